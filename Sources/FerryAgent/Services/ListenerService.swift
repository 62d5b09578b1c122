import FerryNet
import FerryProtocol
import FerryReplicator
import FerryStore
import Foundation
import Logging
import ServiceLifecycle

/// Serves every peer that connects (the passive side), a session each, until shutdown: then
/// each peer gets a close frame and the sessions end. Each connection is logged when it
/// starts and when it ends (who, how, for how long, what moved), and listed in `incoming`
/// while it lasts (`ferry status`).
struct ListenerService: Service {
    let listener: Listener
    let accepted: AsyncStream<PeerConnection>
    let shared: SharedStore
    let readOnly: Bool
    let features: [String]
    let incoming: IncomingPeers
    let logger: Logger

    func run() async {
        await withDiscardingTaskGroup { sessions in
            for await connection in accepted.cancelOnGracefulShutdown() {
                var sessionLogger = logger
                sessionLogger[metadataKey: "client"] = "\(connection.remoteDescription)"
                sessions.addTask { [shared, readOnly, features, incoming, logger] in
                    let id = incoming.add(connection)
                    logger.info("peer connected", metadata: Self.describe(connection))
                    let session = PeerSession(transport: connection, shared: shared, role: .passive,
                                              readOnly: readOnly, features: features, logger: sessionLogger) { stats in
                        incoming.update(id, stats)
                    }
                    await session.run(firstMessageWithin: PeerSession.handshakeLimit)
                    incoming.remove(id)
                    let stats = await session.stats
                    var metadata = Self.describe(connection)
                    metadata["seconds"] = "\(String(format: "%.1f", Date().timeIntervalSince(connection.since)))"
                    metadata["revisionsIn"] = "\(stats.revisionsReceived)"
                    metadata["revisionsOut"] = "\(stats.revisionsSent)"
                    metadata["close"] = "\(connection.closeDescription ?? "dropped")"
                    logger.info("peer disconnected", metadata: metadata)
                }
            }
            await listener.stop()
            sessions.cancelAll()
        }
    }

    /// Who a connection is, for its log lines: address, user (if a password let it in),
    /// wire format and path; never a credential.
    static func describe(_ connection: PeerConnection) -> Logger.Metadata {
        [
            "address": "\(connection.remoteAddress)",
            "user": "\(connection.user ?? "(none)")",
            "protocol": "\(connection.wireFormat.subprotocol)",
            "path": "\(connection.path)",
        ]
    }
}
