#if canImport(Glibc)
import Glibc
#endif
import CFerrySystem
import Synchronization

/// A file written but not yet at its name. Preferably an unnamed inode (`O_TMPFILE`), held
/// open and given its name by `linkat` once durable: no temp name is added to a directory and
/// removed again, and a link never replaces a file (an initial sync did four directory
/// operations and four lookups per received file; now one of each). Where the filesystem has
/// no `O_TMPFILE`, or the process holds too many of them, it is a named temp file, renamed.
///
/// Unchecked `Sendable`: one owner at a time (the file worker writes it, then the store
/// installs or discards it after waiting for the worker).
public final class TempFile: @unchecked Sendable {
    private enum Storage {
        case unnamed(Int32)
        case named(String)
        case gone
    }
    private var storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// A named temp file someone else created and wrote.
    static func named(_ path: String) -> TempFile { TempFile(.named(path)) }

    /// Creates a file holding `bytes`: unnamed in `directory` (made if missing) when possible,
    /// otherwise at `namedPath()` (its directory made if missing). Not fsynced.
    static func create(in directory: String, namedPath: () -> String, bytes: [UInt8], mode: mode_t = 0o644) throws(StoreError) -> TempFile {
        if let fd = openUnnamed(in: directory, mode: mode) {
            let file = TempFile(.unnamed(fd))
            do { try FileSystem.writeAll(fd, bytes, path: directory + "/(unnamed)") } catch {
                file.discard()
                throw error
            }
            return file
        }
        let path = namedPath()
        try FileSystem.createFile(path, bytes, mode: mode)
        return TempFile(.named(path))
    }

    /// A path that opens the file for reading (an unnamed one through `/proc/self/fd`).
    var readablePath: String {
        switch storage {
        case .unnamed(let fd): return "/proc/self/fd/\(fd)"
        case .named(let path): return path
        case .gone: return "/nonexistent"
        }
    }

    /// True for an unnamed file (its `link` cannot replace anything).
    var isUnnamed: Bool {
        if case .unnamed = storage { return true }
        return false
    }

    /// Gives the file the name `path`, which must not exist (its directory is made if
    /// missing). Returns its fingerprint there, or nil when something already has that name
    /// (the file is then left as it was). A named temp file is renamed (`RENAME_NOREPLACE`).
    func link(as path: String) throws(StoreError) -> FileFingerprint? {
        func attempt() -> Int32 {
            switch storage {
            case .unnamed(let fd):
                if Self.linksByDescriptor.load(ordering: .relaxed) {
                    // Linux 6.10+ lets the opener link its own file by descriptor; before, it
                    // takes CAP_DAC_READ_SEARCH and fails with ENOENT, as for a missing
                    // directory: the directory tells which.
                    if ferry_link_descriptor(fd, path) == 0 { return 0 }
                    let error = errno
                    guard error == ENOENT || error == EPERM, FileSystem.isDirectory(FileSystem.dirname(of: path)) else {
                        errno = error
                        return -1
                    }
                    Self.linksByDescriptor.store(false, ordering: .relaxed)
                }
                // Through /proc: a quarter of the link's cost is resolving this path.
                return linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW)
            case .named(let temp):
                return ferry_rename_noreplace(temp, path)
            case .gone:
                errno = EBADF
                return -1
            }
        }
        var result = attempt()
        if result != 0 && errno == ENOENT {
            try FileSystem.makeDirectories(FileSystem.dirname(of: path))
            result = attempt()
        }
        if result != 0 && errno == EINVAL, case .named(let temp) = storage {
            // A filesystem without RENAME_NOREPLACE: look, then rename (a narrow race).
            if FileSystem.exists(path) { return nil }
            try FileSystem.rename(temp, path)
            result = 0
        }
        if result != 0 {
            if errno == EEXIST { return nil }
            throw StoreError.system("cannot create", path: path)
        }
        var st = stat()
        switch storage {
        case .unnamed(let fd):
            fstat(fd, &st)
            close(fd)
            Self.unnamedOpen.subtract(1, ordering: .relaxed)
        case .named, .gone:
            Glibc.lstat(path, &st)
        }
        storage = .gone
        return FileFingerprint(st)
    }

    /// Puts the file at `path`, replacing what is there: an unnamed file is first linked at
    /// `besideName` (a fresh name in the same directory), then renamed.
    func replace(_ path: String, besideName: String) throws(StoreError) {
        if case .unnamed = storage {
            guard try link(as: besideName) != nil else { throw StoreError(.io, "temp name \(besideName) is taken") }
            storage = .named(besideName)
        }
        guard case .named(let temp) = storage else { throw StoreError(.io, "temp file of \(path) was already used") }
        try FileSystem.rename(temp, path)
        storage = .gone
    }

    /// Removes the file (an unnamed one is closed, and the kernel frees it).
    func discard() {
        switch storage {
        case .unnamed(let fd):
            close(fd)
            Self.unnamedOpen.subtract(1, ordering: .relaxed)
        case .named(let path):
            unlink(path)
        case .gone:
            break
        }
        storage = .gone
    }

    deinit {
        // Never leak a descriptor; a named file's fate is its owner's call (it may be in place).
        if case .unnamed(let fd) = storage {
            close(fd)
            Self.unnamedOpen.subtract(1, ordering: .relaxed)
        }
    }

    /// Unnamed files open in this process.
    private static let unnamedOpen = Atomic<Int>(0)
    /// Most unnamed files held open at once: a quarter of the descriptor limit, so a burst
    /// of received files (up to two per revision in flight) never starves sockets. -1 until
    /// first needed (`FileSystem.raiseDescriptorLimit` runs first).
    private static let unnamedLimit = Atomic<Int>(-1)

    /// Sets the most unnamed files held at once (nil: a quarter of the descriptor limit);
    /// tests use 0 to exercise named temp files.
    static func limitUnnamedFiles(to limit: Int?) {
        var value = limit ?? -1
        if value < 0 {
            var rl = rlimit()
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl)
            value = Int(min(rl.rlim_cur, 1 << 20)) / 4
        }
        unnamedLimit.store(value, ordering: .relaxed)
    }

    /// Cleared when `linkat(fd, "", AT_EMPTY_PATH)` turns out not to be allowed.
    private static let linksByDescriptor = Atomic<Bool>(true)
    /// Cleared when the filesystem turns out not to support `O_TMPFILE`.
    private static let unnamedSupported = Atomic<Bool>(true)

    private static func openUnnamed(in directory: String, mode: mode_t) -> Int32? {
        guard unnamedSupported.load(ordering: .relaxed) else { return nil }
        if unnamedLimit.load(ordering: .relaxed) < 0 { limitUnnamedFiles(to: nil) }
        guard unnamedOpen.add(1, ordering: .relaxed).newValue <= unnamedLimit.load(ordering: .relaxed) else {
            unnamedOpen.subtract(1, ordering: .relaxed)
            return nil
        }
        for attempt in 0..<2 {
            let fd = ferry_open_unnamed(directory, UInt32(mode))
            if fd >= 0 { return fd }
            let error = errno
            if error == ENOENT, attempt == 0, (try? FileSystem.makeDirectories(directory)) != nil { continue }
            if error == EOPNOTSUPP || error == EISDIR || error == EINVAL { unnamedSupported.store(false, ordering: .relaxed) }
            break
        }
        unnamedOpen.subtract(1, ordering: .relaxed)
        return nil
    }
}

extension FileSystem {
    /// Raises the soft limit on open descriptors to the hard limit (capped at 65,536): a
    /// receiving replicator holds each revision's unnamed files open until its batch commits.
    public static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = min(limit.rlim_max, 65_536)
        guard wanted > limit.rlim_cur else { return }
        limit.rlim_cur = wanted
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }
}
