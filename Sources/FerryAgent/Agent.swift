import FerryCore
import FerryDiscovery
import FerryNet
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryWatch
import Foundation
import Logging

/// How to run the agent.
public struct AgentConfiguration: Sendable {
    /// The folder.
    public var root: String
    /// Quiet time after a completed write before a file is read.
    public var settle: Duration = .milliseconds(1)
    /// Quiet time after a modification whose writer has not closed the file.
    public var openSettle: Duration = .milliseconds(500)
    /// How long a file must stay away before its deletion is recorded (an editor's save by
    /// rename leaves no file for a moment).
    public var absence: Duration = .milliseconds(500)
    /// How to accept connections; nil: `--no-listen`.
    public var listen: ListenOptions? = ListenOptions()
    /// Peers to replicate with continuously (`--peer`).
    public var peers: [PeerEndpoint] = []
    /// DNS-SD: advertising the listener, discovering peers.
    public var discoveryOptions = DiscoveryOptions()
    /// The DNS-SD implementation (the system's daemon by default).
    public var discovery: Discovery = DNSSDDiscovery()
    /// Called once the folder is open and the listener is bound, with the listener's URLs.
    public var onReady: (@Sendable (_ urls: [String]) -> Void)?

    /// A configuration for `root`.
    public init(root: String) { self.root = root }
}

/// `ferry serve`: watches the folder and records every settled change, serves peers that
/// connect (the passive side), and replicates continuously with every `--peer` (the active
/// side), all over one shared store, until stopped. `ferry status` asks it through the
/// control socket.
///
/// Shutdown is cooperative: `stop()` ends the watcher's stream; the agent then closes the
/// listener (a close frame to every peer), cancels its replicators (each closes its
/// connection) and saves the stat cache.
public final class Agent: @unchecked Sendable {
    /// The configuration.
    public let configuration: AgentConfiguration
    let logger: Logger
    private let stopLock = NSLock()
    private var watcher: FolderWatcher?
    private var stopRequested = false

    /// An agent; nothing runs until `run()`.
    public init(configuration: AgentConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Opens the folder (as its single writer), records what changed while no agent ran,
    /// starts the listener and the replicators, then records every change as it settles
    /// until `stop()`.
    public func run() async throws {
        let root = configuration.root
        guard FileSystem.exists(FolderLayout(root: root).folderFile) else {
            throw StoreError(.notInitialized, "\(root) is not a ferry folder (no .ferry/folder.json); run `ferry init` there")
        }
        // Watches first: whatever changes from here on is seen, even during the startup scan
        // (events queue in the stream; content decides, so a file the scan recorded is not
        // recorded twice).
        let watcher = FolderWatcher(root: root, settle: configuration.settle, openSettle: configuration.openSettle,
                                    absence: configuration.absence, logger: logger)
        let stream = try watcher.start()
        let alreadyStopped = stopLock.withLock { () -> Bool in
            self.watcher = watcher
            return stopRequested
        }
        if alreadyStopped { watcher.stop() }
        let shared: SharedStore
        do {
            shared = try await openAndScan(root)
        } catch {
            watcher.stop()
            throw error
        }

        // The listener and the replicators.
        let (accepted, acceptSink) = AsyncStream<PeerConnection>.makeStream()
        var listener: Listener?
        var urls: [String] = []
        if let options = configuration.listen {
            do {
                (listener, urls) = try await startListener(options, database: shared.info.name) { acceptSink.yield($0) }
            } catch {
                watcher.stop()
                throw error
            }
        }
        let replicators = ReplicatorRegistry()
        for peer in configuration.peers { replicators.add(peer, makeReplicator(peer, shared)) }
        let advertisement = await advertise(listener, shared: shared)
        let control = startControlSocket(shared: shared, listener: listener, urls: urls, replicators: replicators)
        configuration.onReady?(urls)
        logger.notice("watching", metadata: ["folder": "\(root)", "database": "\(shared.info.name)"])

        await withDiscardingTaskGroup { group in
            let readOnly = configuration.listen?.readOnly ?? false
            let features = configuration.listen?.deltaSync == true ? [ProtocolFeature.delta] : []
            let logger = self.logger
            group.addTask {
                await withDiscardingTaskGroup { sessions in
                    for await connection in accepted {
                        var sessionLogger = logger
                        sessionLogger[metadataKey: "client"] = "\(connection.remoteDescription)"
                        sessions.addTask {
                            let session = PeerSession(transport: connection, shared: shared, role: .passive,
                                                      readOnly: readOnly, features: features, logger: sessionLogger)
                            await session.run()
                        }
                    }
                }
            }
            for (_, replicator) in replicators.all {
                group.addTask { _ = try? await replicator.run() }
            }
            if configuration.discoveryOptions.discover {
                group.addTask { await self.discoverPeers(shared: shared, registry: replicators) }
            }
            await index(stream, into: shared, watcher: watcher)
            // Stopping: peers first get a close frame, then everything else ends.
            advertisement?.withdraw()
            control?.stop()
            await listener?.stop()
            acceptSink.finish()
            group.cancelAll()
        }
        await shared.finishSubscribers()
        try await shared.saveStatCache()
        logger.notice("stopped")
    }

    /// Opens the folder and records what changed while no agent ran.
    private func openAndScan(_ root: String) async throws -> SharedStore {
        var storeLogger = logger
        storeLogger[metadataKey: "folder"] = "\(root)"
        let start = ContinuousClock.now
        // Walk the folder on another thread while this one reads the log: two cores, two halves.
        let rules = IgnoreRules.load(root: root)
        let walk = Task.detached { try FolderScanner(root: root, rules: rules).scan() }
        let store: FolderStore
        do {
            store = try FolderStore.open(at: root, writable: true, logger: storeLogger)
        } catch {
            walk.cancel()
            throw error
        }
        let walked = try await walk.value
        let report = try store.batch { try store.scanAndRecord(rules: rules, prescanned: walked) }
        logger.info("startup scan done", metadata: [
            "recorded": "\(report.recorded.count)", "unreadable": "\(report.unreadable.count)",
            "elapsed": "\(ContinuousClock.now - start)",
        ])
        for s in report.skipped { logger.notice("not synced", metadata: ["path": "\(s.path)", "reason": "\(s.reason)"]) }
        // From here on the watcher sees every change: a file missing for a moment (a save by
        // rename) is not a deletion until it has stayed away.
        store.deletionsAwaitWatcher = true
        return SharedStore(store)
    }

    /// Records every settled change until the watcher's stream ends.
    private func index(_ stream: AsyncStream<WatchOutput>, into shared: SharedStore, watcher: FolderWatcher) async {
        let logger = self.logger
        var lastCacheSave = ContinuousClock.now
        for await output in stream {
            do {
                try await shared.perform { store in
                    _ = try Indexer(store: store, logger: logger, recheck: { watcher.recheck($0) }).handle(output)
                }
            } catch {
                // A failed write (e.g. a full disk) loses nothing: the file stays as it is and
                // is picked up again by the next event or the next start.
                logger.error("could not record a change", metadata: ["error": "\(error)"])
            }
            if ContinuousClock.now - lastCacheSave > .seconds(5) {
                try? await shared.saveStatCache()
                lastCacheSave = ContinuousClock.now
            }
        }
    }

    private func startListener(_ options: ListenOptions, database: String,
                               accept: @escaping @Sendable (PeerConnection) -> Void) async throws -> (Listener, [String]) {
        let (bind, hosts) = try NetworkInterfaces.resolve(options.interface)
        var config = ListenerConfiguration(database: database)
        config.host = bind
        config.port = options.port
        config.passwordCheck = options.users?.passwordCheck
        config.recentlyVerified = options.users?.recentlyVerified
        config.heartbeat = options.heartbeat
        config.logger = logger
        config.describe = ["readOnly": options.readOnly ? "true" : "false", "deltaSync": options.deltaSync ? "true" : "false"]
        let identities = IdentityStore(layout: FolderLayout(root: configuration.root))
        switch options.tls {
        case .off:
            break
        case .anonymous:
            config.tls = ListenerTLS(identity: try identities.anonymous(commonName: database), clientRoots: options.clientRoots)
        case .identity:
            guard let identity = try identities.load(.identity) else {
                throw TLSError("--tls identity: this folder has no identity; make one with `ferry identity create --cn NAME` or `ferry identity import FILE.p12`")
            }
            config.tls = ListenerTLS(identity: identity, clientRoots: options.clientRoots)
        }
        if let tls = config.tls {
            let summary = tls.identity.summary
            config.describe["tls"] = "1"
            config.describe["fingerprint"] = summary.fingerprint
            logger.notice("TLS identity", metadata: ["subject": "\(summary.subject)", "sha256": "\(summary.fingerprint)"])
        }
        let listener = try await Listener.start(config, onConnection: accept)
        let scheme = config.tls == nil ? "ws" : "wss"
        let urls = hosts.map { "\(scheme)://\($0):\(listener.port)/\(database)" }
        logger.notice("listening", metadata: ["urls": "\(urls.joined(separator: " "))"])
        return (listener, urls)
    }

    func makeReplicator(_ peer: PeerEndpoint, _ shared: SharedStore) -> Replicator {
        var peerLogger = logger
        peerLogger[metadataKey: "peer"] = "\(peer.url)"
        return peer.makeReplicator(shared: shared, continuous: true, logger: peerLogger)
    }

    private func startControlSocket(shared: SharedStore, listener: Listener?, urls: [String],
                                    replicators: ReplicatorRegistry) -> ControlSocket? {
        let pid = Int(getpid())
        let root = configuration.root
        let database = shared.info.name
        let readOnly = configuration.listen?.readOnly ?? false
        do {
            return try ControlSocket(path: shared.layout.stateDirectory + "/agent.sock") { request in
                guard request == "status" else { return Array("{\"error\":\"unknown request\"}\n".utf8) }
                return AgentStatus.snapshot(pid: pid, root: root, database: database, listener: listener, urls: urls,
                                            readOnly: readOnly, replicators: replicators.all).prettyBytes
            }
        } catch {
            logger.notice("no control socket; `ferry status` will show the folder only", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Asks a running agent to stop; `run()` then returns.
    public func stop() {
        let w = stopLock.withLock { () -> FolderWatcher? in
            stopRequested = true
            return watcher
        }
        w?.stop()
    }
}
