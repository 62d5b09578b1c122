import FerryCore
import FerryDiscovery
import FerryNet
import FerryReplicator
import FerryStore
import Foundation
import Logging

extension Agent {
    /// Advertises the listener over DNS-SD (kept advertised by `DiscoveryService`); without a
    /// reachable mDNS daemon, says so once and goes on without until one answers.
    func advertise(_ listener: Listener?, shared: SharedStore) async -> ListenerAdvertiser? {
        let options = configuration.discoveryOptions
        guard let listener, options.advertise else { return nil }
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "ferry"
        let fingerprint = listener.configuration.tls?.identity.summary.fingerprint
        // A long database name is cut, not the host's, with room for a " #16" should the name be
        // taken: DNS-SD takes 63 bytes (peers match the database by the TXT record, not by name).
        let defaultName = ServiceAdvertisement.name(shared.info.name, suffix: " on \(host)", within: ServiceAdvertisement.maxNameBytes - 4)
        let service = ServiceAdvertisement(
            name: options.serviceName ?? defaultName, type: options.serviceType, port: listener.port,
            txt: PeerFinder.txt(database: shared.info.name, folderID: shared.info.id, fingerprint: fingerprint))
        let advertiser = ListenerAdvertiser(discovery: configuration.discovery, service: service, logger: logger)
        await advertiser.start()
        return advertiser
    }

    /// `serve --discover`: browses every few seconds and keeps one continuous replication with
    /// each peer serving the same database, its advertised fingerprint pinned. A peer that
    /// comes back at another address or port (a restart with `--port 0`) gets a new
    /// replication in place of the old one, which would otherwise retry a dead address. A
    /// peer no longer advertised (`browsesBeforeGone` browses in a row) whose replication
    /// cannot reach it is dropped: it stopped or left, and would be retried and listed as
    /// offline for ever; seen again, it gets a new replication.
    func discoverPeers(shared: SharedStore, registry: ReplicatorRegistry) async {
        let options = configuration.discoveryOptions
        let finder = PeerFinder(discovery: configuration.discovery, serviceType: options.serviceType,
                                layout: shared.layout, database: shared.info.name, folderID: shared.info.id)
        var running: [String: (url: String, name: String, replicator: Replicator, stop: AsyncStream<Void>.Continuation)] = [:]
        var unseen: [String: Int] = [:]        // running peer id → browses in a row that did not find it
        var refusals: [String: String] = [:]   // peer id → the refusal last logged, so each is said once
        var saidOff = false
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                do {
                    let found = try await finder.find(timeout: .milliseconds(1500), template: options.template)
                    let seen = Set(found.map { Self.peerID($0.service) })
                    for (id, entry) in running where !seen.contains(id) {
                        unseen[id, default: 0] += 1
                        guard unseen[id]! >= Self.browsesBeforeGone, entry.replicator.status.activity == .offline else { continue }
                        logger.notice("discovered peer gone: no longer advertised, and not reachable", metadata: ["name": "\(entry.name)", "url": "\(entry.url)"])
                        entry.stop.finish()
                        registry.remove(id: id)
                        running[id] = nil
                        unseen[id] = nil
                    }
                    for id in seen { unseen[id] = nil }
                    for candidate in found {
                        let id = Self.peerID(candidate.service)
                        let metadata: Logger.Metadata = ["name": "\(candidate.service.name)"]
                        guard let endpoint = candidate.endpoint else {
                            let why = candidate.note ?? "not usable"
                            if refusals[id] != why {
                                // A certificate other than the pinned one is shown even under -q.
                                logger.log(level: candidate.distrusted ? .error : .warning, "discovered peer refused: \(why)", metadata: metadata)
                            }
                            refusals[id] = why
                            continue
                        }
                        refusals[id] = nil
                        let url = endpoint.url.description
                        if let current = running[id] {
                            if current.url == url { continue }
                            logger.notice("discovered peer moved", metadata: metadata.merging(["from": "\(current.url)", "to": "\(url)"]) { $1 })
                            current.stop.finish()
                            registry.remove(id: id)
                        }
                        if let note = candidate.note { logger.notice("discovered peer: \(note)", metadata: metadata) }
                        let replicator = makeReplicator(endpoint, shared)
                        registry.add(endpoint, replicator, id: id)
                        let (stopped, stop) = AsyncStream<Void>.makeStream()
                        running[id] = (url, candidate.service.name, replicator, stop)
                        group.addTask { [logger] in await Self.run(replicator, until: stopped, logger: logger) }
                    }
                    saidOff = false
                } catch {
                    if !saidOff { logger.notice("discovery is off: cannot browse for peers", metadata: ["reason": "\(error)"]) }
                    saidOff = true
                }
                try? await Task.sleep(for: .seconds(3))
            }
            for (_, entry) in running { entry.stop.finish() }
        }
    }

    /// Which peer a service is: its folder id when it advertises one, its name otherwise.
    private static func peerID(_ service: DiscoveredService) -> String { service.txt["id"] ?? service.name }

    /// Browses in a row (about 4.5 s apart) that must miss a discovered peer before it is
    /// dropped: one browse of 1.5 s can miss a peer that is there.
    static let browsesBeforeGone = 3

    /// Runs `replicator` until it ends or `stopped` finishes, whichever comes first.
    private static func run(_ replicator: Replicator, until stopped: AsyncStream<Void>, logger: Logger) async {
        await withTaskGroup(of: Void.self) { race in
            race.addTask { await replicator.runReportingStop(logger) }
            race.addTask { for await _ in stopped {} }
            await race.next()
            race.cancelAll()
        }
    }
}

/// The agent's replications, the `--peer` ones and those discovery adds (and replaces) while
/// it runs; what `ferry status` lists.
final class ReplicatorRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [(id: String?, peer: PeerEndpoint, replicator: Replicator)] = []

    /// Adds a replication; `id` names a discovered peer so that it can be replaced.
    func add(_ peer: PeerEndpoint, _ replicator: Replicator, id: String? = nil) {
        lock.withLock { entries.append((id, peer, replicator)) }
    }

    /// Removes the replication of the discovered peer `id`.
    func remove(id: String) { lock.withLock { entries.removeAll { $0.id == id } } }

    /// Every replication, in the order added.
    var all: [(PeerEndpoint, Replicator)] { lock.withLock { entries.map { ($0.peer, $0.replicator) } } }
}
