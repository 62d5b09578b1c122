import FerryCore
import FerryNet
import FerryReplicator

/// The running agent's live state as the control socket answers it (and `ferry status`
/// prints it): the listener's URLs, connection counts and connected peers, and each
/// replication's activity, progress and last error.
public enum AgentStatus {
    /// The JSON answer to `status`.
    static func snapshot(pid: Int, root: String, database: String, listener: Listener?, urls: [String], readOnly: Bool,
                         replicators: [(PeerEndpoint, Replicator)], incoming: IncomingPeers) -> JSONValue {
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
        return [
            "pid": .int(pid), "folder": .string(root), "database": .string(database),
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
