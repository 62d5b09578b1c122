import ArgumentParser
import Dispatch
import FerryAgent
import FerryStore
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `ferry serve`: the agent.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the agent: watch the folder, serve peers, and replicate continuously with every --peer (until SIGINT/SIGTERM).",
        discussion: """
            Prints its listener URL(s) on start. `ferry status` shows its live state. Logs at info level on stderr: \
            each peer's connection (address, user, protocol, path) and its end, each failed login (never a password), \
            each replication's connections and failures; -q logs errors only (and prints no URLs), FERRY_LOG=LEVEL \
            (trace, debug, info, notice, warning, error, critical) overrides both.
            """)

    @OptionGroup(title: "Listener") var listener: ListenerOptions

    @Option(name: .customLong("peer"), help: ArgumentHelp("Replicate continuously, both ways, with this listener or saved peer (repeatable); every peer saved with `ferry peer add` is replicated with too.", valueName: "url|name"))
    var peers: [String] = []

    @Flag(help: "Also replicate with every peer found over DNS-SD that serves the same database, pinning its advertised fingerprint.")
    var discover = false

    @OptionGroup(title: "Replication with --peer") var client: ClientOptions

    @Option(help: "Milliseconds a file must stay quiet after its writer closed it before it is recorded.")
    var settleMs = 1

    @Option(help: "Milliseconds a file that is written but not closed must stay quiet before it is recorded.")
    var openSettleMs = 500

    @OptionGroup var folder: FolderOptions
    @OptionGroup var quiet: QuietOption

    func validate() throws {
        guard settleMs >= 0, openSettleMs >= 0 else { throw ValidationError("settle times must be 0 or more") }
        if quiet.quiet && folder.verbose { throw ValidationError("--quiet and --verbose: choose one") }
    }

    func run() async throws {
        var config = AgentConfiguration(root: try folder.resolveRoot())
        config.settle = .milliseconds(settleMs)
        config.openSettle = .milliseconds(openSettleMs)
        config.listen = try listener.resolve()
        config.listen?.heartbeat = .milliseconds(Int(client.heartbeat * 1000))
        let layout = FolderLayout(root: config.root)
        config.peers = try peers.map { try client.endpoint(naming: $0, layout: layout, direction: .both) }
        for saved in try SavedPeers(layout: layout).load() where !config.peers.contains(where: { $0.name == saved.name }) {
            config.peers.append(try client.endpoint(saved: saved, direction: .both))
        }
        config.discoveryOptions.advertise = !listener.noAdvertise
        config.discoveryOptions.serviceType = listener.serviceType
        config.discoveryOptions.serviceName = listener.serviceName
        config.discoveryOptions.discover = discover
        if discover { config.discoveryOptions.template = try client.endpoint("ws://discovered:1/x", direction: .both) }
        let isQuiet = quiet.quiet
        config.onReady = { urls in
            guard !isQuiet else { return }
            for url in urls { FileHandleOutput.stdout(Array("listening on \(url)\n".utf8)) }
            if urls.isEmpty { FileHandleOutput.stdout(Array("not listening (--no-listen)\n".utf8)) }
        }
        var logger = folder.makeLogger(label: "ferry.serve", quiet: isQuiet)
        // An agent's log is its record of who connected and what failed: info unless told.
        if !isQuiet && FolderOptions.environmentLevel == nil { logger.logLevel = .info }
        let agent = Agent(configuration: config, logger: logger)
        // The first SIGINT/SIGTERM stops gracefully (peers get close frames, the folder's state
        // is saved); a second one, for when that takes too long, stops at once.
        let received = Mutex(0)
        let signals = onTerminationSignals { [logger] in
            let count = received.withLock { n -> Int in n += 1; return n }
            if count == 1 {
                agent.stop()
            } else if count == 2 {
                logger.notice("second signal: stopping now, without waiting for peers")
                agent.forceStop()
            }
        }
        defer { signals.forEach { $0.cancel() } }
        do {
            try await agent.run()
        } catch let error as InterfaceError {
            throw CLIError("--interface: \(error)", exitCode: 2)
        } catch let error as StoreError {
            throw error
        } catch {
            throw CLIError("\(error)")
        }
    }
}
