import FerryCore
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
    /// Whether to accept connections (issue 4 adds the listener; today only `false` runs).
    public var listen = false

    /// A configuration for `root`.
    public init(root: String) { self.root = root }
}

/// `ferry serve`: watches the folder and records every settled change, until stopped.
///
/// Today it runs the startup scan and the watcher/indexer pipeline; the listener and the
/// replicators of later issues join it as further services.
public final class Agent: @unchecked Sendable {
    /// The configuration.
    public let configuration: AgentConfiguration
    private let logger: Logger
    private let stopLock = NSLock()
    private var watcher: FolderWatcher?
    private var stopRequested = false

    /// An agent; nothing runs until `run()`.
    public init(configuration: AgentConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Opens the folder (as its single writer), records what changed while no agent ran,
    /// then records every change as it settles until `stop()`.
    public func run() async throws {
        var storeLogger = logger
        storeLogger[metadataKey: "folder"] = "\(configuration.root)"
        let root = configuration.root
        guard FileSystem.exists(FolderLayout(root: root).folderFile) else {
            throw StoreError(.notInitialized, "\(root) is not a ferry folder (no .ferry/folder.json); run `ferry init` there")
        }
        // Watches first: whatever changes from here on is seen, even during the startup scan
        // (events queue in the stream; content decides, so a file the scan recorded is not
        // recorded twice).
        let watcher = FolderWatcher(root: root, settle: configuration.settle,
                                    openSettle: configuration.openSettle, logger: logger)
        let stream = try watcher.start()
        let alreadyStopped = stopLock.withLock { () -> Bool in
            self.watcher = watcher
            return stopRequested
        }
        if alreadyStopped { watcher.stop() }
        let start = ContinuousClock.now
        // Walk the folder on another thread while this one reads the log: two cores, two halves.
        let rules = IgnoreRules.load(root: root)
        let walk = Task.detached { try FolderScanner(root: root, rules: rules).scan() }
        let store: FolderStore
        do {
            store = try FolderStore.open(at: root, writable: true, logger: storeLogger)
        } catch {
            watcher.stop()
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

        logger.notice("watching", metadata: ["folder": "\(configuration.root)", "database": "\(store.info.name)"])
        let indexer = Indexer(store: store, logger: logger)
        var lastCacheSave = ContinuousClock.now
        for await output in stream {
            do {
                try indexer.handle(output)
            } catch {
                // A failed write (e.g. a full disk) loses nothing: the file stays as it is and
                // is picked up again by the next event or the next start.
                logger.error("could not record a change", metadata: ["error": "\(error)"])
            }
            if ContinuousClock.now - lastCacheSave > .seconds(5) {
                try? store.saveStatCache()
                lastCacheSave = ContinuousClock.now
            }
        }
        try store.saveStatCache()
        logger.notice("stopped")
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
