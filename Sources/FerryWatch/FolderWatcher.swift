#if canImport(Glibc)
import Glibc
#endif
import FerryStore
import Foundation
import Logging

/// Watches a folder recursively with the kernel's inotify (through Glibc; never inside
/// `.ferry/`) on a dedicated thread, settles what changes, and reports settled paths, paths
/// and directories that stayed away, and the need to rescan on an `AsyncStream`.
///
/// - A path that goes away is reported gone only after it has stayed away for the absence
///   window (`Settler`): vim and emacs save by renaming the file away and writing a new one,
///   and that is one edit, not a deletion.
/// - `IN_MOVED_FROM`/`IN_MOVED_TO` are paired by cookie within a read: a directory renamed
///   inside the folder keeps its watches (renamed in place) and is reported as gone under the
///   old name (after the absence window) and rescanned under the new one; an unpaired one is
///   a removal or a creation.
/// - A new directory is watched, then scanned, so files that landed before the watch exist
///   are not missed.
/// - `IN_Q_OVERFLOW` asks for a full rescan.
/// - An exhausted watch limit is reported once, naming the sysctl to raise, and replaced by
///   periodic rescans rather than silence.
/// - Its user may have an output reported later (`report(_:after:)`): a retry of what could
///   not be recorded, or of what was held back, for changes no event announces (room freed
///   on the disk, a filesystem remounted read-write).
public final class FolderWatcher: @unchecked Sendable {
    /// The folder.
    public let root: String
    private var rules: IgnoreRules
    private var settler: Settler
    private let rescanInterval: UInt64
    private let logger: Logger

    // Owned by the watcher thread once started.
    private var fd: Int32 = -1
    private var stopPipe: [Int32] = [-1, -1]
    private var wakePipe: [Int32] = [-1, -1]
    /// Paths handed in by `recheck` and outputs by `report(_:after:)`, taken by the thread.
    private let injected = NSLock()
    private var injectedPaths: [String] = []
    private var scheduled: [(due: UInt64, output: WatchOutput)] = []
    private var pathByWatch: [Int32: String] = [:]
    private var watchByPath: [String: Int32] = [:]
    private var watchLimitHit = false
    private var nextPeriodicRescan: UInt64 = 0
    private var thread: Thread?
    private var continuation: AsyncStream<WatchOutput>.Continuation?

    /// `IN_ATTRIB` too: a file made readable again (`chmod`) is read again, and recorded if
    /// it changed while it could not be read.
    static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB
        | IN_DELETE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

    /// A watcher; `settle` is the quiet time after a completed write, `openSettle` after a
    /// modification whose writer has not closed the file, `absence` how long a path must stay
    /// away before it counts as deleted.
    public init(root: String, settle: Duration = .milliseconds(1), openSettle: Duration = .milliseconds(500),
                absence: Duration = .milliseconds(500), rescanInterval: Duration = .seconds(10), logger: Logger) {
        self.root = root
        self.rules = IgnoreRules.load(root: root)
        self.settler = Settler(window: settle.nanoseconds, openWindow: openSettle.nanoseconds, absenceWindow: absence.nanoseconds)
        self.rescanInterval = rescanInterval.nanoseconds
        self.logger = logger
    }

    /// Watches every directory, then starts the thread. Watches are in place when this
    /// returns, so any change made after it is seen.
    public func start() throws -> AsyncStream<WatchOutput> {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else {
            throw StoreError(.io, "cannot start inotify: \(String(cString: strerror(errno)))", errno: errno)
        }
        guard pipe(&stopPipe) == 0, pipe(&wakePipe) == 0 else { throw StoreError(.io, "cannot create a pipe", errno: errno) }
        _ = fcntl(wakePipe[0], F_SETFL, O_NONBLOCK)
        _ = fcntl(wakePipe[1], F_SETFL, O_NONBLOCK)
        _ = addWatches(under: "")
        let (stream, continuation) = AsyncStream<WatchOutput>.makeStream(bufferingPolicy: .unbounded)
        self.continuation = continuation
        let thread = Thread { [self] in self.run() }
        thread.name = "ferry-watch"
        self.thread = thread
        thread.start()
        return stream
    }

    /// Looks at these paths again as if each had just gone away: one found there is read, one
    /// that stays away for the absence window is reported gone. (A rescan's missing files.)
    public func recheck(_ paths: [String]) {
        guard !paths.isEmpty else { return }
        injected.withLock { injectedPaths += paths }
        var b: UInt8 = 1
        _ = write(wakePipe[1], &b, 1)
    }

    /// Reports `output` once `delay` has passed, unless the same output is already waiting
    /// (then the earlier time holds).
    public func report(_ output: WatchOutput, after delay: Duration) {
        let due = monotonicNow() + delay.nanoseconds
        injected.withLock {
            if !scheduled.contains(where: { $0.output == output }) { scheduled.append((due, output)) }
        }
        var b: UInt8 = 1
        _ = write(wakePipe[1], &b, 1)
    }

    /// Stops the thread; the stream finishes.
    public func stop() {
        if stopPipe[1] >= 0 {
            var b: UInt8 = 1
            _ = write(stopPipe[1], &b, 1)
        }
    }

    deinit {
        if fd >= 0 { close(fd) }
        for p in stopPipe + wakePipe where p >= 0 { close(p) }
    }

    // MARK: The thread

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        defer { continuation?.finish() }
        while true {
            let now = monotonicNow()
            var timeout: Int32 = 1000
            if let d = settler.nextDeadline { timeout = Int32(clamping: d > now ? (d - now + 999_999) / 1_000_000 : 0) }
            if watchLimitHit { timeout = min(timeout, Int32(clamping: nextPeriodicRescan > now ? (nextPeriodicRescan - now) / 1_000_000 : 0)) }
            if let next = injected.withLock({ scheduled.map(\.due).min() }) {
                timeout = min(timeout, Int32(clamping: next > now ? (next - now + 999_999) / 1_000_000 : 0))
            }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakePipe[0], events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 3, timeout)
            if n < 0 && errno != EINTR {
                logger.error("inotify poll failed", metadata: ["error": "\(String(cString: strerror(errno)))"])
                return
            }
            if fds[1].revents != 0 { return }
            if fds[0].revents != 0 { drain(&buffer) }
            if fds[2].revents != 0 {
                var bytes = [UInt8](repeating: 0, count: 64)
                while read(wakePipe[0], &bytes, bytes.count) > 0 {}
                let now = monotonicNow()
                for path in injected.withLock({ () -> [String] in defer { injectedPaths = [] }; return injectedPaths }) {
                    settler.note(path, .removed, now: now)
                }
            }
            let later = monotonicNow()
            let due = settler.takeDue(now: later) { path in
                var st = stat()
                return lstat(root + "/" + path, &st) == 0
            }
            if !due.present.isEmpty { continuation?.yield(.settled(due.present)) }
            if !due.gone.isEmpty { continuation?.yield(.gone(due.gone)) }
            for dir in due.directoriesGone { continuation?.yield(.directoryGone(dir)) }
            let timed = injected.withLock { () -> [WatchOutput] in
                let ready = scheduled.filter { $0.due <= later }.map(\.output)
                scheduled.removeAll { $0.due <= later }
                return ready
            }
            for output in timed { continuation?.yield(output) }
            if watchLimitHit && later >= nextPeriodicRescan {
                nextPeriodicRescan = later + rescanInterval
                _ = addWatches(under: "")
                continuation?.yield(.rescan(reason: "inotify watch limit reached"))
            }
        }
    }

    private func drain(_ buffer: inout [UInt8]) {
        var events: [(wd: Int32, mask: UInt32, cookie: UInt32, name: String)] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            var offset = 0
            buffer.withUnsafeBytes { raw in
                while offset + 16 <= n {
                    let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let cookie = raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
                    let len = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    var name = ""
                    if len > 0 {
                        let bytes = raw[(offset + 16)..<(offset + 16 + len)]
                        let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
                        name = String(decoding: raw[(offset + 16)..<end], as: UTF8.self)
                    }
                    events.append((wd, mask, cookie, name))
                    offset += 16 + len
                }
            }
        }
        handle(events)
    }

    private func handle(_ events: [(wd: Int32, mask: UInt32, cookie: UInt32, name: String)]) {
        let now = monotonicNow()
        // Pair directory moves by cookie within this read.
        var movedToByCookie: [UInt32: String] = [:]
        for e in events where e.mask & UInt32(IN_MOVED_TO) != 0 && e.mask & UInt32(IN_ISDIR) != 0 {
            if let dir = pathByWatch[e.wd] { movedToByCookie[e.cookie] = join(dir, e.name) }
        }
        var renamedDirectories: Set<String> = []
        for e in events {
            if e.mask & UInt32(IN_Q_OVERFLOW) != 0 {
                logger.notice("inotify queue overflowed; rescanning the folder")
                _ = addWatches(under: "")
                continuation?.yield(.rescan(reason: "inotify queue overflow"))
                continue
            }
            if e.mask & UInt32(IN_IGNORED) != 0 {
                if let path = pathByWatch.removeValue(forKey: e.wd), watchByPath[path] == e.wd { watchByPath[path] = nil }
                continue
            }
            guard let dir = pathByWatch[e.wd] else { continue }
            if e.mask & UInt32(IN_DELETE_SELF) != 0 {
                if dir.isEmpty { logger.error("the watched folder itself was removed") }
                continue
            }
            let path = join(dir, e.name)
            let isDir = e.mask & UInt32(IN_ISDIR) != 0
            // This folder's state, or that of a ferry folder inside it: never documents.
            if e.name == ".ferry" || path.hasPrefix(".ferry/") || path.contains("/.ferry/") { continue }
            if path == ".ferryignore" {
                rules = IgnoreRules.load(root: root)
                continuation?.yield(.rescan(reason: ".ferryignore changed"))
                continue
            }
            if rules.isIgnored(path, isDirectory: isDir) || IgnoreRules.isSedTemporary(e.name) { continue }
            if isDir {
                if e.mask & UInt32(IN_MOVED_FROM) != 0, let newPath = movedToByCookie[e.cookie] {
                    renameWatches(from: path, to: newPath)
                    renamedDirectories.insert(newPath)
                    settler.noteDirectoryRemoved(path, now: now)
                    for file in scanFiles(under: newPath) { settler.note(file, .completed, now: now) }
                } else if e.mask & UInt32(IN_MOVED_FROM | IN_DELETE) != 0 {
                    removeWatches(under: path)
                    settler.noteDirectoryRemoved(path, now: now)
                } else if e.mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0, !renamedDirectories.contains(path) {
                    // Watch first, then scan: what landed before the watch is found by the scan.
                    for file in addWatches(under: path) { settler.note(file, .completed, now: now) }
                } else if e.mask & UInt32(IN_ATTRIB) != 0 {
                    continuation?.yield(.permissionsChanged(path))
                }
                continue
            }
            if e.mask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO) != 0 {
                settler.note(path, .completed, now: now)
            } else if e.mask & UInt32(IN_MOVED_FROM | IN_DELETE) != 0 {
                settler.note(path, .removed, now: now)
            } else if e.mask & UInt32(IN_MODIFY | IN_CREATE) != 0 {
                settler.note(path, .modified, now: now)
            } else if e.mask & UInt32(IN_ATTRIB) != 0 {
                settler.note(path, .completed, now: now)
            }
        }
    }

    // MARK: Watches

    /// Adds watches to `relative` and every directory below it; returns the regular files found.
    @discardableResult
    private func addWatches(under relative: String) -> [String] {
        var files: [String] = []
        var stack = [relative]
        while let dir = stack.popLast() {
            let full = dir.isEmpty ? root : root + "/" + dir
            let wd = inotify_add_watch(fd, full, Self.mask)
            if wd < 0 {
                if errno == ENOSPC { reportWatchLimit() }
                if errno == ENOENT || errno == ENOTDIR { continue }
            } else {
                // The same directory already watched under another name: the folder (or a
                // directory of it) mounted inside itself. Descending would never end.
                if let other = pathByWatch[wd], other != dir, watchByPath[other] == wd { continue }
                if let old = watchByPath[dir], old != wd { pathByWatch[old] = nil }
                pathByWatch[wd] = dir
                watchByPath[dir] = wd
            }
            guard let entries = try? FileSystem.listDirectoryEntries(full) else { continue }
            let parts = FileSystem.components(of: dir)
            for (name, type) in entries {
                let rel = join(dir, name)
                if name == ".ferry" { continue }
                var isDir = type == .directory
                if type == .unknown {
                    var st = stat()
                    guard lstat(root + "/" + rel, &st) == 0 else { continue }
                    isDir = st.st_mode & S_IFMT == S_IFDIR
                }
                if !isDir && type != .regular && type != .unknown { continue }
                if rules.isIgnoredEntry(parent: parts, name: name, isDirectory: isDir) || IgnoreRules.isSedTemporary(name) { continue }
                if isDir { stack.append(rel) } else { files.append(rel) }
            }
        }
        return files
    }

    private func scanFiles(under relative: String) -> [String] {
        guard let (found, _) = try? FolderScanner(root: root, rules: rules).scan(relativeDirectory: relative) else { return [] }
        return found.map(\.doc.rawValue)
    }

    private func removeWatches(under relative: String) {
        for (path, wd) in watchByPath where path == relative || FileSystem.isBelow(path, directory: relative) {
            inotify_rm_watch(fd, wd)
            watchByPath[path] = nil
            pathByWatch[wd] = nil
        }
    }

    private func renameWatches(from old: String, to new: String) {
        for (path, wd) in watchByPath where path == old || FileSystem.isBelow(path, directory: old) {
            let moved = new + String(decoding: path.utf8.dropFirst(old.utf8.count), as: UTF8.self)
            watchByPath[path] = nil
            watchByPath[moved] = wd
            pathByWatch[wd] = moved
        }
    }

    private func reportWatchLimit() {
        guard !watchLimitHit else { return }
        watchLimitHit = true
        nextPeriodicRescan = monotonicNow() + rescanInterval
        let limit = (try? FileSystem.readFile("/proc/sys/fs/inotify/max_user_watches"))
            .map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
        logger.error("""
            inotify watch limit reached (fs.inotify.max_user_watches = \(limit)); raise it with \
            `sysctl fs.inotify.max_user_watches=524288`; until then ferry rescans the folder every \
            \(rescanInterval / 1_000_000_000) s
            """)
    }

    private func join(_ dir: String, _ name: String) -> String { dir.isEmpty ? name : dir + "/" + name }

    /// The number of directories watched (for tests and status).
    public var watchCount: Int { watchByPath.count }
}

/// Monotonic nanoseconds.
func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

extension Duration {
    /// The duration in whole nanoseconds.
    var nanoseconds: UInt64 {
        let (s, a) = components
        return UInt64(max(0, s)) * 1_000_000_000 + UInt64(max(0, a) / 1_000_000_000)
    }
}
