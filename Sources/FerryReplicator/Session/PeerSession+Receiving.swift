import FerryCore
import FerryProtocol
import FerryStore
import Logging

/// Receiving revisions: straight into the inbox when nothing is missing, otherwise after their
/// blobs are fetched or their delta rebuilt; applied in groups by the drain task.
extension PeerSession {
    // MARK: Answering what the peer offers

    /// Answers the peer's `changes`: an empty list means it has caught up; otherwise, per
    /// entry, not wanted (already here) or wanted with the leaves known here.
    func answerChanges(_ handle: RequestHandle, _ entries: [ChangeEntry]) async {
        if readOnly {
            await respond(handle, .error(status: 403, message: Self.readOnlyMessage))
            return
        }
        if relatedness != nil {
            await answerProbeChanges(handle, entries)
            return
        }
        guard !entries.isEmpty else {
            await respond(handle, .changes([], maxHistory: nil))
            awaited.caughtUpPending = true
            await settleArrivals()
            return
        }
        let asked = entries.map { ($0.doc, $0.rev) }
        let answers: [ChangeAnswer] = await shared.perform { store in
            asked.map { doc, rev in store.knownAncestors(of: rev, doc: doc).map { .wanted(knownAncestors: $0) } ?? .notWanted }
        }
        for (entry, answer) in zip(entries, answers) {
            if answer == .notWanted {
                // Here already: if it was asked for before (announced again after a pass that
                // failed on the peer's side) and came another way, it is no longer awaited.
                awaited.arrived(entry.doc, entry.rev)
            } else if !awaited.expect(entry.doc, entry.rev, sequence: entry.sequence) {
                return await refuseUnsentFlood()
            }
        }
        highestSequenceAnnounced = max(highestSequenceAnnounced, entries.map(\.sequence).max() ?? 0)
        changesAnnounced += 1
        let wanted = answers.filter { $0 != .notWanted }.count
        pullUnannounced -= entries.count
        update {
            $0.revisionsWanted += wanted
            $0.revisionsSkipped += entries.count - wanted
            $0.receivingChanges = true
            if wanted > 0 { $0.pullCaughtUp = false }
        }
        await respond(handle, .changes(answers, maxHistory: nil))
    }

    /// A `changes` that announced revisions has been answered (`AwaitedRevisions.answering`,
    /// counted as it arrived): a "caught up" that came meanwhile may be taken now.
    func changesAnswered() async {
        awaited.answering -= 1
        await settleArrivals()
    }

    /// Answers `proposeChanges` the way Couchbase Lite does: send (0), already here (304), or
    /// conflict (409: the proposer's parent is not this side's current revision). A read-only
    /// listener refuses each entry it does not have (403), so that a Couchbase Lite
    /// push-and-pull replicator still pulls (an error for the whole message stops it).
    func answerProposal(_ handle: RequestHandle, _ entries: [ProposedChange]) async {
        let proposed = entries.map { ($0.doc, $0.rev, $0.parent) }
        let readOnly = readOnly
        let answers: [ProposeAnswer] = await shared.perform { store in
            proposed.map { doc, rev, parent in
                guard let tree = store.index[doc] else { return readOnly ? .forbidden : parent == nil ? .send : .conflict }
                if let node = tree.nodes[rev], node.seq != 0 { return .alreadyHave }
                if readOnly { return .forbidden }
                let current = tree.current
                if current?.rev == parent || (current?.deleted == true && parent == nil) { return .send }
                return .conflict
            }
        }
        for (entry, answer) in zip(entries, answers) where answer == .send {
            guard awaited.expect(entry.doc, entry.rev, sequence: 0, proposed: true) else { return await refuseUnsentFlood() }
        }
        let send = answers.filter { $0 == .send }.count
        let refused = answers.filter { $0 == .forbidden }.count
        update {
            $0.revisionsWanted += send
            $0.revisionsFailed += refused
            $0.revisionsSkipped += answers.count - send - refused
            $0.receivingChanges = true
        }
        await respond(handle, .proposeChanges(answers))
    }

    /// Merges the conflicts opened by the revisions a Couchbase Lite client proposed, per
    /// document once none of its revisions is awaited (a Couchbase Lite pusher never says its
    /// push is done: waiting for the end of its pass would leave them open while the
    /// connection lasts). Then takes the peer's caught-up (`AwaitedRevisions.caughtUpPending`)
    /// once every revision it announced before it is here: merges what its pass opened, with
    /// its whole history at hand, and lets the pull save its checkpoint.
    func settleArrivals() async {
        let settled = awaited.takeSettledProposals()
        if !settled.isEmpty { await shared.resolvePendingConflicts(of: settled) }
        guard awaited.isSettled else { return }
        guard awaited.caughtUpPending else {
            if channel.saysCaughtUpOnce && pullCaughtUpOnce && !counts.pullCaughtUp { scheduleQuietCaughtUp() }
            return
        }
        awaited.caughtUpPending = false
        pullCaughtUpOnce = true
        // Everything announced so far is here; what is announced during the merge below is
        // not, and its answer may set the status back (so the status is set first). The
        // checkpoint stays below a revision that came without being stored.
        let reached = awaited.firstNotStored.map { min(highestSequenceAnnounced, $0 - 1) } ?? highestSequenceAnnounced
        let unannounced = max(pullUnannounced, 0)
        pullUnannounced = 0
        // Not caught up while something it sent is to be asked for again (the pull then fails,
        // and its attempt counts: `ReplicationError.repeats`).
        let caughtUp = awaited.notStoredCount == 0
        update {
            $0.pullCaughtUp = caughtUp
            $0.receivingChanges = true
            $0.revisionsOffered -= unannounced
        }
        await shared.resolvePendingConflicts()
        caughtUpWaiter?.yield(reached)
    }

    /// How long everything the peer announced must have been here, with nothing announced
    /// since, before a peer that says "caught up" only once counts as caught up again: longer
    /// than the pause between a pass's batches, so that a ferry listener's pass (which ends
    /// with its own "caught up") is not taken for over before its end.
    static let quietCaughtUpDelay = Duration.milliseconds(300)

    /// After a continuous pull's first "caught up", from a peer that says it only once
    /// (`ReplicationChannel.saysCaughtUpOnce`): once all it announced since has arrived and it
    /// has announced nothing for `quietCaughtUpDelay`, that counts as its "caught up": the
    /// status goes back to idle, the conflicts its revisions opened are merged, and the
    /// checkpoint moves on. Without it the status stayed busy and the checkpoint where the
    /// first "caught up" left it while the connection lasted.
    func scheduleQuietCaughtUp() {
        let mark = changesAnnounced
        quietCaughtUp?.cancel()
        quietCaughtUp = Task { [weak self] in
            do { try await Task.sleep(for: Self.quietCaughtUpDelay) } catch { return }
            await self?.takeQuietCaughtUp(ifNothingAnnouncedSince: mark)
        }
    }

    /// The quiet moment `scheduleQuietCaughtUp` waited for, if nothing was announced meanwhile.
    func takeQuietCaughtUp(ifNothingAnnouncedSince mark: Int) async {
        guard !closed, changesAnnounced == mark, awaited.isSettled, !counts.pullCaughtUp else { return }
        awaited.caughtUpPending = true
        await settleArrivals()
    }

    /// Closes a connection whose peer announced more revisions than it sends
    /// (`AwaitedRevisions.capacity`): their keys would grow without bound.
    private func refuseUnsentFlood() async {
        await closeConnection(code: 1008, reason: "over \(AwaitedRevisions.capacity) revisions announced and not sent")
    }

    // MARK: Receiving revisions

    /// Takes a `rev` that needs nothing fetched or rebuilt (no delta, every blob it names is
    /// here) straight into the inbox, without a task; the drain answers it. False for any
    /// other request, which is served by a task of its own.
    func receiveAtOnce(_ incoming: IncomingRequest) -> Bool {
        guard case let .rev(doc, rev, history, _, body, merged, author) = incoming.request, !readOnly, !closed, relatedness == nil, arrivalOrder.isClear(doc),
              FolderStore.nameRefusal(doc) == nil else { return false }
        var references: [BlobReference]?
        switch body {
        case .deleted:
            break
        case .json(let value):
            guard let refs = try? value.blobReferences(), refs.allSatisfy({ shared.hasBlob($0.digest) }) else { return false }
            references = refs
        case .canonicalJSON(let canonical):
            guard let refs = canonical.checked?.blobReferences, refs.allSatisfy({ shared.hasBlob($0.digest) }) else { return false }
            references = refs
        case .blob(let ref):
            guard shared.hasBlob(ref.digest) else { return false }
        case .delta:
            return false
        }
        let remote = storable(doc: doc, rev: rev, history: history, body: body, merged: merged, author: author, references: references)
        inbox.append(ReceivedRevision(revision: remote, then: .answer(incoming.handle), size: incoming.size))
        budget.queued(incoming.size)
        inboxSignal?.yield()
        return true
    }

    /// A received revision as the store takes it, from the peer on this connection; every
    /// blob its body names is here, and a delta is already rebuilt (`.json`, with its
    /// canonical bytes when they were computed to check it, and the blob references found
    /// in it). Canonical bytes are checked already (`.canonicalJSON` with `checked`). A JSON
    /// body's files start being written now, on the folder's file worker, while the store is
    /// busy with earlier ones.
    private func storable(doc: DocumentID, rev: RevisionID, history: [RevisionID], body: RevisionBody, merged: RevisionID?,
                          author: String?, canonical: [UInt8]? = nil, references: [BlobReference]?) -> RemoteRevision {
        var object: BlobDigest?
        var size = 0
        var jsonBody: ReceivedBody?
        switch body {
        case .deleted:
            break
        case .json(let value):
            let bytes = canonical ?? value.canonicalBytes
            (jsonBody, size) = (shared.prepare(value, canonical: bytes, references: references, for: doc), bytes.count)
        case .canonicalJSON(let canonical):
            guard let facts = canonical.checked else { preconditionFailure("a peer's canonical bytes are checked before they are stored") }
            (jsonBody, size) = (shared.prepare(checked: canonical.bytes, facts: facts, for: doc), canonical.bytes.count)
        case .blob(let ref):
            (object, size) = (ref.digest, ref.length)
        case .delta:
            preconditionFailure("a delta is rebuilt before it is stored")
        }
        var isDeletion = false
        if case .deleted = body { isDeletion = true }
        let incoming = IncomingRevision(doc: doc, rev: rev, history: history, deleted: isDeletion, object: object,
                                        size: size, origin: channel.remotePeer ?? "peer", merged: merged, author: author)
        return RemoteRevision(incoming: incoming, jsonBody: jsonBody)
    }

    /// Counts a received revision and answers its request (an error status when refused).
    func answerReceipt(_ handle: RequestHandle, doc: DocumentID, rev: RevisionID, _ result: Result<[LogEntry], ReceiveFailure>) {
        // Its caller then settles (`settleArrivals`), from the session's own task. One this
        // side could not store (a full disk) or whose blob the peer could not send is asked for
        // again by the next pull.
        var notStored: String?
        defer { awaited.arrived(doc, rev, notStored: notStored) }
        var response = Response.ok
        switch result {
        case .success:
            update {
                $0.revisionsReceived += 1
                $0.storeFailure = nil
            }
            receivedHere.insert(doc, rev)
        case .failure(let error):
            if error.status >= 500 { notStored = error.message }
            update {
                $0.revisionsFailed += 1
                if notStored != nil { $0.storeFailure = "could not store \(doc): \(error.message)" }
            }
            logger.warning("revision refused", metadata: ["doc": "\(doc)", "rev": "\(rev)", "status": "\(error.status)", "error": "\(error.message)"])
            response = .error(status: error.status, message: "\(error.message)")
        }
        // Queued, not awaited: the drain answers here and must not wait for the wire.
        guard !handle.noReply, !closed else { return }
        _ = channel.respond(to: handle, with: response)
    }

    /// Stores a revision from the peer: its missing blobs first (verified as they arrive), then
    /// the revision with its body, through the drain task's next group, after the revisions of
    /// the same document that arrived before it (`ticket`, see `ArrivalOrder`).
    func receive(doc: DocumentID, rev: RevisionID, history: [RevisionID], body: RevisionBody, merged: RevisionID?, author: String?,
                 ticket: Int) async -> Result<[LogEntry], ReceiveFailure> {
        let prepared = await prepareBody(doc: doc, rev: rev, history: history, body: body, merged: merged)
        if !arrivalOrder.isTurn(doc, ticket) {
            await withCheckedContinuation { arrivalOrder.park(doc, ticket, $0) }
        }
        defer { arrivalOrder.next(doc) }
        let ready: PreparedBody
        switch prepared {
        case .success(let body): ready = body
        case .failure(let failure): return .failure(failure)
        }
        var remote = storable(doc: doc, rev: rev, history: history, body: ready.body, merged: merged, author: author,
                              canonical: ready.canonical, references: ready.references)
        remote.fileTemp = ready.fileTemp
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<[LogEntry], StoreError>, Never>) in
            // The drain task has ended with the connection: nothing would ever resume this.
            guard !closed else {
                remote.discardFiles(in: shared)
                done.resume(returning: Result<[LogEntry], StoreError>.failure(StoreError(.io, "\(endReason) before \(doc)@\(rev) was stored")))
                return
            }
            inbox.append(ReceivedRevision(revision: remote, then: .resume(done)))
            inboxSignal?.yield()
        }
        return result.mapError { ReceiveFailure($0) }
    }

    /// What a received revision needs before the store can take it: a delta rebuilt (and its
    /// canonical bytes, computed to check it), the blobs it names fetched (and their
    /// references, found once for the store's check too).
    private func prepareBody(doc: DocumentID, rev: RevisionID, history: [RevisionID], body: RevisionBody,
                             merged: RevisionID?) async -> Result<PreparedBody, ReceiveFailure> {
        // A name no folder records is refused before anything of it is fetched.
        if let why = FolderStore.nameRefusal(doc) { return .failure(ReceiveFailure(status: 400, message: "rejected \(doc)@\(rev): \(why)")) }
        var body = body
        var canonical: [UInt8]?
        var references: [BlobReference]?
        var fileTemp: String?
        if case .canonicalJSON(let stored) = body, stored.checked == nil {
            // ferry/1's codec checks canonical bodies as it decodes them; a channel that passes
            // the sender's stored bytes through (in-process) has them checked here, never
            // trusted, and parsed where they are not canonical (the store checks the value as
            // it checks every received body).
            if let facts = stored.bytes.withUnsafeBufferPointer(CanonicalJSONCheck.object) {
                body = .canonicalJSON(CanonicalBody(stored.bytes, checked: facts))
            } else if let value = try? JSONParser.parse(stored.bytes) {
                body = .json(value)
            } else {
                return .failure(ReceiveFailure(status: 400, message: "rejected \(doc)@\(rev): its body is not JSON"))
            }
        }
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
            case .canonicalJSON(let received):
                let refs = received.checked?.blobReferences ?? []  // checked above
                references = refs
                for ref in refs where !shared.hasBlob(ref.digest) { try await fetchBlob(ref.digest) }
            case .json(let value):
                let refs = try value.blobReferences()
                references = refs
                for ref in refs where !shared.hasBlob(ref.digest) { try await fetchBlob(ref.digest) }
            case .blob(let ref):
                if !shared.hasBlob(ref.digest) { fileTemp = try await fetchBlob(ref.digest, copyFor: doc) }
            case .delta:
                preconditionFailure("expanded above")
            }
        } catch let error as StoreError {
            if error.code == .corrupt {
                // Bytes that do not hash to what the peer announced: nothing was stored, and a
                // peer that sends them is broken or hostile. Hang up.
                await closeConnection(code: 1002, reason: "peer protocol error (invalidField): \(error.message)")
            }
            return .failure(ReceiveFailure(error))
        } catch {
            return .failure(ReceiveFailure(status: 502, message: "\(error)"))
        }
        return .success(PreparedBody(body: body, canonical: canonical, references: references, fileTemp: fileTemp))
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

    /// Most revisions the store takes in one group: a ferry sender's batch. A group that took
    /// every revision waiting (up to three batches) would answer them all at once, after the
    /// flushes of all of them, and the sender would wait that long for its oldest batch's
    /// answers before sending more.
    static let maxRevisionsPerGroup = changesBatchSize

    private func drainOnce() async {
        while !inbox.isEmpty {
            let group = Array(inbox.prefix(Self.maxRevisionsPerGroup))
            inbox.removeFirst(group.count)
            let results = await shared.applyRemote(group.map(\.revision))
            for (item, result) in zip(group, results) {
                switch item.then {
                case .resume(let done):
                    done.resume(returning: result)
                case .answer(let handle):
                    let incoming = item.revision.incoming
                    answerReceipt(handle, doc: incoming.doc, rev: incoming.rev, result.mapError { ReceiveFailure($0) })
                    budget.finished()
                }
            }
            budget.stored(group.reduce(0) { $0 + $1.size })
            await settleArrivals()
        }
    }
}

/// A received body made ready for the store (`PeerSession.prepareBody`).
struct PreparedBody {
    /// The body (a delta rebuilt, canonical bytes parsed).
    var body: RevisionBody
    /// Its canonical bytes, when they were computed to check a rebuilt delta.
    var canonical: [UInt8]?
    /// The blob references a JSON body names.
    var references: [BlobReference]?
    /// A file document's temp file beside it, written as its blob arrived.
    var fileTemp: String?
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
