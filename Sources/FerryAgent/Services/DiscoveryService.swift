import FerryDiscovery
import ServiceLifecycle

/// DNS-SD: the listener's advertisement, kept while the agent runs (`ListenerAdvertiser`) and
/// withdrawn at shutdown, and with `--discover` the replications with the peers found
/// (`Agent.discoverPeers`), cancelled at shutdown.
struct DiscoveryService: Service {
    let advertiser: ListenerAdvertiser?
    let discover: (@Sendable () async -> Void)?

    func run() async {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                if let advertiser { group.addTask { await advertiser.keep() } }
                if let discover { group.addTask { await discover() } }
                // Neither: wait for the shutdown all the same.
                group.addTask { try? await gracefulShutdown() }
            }
        }
        advertiser?.withdraw()
    }
}
