import FerryCore
import FerryNet
import FerryReplicator
import FerryStore
import Synchronization

/// The running agent's live state as the control socket answers it (and `ferry status`
/// prints it): the listener's URLs, connection counts and connected peers, and each
/// replication's activity, progress and last error.
public enum AgentStatus {
    /// The JSON answer to `status` once the agent runs: the folder's summary (as of the
    /// store's last operation), the paths its startup scan did not sync, and the live state.
    static func snapshot(folder: FolderSummary, skipped: [FolderScanner.Skipped], listener: Listener?, urls: [String], readOnly: Bool,
                         replicators: [(PeerEndpoint, Replicator)], incoming: IncomingPeers) -> [String: JSONValue] {
        var listening: JSONValue = .null
        if let listener {
            let counts = listener.connectionCounts
            listening = [
                "urls": .array(urls.map { .string($0) }),
                "connections": ["total": .int(counts.total), "active": .int(counts.active)],
                "read_only": .bool(readOnly),
                "peers": incoming.json,
            ]
        }
        func problems(_ byDoc: [DocumentID: String], _ key: String) -> JSONValue {
            ReportJSON.documents(byDoc.sorted { $0.key < $1.key }.map { (doc: $0.key, reason: $0.value) }, key: key)
        }
        return [
            "documents": .int(folder.documents), "revisions": .int(folder.revisions), "last_seq": .int(folder.lastSequence),
            "unreadable": problems(folder.unreadable, "error"), "held_back": problems(folder.heldBack, "reason"),
            "skipped": ReportJSON.skipped(skipped),
            "listener": listening,
            "replications": .array(replicators.map { peer, replicator in json(peer: peer, status: replicator.status) }),
        ]
    }

    /// One replication's status.
    public static func json(peer: PeerEndpoint, status: ReplicatorStatus) -> JSONValue {
        let progress = ProgressEstimate.of(status.current, caughtUp: status.activity == .idle)
        var o: [String: JSONValue] = [
            "url": .string(peer.url.description),
            "user": BasicCredentials.parse(peer.authorization).0.map { .string($0) } ?? .null,
            "direction": .string(peer.direction.rawValue),
            "activity": .string(status.activity.rawValue),
            "progress": ["done": .int(progress.done), "total": .int(progress.total)],
            "revisions_sent": .int(status.totals.revisionsSent),
            "revisions_received": .int(status.totals.revisionsReceived),
            "blobs_received": .int(status.totals.blobsReceived),
            "revisions_failed": .int(status.totals.revisionsFailed),
            "connections": .int(status.connections),
            "last_error": status.lastError.map { .string($0) } ?? .null,
        ]
        if let retry = status.retryInSeconds, let n = JSONNumber(retry) { o["retry_in_seconds"] = .number(n) }
        return .object(o)
    }
}

/// What the control socket answers from the agent's first moment: while the folder opens
/// (its log read, its files walked, what changed meanwhile recorded), which step it is at and
/// for how long; once it runs, the folder's summary and the live state (`AgentStatus`).
final class StatusBoard: Sendable {
    private struct State {
        var step = "reading the log and walking the folder"
        var since = ContinuousClock.now
        var running: (@Sendable () -> [String: JSONValue])?
    }
    private let state = Mutex(State())
    private let identity: [String: JSONValue]

    /// A board for the agent of `root` (`database`: its name), starting.
    init(pid: Int, root: String, database: String) {
        identity = ["pid": .int(pid), "folder": .string(root), "database": .string(database)]
    }

    /// The startup step under way.
    func starting(_ step: String) {
        state.withLock {
            $0.step = step
            $0.since = .now
        }
    }

    /// The agent runs: from now on `answer` is `snapshot()` (with its identity).
    func running(_ snapshot: @escaping @Sendable () -> [String: JSONValue]) {
        state.withLock { $0.running = snapshot }
    }

    /// The JSON answer to `status`.
    func answer() -> JSONValue {
        let (running, step, since) = state.withLock { ($0.running, $0.step, $0.since) }
        var o = identity
        if let running {
            o.merge(running()) { _, new in new }
        } else {
            let elapsed = (ContinuousClock.now - since).components
            let seconds = ((Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18) * 10).rounded() / 10
            o["starting"] = ["step": .string(step), "seconds": JSONNumber(seconds).map(JSONValue.number) ?? .null]
        }
        return .object(o)
    }
}
