import FerryDiscovery
import Logging
import Synchronization

/// Keeps the listener advertised over DNS-SD for as long as the agent runs. The mDNS daemon
/// forgets a registration when it stops or restarts (a package upgrade, a crash), and may not
/// be running yet when the agent starts: every few seconds the advertisement is checked and,
/// when lost or never made while no daemon answered, made again. Each change is logged once.
final class ListenerAdvertiser: Sendable {
    private let discovery: any Discovery
    private let service: ServiceAdvertisement
    private let logger: Logger
    private let current = Mutex<(any Advertisement)?>(nil)
    /// Whether the last failure was logged, and whether trying again may help (no daemon
    /// answered) or not (a refusal, such as every name taken): each outage is said once.
    private let failure = Mutex<(said: Bool, worthRetrying: Bool)>((false, true))

    /// How often the advertisement is checked, and tried again while no daemon answers.
    static let checkEvery: Duration = .seconds(5)

    init(discovery: any Discovery, service: ServiceAdvertisement, logger: Logger) {
        self.discovery = discovery
        self.service = service
        self.logger = logger
    }

    /// The first attempt, before the agent says it is watching.
    func start() async {
        await advertise()
    }

    /// Checks and renews the advertisement until cancelled, then withdraws it.
    func keep() async {
        while (try? await Task.sleep(for: Self.checkEvery)) != nil {
            if let ad = current.withLock({ $0 }) {
                guard ad.isLost else { continue }
                ad.withdraw()
                current.withLock { $0 = nil }
                failure.withLock { $0 = (false, true) }
                logger.notice("the DNS-SD advertisement was dropped (the mDNS daemon stopped, restarted or found its name taken); advertising again")
            } else if !failure.withLock({ $0.worthRetrying }) {
                continue
            }
            await advertise()
        }
        withdraw()
    }

    /// Withdraws the advertisement (shutdown).
    func withdraw() {
        current.withLock { ad in
            ad?.withdraw()
            ad = nil
        }
    }

    private func advertise() async {
        do {
            let ad = try await discovery.advertise(service)
            current.withLock { $0 = ad }
            failure.withLock { $0 = (false, true) }
            logger.notice("advertised over DNS-SD", metadata: ["name": "\(ad.registeredName)", "type": "\(service.type)"])
        } catch {
            // An attempt the shutdown cut short is no news.
            guard !Task.isCancelled else { return }
            let retry = (error as? DiscoveryError)?.daemonUnavailable ?? false
            let sayIt = failure.withLock { f in
                defer { f = (true, retry) }
                return !f.said
            }
            if sayIt {
                let how = retry ? "; trying again every \(Self.checkEvery.components.seconds) s" : ""
                logger.notice("discovery is off: the listener is not advertised\(how)", metadata: ["reason": "\(error)"])
            }
        }
    }
}
