import FerryNet
import FerryProtocol
import FerryReplicator
import FerryStore
import Logging
import ServiceLifecycle

/// Serves every peer that connects (the passive side), a session each, until shutdown: then
/// each peer gets a close frame and the sessions end.
struct ListenerService: Service {
    let listener: Listener
    let accepted: AsyncStream<PeerConnection>
    let shared: SharedStore
    let readOnly: Bool
    let features: [String]
    let logger: Logger

    func run() async {
        await withDiscardingTaskGroup { sessions in
            for await connection in accepted.cancelOnGracefulShutdown() {
                var sessionLogger = logger
                sessionLogger[metadataKey: "client"] = "\(connection.remoteDescription)"
                sessions.addTask { [shared, readOnly, features] in
                    let session = PeerSession(transport: connection, shared: shared, role: .passive,
                                              readOnly: readOnly, features: features, logger: sessionLogger)
                    await session.run()
                }
            }
            await listener.stop()
            sessions.cancelAll()
        }
    }
}
