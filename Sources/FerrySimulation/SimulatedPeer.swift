import FerryCore
import FerryStore
import Foundation

/// The simulation's clock: every peer's store reads it (`FolderStore.clock`), and the
/// simulation moves it, so time-dependent decisions (a stale save) replay exactly.
final class SimulatedClock: @unchecked Sendable {
    private let lock = NSLock()
    private var nanoseconds: UInt64 = 1_000_000_000

    /// Now.
    var now: UInt64 { lock.withLock { nanoseconds } }

    /// Moves the clock on.
    func advance(seconds: UInt64) { lock.withLock { nanoseconds += seconds * 1_000_000_000 } }
}

/// One simulated machine: a real ferry folder on disk (on a RAM-backed filesystem when there
/// is one) opened by the real store, shared as the agent shares it.
final class SimulatedPeer {
    /// Its number.
    let index: Int
    /// Its folder.
    let root: String
    /// The store, as sessions and edits reach it.
    var shared: SharedStore { open! }
    private var open: SharedStore?
    private let clock: SimulatedClock
    private let storeExecutor: (any SerialExecutor)?

    /// Creates `root` as a ferry folder whose id names the peer; its store runs on
    /// `storeExecutor` when given.
    init(index: Int, root: String, clock: SimulatedClock, storeExecutor: (any SerialExecutor)?) throws {
        self.index = index
        self.root = root
        self.clock = clock
        self.storeExecutor = storeExecutor
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let store = try FolderStore.create(at: root, name: "sim", id: "peer-\(index)")
        store.clock = { [clock] in clock.now }
        open = SharedStore(store, executor: storeExecutor)
    }

    /// Closes the folder and opens it again, as a restarted agent does: the log is read back,
    /// the folder scanned, conflicts left open are resolved.
    func restart() throws {
        open = nil  // the old store lets go of the folder's lock first
        let store = try FolderStore.open(at: root, writable: true)
        store.clock = { [clock] in clock.now }
        _ = try store.batch { try store.scanAndRecord() }
        open = SharedStore(store, executor: storeExecutor)
    }

    /// The path of a document's file.
    func path(_ doc: DocumentID) -> String { root + "/" + doc.rawValue }

    /// The document's file, if there is one.
    func file(_ doc: DocumentID) -> [UInt8]? {
        FileManager.default.contents(atPath: path(doc)).map { Array($0) }
    }

    /// Writes a document's file as an editor would (in place, creating directories).
    func write(_ doc: DocumentID, _ bytes: [UInt8]) throws {
        let url = URL(fileURLWithPath: path(doc))
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: url)
    }

    /// Removes a document's file.
    func remove(_ doc: DocumentID) throws {
        try FileManager.default.removeItem(atPath: path(doc))
    }
}
