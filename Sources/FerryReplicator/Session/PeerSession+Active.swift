import FerryCore
import FerryProtocol
import FerryStore

extension PeerSession {
    /// How long a new connection's peer may take to say something: to answer the handshake
    /// (`open`), or, where there is none to wait for (a listener's session, or Couchbase
    /// Lite's protocol), to send its first message (`run(firstMessageWithin:)`). A peer that
    /// accepts the WebSocket and answers its pings but never speaks would otherwise hold this
    /// side for ever: the heartbeat notices only a peer that sends nothing at all.
    public static let handshakeLimit: Duration = .seconds(30)

    /// Opens the session (the channel's handshake); call after `run()` has started in another
    /// task. Without an answer within `limit`, closes the connection (1001) and throws. The
    /// limit is wall-clock time, also in the simulation, whose in-memory handshakes take
    /// microseconds.
    public func open(within limit: Duration = PeerSession.handshakeLimit) async throws {
        let channel = self.channel
        let outcome = await withTaskGroup(of: HandshakeOutcome.self) { group in
            group.addTask { .answered(await channel.open()) }
            group.addTask {
                do { try await Task.sleep(for: limit) } catch { return .cancelled }
                return .timedOut
            }
            let first = await group.next() ?? .cancelled
            // The handshake still waits: closing the connection ends it (it returns false).
            switch first {
            case .answered: break
            case .timedOut: await closeConnection(code: 1001, reason: "no answer to the handshake within \(Self.text(limit))")
            case .cancelled: await channel.close(code: 1001, reason: "replication stopped")
            }
            group.cancelAll()
            return first
        }
        switch outcome {
        case .answered(true): return
        case .answered(false): break
        case .timedOut: throw ReplicationError("the peer did not answer the handshake within \(Self.text(limit))")
        case .cancelled: throw CancellationError()
        }
        // This side closed it: the peer refused the handshake (404: no such database) or spoke
        // a version this side does not; retrying cannot help. Otherwise the connection dropped.
        if let refusal = channel.refusal { throw ReplicationError(refusal, kind: .permanent) }
        throw ReplicationError("\(endReason) during the handshake")
    }

    /// How `open` ended: the channel's answer (true: open), the limit, or this task cancelled.
    private enum HandshakeOutcome: Sendable {
        case answered(Bool)
        case timedOut
        case cancelled
    }

    /// A duration as a message says it: "30 s", "300 ms".
    static func text(_ duration: Duration) -> String {
        let ms = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return ms % 1000 == 0 ? "\(ms / 1000) s" : "\(ms) ms"
    }

    /// Most rounds of a one-shot replication both ways.
    static let maxRounds = 8

    /// Replicates in `direction`: once (returns when both ways have caught up) or
    /// continuously (returns only when the connection closes, by throwing).
    ///
    /// Once both ways, it repeats until a round moves nothing: after one round the two sides
    /// can still differ by the merges each made of what the other sent (this side's, made as
    /// its pull ended, were not in its push yet; the peer's, made as this side's push ended,
    /// were not in its answer to the pull). The next round carries them; the one after finds
    /// both sides with the same revisions, so it moves nothing.
    /// With `refusingUnrelated` (the peer's URL, for the message, and the database it serves),
    /// the first sync with a peer whose folder shares no history with this one, or is another
    /// database, is refused before anything moves.
    public func replicate(_ direction: ReplicationDirection, continuous: Bool, docIDs: [DocumentID]? = nil,
                          refusingUnrelated peer: (url: String, database: String)? = nil) async throws {
        wantsAnotherRound = false
        if let peer { try await refuseIfUnrelated(peer: peer.url, database: peer.database, docIDs: docIDs) }
        let rounds = continuous || direction != .both ? 1 : (channel.resubscribes ? Self.maxRounds : 1)
        for _ in 0..<rounds {
            let before = stats.revisionsWanted
            try await withThrowingTaskGroup(of: Void.self) { group in
                if direction.pulls { group.addTask { try await self.pull(continuous: continuous, docIDs: docIDs) } }
                if direction.pushes {
                    group.addTask {
                        do { try await self.push(continuous: continuous, docIDs: docIDs) } catch let error as ReplicationError
                            where error.refusesPush && continuous && direction.pulls {
                            // A read-only listener: its changes still come; this side's are said
                            // not to go (the status's last error), once per connection.
                            await self.pushWasRefused(error)
                        }
                    }
                }
                if continuous {
                    // The first failure ends both directions at once: `waitForAll` would wait
                    // for the pull, which never ends, before reporting a failed push.
                    while try await group.next() != nil {}
                } else {
                    try await group.waitForAll()
                }
            }
            if stats.revisionsWanted == before { return }
        }
        // A peer that serves one subscription per connection: the next round needs a new one.
        wantsAnotherRound = rounds == 1 && !continuous && direction == .both
    }

    /// Notes that the peer refuses this side's push while its pull goes on.
    func pushWasRefused(_ error: ReplicationError) {
        logger.warning("the peer refuses this folder's changes; pulling only", metadata: ["error": "\(error.message)"])
        update { $0.pushRefused = error.message }
    }

    /// Pulls everything the peer has that this folder lacks, once; keeps checkpoints on both
    /// sides so that the next pull starts where this one ended. Returns what it did.
    public func pullOnce() async throws -> ReplicationStats {
        try await pull(continuous: false, docIDs: nil)
        return stats
    }

    /// Pushes everything this folder has that the peer lacks, once, resuming from the push
    /// checkpoint kept on both sides. A read-only peer refuses with a permanent error.
    public func pushOnce() async throws -> ReplicationStats {
        try await push(continuous: false, docIDs: nil)
        return stats
    }

    /// The pull: `subChanges` from the checkpoint, then the peer's `changes` and `rev`s are
    /// served by the loop; its progress is saved at the end of a one-shot pull, and after a
    /// pause while continuous (`DeferredCheckpoint`).
    func pull(continuous: Bool, docIDs: [DocumentID]?) async throws {
        let client = checkpointClient(FerryCheckpointClient.pullPrefix, docIDs: docIDs)
        var (peerRev, saved) = try await readCheckpoint(client)
        let (caughtUp, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
        caughtUpWaiter = continuation
        highestSequenceAnnounced = saved.remote
        let answer = try await request(.subChanges(since: saved.remote, continuous: continuous, docIDs: docIDs))
        if case let .error(status, message) = answer {
            throw ReplicationError("the peer refused subChanges (\(status)): \(message)", kind: .permanent)
        }
        // A peer that gives no count (an older ferry, Couchbase Lite) leaves the total to grow
        // as its changes are answered.
        if case .subscribed(let count) = answer {
            pullUnannounced += count
            update { $0.revisionsOffered += count }
        }
        update { $0.pullSubscribed = true }
        if continuous { deferredCheckpoints[client] = DeferredCheckpoint(peerRev: peerRev, saved: saved) }
        defer { if continuous { endDeferredCheckpoint(client) } }
        for await reached in caughtUp {
            if continuous {
                advanceDeferredCheckpoint(client) { $0.remote = max($0.remote, reached) }
                // Saved now: the connection ends below, and the next one starts from here.
                if awaited.notStoredCount > 0 { await saveDeferredCheckpoint(client) }
            } else if reached > saved.remote {
                saved.remote = reached
                peerRev = try await saveCheckpoint(client, peerRev: peerRev, saved)
            }
            try notStoredFailure()
            guard continuous else { return }
        }
        throw ReplicationError(endReason)
    }

    /// Throws when revisions the peer sent could not be stored (a full disk here, a blob it
    /// could not send then): the checkpoint saved stays below them, and the replicator's next
    /// attempt (a new connection) asks for them again.
    func notStoredFailure() throws {
        let count = awaited.notStoredCount
        guard count > 0 else { return }
        let why = awaited.notStoredReason.map { " (\($0))" } ?? ""
        throw ReplicationError("\(count) revision\(count == 1 ? "" : "s") from the peer could not be stored\(why); the next attempt asks for \(count == 1 ? "it" : "them") again",
                               repeats: true)
    }

    /// The push: `changes` from the push checkpoint, and the `rev`s the peer wants.
    func push(continuous: Bool, docIDs: [DocumentID]?) async throws {
        let client = checkpointClient(FerryCheckpointClient.pushPrefix, docIDs: docIDs)
        var (peerRev, saved) = try await readCheckpoint(client)
        if continuous { deferredCheckpoints[client] = DeferredCheckpoint(peerRev: peerRev, saved: saved) }
        defer { if continuous { endDeferredCheckpoint(client) } }
        try await streamChanges(since: saved.local, continuous: continuous, docIDs: docIDs.map(Set.init)) { reached in
            guard continuous else {
                guard reached > saved.local else { return }
                saved.local = reached
                peerRev = try await saveCheckpoint(client, peerRev: peerRev, saved)
                return
            }
            advanceDeferredCheckpoint(client) { $0.local = max($0.local, reached) }
        }
    }

    /// Takes a continuous replication's progress and (re)arms its checkpoint's save.
    func advanceDeferredCheckpoint(_ client: String, _ change: (inout Checkpoint) -> Void) {
        guard var entry = deferredCheckpoints[client] else { return }
        // Kept even when no save is armed: progress made during a save is what its end saves next.
        defer { deferredCheckpoints[client] = entry }
        guard let due = entry.advance(at: .now, change) else { return }
        entry.timer?.cancel()
        entry.timer = Task { [weak self] in
            do { try await Task.sleep(until: due) } catch { return }
            await self?.saveDeferredCheckpoint(client)
        }
    }

    /// Saves what a continuous replication has reached, once its wait is over.
    func saveDeferredCheckpoint(_ client: String) async {
        // A wait that ended just as newer progress cancelled it leaves the save to the new wait.
        guard !Task.isCancelled, var entry = deferredCheckpoints[client], let checkpoint = entry.beginSave() else { return }
        deferredCheckpoints[client] = entry
        // A failed save (the connection is going) leaves the progress to the next one.
        let rev: String??
        do { rev = .some(try await saveCheckpoint(client, peerRev: entry.peerRev, checkpoint)) } catch { rev = nil }
        guard deferredCheckpoints[client]?.endSave(of: checkpoint, peerRev: rev) == true else { return }
        advanceDeferredCheckpoint(client) { _ in }
    }

    /// Ends a continuous replication's checkpoint: a save still waiting is dropped.
    func endDeferredCheckpoint(_ client: String) {
        deferredCheckpoints.removeValue(forKey: client)?.timer?.cancel()
    }

    /// This folder's checkpoint client for a direction (`FerryCheckpointClient`).
    func checkpointClient(_ prefix: String, docIDs: [DocumentID]?) -> String {
        prefix + shared.info.id + (docIDs.map { ":" + Self.filterKey($0) } ?? "")
    }

    /// A filtered replication keeps its own checkpoints: a short digest of its document list.
    static func filterKey(_ docIDs: [DocumentID]) -> String {
        String(BlobDigest.of(Array(docIDs.map(\.rawValue).sorted().joined(separator: "\n").utf8)).hex.prefix(16))
    }

    /// The checkpoint of `client` as both sides agree: the lower of the peer's copy and this
    /// folder's (zero when either has none), and the peer copy's revision for the next save.
    func readCheckpoint(_ client: String) async throws -> (peerRev: String?, checkpoint: Checkpoint) {
        guard case let .checkpoint(rev, theirs) = try await request(.getCheckpoint(client: client)) else {
            return (nil, Checkpoint(local: 0, remote: 0))
        }
        let layout = shared.layout
        let ours = await shared.perform { _ in CheckpointStore(layout: layout).get(client) }
        return (rev, Checkpoint(local: min(theirs.local, ours?.local ?? 0), remote: min(theirs.remote, ours?.remote ?? 0)))
    }

    /// Saves `checkpoint` for `client` on the peer and in this folder; returns the peer copy's
    /// new revision (its old one if the peer refused, e.g. after a concurrent save).
    func saveCheckpoint(_ client: String, peerRev: String?, _ checkpoint: Checkpoint) async throws -> String? {
        var rev = peerRev
        switch try await request(.setCheckpoint(client: client, rev: peerRev, checkpoint: checkpoint)) {
        case .checkpointSaved(let saved): rev = saved
        default:
            // Out of step with the peer's copy: read its revision so the next save succeeds.
            if case let .checkpoint(current, _) = try await request(.getCheckpoint(client: client)) { rev = current }
        }
        let local = CheckpointStore(layout: shared.layout)
        await shared.perform { _ in
            _ = try? local.set(client, expectedRev: local.get(client)?.rev, local: checkpoint.local, remote: checkpoint.remote)
        }
        return rev
    }
}
