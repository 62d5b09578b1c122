import FerryCore
import FerryNet
import FerryReplicator
import Foundation
import Synchronization

/// The peers connected to the agent's listener now, for `ferry status`: who (address, user),
/// how (wire format, path), since when, which way revisions go, and what moved. The listener's
/// sessions add and update their entry; the control socket reads a snapshot.
final class IncomingPeers: Sendable {
    /// One connected peer.
    struct Entry: Sendable {
        let address: String
        let user: String?
        let wire: String
        let path: String
        let since: Date
        var stats = ReplicationStats()

        /// Push (the peer sends), pull (it receives), both, or nil before it asked for either.
        var direction: String? {
            switch (stats.receivingChanges, stats.sendingChanges) {
            case (true, true): "both"
            case (true, false): "push"
            case (false, true): "pull"
            case (false, false): nil
            }
        }
    }

    private let entries = Mutex<[Int: Entry]>([:])
    private let nextID = Atomic<Int>(0)

    /// Registers a new connection; returns its key.
    func add(_ connection: PeerConnection) -> Int {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let entry = Entry(address: connection.remoteAddress, user: connection.user, wire: connection.wireFormat.subprotocol,
                          path: connection.path, since: connection.since)
        entries.withLock { $0[id] = entry }
        return id
    }

    /// The session's latest counts.
    func update(_ id: Int, _ stats: ReplicationStats) {
        entries.withLock { $0[id]?.stats = stats }
    }

    /// The connection ended.
    func remove(_ id: Int) {
        entries.withLock { _ = $0.removeValue(forKey: id) }
    }

    /// Every connected peer, oldest first.
    var all: [Entry] {
        entries.withLock { $0.sorted { $0.key < $1.key }.map(\.value) }
    }

    /// The status JSON of every connected peer.
    var json: JSONValue {
        .array(all.map { e in
            [
                "address": .string(e.address),
                "user": e.user.map { .string($0) } ?? .null,
                "protocol": .string(e.wire),
                "path": .string(e.path),
                "direction": e.direction.map { .string($0) } ?? .null,
                "since": .string(ISO8601DateFormatter().string(from: e.since)),
                "revisions_received": .int(e.stats.revisionsReceived),
                "revisions_sent": .int(e.stats.revisionsSent),
            ]
        })
    }
}
