import FerryCore
import FerryProtocol
import FerryStore
import Logging
#if canImport(Glibc)
import Glibc
#endif

extension PeerSession {
    /// Most entries per `changes` message this side sends.
    static let changesBatchSize = 500
    /// Largest range asked per `getAttachment`: the bytes in flight, and so memory, stay
    /// bounded however large the blob.
    static let blobWindow = 8 << 20
    /// Size of each binary frame of a blob.
    static let blobChunkSize = 256 << 10

    // MARK: Serving the peer's requests

    func serve(number: Int, noReply: Bool, _ request: Request, ticket: Int? = nil) async {
        switch request {
        case .getCheckpoint(let client):
            let layout = shared.layout
            if let c = await shared.perform({ _ in CheckpointStore(layout: layout).get(client) }) {
                await respond(number, .checkpoint(rev: String(c.rev), checkpoint: Checkpoint(local: c.local, remote: c.remote)))
            } else {
                await respond(number, .error(status: 404, message: "no checkpoint \(client)"))
            }
        case let .setCheckpoint(client, rev, checkpoint):
            if let why = CheckpointStore.clientRefusal(client) {
                await respond(number, .error(status: 400, message: why))
                return
            }
            // A read-only listener takes no pushes, so no checkpoint of pushed progress either.
            if readOnly && checkpoint.local != 0 {
                await respond(number, .error(status: 403, message: Self.readOnlyMessage))
                return
            }
            let layout = shared.layout
            do {
                let saved = try await shared.perform { _ in
                    try CheckpointStore(layout: layout).set(client, expectedRev: rev.flatMap { Int($0) }, local: checkpoint.local, remote: checkpoint.remote)
                }
                await respond(number, .checkpointSaved(rev: String(saved.rev)))
            } catch {
                await respond(number, .error(status: 409, message: "\(error)"))
            }
        case let .subChanges(since, continuous, docIDs):
            await respond(number, .ok)
            await serveChanges(since: since, continuous: continuous, docIDs: docIDs.map(Set.init))
        case .changes(let entries):
            await answerChanges(number: number, noReply: noReply, entries)
        case .proposeChanges(let entries):
            await answerProposal(number: number, entries)
        case let .rev(doc, rev, history, _, body, merged):
            if readOnly {
                if !noReply { await respond(number, .error(status: 403, message: Self.readOnlyMessage)) }
                return
            }
            let result = await receive(doc: doc, rev: rev, history: history, body: body, merged: merged, ticket: ticket ?? arrivalOrder.take(doc))
            answerReceipt(number: number, noReply: noReply, doc: doc, rev: rev, result)
        case let .getAttachment(digest, offset, length):
            await sendBlob(digest, offset: offset, length: length, number: number)
        case .norev(let doc, let rev, _, let status, let reason):
            update { $0.revisionsFailed += 1 }
            // A few are worth a line each; a flood of them is counted (`revisionsFailed`), not
            // logged, so a peer cannot fill the disk through the agent's log.
            if stats.revisionsFailed <= Self.norevsLogged {
                logger.warning("peer cannot send a revision", metadata: ["doc": "\(doc)", "rev": "\(rev)", "status": "\(status)", "reason": "\(reason)"])
            }
            if stats.revisionsFailed == Self.norevsLogged { logger.warning("further revisions the peer cannot send are counted, not logged") }
        case .hello:
            break  // the state machine handles hello
        }
    }

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
                    let reason = String("could not send every change: \(error)".prefix(120))
                    localCloseReason = reason
                    await transport.close(code: 1011, reason: reason)
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

    /// Most `norev`s logged per session.
    static let norevsLogged = 10

    static let readOnlyMessage = "this listener is read-only: peers may pull, not push"

    /// Answers the peer's `changes`: an empty list means it has caught up; otherwise, per
    /// entry, not wanted (already here) or wanted with the leaves known here.
    func answerChanges(number: Int, noReply: Bool, _ entries: [ChangeEntry]) async {
        if readOnly {
            if !noReply { await respond(number, .error(status: 403, message: Self.readOnlyMessage)) }
            return
        }
        guard !entries.isEmpty else {
            if !noReply { await respond(number, .changes([], maxHistory: nil)) }
            // The peer's pass is all here: merge what it opened, with its whole history at hand.
            await shared.resolvePendingConflicts()
            update { $0.pullCaughtUp = true }
            caughtUpWaiter?.yield(highestSequenceAnnounced)
            return
        }
        let asked = entries.map { ($0.doc, $0.rev) }
        let answers: [ChangeAnswer] = await shared.perform { store in
            asked.map { doc, rev in store.knownAncestors(of: rev, doc: doc).map { .wanted(knownAncestors: $0) } ?? .notWanted }
        }
        highestSequenceAnnounced = max(highestSequenceAnnounced, entries.map(\.sequence).max() ?? 0)
        let wanted = answers.filter { $0 != .notWanted }.count
        update {
            $0.revisionsWanted += wanted
            if wanted > 0 { $0.pullCaughtUp = false }
        }
        if !noReply { await respond(number, .changes(answers, maxHistory: nil)) }
    }

    /// Answers `proposeChanges` the way Couchbase Lite does: send (0), already here (304), or
    /// conflict (409: the proposer's parent is not this side's current revision).
    func answerProposal(number: Int, _ entries: [ProposedChange]) async {
        if readOnly {
            await respond(number, .error(status: 403, message: Self.readOnlyMessage))
            return
        }
        let proposed = entries.map { ($0.doc, $0.rev, $0.parent) }
        let answers: [ProposeAnswer] = await shared.perform { store in
            proposed.map { doc, rev, parent in
                guard let tree = store.index[doc] else { return parent == nil ? .send : .conflict }
                if let node = tree.nodes[rev], node.seq != 0 { return .alreadyHave }
                let current = tree.current
                if current?.rev == parent || (current?.deleted == true && parent == nil) { return .send }
                return .conflict
            }
        }
        update { $0.revisionsWanted += answers.filter { $0 == .send }.count }
        await respond(number, .proposeChanges(answers))
    }

    // MARK: Sending changes (the passive side's answer to subChanges, and the active push)

    /// Announces every current revision after `since` in batches, sends the ones the peer
    /// wants (pipelined: a batch's revisions go out together and their answers are awaited
    /// together), then says "caught up" (an empty `changes`). Continuous: then waits for the
    /// log to grow and goes on, until the connection closes or the task is cancelled.
    /// `caughtUp` gets the sequence everything up to which the peer now has.
    /// Revisions this connection delivered are not announced back (echo cancellation).
    func streamChanges(since: Int, continuous: Bool, docIDs: Set<DocumentID>?,
                       caughtUp: (Int) async throws -> Void) async throws {
        var cursor = since
        let updates = continuous ? await shared.sequenceUpdates() : nil
        var waiter = updates?.makeAsyncIterator()
        while !closed {
            let from = cursor
            let (pending, scannedThrough) = await shared.perform { store in
                (store.changes(since: from, docIDs: docIDs), store.index.lastSeq)
            }
            var start = 0
            // Two batches in flight: the next batch is announced as soon as this one's
            // revisions are on the wire, so the peer's store never waits for the announcement
            // and for this side's reading of the next bodies.
            var unanswered: [SentRevision] = []
            while start < pending.count {
                let batch = pending[start..<min(start + Self.changesBatchSize, pending.count)]
                start += batch.count
                let toAnnounce = batch.filter { !receivedHere.take($0.doc, $0.rev) }
                if !toAnnounce.isEmpty {
                    update { $0.pushCaughtUp = false }
                    let sent = try await announceAndSend(Array(toAnnounce))
                    try await collectAnswers(unanswered)
                    unanswered = sent
                }
            }
            try await collectAnswers(unanswered)
            cursor = max(cursor, scannedThrough)
            try await notify(.changes([]))
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

    /// One `changes` message and the `rev`s the peer asks for, sent without waiting for
    /// their answers (`collectAnswers` reads them).
    func announceAndSend(_ batch: [RecordedRevision]) async throws -> [SentRevision] {
        let entries = batch.map { ChangeEntry(sequence: $0.seq, doc: $0.doc, rev: $0.rev, deleted: $0.deleted, bodySize: $0.size) }
        // The JSON bodies this batch may send are read into memory while the peer answers.
        shared.prefetch(batch.filter { $0.doc.kind == .json }.compactMap(\.object))
        let answer = try await request(.changes(entries))
        if case let .error(status, message) = answer {
            throw ReplicationError("the peer refused the push (\(status)): \(message)", kind: status == 403 ? .permanent : .transient)
        }
        guard case .changes(let answers, _) = answer, answers.count <= batch.count else {
            throw ReplicationError("the peer answered changes with something else", kind: .permanent)
        }
        var wanted: [(RecordedRevision, [RevisionID])] = []
        for (i, change) in batch.enumerated() where i < answers.count {
            if case .wanted(let known) = answers[i] { wanted.append((change, known)) }
        }
        guard !wanted.isEmpty else { return [] }
        update { $0.revisionsWanted += wanted.count }
        let asked = wanted.map { ($0.0.doc, $0.0.rev, $0.1) }
        let deltas = usesDeltas
        let revs: [OutgoingRevision?] = await shared.perform { store in
            asked.map { doc, rev, known in Self.outgoing(doc, rev, knownByPeer: known, deltas: deltas, store) }
        }
        var waiting: [SentRevision] = []
        for (i, rev) in revs.enumerated() {
            guard let rev else {
                // Compacted or damaged since it was announced: say so instead of stalling.
                let (doc, r, _) = asked[i]
                try await notify(.norev(doc: doc, rev: r, sequence: wanted[i].0.seq, status: 410, reason: "body no longer available"))
                update { $0.revisionsFailed += 1 }
                continue
            }
            waiting.append(SentRevision(revision: rev, answer: try await send(rev.request).response))
        }
        return waiting
    }

    /// Waits for the peer's answers to revisions sent; a delta it could not use is sent again
    /// whole. Throws when the peer refused one for good, or could not store one (so the
    /// checkpoint does not move past it).
    func collectAnswers(_ waiting: [SentRevision]) async throws {
        var transientFailure: String?
        for sent in waiting {
            let rev = sent.revision
            var response = try await response(sent.answer, to: "rev")
            if case .error(Self.deltaRefusedStatus, let message) = response, let full = rev.fullBody {
                // The receiver could not use the delta (its base is gone, or it did not
                // reproduce the revision): send the whole body instead.
                logger.info("delta refused; sending the whole body", metadata: ["doc": "\(rev.doc)", "reason": "\(message)"])
                response = try await request(full)
            }
            if case let .error(status, message) = response {
                update { $0.revisionsFailed += 1 }
                logger.warning("peer refused a revision", metadata: ["doc": "\(rev.doc)", "status": "\(status)", "error": "\(message)"])
                if status == 403 { throw ReplicationError("the peer refused the push (403): \(message)", kind: .permanent) }
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
            .rev(doc: doc, rev: rev, history: history, sequence: node.seq, body: body, merged: merged)
        }
        if node.deleted { return OutgoingRevision(doc: doc, request: request(.deleted)) }
        guard doc.kind == .json else {
            guard let object = node.object else { return nil }
            return OutgoingRevision(doc: doc, request: request(.blob(BlobReference(digest: object, length: node.size, contentType: nil))))
        }
        // The stored bytes go out as they are, once their digest proves them intact (a damaged
        // object gets a norev, never a broken frame).
        guard let object = node.object, let bytes = try? store.body(of: node, doc: doc), BlobDigest.of(bytes) == object else { return nil }
        let whole = request(.canonicalJSON(bytes))
        // Known revisions come best first (the peer's current one leads).
        if deltas, let base = known.lazy.compactMap({ tree.nodes[$0] }).first(where: { !$0.deleted && $0.object != nil }),
           let baseValue = try? store.jsonBody(of: base, doc: doc), let value = try? JSONParser.parse(bytes) {
            let delta = JSONDelta.make(from: baseValue, to: value)
            if delta.canonicalBytes.count < node.size {
                return OutgoingRevision(doc: doc, request: request(.delta(base: base.rev, delta: delta)), fullBody: whole)
            }
        }
        return OutgoingRevision(doc: doc, request: whole)
    }

    // MARK: Blobs

    /// Streams `length` bytes (nil: to the end) of an object from `offset` to the peer, as
    /// chunks of the `getAttachment` request `number`.
    func sendBlob(_ digest: BlobDigest, offset: Int, length: Int?, number: Int) async {
        await withCheckedContinuation { budget.takeBlobTurn($0) }
        defer { budget.endBlobTurn() }
        guard !closed else { return }
        guard let fd = try? objects.open(digest) else {
            await respond(number, .error(status: 404, message: "no blob \(digest)"))
            return
        }
        defer { Glibc.close(fd) }
        var st = stat()
        fstat(fd, &st)
        let size = Int(st.st_size)
        let start = min(offset, size)
        var remaining = min(size - start, length ?? Int.max)
        var position = off_t(start)
        await respond(number, .attachment(length: remaining))
        var buffer = [UInt8](repeating: 0, count: Self.blobChunkSize)
        // Objects are immutable, so the size says which chunk is the last (an empty range is
        // one empty last chunk).
        repeat {
            let want = min(buffer.count, remaining)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, position) }
            guard n >= 0, n > 0 || want == 0 else {
                await transport.close(code: 1011, reason: "cannot read blob \(digest)")
                return
            }
            position += off_t(n)
            remaining -= n
            let chunk = BlobChunk(requestNumber: UInt32(number), isLast: remaining == 0, bytes: buffer[0..<n])
            do { try await write(.binary(chunk.encoded())) } catch { return }
        } while remaining > 0
    }

    /// Fetches a blob a window at a time, verifying its digest as the bytes arrive.
    func fetchBlob(_ digest: BlobDigest) async throws {
        let writer = try objects.beginWrite(expected: digest)
        var complete = false
        defer { if !complete { writer.abandon() } }
        while true {
            let (responseStream, chunkStream) = try await send(.getAttachment(digest: digest, offset: writer.count, length: Self.blobWindow))
            let answer = try await response(responseStream, to: "getAttachment")
            guard case .attachment(let length) = answer, let chunks = chunkStream else {
                throw ReplicationError("the peer has no blob \(digest)")
            }
            guard length <= Self.blobWindow else { throw ReplicationError("the peer sent more of \(digest) than asked", kind: .permanent) }
            var received = 0
            var last = false
            for await chunk in chunks {
                received += chunk.bytes.count
                guard received <= length else { throw ReplicationError("the peer sent more of \(digest) than it announced", kind: .permanent) }
                try writer.append(chunk.bytes)
                if chunk.isLast { last = true; break }
            }
            guard last, received == length else { throw ReplicationError("\(endReason) while receiving \(digest)") }
            if length < Self.blobWindow { break }
        }
        try writer.finish()
        complete = true
        update { $0.blobsReceived += 1 }
    }

    // MARK: Receiving revisions

    /// Takes a `rev` that needs nothing fetched or rebuilt (no delta, every blob it names is
    /// here) straight into the inbox, without a task; the drain answers it. False for any
    /// other request, which is served by a task of its own.
    func receiveAtOnce(number: Int, noReply: Bool, _ request: Request, size: Int) -> Bool {
        guard case let .rev(doc, rev, history, _, body, merged) = request, !readOnly, !closed, arrivalOrder.isClear(doc),
              FolderStore.nameRefusal(doc) == nil else { return false }
        switch body {
        case .deleted:
            break
        case .json(let value):
            guard let refs = try? value.blobReferences(), refs.allSatisfy({ objects.contains($0.digest) }) else { return false }
        case .blob(let ref):
            guard objects.contains(ref.digest) else { return false }
        case .delta, .canonicalJSON:
            return false
        }
        let remote = storable(doc: doc, rev: rev, history: history, body: body, merged: merged)
        inbox.append(ReceivedRevision(revision: remote, then: .answer(number: number, noReply: noReply), size: size))
        budget.queued(size)
        inboxSignal?.yield()
        return true
    }

    /// A received revision as the store takes it, from the peer on this connection; every
    /// blob its body names is here, and a delta is already rebuilt (`.json`, with its
    /// canonical bytes when they were computed to check it). A JSON body's files start being
    /// written now, on the folder's file worker, while the store is busy with earlier ones.
    private func storable(doc: DocumentID, rev: RevisionID, history: [RevisionID], body: RevisionBody, merged: RevisionID?,
                          canonical: [UInt8]? = nil) -> RemoteRevision {
        var object: BlobDigest?
        var size = 0
        var jsonBody: ReceivedBody?
        switch body {
        case .deleted:
            break
        case .json(let value):
            let bytes = canonical ?? value.canonicalBytes
            (jsonBody, size) = (shared.prepare(value, canonical: bytes, for: doc), bytes.count)
        case .blob(let ref):
            (object, size) = (ref.digest, ref.length)
        case .delta, .canonicalJSON:
            preconditionFailure("a decoded rev carries .json; a delta is rebuilt before it is stored")
        }
        var isDeletion = false
        if case .deleted = body { isDeletion = true }
        let incoming = IncomingRevision(doc: doc, rev: rev, history: history, deleted: isDeletion, object: object,
                                        size: size, origin: machine.remotePeer ?? "peer", merged: merged)
        return RemoteRevision(incoming: incoming, jsonBody: jsonBody)
    }

    /// Counts a received revision and answers its request (an error status when refused).
    func answerReceipt(number: Int, noReply: Bool, doc: DocumentID, rev: RevisionID, _ result: Result<[LogEntry], ReceiveFailure>) {
        var response = Response.ok
        switch result {
        case .success:
            update { $0.revisionsReceived += 1 }
            receivedHere.insert(doc, rev)
        case .failure(let error):
            update { $0.revisionsFailed += 1 }
            logger.warning("revision refused", metadata: ["doc": "\(doc)", "rev": "\(rev)", "error": "\(error)"])
            response = .error(status: error.status, message: "\(error.message)")
        }
        guard !noReply, !closed else { return }
        queue(.text(FrameCodec.encode(.response(to: number, response))))
    }

    /// Stores a revision from the peer: its missing blobs first (verified as they arrive), then
    /// the revision with its body, through the drain task's next group, after the revisions of
    /// the same document that arrived before it (`ticket`, see `ArrivalOrder`).
    func receive(doc: DocumentID, rev: RevisionID, history: [RevisionID], body: RevisionBody, merged: RevisionID?,
                 ticket: Int) async -> Result<[LogEntry], ReceiveFailure> {
        let prepared = await prepareBody(doc: doc, rev: rev, history: history, body: body, merged: merged)
        if !arrivalOrder.isTurn(doc, ticket) {
            await withCheckedContinuation { arrivalOrder.park(doc, ticket, $0) }
        }
        defer { arrivalOrder.next(doc) }
        let body: RevisionBody, canonical: [UInt8]?
        switch prepared {
        case .success(let ready): (body, canonical) = ready
        case .failure(let failure): return .failure(failure)
        }
        let remote = storable(doc: doc, rev: rev, history: history, body: body, merged: merged, canonical: canonical)
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<[LogEntry], StoreError>, Never>) in
            // The drain task has ended with the connection: nothing would ever resume this.
            guard !closed else {
                remote.jsonBody.map(shared.discard)
                done.resume(returning: Result<[LogEntry], StoreError>.failure(StoreError(.io, "\(endReason) before \(doc)@\(rev) was stored")))
                return
            }
            inbox.append(ReceivedRevision(revision: remote, then: .resume(done)))
            inboxSignal?.yield()
        }
        return result.mapError { ReceiveFailure($0) }
    }

    /// What a received revision needs before the store can take it: a delta rebuilt (and its
    /// canonical bytes, computed to check it), the blobs it names fetched.
    private func prepareBody(doc: DocumentID, rev: RevisionID, history: [RevisionID], body: RevisionBody,
                             merged: RevisionID?) async -> Result<(RevisionBody, [UInt8]?), ReceiveFailure> {
        // A name no folder records is refused before anything of it is fetched.
        if let why = FolderStore.nameRefusal(doc) { return .failure(ReceiveFailure(status: 400, message: "rejected \(doc)@\(rev): \(why)")) }
        var body = body
        var canonical: [UInt8]?
        if case let .delta(base, delta) = body {
            switch await expand(delta, base: base, doc: doc, rev: rev, parent: history.first, merged: merged) {
            case .success(let (value, bytes)):
                body = .json(value)
                canonical = bytes
            case .failure(let failure): return .failure(failure)
            }
        }
        do {
            switch body {
            case .deleted:
                break
            case .canonicalJSON(let bytes):
                preconditionFailure("a decoded rev carries .json, not \(bytes.count) raw bytes")
            case .json(let value):
                for ref in try value.blobReferences() where !objects.contains(ref.digest) { try await fetchBlob(ref.digest) }
            case .blob(let ref):
                if !objects.contains(ref.digest) { try await fetchBlob(ref.digest) }
            case .delta:
                preconditionFailure("expanded above")
            }
        } catch let error as StoreError {
            if error.code == .corrupt {
                // Bytes that do not hash to what the peer announced: nothing was stored, and a
                // peer that sends them is broken or hostile. Hang up.
                let reason = "peer protocol error (invalidField): \(error.message)"
                localCloseReason = reason
                logger.warning("closing connection", metadata: ["code": "1002", "reason": "\(reason)"])
                await transport.close(code: 1002, reason: String(reason.prefix(120)))
            }
            return .failure(ReceiveFailure(error))
        } catch {
            return .failure(ReceiveFailure(status: 502, message: "\(error)"))
        }
        return .success((body, canonical))
    }

    /// The body a delta makes of its base revision here, checked against the revision id (a
    /// pure function of parent and body): a delta that does not rebuild exactly the revision
    /// announced is refused, and the sender sends the whole body. Returns the body and its
    /// canonical bytes.
    func expand(_ delta: JSONValue, base: RevisionID, doc: DocumentID, rev: RevisionID,
                parent: RevisionID?, merged: RevisionID?) async -> Result<(JSONValue, [UInt8]), ReceiveFailure> {
        let baseValue: JSONValue? = await shared.perform { store in
            guard let node = store.index[doc]?.nodes[base], !node.deleted, node.object != nil else { return nil }
            return try? store.jsonBody(of: node, doc: doc)
        }
        guard let baseValue else {
            return .failure(ReceiveFailure(status: Self.deltaRefusedStatus, message: "delta source \(doc)@\(base) is not here"))
        }
        let value: JSONValue
        do { value = try JSONDelta.apply(delta, to: baseValue) } catch {
            return .failure(ReceiveFailure(status: Self.deltaRefusedStatus, message: "delta for \(doc)@\(rev) does not apply: \(error)"))
        }
        let bytes = value.canonicalBytes
        guard case .object = value, RevisionID.compute(parent: parent, deleted: false, body: BlobDigest.of(bytes), merged: merged) == rev else {
            return .failure(ReceiveFailure(status: Self.deltaRefusedStatus, message: "delta for \(doc)@\(rev) does not rebuild that revision"))
        }
        return .success((value, bytes))
    }

    /// Applies what the inbox holds, a group at a time, until the connection closes.
    func drainInbox(_ signal: AsyncStream<Void>) async {
        for await _ in signal {
            await drainOnce()
        }
        await drainOnce()
    }

    private func drainOnce() async {
        while !inbox.isEmpty {
            let group = inbox
            inbox.removeAll()
            let results = await shared.applyRemote(group.map(\.revision))
            for (item, result) in zip(group, results) {
                switch item.then {
                case .resume(let done):
                    done.resume(returning: result)
                case let .answer(number, noReply):
                    let incoming = item.revision.incoming
                    answerReceipt(number: number, noReply: noReply, doc: incoming.doc, rev: incoming.rev, result.mapError { ReceiveFailure($0) })
                    budget.finished()
                }
            }
            budget.stored(group.reduce(0) { $0 + $1.size })
        }
    }
}

/// A `rev` on the wire and the stream its answer arrives on.
struct SentRevision {
    var revision: OutgoingRevision
    var answer: AsyncStream<Response>
}

/// A `rev` ready to send, and for a delta the whole-body `rev` to send if the peer refuses it.
struct OutgoingRevision: Sendable {
    var doc: DocumentID
    var request: Request
    var fullBody: Request?
}

/// Why a received revision was not stored, with the status answered to the peer.
struct ReceiveFailure: Error {
    let status: Int
    let message: String

    init(status: Int, message: String) {
        self.status = status
        self.message = message
    }

    /// Invalid input is the peer's fault (400); anything else is this side's (503: retry).
    init(_ error: StoreError) {
        self.status = error.code == .invalidInput || error.code == .corrupt ? 400 : 503
        self.message = error.message
    }
}
