import FerryProtocol
import FerryReplicator
import FerryStore
import Logging

/// Pulls once from `source` (a passive session on `passive`) into `target` (an active one on
/// `active`), each side offering its features; returns the active side's stats. Bounded: a
/// hang closes the connection after 30 s and the pull fails.
func loopbackPull(active: MessageTransport, passive: MessageTransport, from source: SharedStore, into target: SharedStore,
                  sourceFeatures: [String] = [], targetFeatures: [String] = [], logger: Logger) async throws -> ReplicationStats {
    let server = PeerSession(transport: passive, shared: source, role: .passive, features: sourceFeatures, logger: logger)
    let client = PeerSession(transport: active, shared: target, role: .active, remoteDatabase: source.info.name,
                             features: targetFeatures, logger: logger)
    async let serving: Void = server.run()
    async let reading: Void = client.run()
    let watchdog = Task {
        try await Task.sleep(for: .seconds(30))
        await active.close(code: 4000, reason: "test timed out")
    }
    defer { watchdog.cancel() }
    var outcome: Result<ReplicationStats, Error>
    do {
        try await client.open()
        outcome = .success(try await client.pullOnce())
    } catch {
        outcome = .failure(error)
    }
    await client.close()
    _ = await (serving, reading)
    return try outcome.get()
}
