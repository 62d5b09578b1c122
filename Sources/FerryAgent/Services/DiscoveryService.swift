import FerryDiscovery
import ServiceLifecycle

/// DNS-SD: the listener's advertisement, withdrawn at shutdown, and with `--discover` the
/// replications with the peers found (`Agent.discoverPeers`), cancelled at shutdown.
struct DiscoveryService: Service {
    let advertisement: (any Advertisement)?
    let discover: (@Sendable () async -> Void)?

    func run() async {
        if let discover {
            await cancelWhenGracefulShutdown { await discover() }
        } else {
            try? await gracefulShutdown()
        }
        advertisement?.withdraw()
    }
}
