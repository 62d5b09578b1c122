import FerryCore
import FerryDiscovery
import FerryNet
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryWatch
import Foundation
import Logging
import ServiceLifecycle

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
/// Its parts run as services of a `ServiceGroup` (swift-service-lifecycle): `stop()` shuts
/// them down gracefully in reverse start order — control socket, discovery, replications,
/// listener (a close frame to every peer), then the watcher, which records what is still
/// queued and saves the stat cache; `forceStop()` (a second signal) cancels them all.
public final class Agent: @unchecked Sendable {
    /// The configuration.
    public let configuration: AgentConfiguration
    let logger: Logger
    private let stopLock = NSLock()
    private var group: (services: ServiceGroup, task: Task<Void, any Error>)?
    private var stopRequested = false
    private var forceRequested = false

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
        let layout = FolderLayout(root: root)
        let info = try FolderStore.readInfo(root: root)
        // The folder's one writer from the first moment, so that the control socket can answer
        // `ferry status` (which step of opening the folder it is at) while the log is read.
        let lock = try FolderLock(path: layout.lockFile)
        let board = StatusBoard(pid: Int(getpid()), root: root, database: info.name)
        let control = startControlSocket(path: layout.stateDirectory + "/agent.sock", board: board)
        // Watches first: whatever changes from here on is seen, even during the startup scan
        // (events queue in the stream; content decides, so a file the scan recorded is not
        // recorded twice).
        let watcher = FolderWatcher(root: root, settle: configuration.settle, openSettle: configuration.openSettle,
                                    absence: configuration.absence, logger: logger)
        let stream: AsyncStream<WatchOutput>
        do { stream = try watcher.start() } catch {
            control?.stop()
            throw error
        }
        let shared: SharedStore, skipped: [FolderScanner.Skipped]
        do {
            (shared, skipped) = try await openAndScan(root, info: info, lock: lock, board: board)
        } catch {
            watcher.stop()
            control?.stop()
            throw error
        }

        // The listener and the replicators, unless a stop came while the folder was opened:
        // then only what records the folder runs, and stops at once.
        let stopping = stopLock.withLock { stopRequested }
        board.starting("starting the listener and the replications")
        let (accepted, acceptSink) = AsyncStream<PeerConnection>.makeStream()
        var listener: Listener?
        var urls: [String] = []
        if let options = configuration.listen, !stopping {
            do {
                (listener, urls) = try await startListener(options, database: shared.info.name) { acceptSink.yield($0) }
            } catch {
                watcher.stop()
                control?.stop()
                throw error
            }
        }
        let replicators = ReplicatorRegistry()
        for peer in configuration.peers where !stopping { replicators.add(peer, makeReplicator(peer, shared)) }
        let advertiser = await advertise(listener, shared: shared)
        let incoming = IncomingPeers()
        let readOnly = configuration.listen?.readOnly ?? false
        board.running { [urls, listener] in
            AgentStatus.snapshot(folder: shared.summary, skipped: skipped, listener: listener, urls: urls, readOnly: readOnly,
                                 replicators: replicators.all, incoming: incoming)
        }

        // Started in this order, stopped in the reverse one (ServiceGroup's graceful shutdown):
        // status and discovery go first, then the replications and the listener close their
        // connections, and the folder is recorded until the very end.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: FolderIndexingService(stream: stream, watcher: watcher, shared: shared, logger: logger),
                  successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
        ]
        if let listener {
            let service = ListenerService(listener: listener, accepted: accepted, shared: shared,
                                          readOnly: configuration.listen?.readOnly ?? false,
                                          features: configuration.listen?.deltaSync == true ? [ProtocolFeature.delta] : [],
                                          incoming: incoming, logger: logger)
            services.append(.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        for (_, replicator) in replicators.all {
            services.append(.init(service: ReplicationService(replicator: replicator, logger: logger), successTerminationBehavior: .ignore))
        }
        var discover: (@Sendable () async -> Void)?
        if configuration.discoveryOptions.discover, !stopping {
            discover = { @Sendable in await self.discoverPeers(shared: shared, registry: replicators) }
        }
        services.append(.init(service: DiscoveryService(advertiser: advertiser, discover: discover),
                              successTerminationBehavior: .ignore))
        if let control { services.append(.init(service: ControlSocketService(control: control), successTerminationBehavior: .ignore)) }
        var groupConfiguration = ServiceGroupConfiguration(services: services, logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = Self.gracefulShutdownLimit
        groupConfiguration.maximumCancellationDuration = .seconds(5)
        let group = ServiceGroup(configuration: groupConfiguration)

        if !stopping { configuration.onReady?(urls) }
        logger.notice("watching", metadata: ["folder": "\(root)", "database": "\(shared.info.name)"])
        let running = Task { try await group.run() }
        // A stop (or a second signal) that came while the folder was opened takes effect now.
        let (stopNow, forceNow) = stopLock.withLock { () -> (Bool, Bool) in
            self.group = (group, running)
            return (stopRequested, forceRequested)
        }
        if forceNow {
            running.cancel()
        } else if stopNow {
            await group.triggerGracefulShutdown()
        }
        defer { acceptSink.finish() }
        do {
            try await withTaskCancellationHandler { try await running.value } onCancel: { running.cancel() }
        } catch {
            logger.error("stopped without a clean shutdown", metadata: ["error": "\(error)"])
            throw error
        }
        logger.notice("stopped")
    }

    /// How long a graceful shutdown may take before the services are cancelled.
    static let gracefulShutdownLimit: Duration = .seconds(10)

    /// Opens the folder (under `lock`) and records what changed while no agent ran; returns
    /// it with the paths the scan does not sync. `board` tells `status` the step under way.
    private func openAndScan(_ root: String, info: FolderInfo, lock: FolderLock, board: StatusBoard) async throws -> (SharedStore, [FolderScanner.Skipped]) {
        var storeLogger = logger
        storeLogger[metadataKey: "folder"] = "\(root)"
        let start = ContinuousClock.now
        // Walk the folder on another thread while this one reads the log: two cores, two halves.
        let rules = IgnoreRules.load(root: root)
        let walk = Task.detached { try FolderScanner(root: root, rules: rules).scan() }
        let store: FolderStore
        do {
            store = try FolderStore.open(at: root, info: info, holding: lock, logger: storeLogger)
        } catch {
            walk.cancel()
            throw error
        }
        let walked = try await walk.value
        board.starting("recording what changed while no agent ran")
        let report = try store.batch { try store.scanAndRecord(rules: rules, prescanned: walked) }
        logger.info("startup scan done", metadata: [
            "recorded": "\(report.recorded.count)", "unreadable": "\(report.unreadable.count)",
            "elapsed": "\(ContinuousClock.now - start)",
        ])
        for s in report.skipped { logger.notice("not synced", metadata: ["path": "\(PrintablePath.text(s.path))", "reason": "\(s.reason)"]) }
        // From here on the watcher sees every change: a file missing for a moment (a save by
        // rename) is not a deletion until it has stayed away.
        store.deletionsAwaitWatcher = true
        return (SharedStore(store), report.skipped)
    }

    private func startListener(_ options: ListenOptions, database: String,
                               accept: @escaping @Sendable (PeerConnection) -> Void) async throws -> (Listener, [String]) {
        let (bind, hosts) = try NetworkInterfaces.resolve(options.interface)
        var config = ListenerConfiguration(database: database)
        config.host = bind
        let keptPort = ListenerPort(layout: FolderLayout(root: configuration.root))
        config.port = options.port ?? keptPort.read() ?? 0
        config.passwordCheck = options.users?.passwordCheck
        config.recentlyVerified = options.users?.recentlyVerified
        config.heartbeat = options.heartbeat
        config.logger = logger
        config.describe = ["readOnly": .bool(options.readOnly), "deltaSync": .bool(options.deltaSync), "tls": .bool(false)]
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
            config.describe["tls"] = .bool(true)
            config.describe["fingerprint"] = .string(summary.fingerprint)
            logger.notice("TLS identity", metadata: ["subject": "\(summary.subject)", "sha256": "\(summary.fingerprint)"])
        }
        let listener: Listener
        do {
            listener = try await Listener.start(config, onConnection: accept)
        } catch where Listener.isAddressInUse(error) && config.port != 0 {
            guard options.port == nil else {
                throw ListenError("port \(config.port) on \(bind) is in use by another program; stop it, or choose another port with --port (0: any free one)")
            }
            logger.warning("port \(config.port), where this folder listened last, is in use; listening on another one: peers that use the old URL must be given the new one",
                           metadata: ["port": "\(config.port)"])
            config.port = 0
            listener = try await Listener.start(config, onConnection: accept)
        }
        if options.port == nil { keptPort.save(listener.port) }
        warnIfOpen(options, bind: bind)
        let scheme = config.tls == nil ? "ws" : "wss"
        let urls = hosts.map { "\(scheme)://\($0):\(listener.port)/\(database)" }
        logger.notice("listening", metadata: ["urls": "\(urls.joined(separator: " "))"])
        return (listener, urls)
    }

    /// Says so when the listener is open to more than this machine with nobody checked, or
    /// when passwords would cross the network in clear.
    private func warnIfOpen(_ options: ListenOptions, bind: String) {
        let loopbackOnly = bind.hasPrefix("127.")
        if !loopbackOnly && options.users == nil && options.clientRoots == nil {
            logger.warning("""
                anyone who can reach this machine can read and change this folder: the listener on \(bind) asks for no password \
                and no client certificate; give --users FILE or --client-ca PEM, or --interface 127.0.0.1
                """)
        }
        if !loopbackOnly && options.users != nil && options.tls == .off {
            logger.warning("passwords cross the network in clear with --tls off; drop --tls off (TLS is the default)")
        }
    }

    func makeReplicator(_ peer: PeerEndpoint, _ shared: SharedStore) -> Replicator {
        var peerLogger = logger
        peerLogger[metadataKey: "peer"] = "\(peer.url)"
        return peer.makeReplicator(shared: shared, continuous: true, logger: peerLogger)
    }

    /// The control socket at `path`, answering `status` from `board`; nil (with a notice)
    /// when it cannot be made: `ferry status` then shows the folder only.
    private func startControlSocket(path: String, board: StatusBoard) -> ControlSocket? {
        do {
            return try ControlSocket(path: path) { request in
                guard request == "status" else { return Array("{\"error\":\"unknown request\"}\n".utf8) }
                return board.answer().prettyBytes
            }
        } catch {
            logger.notice("no control socket; `ferry status` will show the folder only", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Asks a running agent to stop gracefully; `run()` then returns. While the folder is
    /// still being opened this only records the request, and the services stop as soon as
    /// they have started: stopping the watcher then ended the indexing service before its turn
    /// in the group's graceful shutdown, which the group reports as a failure (exit 1).
    public func stop() {
        let group = stopLock.withLock { () -> ServiceGroup? in
            stopRequested = true
            return self.group?.services
        }
        if let group { Task { await group.triggerGracefulShutdown() } }
    }

    /// Stops at once (a second signal): every service is cancelled, connections are closed
    /// without waiting for their peers; what is on disk stays consistent.
    public func forceStop() {
        let task = stopLock.withLock { () -> Task<Void, any Error>? in
            stopRequested = true
            forceRequested = true
            return group?.task
        }
        task?.cancel()
    }
}
