import FerryDiscovery
import Logging
import Synchronization

/// Keeps the listener advertised over DNS-SD for as long as the agent runs. The mDNS daemon
/// forgets a registration when it stops or restarts (a package upgrade, a crash), and may not
/// be running yet when the agent starts: every few seconds the advertisement is checked and,
/// when lost or never made, made again. Each change is logged once.
final class ListenerAdvertiser: Sendable {
    private let discovery: any Discovery
    private let service: ServiceAdvertisement
    private let logger: Logger
    private let current = Mutex<(any Advertisement)?>(nil)
    /// False once an attempt failed and was logged, until one succeeds: a daemon that stays
    /// away is said once.
    private let lastAttemptWorked = Mutex(true)

    /// How often the advertisement is checked, and tried again while no daemon answers.
    static let checkEvery: Duration = .seconds(5)

    init(discovery: any Discovery, service: ServiceAdvertisement, logger: Logger) {
        self.discovery = discovery
        self.service = service
        self.logger = logger
    }

    /// The first attempt, before the agent says it is watching.
    func start() async {
        await advertise(again: false)
    }

    /// Checks and renews the advertisement until cancelled, then withdraws it.
    func keep() async {
        while (try? await Task.sleep(for: Self.checkEvery)) != nil {
            let ad = current.withLock { $0 }
            if let ad {
                guard ad.isLost else { continue }
                ad.withdraw()
                current.withLock { $0 = nil }
                logger.notice("the DNS-SD advertisement was lost (the mDNS daemon stopped or restarted); advertising again")
            }
            await advertise(again: true)
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

    private func advertise(again: Bool) async {
        do {
            let ad = try await discovery.advertise(service)
            current.withLock { $0 = ad }
            lastAttemptWorked.withLock { $0 = true }
            logger.notice("advertised over DNS-SD", metadata: ["name": "\(ad.registeredName)", "type": "\(service.type)"])
        } catch {
            let sayIt = lastAttemptWorked.withLock { worked in
                defer { worked = false }
                return worked
            }
            if sayIt {
                logger.notice("discovery is off: the listener is not advertised; trying again every \(Self.checkEvery.components.seconds) s",
                              metadata: ["reason": "\(error)"])
            }
        }
    }
}
