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
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            close(fd)
            let holder = (try? FileSystem.readFile(path)).map { String(decoding: $0, as: UTF8.self).trimmingWhitespace() } ?? ""
            if e == EWOULDBLOCK {
                let who = holder.isEmpty ? "another ferry process" : "another ferry process (pid \(holder))"
                throw StoreError(.locked, "\(FileSystem.dirname(of: FileSystem.dirname(of: path))) is in use by \(who); stop it or let it do the work")
            }
            throw StoreError.system("cannot lock", path: path, errno: e)
        }
        _ = ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
    }

    /// The pid of the process holding the lock on `path`, or nil when none does. (It probes
    /// with a shared lock released at once, so it never waits.)
    public static func holder(path: String) -> Int32? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        let text = (try? FileSystem.readFile(path)).map { String(decoding: $0, as: UTF8.self).trimmingWhitespace() } ?? ""
        return Int32(text) ?? 0
    }

    deinit {
        _ = ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
    }
}

extension String {
    /// The string without leading and trailing ASCII whitespace.
    func trimmingWhitespace() -> String {
        let bytes = Array(utf8)
        var start = 0
        var end = bytes.count
        while start < end, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[start]) { start += 1 }
        while end > start, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
