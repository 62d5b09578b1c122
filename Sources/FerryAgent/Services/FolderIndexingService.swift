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
            await index()
        } onGracefulShutdown: {
            watcher.stop()  // ends the stream once what is queued is handled
        }
        await shared.finishSubscribers()
        try await shared.saveStatCache()
    }

    private func index() async {
        let watcher = self.watcher
        var lastCacheSave = ContinuousClock.now
        for await output in stream {
            do {
                try await shared.perform { [logger] store in
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
}
