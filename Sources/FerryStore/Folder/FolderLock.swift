#if canImport(Glibc)
import Glibc
#endif

/// The folder's single-writer lock: `flock` on `.ferry/lock`, which holds the writer's pid.
/// The kernel releases it when the process dies, so a killed agent never leaves it stuck.
public final class FolderLock: Sendable {
    private let fd: Int32
    /// The lock file.
    public let path: String

    /// Takes the lock or fails at once with `.locked`, naming the holder's pid.
    public init(path: String) throws(StoreError) {
        // Taken before any stored property is set: a class whose initializer throws once it
        // is fully initialized runs its deinit, which would close the descriptor a second
        // time (by then perhaps another thread's file) and truncate through it.
        fd = try Self.take(path)
        self.path = path
    }

    /// Opens `path`, locks it and writes this process's pid into it; on failure closes it
    /// and throws.
    private static func take(_ path: String) throws(StoreError) -> Int32 {
        let fd = try FileSystem.open(path, O_RDWR | O_CREAT, mode: 0o644)
        var tries = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            if e == EINTR, tries < maxRetries {
                tries += 1
                continue
            }
            // `holder`'s probe holds a shared lock for an instant (whatever pid a killed
            // holder left in the file), and a holder between taking the lock and writing its
            // pid, or emptying the file and letting go, names no live process: look again, a
            // few times at once, and while no live process is named for up to 100 ms.
            let holder = pidWritten(fd)
            let named = isAlive(holder)
            if e == EWOULDBLOCK, tries < (named ? quickRetries : maxRetries) {
                tries += 1
                usleep(named ? quickRetryMicroseconds : retryMicroseconds)
                continue
            }
            close(fd)
            if e == EWOULDBLOCK {
                let who = holder.map { "another ferry process (pid \($0))" } ?? "another ferry process"
                throw StoreError(.locked, "\(FileSystem.dirname(of: FileSystem.dirname(of: path))) is in use by \(who); stop it or let it do the work")
            }
            throw StoreError.system("cannot lock", path: path, errno: e)
        }
        // Emptied first, then the pid appended: a reader finds no pid (and looks again) or the
        // whole line, never this pid's first digits over what a killed holder left.
        _ = ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
    }

    /// Times a refused lock is tried again when no live process is named in the file.
    static let maxRetries = 100
    /// The pause between those tries.
    static let retryMicroseconds: UInt32 = 1_000
    /// Times a refused lock is tried again when the file names a live process (a probe may
    /// have been in the way all the same).
    static let quickRetries = 10
    /// The pause between those tries.
    static let quickRetryMicroseconds: UInt32 = 100

    /// The pid on the first line of the lock file open at `fd`, or nil when there is none.
    private static func pidWritten(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 24)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        // A line is whole only with its newline.
        guard let newline = bytes[0..<n].firstIndex(of: UInt8(ascii: "\n")),
              let pid = Int32(String(decoding: bytes[0..<newline], as: UTF8.self)), pid > 0 else { return nil }
        return pid
    }

    /// True when a process with this pid exists (`EPERM`: one of another user's).
    private static func isAlive(_ pid: Int32?) -> Bool {
        guard let pid else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// The pid of the process holding the lock on `path`, or nil when none does; 0 when one
    /// does but has not named itself. It probes with a shared lock released at once, so it
    /// never waits (a process taking the lock in that instant tries again: `take`).
    public static func holder(path: String) -> Int32? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // Between taking the lock and writing its pid (or emptying the file and letting go)
        // the holder's file names no one, or the process a killed holder left there: look
        // again while no live process is named, for up to 100 ms.
        for _ in 0..<maxRetries {
            if flock(fd, LOCK_SH | LOCK_NB) == 0 {
                flock(fd, LOCK_UN)
                return nil
            }
            if let pid = pidWritten(fd), isAlive(pid) { return pid }
            usleep(retryMicroseconds)
        }
        return pidWritten(fd) ?? 0
    }

    deinit {
        _ = ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
    }
}
