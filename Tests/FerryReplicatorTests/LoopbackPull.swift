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

/// A continuous replication between two stores over a loopback connection: a passive session
/// serving `there` on `passive`, and an active one replicating `here` in `direction` on
/// `active`, each session's loop in its own task. `stop()` ends it.
struct ContinuousLoopback {
    /// The active session.
    let client: PeerSession
    private let loops: [Task<Void, Never>]
    private let replicating: Task<Void, Error>

    /// Starts both sessions and the replication.
    init(active: MessageTransport, passive: MessageTransport, here: SharedStore, there: SharedStore,
         direction: ReplicationDirection, logger: Logger) {
        let server = PeerSession(transport: passive, shared: there, role: .passive, logger: logger)
        let client = PeerSession(transport: active, shared: here, role: .active, remoteDatabase: there.info.name, logger: logger)
        loops = [Task { await server.run() }, Task { await client.run() }]
        replicating = Task {
            try await client.open()
            try await client.replicate(direction, continuous: true)
        }
        self.client = client
    }

    /// Stops the replication, closes the connection and waits for both loops.
    func stop() async {
        replicating.cancel()
        await client.close()
        for loop in loops { await loop.value }
        _ = await replicating.result
    }
}
