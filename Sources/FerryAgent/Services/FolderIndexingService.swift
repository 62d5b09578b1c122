import FerryCore
import FerryStore
import FerryWatch
import Logging
import ServiceLifecycle

/// Records every settled change the watcher reports. First to start and last to stop: edits
/// made while the network services shut down are still recorded; then the stat cache is saved.
struct FolderIndexingService: Service {
    let stream: AsyncStream<WatchOutput>
    let watcher: FolderWatcher
    let shared: SharedStore
    let logger: Logger

    func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await retryHeldBackNow() }
                await index()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            watcher.stop()  // ends the stream once what is queued is handled
        }
        await shared.finishSubscribers()
        try await shared.saveStatCache()
    }

    private func index() async {
        let watcher = self.watcher
        var lastCacheSave = ContinuousClock.now
        var retry = RetryWait()
        for await output in stream {
            do {
                try await shared.perform { [logger] store in
                    _ = try Indexer(store: store, logger: logger, recheck: { watcher.recheck($0) }).handle(output)
                }
                if case .rescan = output { retry.reset() }
            } catch {
                // A failed write (e.g. a full disk) loses nothing: the file stays as it is and
                // a rescan, until one succeeds, records it once there is room again.
                // Only the retry's own failures make the next wait longer: a burst of saves
                // failing on a full disk is retried a second later all the same.
                var wait = RetryWait.first
                if case .rescan = output { wait = retry.next() }
                logger.error("could not record a change; trying again", metadata: ["error": "\(error)", "retryIn": "\(wait)"])
                watcher.report(.rescan(reason: "trying again what could not be recorded"), after: wait)
            }
            if ContinuousClock.now - lastCacheSave > .seconds(5) {
                try? await shared.saveStatCache()
                lastCacheSave = ContinuousClock.now
            }
        }
    }

    /// While documents are held back (their directory could not be written, by the watcher's
    /// change or a peer's), has them tried again every few seconds: a remount read-write or
    /// a change of ACL sends no event.
    private func retryHeldBackNow() async {
        while (try? await Task.sleep(for: RetryWait.heldBack)) != nil {
            if !shared.summary.heldBack.isEmpty { watcher.report(.retryHeldBack, after: .zero) }
        }
    }
}

/// How long the indexer waits before trying again: what could not be recorded, doubling
/// from one second to a minute while it keeps failing; what was held back, every few seconds
/// (each try is an `access` call per held-back directory).
struct RetryWait {
    /// The wait before the first rescan after a failed record.
    static let first: Duration = .seconds(1)
    /// The wait before held-back documents are tried again without an event.
    static let heldBack: Duration = .seconds(5)
    private var failures = 0

    /// The wait after one more failure.
    mutating func next() -> Duration {
        failures += 1
        return .seconds(min(1 << min(failures, 6), 60))
    }

    /// After a rescan that succeeded.
    mutating func reset() { failures = 0 }
}
