import FerryCore
import FerryProtocol
import FerryStore
import Logging

/// Sending revisions: the changes feed, announced in batches, and the `rev`s the peer wants.
extension PeerSession {
    /// Most entries per `changes` message this side sends.
    static let changesBatchSize = 500
    /// Most batches whose revisions are unanswered: the peer makes one durable, has the next
    /// at hand, and receives the third meanwhile, so its store never waits for this side (with
    /// two, the third was sent only once the first was answered, after its flushes, and both
    /// ends idled while they ran).
    static let batchesUnanswered = 3
    /// Revisions read from the store at once while announcing (see `changesPage`).
    static let changesPageSize = 10 * changesBatchSize

    // MARK: Sending changes (the passive side's answer to subChanges, and the active push)

    /// Sends the peer the changes it subscribed to. When it could not store some (its disk
    /// was full), a continuous subscription starts again from where the peer last caught up,
    /// after a pause that doubles up to `changesRetryCeiling`: once the peer has room again,
    /// everything arrives without a reconnection. A one-shot subscription closes the
    /// connection instead, and the peer's replicator retries it.
    func serveChanges(since: Int, continuous: Bool, docIDs: Set<DocumentID>?) async {
        var cursor = since
        var pause = Duration.milliseconds(250)
        while !closed {
            do {
                try await streamChanges(since: cursor, continuous: continuous, docIDs: docIDs) { caughtUp in
                    cursor = max(cursor, caughtUp)
                    pause = .milliseconds(250)
                }
                return
            } catch {
                guard !closed else { return }
                let transient = ((error as? ClassifiedFailure)?.failureKind ?? .transient) == .transient
                guard continuous && transient else {
                    logger.warning("sending changes stopped", metadata: ["error": "\(error)"])
                    // The peer waits for the end of the pass: tell it there is none, so that
                    // its replicator retries (or gives up) instead of waiting for ever.
                    await closeConnection(code: 1011, reason: String("could not send every change: \(error)".prefix(120)))
                    return
                }
                logger.warning("the peer could not take every change; sending again", metadata: ["error": "\(error)", "in": "\(pause)"])
                do { try await Task.sleep(for: pause) } catch { return }
                pause = min(pause * 2, Self.changesRetryCeiling)
            }
        }
    }

    /// Longest pause between two attempts to send changes the peer could not store.
    static let changesRetryCeiling = Duration.seconds(4)

    /// Announces the revisions after `since` in batches (every one to a ferry peer, those
    /// current ones to a Couchbase Lite client: `announcesIntermediateRevisions`), sends the ones the peer
    /// wants (pipelined: a batch's revisions go out together and their answers are awaited
    /// together), then says "caught up" (an empty `changes`) unless it announced nothing and
    /// said so already. Continuous: then waits for the log to grow and goes on, until the
    /// connection closes or the task is cancelled. To a peer that refuses conflicts (it
    /// answers `changes` with 409) the pass starts again as proposals (`propose`).
    /// `caughtUp` gets the sequence everything up to which the peer now has.
    /// Revisions this connection delivered are not announced back (echo cancellation).
    func streamChanges(since: Int, continuous: Bool, docIDs: Set<DocumentID>?,
                       caughtUp: (Int) async throws -> Void) async throws {
        var cursor = since
        let updates = continuous ? await shared.sequenceUpdates() : nil
        var waiter = updates?.makeAsyncIterator()
        // Whether the peer has been told "caught up" since the last revision announced: a pass
        // that announces nothing (the log grew by revisions this connection delivered) need
        // not tell it again, which spares the peer a message and its store a look per edit.
        var caughtUpTold = false
        while !closed {
            let from = cursor
            // Proposals name each document's current revision, as Couchbase Lite's do.
            let currentOnly = !channel.announcesIntermediateRevisions || proposesChanges
            // The count, the pass's end and its first page in one call on the store's thread
            // (a pass after one edit needs no other).
            let (total, passEnd, firstPage) = await shared.perform { store in
                let end = store.index.lastSeq
                return (store.changeCount(since: from, docIDs: docIDs, currentOnly: currentOnly), end,
                        store.changesPage(since: from, through: end, limit: Self.changesPageSize, docIDs: docIDs, currentOnly: currentOnly))
            }
            // This side's own count: its progress total (the peer's, on a pull it serves, came
            // with the answer to `subChanges`).
            update {
                $0.revisionsOffered += total
                $0.sendingChanges = true
            }
            // Batches overlap: the next batch is announced before this one's revisions go out
            // (the peer answers it while it stores them, so its revisions follow these
            // without a pause), and this one's go out before the previous one's answers are
            // in; the answers to the oldest batch are awaited before a fourth goes out
            // (`batchesUnanswered`).
            var (page, pageFrom) = firstPage
            var start = 0
            var unanswered: [[SentRevision]] = []
            var current: AnnouncedBatch?
            var echoesSkipped = 0
            do {
                repeat {
                    // Announce the next batch of the pass worth announcing (none at its end).
                    var next: AnnouncedBatch?
                    while next == nil, start < page.count || pageFrom != nil {
                        if start >= page.count, let since = pageFrom {
                            (page, pageFrom) = await shared.perform { store in
                                store.changesPage(since: since, through: passEnd, limit: Self.changesPageSize, docIDs: docIDs, currentOnly: currentOnly)
                            }
                            start = 0
                            continue
                        }
                        let batch = page[start..<min(start + Self.changesBatchSize, page.count)]
                        start += batch.count
                        let toAnnounce = batch.filter { !receivedHere.take($0.doc, $0.rev) }
                        if toAnnounce.count < batch.count {
                            echoesSkipped += batch.count - toAnnounce.count
                            update { $0.revisionsSkipped += batch.count - toAnnounce.count }
                        }
                        guard !toAnnounce.isEmpty else { continue }
                        caughtUpTold = false
                        update { $0.pushCaughtUp = false }
                        if proposesChanges {
                            try await propose(Array(toAnnounce))
                            continue
                        }
                        next = try await announce(Array(toAnnounce))
                    }
                    if let current {
                        if unanswered.count == Self.batchesUnanswered { try await collectAnswers(unanswered.removeFirst()) }
                        unanswered.append(try await sendWanted(current))
                    }
                    current = next
                } while current != nil
                for sent in unanswered { try await collectAnswers(sent) }
            } catch is ProposalsRequired {
                // Nothing of this pass was taken: it starts again, as proposals.
                logger.info("the peer takes only proposed changes (it refuses conflicts); proposing them")
                proposesChanges = true
                // Counted again by the new pass (its echoes are proposed, and answered 304).
                update {
                    $0.revisionsOffered -= total
                    $0.revisionsSkipped -= echoesSkipped
                }
                continue
            }
            cursor = max(cursor, passEnd)
            if !caughtUpTold {
                try await notify(proposesChanges ? .proposeChanges([]) : .changes([]))
                caughtUpTold = true
            }
            update { $0.pushCaughtUp = true }
            try await caughtUp(cursor)
            guard continuous else { return }
            // Wait for the log to grow past what was scanned.
            while true {
                guard let last = await waiter?.next() else { return }
                if last > cursor { break }
            }
        }
        throw ReplicationError(endReason)
    }

    /// Queues one `changes` message for `batch`; `sendWanted` reads its answer.
    func announce(_ batch: [RecordedRevision]) async throws -> AnnouncedBatch {
        let entries = batch.map { ChangeEntry(sequence: $0.seq, doc: $0.doc, rev: $0.rev, deleted: $0.deleted, bodySize: $0.size) }
        // The JSON bodies this batch may send are read into memory while the peer answers.
        shared.prefetch(batch.filter { $0.doc.kind == .json })
        return AnnouncedBatch(batch: batch, answer: try await send(.changes(entries)).answer)
    }

    /// Sends the `rev`s the peer asked for in its answer to an announced batch, without
    /// waiting for their answers (`collectAnswers` reads them).
    func sendWanted(_ announced: AnnouncedBatch) async throws -> [SentRevision] {
        let batch = announced.batch
        let answer = try await response(announced.answer, to: "changes")
        if case let .error(status, message) = answer {
            // A Couchbase Lite (or Sync Gateway) that refuses conflicts takes pushes only as
            // proposals, as LiteCore's pusher learns from the same answer.
            if status == 409 && !proposesChanges { throw ProposalsRequired() }
            throw ReplicationError.pushAnswered(status: status, message)
        }
        guard case .changes(let answers, _) = answer, answers.count <= batch.count else {
            throw ReplicationError("the peer answered changes with something else", kind: .permanent)
        }
        var wanted: [(RecordedRevision, [RevisionID])] = []
        for (i, change) in batch.enumerated() where i < answers.count {
            if case .wanted(let known) = answers[i] { wanted.append((change, known)) }
        }
        update { $0.revisionsSkipped += batch.count - wanted.count }
        return try await sendRevisions(wanted)
    }

    /// Sends the `rev`s of `wanted` (each with the revisions the peer said it has of that
    /// document), without waiting for their answers (`collectAnswers` reads them).
    func sendRevisions(_ wanted: [(RecordedRevision, [RevisionID])]) async throws -> [SentRevision] {
        guard !wanted.isEmpty else { return [] }
        update { $0.revisionsWanted += wanted.count }
        let asked = wanted.map { ($0.0.doc, $0.0.rev, $0.1) }
        let deltas = usesDeltas
        let revs: [OutgoingRevision?] = await shared.perform { store in
            asked.map { doc, rev, known in Self.outgoing(doc, rev, knownByPeer: known, deltas: deltas, store) }
        }
        var waiting: [SentRevision] = []
        var inFlight = WritesInFlight()
        var i = 0
        while i < revs.count {
            guard let first = revs[i] else {
                // Compacted or damaged since it was announced: say so instead of stalling.
                let (doc, r, _) = asked[i]
                try await notify(.norev(doc: doc, rev: r, sequence: wanted[i].0.seq, status: 410, reason: "body no longer available"))
                update { $0.revisionsFailed += 1 }
                i += 1
                continue
            }
            // A burst of revisions is queued together and leaves in one socket write.
            var burst = [first], bytes = first.wireBytes
            i += 1
            while i < revs.count, let rev = revs[i], burst.count < WritesInFlight.burstCount, bytes + rev.wireBytes <= WritesInFlight.burstBytes {
                burst.append(rev)
                bytes += rev.wireBytes
                i += 1
            }
            let outgoing = try queue(burst.map(\.request))
            waiting += zip(burst, outgoing).map { SentRevision(doc: $0.doc, fullBody: $0.fullBody, answer: $1.answer) }
            // Written once all of it is: a channel may finish a later frame first (BLIP pauses
            // a large message until the peer acknowledges it, and sends the next ones).
            let writes = outgoing.map(\.written)
            try await inFlight.add(TransportWrite { for write in writes { try await write.sent() } }, bytes: bytes)
        }
        try await inFlight.finish()
        return waiting
    }

    /// Waits for the peer's answers to revisions sent; a delta it could not use is sent again
    /// whole. A revision refused (403: Sync Gateway's sync function, a per-document rule) is
    /// that document's failure, counted and logged, as Couchbase Lite's pusher counts it: the
    /// push goes on, and the revision is not offered again until the document changes (a peer
    /// that takes no push at all refuses `changes`, `sendWanted`). Throws when the peer could
    /// not store one (so the checkpoint does not move past it).
    func collectAnswers(_ waiting: [SentRevision]) async throws {
        var transientFailure: String?
        for rev in waiting {
            var response = try await response(rev.answer, to: "rev")
            if case .error(Self.deltaRefusedStatus, let message) = response, let full = rev.fullBody {
                // The receiver could not use the delta (its base is gone, or it did not
                // reproduce the revision): send the whole body instead.
                logger.info("delta refused; sending the whole body", metadata: ["doc": "\(rev.doc)", "reason": "\(message)"])
                response = try await request(full)
            }
            if case let .error(status, message) = response {
                update { $0.revisionsFailed += 1 }
                // Refused by the peer, or not sent at all: a channel that cannot give the peer a
                // revision (a body Couchbase Lite would change) answers for it.
                logger.warning("a revision did not reach the peer", metadata: ["doc": "\(rev.doc)", "status": "\(status)", "error": "\(message)"])
                if status >= 500 { transientFailure = "the peer could not store \(rev.doc) (\(status)): \(message)" }
            } else {
                update { $0.revisionsSent += 1 }
            }
        }
        // A peer that could not store a revision (a full disk) gets it again on the next
        // attempt: the checkpoint must not move past it.
        if let transientFailure { throw ReplicationError(transientFailure) }
    }

    /// The status a receiver answers a delta it cannot use with; the sender then sends the
    /// whole body.
    static let deltaRefusedStatus = 422

    /// The `rev` to send for `rev` of `doc`, and for a delta the whole-body `rev` to fall back
    /// on; nil when its body is no longer here. With `deltas`, a JSON body goes as a delta
    /// against the best revision the peer said it has (`knownByPeer`), when that is smaller.
    static func outgoing(_ doc: DocumentID, _ rev: RevisionID, knownByPeer known: [RevisionID], deltas: Bool,
                         _ store: FolderStore) -> OutgoingRevision? {
        guard let tree = store.index[doc], let node = tree.nodes[rev] else { return nil }
        let history = store.historyToSend(rev, doc: doc, knownByPeer: known)
        let merged = tree.mergedParent(of: rev)
        func request(_ body: RevisionBody) -> Request {
            .rev(doc: doc, rev: rev, history: history, sequence: node.seq, body: body, merged: merged, author: node.author)
        }
        // What a frame takes besides its body, about (its ids, history and fields).
        let frameBytes = 256 + history.count * 48
        if node.deleted { return OutgoingRevision(doc: doc, request: request(.deleted), wireBytes: frameBytes) }
        guard doc.kind == .json else {
            guard let object = node.object else { return nil }
            return OutgoingRevision(doc: doc, request: request(.blob(BlobReference(digest: object, length: node.size, contentType: nil))),
                                    wireBytes: frameBytes)
        }
        // The stored bytes go out as they are, once their digest proves them intact (a damaged
        // object gets a norev, never a broken frame).
        guard let bytes = store.verifiedBody(of: node, doc: doc) else { return nil }
        let whole = request(.canonicalJSON(CanonicalBody(bytes)))
        // Known revisions come best first (the peer's current one leads).
        if deltas, let base = known.lazy.compactMap({ tree.nodes[$0] }).first(where: { !$0.deleted && $0.object != nil }),
           let baseValue = try? store.jsonBody(of: base, doc: doc), let value = try? JSONParser.parse(bytes) {
            let delta = JSONDelta.make(from: baseValue, to: value)
            let deltaBytes = delta.canonicalBytes.count
            if deltaBytes < node.size {
                return OutgoingRevision(doc: doc, request: request(.delta(base: base.rev, delta: delta)), fullBody: whole,
                                        wireBytes: frameBytes + deltaBytes)
            }
        }
        return OutgoingRevision(doc: doc, request: whole, wireBytes: frameBytes + bytes.count)
    }
}

/// A `changes` message on the wire: the revisions it announced and the stream its answer
/// arrives on.
struct AnnouncedBatch {
    var batch: [RecordedRevision]
    var answer: AsyncStream<Response>
}

/// A `rev` on the wire: its document, for a delta the whole-body `rev` to send if the peer
/// refuses it, and the stream its answer arrives on (not its body: batches of them wait for
/// their answers).
struct SentRevision {
    var doc: DocumentID
    var fullBody: Request?
    var answer: AsyncStream<Response>
}

/// A `rev` ready to send, and for a delta the whole-body `rev` to send if the peer refuses it.
struct OutgoingRevision: Sendable {
    var doc: DocumentID
    var request: Request
    var fullBody: Request? = nil
    /// About how many bytes `request` takes on the wire (its body, or delta, and its history),
    /// to bound what is queued (`WritesInFlight`); counted where the body was made, not by
    /// serializing a delta again.
    var wireBytes: Int
}
