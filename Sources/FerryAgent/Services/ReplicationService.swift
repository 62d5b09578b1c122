import FerryReplicator
import ServiceLifecycle

/// One continuous replication with a `--peer`; shutdown cancels it, which closes its connection.
struct ReplicationService: Service {
    let replicator: Replicator

    func run() async {
        await cancelWhenGracefulShutdown { [replicator] in _ = try? await replicator.run() }
    }
}
