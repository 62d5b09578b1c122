import FerryCore
import FerryProtocol
import FerryStore
import Logging

/// Serving the peer's requests: each goes to the code that answers it.
extension PeerSession {
    /// Answers one of the peer's requests; a `rev` comes with its place in its document's
    /// line (`ticket`, see `ArrivalOrder`) when the loop took one for it.
    func serve(_ incoming: IncomingRequest, ticket: Int? = nil) async {
        let handle = incoming.handle
        switch incoming.request {
        case .getCheckpoint(let client):
            let layout = shared.layout
            if let c = await shared.perform({ _ in CheckpointStore(layout: layout).get(client) }) {
                await respond(handle, .checkpoint(rev: String(c.rev), checkpoint: Checkpoint(local: c.local, remote: c.remote)))
            } else {
                await respond(handle, .error(status: 404, message: "no checkpoint \(client)"))
            }
        case .setCheckpoint(let client, let rev, let asked):
            if let why = CheckpointStore.clientRefusal(client) {
                await respond(handle, .error(status: 400, message: why))
                return
            }
            // A read-only listener takes no pushes, so it keeps no pushed progress. A ferry
            // pusher's own checkpoint is refused. Couchbase Lite keeps its push's and its pull's
            // progress in one checkpoint, and stops its replicator when a save is refused: that
            // one is kept with its push part at 0, so its pusher offers its revisions again
            // should the listener become writable.
            let pushedProgress = readOnly && asked.local != 0
            if pushedProgress && client.hasPrefix(FerryCheckpointClient.pushPrefix) {
                await respond(handle, .error(status: 403, message: Self.readOnlyMessage))
                return
            }
            let kept = pushedProgress ? Checkpoint(local: 0, remote: asked.remote) : asked
            let layout = shared.layout
            do {
                let saved = try await shared.perform { _ in
                    try CheckpointStore(layout: layout).set(client, expectedRev: rev.flatMap { Int($0) }, local: kept.local, remote: kept.remote)
                }
                await respond(handle, .checkpointSaved(rev: String(saved.rev)))
            } catch {
                await respond(handle, .error(status: 409, message: "\(error)"))
            }
        case let .subChanges(since, continuous, docIDs):
            // How many changes the first pass will announce, so the subscriber's progress bar
            // has its total from the start (docs/protocol.md, subChanges).
            let filter = docIDs.map(Set.init)
            let currentOnly = !channel.announcesIntermediateRevisions
            let count = channel.answersSubscriptionWithCount
                ? await shared.perform { store in store.changeCount(since: since, docIDs: filter, currentOnly: currentOnly) }
                : 0
            await respond(handle, .subscribed(count: count))
            await serveChanges(since: since, continuous: continuous, docIDs: filter)
        case .changes(let entries):
            await answerChanges(handle, entries)
        case .proposeChanges(let entries):
            await answerProposal(handle, entries)
        case let .rev(doc, rev, history, _, body, merged, author):
            if readOnly {
                await respond(handle, .error(status: 403, message: Self.readOnlyMessage))
                return
            }
            if relatedness != nil {
                await probeRevision(handle, doc: doc, rev: rev, history: history)
                return
            }
            let result = await receive(doc: doc, rev: rev, history: history, body: body, merged: merged, author: author, ticket: ticket ?? arrivalOrder.take(doc))
            answerReceipt(handle, doc: doc, rev: rev, result)
            await settleArrivals()
        case let .getAttachment(digest, offset, length):
            await sendBlob(digest, offset: offset, length: length, to: handle)
        case .norev(let doc, let rev, _, let status, let reason):
            update { $0.revisionsFailed += 1 }
            // A few are worth a line each; a flood of them is counted (`revisionsFailed`), not
            // logged, so a peer cannot fill the disk through the agent's log.
            if stats.revisionsFailed <= Self.norevsLogged {
                logger.warning("peer cannot send a revision", metadata: ["doc": "\(doc)", "rev": "\(rev)", "status": "\(status)", "reason": "\(reason)"])
            }
            if stats.revisionsFailed == Self.norevsLogged { logger.warning("further revisions the peer cannot send are counted, not logged") }
            // One it cannot send now (5xx) is asked for again by the next pull.
            awaited.arrived(doc, rev, notStored: status >= 500 ? "the peer could not send it (\(status)): \(reason)" : nil)
            await settleArrivals()
        case .hello:
            break  // the channel handles its handshake
        }
    }

    /// Most `norev`s logged per session.
    static let norevsLogged = 10

    static let readOnlyMessage = "this listener is read-only: peers may pull, not push"
}
