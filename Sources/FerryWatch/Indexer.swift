import FerryCore
import FerryStore
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Turns what the watcher reports into revisions: reads each settled file through the store
/// (content, not timing, decides: a file equal to its current revision — e.g. one ferry
/// itself just wrote — records nothing), records deletions only for paths that stayed away,
/// and rescans the folder when events may have been lost.
public final class Indexer {
    /// The folder, opened for writing.
    public let store: FolderStore
    private let logger: Logger
    /// Where a rescan's missing files go to be watched for the absence window (`FolderWatcher.recheck`).
    private let recheck: ([String]) -> Void

    /// An indexer over `store`; `recheck` receives the documents a rescan did not find.
    public init(store: FolderStore, logger: Logger, recheck: @escaping ([String]) -> Void = { _ in }) {
        self.store = store
        self.logger = logger
        self.recheck = recheck
    }

    /// Handles one report; returns the entries recorded.
    @discardableResult
    public func handle(_ output: WatchOutput) throws -> [LogEntry] {
        var recorded = try record(output)
        // Something moved: a document held back by what was in its way may fit now.
        if !store.heldBack.isEmpty { recorded += try store.retryHeldBack() }
        return recorded
    }

    private func record(_ output: WatchOutput) throws -> [LogEntry] {
        switch output {
        case .settled(let paths):
            var recorded: [LogEntry] = []
            for path in paths {
                guard let doc = try? DocumentID(path) else {
                    logger.notice("not synced: the name is not a valid document id", metadata: ["path": "\(PrintablePath.text(path))"])
                    continue
                }
                recorded += try ingestSettled(doc, whenMissing: .wait)
            }
            return recorded
        case .gone(let paths):
            var recorded: [LogEntry] = []
            for path in paths {
                guard let doc = try? DocumentID(path) else { continue }
                recorded += try ingestSettled(doc, whenMissing: .recordDeletion)
            }
            return recorded
        case .directoryGone(let dir):
            var recorded: [LogEntry] = []
            for doc in store.index.liveDocuments where FileSystem.isBelow(doc.rawValue, directory: dir) {
                recorded += try ingestSettled(doc, whenMissing: .recordDeletion)
            }
            return recorded
        case .permissionsChanged, .retryHeldBack:
            return []  // `handle` tries the held-back documents again
        case .rescan(let reason):
            logger.info("rescanning the folder", metadata: ["reason": "\(reason)"])
            // The agent's sessions may be writing temp files right now: they are not leftovers.
            let report = try store.batch { try store.scanAndRecord(removingLeftovers: false) }
            recheck(report.missing.map(\.rawValue))
            return report.recorded
        }
    }

    private func ingestSettled(_ doc: DocumentID, whenMissing: MissingFile) throws -> [LogEntry] {
        // A file still being rewritten while read: give it a few short chances to settle.
        for attempt in 0..<5 {
            switch try store.ingest(doc, whenMissing: whenMissing) {
            case .recorded(let e): return [e]
            case .deleted(let e?): return [e]
            case .changing where attempt < 4: usleep(20_000)
            case .notRegular(let why): logger.notice("not synced", metadata: ["doc": "\(doc)", "reason": "\(why)"]); return []
            default: return []
            }
        }
        return []
    }
}
