import FerryReplicator
import Logging
import ServiceLifecycle

/// One continuous replication with a `--peer`; shutdown cancels it, which closes its connection.
struct ReplicationService: Service {
    let replicator: Replicator
    let logger: Logger

    func run() async {
        await cancelWhenGracefulShutdown { [replicator, logger] in await replicator.runReportingStop(logger) }
    }
}

extension Replicator {
    /// Runs a continuous replication; one that stops for good (wrong credentials, an untrusted
    /// certificate, a refusal no retry can change) is an error of the agent's, logged even
    /// under `serve -q`, since nothing else will say it until the agent restarts.
    func runReportingStop(_ logger: Logger) async {
        do { try await run() } catch {
            guard !Task.isCancelled else { return }
            logger.error("replication stopped until the agent restarts",
                         metadata: ["peer": "\(configuration.url)", "error": "\(error)"])
        }
    }
}
