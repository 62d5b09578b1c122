import ArgumentParser
import Dispatch
import FerryAgent
import FerryStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `ferry serve`: the agent.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the agent: watch the folder and record every save as a revision (until SIGINT/SIGTERM).",
        discussion: "This build runs the watcher only (--no-listen); the listener and --peer replication arrive with the wire protocol.")

    @Flag(help: "Accept no connections: watch and record only.")
    var noListen = false

    @Option(help: "Milliseconds a file must stay quiet after its writer closed it before it is recorded.")
    var settleMs = 1

    @Option(help: "Milliseconds a file that is written but not closed must stay quiet before it is recorded.")
    var openSettleMs = 500

    @OptionGroup var folder: FolderOptions

    func validate() throws {
        guard settleMs >= 0, openSettleMs >= 0 else { throw ValidationError("settle times must be 0 or more") }
    }

    func run() async throws {
        guard noListen else {
            throw CLIError("the listener is not built yet; run `ferry serve --no-listen` to watch and record", exitCode: 1)
        }
        var config = AgentConfiguration(root: try folder.resolveRoot())
        config.settle = .milliseconds(settleMs)
        config.openSettle = .milliseconds(openSettleMs)
        var logger = folder.makeLogger(label: "ferry.serve")
        if !folder.verbose && ProcessInfo.processInfo.environment["FERRY_LOG"] == nil { logger.logLevel = .info }
        let agent = Agent(configuration: config, logger: logger)
        let signals = [SIGINT, SIGTERM].map { sig -> DispatchSourceSignal in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { agent.stop() }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        try await agent.run()
    }
}
