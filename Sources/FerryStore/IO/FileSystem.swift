#if canImport(Glibc)
import Glibc
#endif
import CFerrySystem
import Synchronization

/// Thin, throwing wrappers over the POSIX calls the store uses; every durable write in the
/// project goes through `writeAtomically` or the object store.
public enum FileSystem {
    /// Opens `path`; retries on EINTR.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(StoreError) -> Int32 {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw StoreError.system("cannot open", path: path)
        }
    }

    /// Writes every byte of `buffer` to `fd`.
    public static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws(StoreError) {
        var offset = 0
        while offset < buffer.count {
            let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError.system("cannot write", path: path)
            }
            offset += n
        }
    }

    /// Writes every byte of `bytes` to `fd`.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(StoreError) {
        let result = bytes.withUnsafeBytes { p in Result { () throws(StoreError) in try writeAll(fd, p, path: path) } }
        try result.get()
    }

    /// Reads up to `buffer.count` bytes; 0 at end of file.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String) throws(StoreError) -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress!, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw StoreError.system("cannot read", path: path)
        }
    }

    /// Reads `fd` to its end in chunks of `chunkSize` bytes, handing each to `body`: memory
    /// stays at one chunk whatever the file's size (how every blob is hashed and copied).
    public static func forEachChunk(of fd: Int32, path: String, chunkSize: Int = 1 << 20,
                                    _ body: (UnsafeRawBufferPointer) throws(StoreError) -> Void) throws(StoreError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = try read(fd, into: buffer, path: path)
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
    }

    /// Hands each complete line of `fd` (without its newline) to `body`, reading a chunk at a
    /// time, so a large file is never in memory whole; returns the count of bytes after the
    /// last newline (a torn last line, not handed over).
    public static func forEachLine(of fd: Int32, path: String, chunkSize: Int = 1 << 20,
                                   _ body: (UnsafeBufferPointer<UInt8>) -> Void) throws(StoreError) -> Int {
        var pending: [UInt8] = []  // bytes after the last complete line read so far
        try forEachChunk(of: fd, path: path, chunkSize: chunkSize) { chunk throws(StoreError) in
            pending += chunk
            guard chunk.contains(0x0A) else { return }
            let used = pending.withUnsafeBufferPointer { buf in
                var start = 0
                while let nl = buf[start...].firstIndex(of: 0x0A) {
                    body(UnsafeBufferPointer(rebasing: buf[start..<nl]))
                    start = nl + 1
                }
                return start
            }
            pending.removeFirst(used)
        }
        return pending.count
    }

    /// Copies all of `input` (from its start) to `output`, a new empty file, inside the kernel
    /// (`sendfile`: one copy, page cache to page cache, none through this process). Holes stay
    /// holes: only the data `SEEK_DATA`/`SEEK_HOLE` find is copied, so a sparse object makes a
    /// sparse file.
    public static func copyAll(from input: Int32, to output: Int32, path: String) throws(StoreError) {
        var writeback = WritebackStarter(fd: output, dropBehind: .waiting)
        var st = stat()
        guard fstat(input, &st) == 0 else { throw StoreError.system("cannot stat the source of", path: path) }
        let size = off_t(st.st_size)
        var offset: off_t = 0
        while offset < size {
            let data = lseek(input, offset, Self.seekData)
            if data < 0 { break }  // ENXIO: only a hole remains
            var end = lseek(input, data, Self.seekHole)
            if end < 0 { end = size }
            // sendfile with an input offset writes at the output's own position: put it there.
            if lseek(output, data, SEEK_SET) < 0 { throw StoreError.system("cannot seek in", path: path) }
            var position = data
            while position < end {
                let n = sendfile(output, input, &position, min(Int(end - position), Int(WritebackStarter.stride)))
                if n == 0 { break }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw StoreError.system("cannot write", path: path)
                }
                writeback.wrote(n)
            }
            offset = end
        }
        if ftruncate(output, size) != 0 { throw StoreError.system("cannot set the size of", path: path) }
    }

    /// `lseek` whences for the next data and the next hole (Linux values; Glibc's module
    /// leaves them out without `_GNU_SOURCE`).
    static let seekData: Int32 = 3
    static let seekHole: Int32 = 4

    /// Writes `buffer` at `fd`'s position, leaving a hole (seeking over it) for each 4 KiB
    /// block that is all zeros, so that a sparse file's object stays sparse. The caller sets
    /// the file's size at the end (`ftruncate`): a trailing hole is not written.
    public static func writeSkippingZeros(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws(StoreError) {
        let block = 4096
        var start = 0
        var pending = 0  // bytes of data from `start` not yet written
        func flush() throws(StoreError) {
            if pending > 0 { try writeAll(fd, UnsafeRawBufferPointer(rebasing: buffer[start..<(start + pending)]), path: path) }
        }
        var i = 0
        while i < buffer.count {
            let n = min(block, buffer.count - i)
            if n == block && isAllZero(UnsafeRawBufferPointer(rebasing: buffer[i..<(i + n)])) {
                try flush()
                if lseek(fd, off_t(n), SEEK_CUR) < 0 { throw StoreError.system("cannot seek in", path: path) }
                start = i + n
                pending = 0
            } else {
                pending += n
            }
            i += n
        }
        try flush()
    }

    /// True when every byte is zero (word by word; stops at the first that is not).
    static func isAllZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let words = bytes.count / 8
        for w in 0..<words where bytes.loadUnaligned(fromByteOffset: w * 8, as: UInt64.self) != 0 { return false }
        for b in (words * 8)..<bytes.count where bytes[b] != 0 { return false }
        return true
    }

    /// The whole content of a file.
    public static func readFile(_ path: String) throws(StoreError) -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) != 0 { throw StoreError.system("cannot stat", path: path) }
        var out: [UInt8] = []
        out.reserveCapacity(Int(st.st_size) + 1)
        var chunk = [UInt8](repeating: 0, count: max(4096, min(Int(st.st_size) + 1, 1 << 20)))
        while true {
            let n = try chunk.withUnsafeMutableBytes { p in Result { () throws(StoreError) in try read(fd, into: p, path: path) } }.get()
            if n == 0 { break }
            out += chunk[0..<n]
        }
        return out
    }

    /// Makes `fd`'s data durable.
    public static func sync(_ fd: Int32, path: String) throws(StoreError) {
        if fdatasync(fd) != 0 { throw StoreError.system("cannot fsync", path: path) }
    }

    /// Makes the data of the file at `path` durable.
    public static func syncFile(atPath path: String) throws(StoreError) {
        let fd = try open(path, O_RDONLY)
        defer { close(fd) }
        try sync(fd, path: path)
    }

    /// Makes a directory's entries (creations, renames, removals) durable.
    public static func syncDirectory(_ path: String) throws(StoreError) {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        if fsync(fd) != 0 { throw StoreError.system("cannot fsync directory", path: path) }
    }

    /// Flushes the whole filesystem holding `path` (Linux `syncfs`): one call for a batch.
    public static func syncFilesystem(containing path: String) throws(StoreError) {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        if ferry_syncfs(fd) != 0 { throw StoreError.system("cannot sync filesystem of", path: path) }
    }

    /// Renames atomically.
    public static func rename(_ from: String, _ to: String) throws(StoreError) {
        if Glibc.rename(from, to) != 0 { throw StoreError.system("cannot rename to", path: to) }
    }

    /// Renames unless something already has the name `to` (`RENAME_NOREPLACE`: the look and
    /// the rename are one atomic step); returns false then, leaving both files as they were.
    public static func renameIfAbsent(_ from: String, _ to: String) throws(StoreError) -> Bool {
        if ferry_rename_noreplace(from, to) == 0 { return true }
        switch errno {
        case EEXIST:
            return false
        case EINVAL:
            // A filesystem without RENAME_NOREPLACE: look, then rename (a narrow race).
            if exists(to) { return false }
            try rename(from, to)
            return true
        default:
            throw StoreError.system("cannot rename to", path: to)
        }
    }

    /// Swaps the names `a` and `b` atomically (both exist); false where the filesystem cannot.
    public static func exchange(_ a: String, _ b: String) throws(StoreError) -> Bool {
        if ferry_rename_exchange(a, b) == 0 { return true }
        if errno == EINVAL || errno == ENOSYS { return false }
        throw StoreError.system("cannot exchange with", path: b)
    }

    /// Renames, creating the target's directory first if it is missing (cheaper than making
    /// sure of the directory before every rename when it almost always exists).
    public static func renameMakingDirectory(_ from: String, _ to: String) throws(StoreError) {
        if Glibc.rename(from, to) == 0 { return }
        guard errno == ENOENT else { throw StoreError.system("cannot rename to", path: to) }
        try makeDirectories(dirname(of: to))
        try rename(from, to)
    }

    /// Removes a file; a missing file is not an error.
    public static func unlink(_ path: String) throws(StoreError) {
        if Glibc.unlink(path) != 0 && errno != ENOENT { throw StoreError.system("cannot remove", path: path) }
    }

    /// Creates a directory and its missing parents.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(StoreError) {
        if mkdir(path, mode) == 0 || errno == EEXIST { return }
        if errno == ENOENT {
            let parent = dirname(of: path)
            if parent != path && !parent.isEmpty {
                try makeDirectories(parent, mode: mode)
                if mkdir(path, mode) == 0 || errno == EEXIST { return }
            }
        }
        throw StoreError.system("cannot create directory", path: path)
    }

    /// `lstat`, or nil when the path does not exist.
    public static func lstat(_ path: String) throws(StoreError) -> stat? {
        var st = stat()
        if Glibc.lstat(path, &st) == 0 { return st }
        if errno == ENOENT || errno == ENOTDIR { return nil }
        throw StoreError.system("cannot stat", path: path)
    }

    /// Gives the file at `path` (a temp file about to replace a document's file) the group and
    /// the read, write and execute bits of the file it replaces, `replaced`: a file the user
    /// made private stays private, a script stays executable. Never set-user-id or set-group-id
    /// (a peer chose the content), and no group bits where the group cannot be kept (they
    /// would go to another group). Best effort: the content matters more than its mode.
    public static func givePermissions(of replaced: stat, to path: String) {
        guard replaced.st_mode & S_IFMT == S_IFREG else { return }
        var mode = replaced.st_mode & 0o777
        if chown(path, uid_t.max, replaced.st_gid) != 0 { mode &= ~0o070 }
        _ = chmod(path, mode)
    }

    /// The mode to create a temp file with that will replace the document at `path`: private
    /// (`0600`) when a file is there, whose permissions `givePermissions` gives the temp file
    /// only once it is written; a file the user made private is then never readable by others
    /// with its new content, not even while that is written. The usual `0644` for a new file.
    public static func modeForTemp(replacing path: String) -> mode_t {
        modeForTemp(replacingAFile: exists(path))
    }

    /// `modeForTemp(replacing:)` for a caller that knows whether a file is there.
    public static func modeForTemp(replacingAFile fileThere: Bool) -> mode_t {
        fileThere ? 0o600 : 0o644
    }

    /// Whether this process may create files in `directory`, or in the nearest directory
    /// above it that exists (up to `root`): false where a directory is read-only to it or on
    /// a read-only mount.
    public static func canCreate(in directory: String, within root: String) -> Bool {
        var dir = directory
        while access(dir, F_OK) != 0, dir.count > root.count { dir = dirname(of: dir) }
        return access(dir, W_OK | X_OK) == 0
    }

    /// True when something exists at `path` (a dangling symlink counts).
    public static func exists(_ path: String) -> Bool {
        var st = stat()
        return Glibc.lstat(path, &st) == 0
    }

    /// True when `path` is a directory (not following a final symlink).
    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return Glibc.lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// What `readdir` says an entry is (`d_type`); `.unknown` when the filesystem does not say.
    public enum EntryType: Sendable { case directory, regular, symlink, other, unknown }

    /// Names and types in a directory, without `.` and `..` (no `stat` per entry).
    public static func listDirectoryEntries(_ path: String) throws(StoreError) -> [(name: String, type: EntryType)] {
        guard let dir = opendir(path) else { throw StoreError.system("cannot list", path: path) }
        defer { closedir(dir) }
        var entries: [(String, EntryType)] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { p in
                p.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            let type: EntryType
            switch Int32(entry.pointee.d_type) {
            case Int32(DT_DIR): type = .directory
            case Int32(DT_REG): type = .regular
            case Int32(DT_LNK): type = .symlink
            case Int32(DT_UNKNOWN): type = .unknown
            default: type = .other
            }
            entries.append((name, type))
        }
        return entries
    }

    /// Names in a directory, without `.` and `..`.
    public static func listDirectory(_ path: String) throws(StoreError) -> [String] {
        try listDirectoryEntries(path).map(\.name)
    }

    /// The parent directory of a `/`-separated path ("" for a bare name).
    public static func dirname(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        if slash == path.utf8.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// The non-empty components of a `/`-separated path, split at every byte `/` as the kernel
    /// splits a path (a `/` followed by a combining mark is one Swift `Character`, which
    /// `split(separator: "/")` would not split).
    public static func components(of path: String) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether `path` lies below `directory` (both relative, `/`-separated), compared as bytes
    /// for the same reason.
    public static func isBelow(_ path: String, directory: String) -> Bool {
        path.utf8.starts(with: (directory + "/").utf8)
    }

    /// The last component of a `/`-separated path.
    public static func basename(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(path[path.utf8.index(after: slash)...])
    }

    /// Creates `path` (which must not exist) for writing; its directory is made only when the
    /// create fails for lack of it (a `mkdir` per file would be 10,000 failing calls in an
    /// initial sync).
    public static func createNew(_ path: String, mode: mode_t = 0o644) throws(StoreError) -> Int32 {
        do { return try open(path, O_WRONLY | O_CREAT | O_EXCL, mode: mode) } catch where error.errno == ENOENT {
            try makeDirectories(dirname(of: path))
            return try open(path, O_WRONLY | O_CREAT | O_EXCL, mode: mode)
        }
    }

    /// Creates `path` (which must not exist) holding `bytes`, without fsync (`createNew`). On
    /// failure nothing is left behind.
    public static func createFile(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws(StoreError) {
        let fd = try createNew(path, mode: mode)
        defer { close(fd) }
        do { try writeAll(fd, bytes, path: path) } catch {
            Glibc.unlink(path)
            throw error
        }
    }

    /// A random hex suffix for temporary names.
    public static func randomSuffix() -> String {
        // A random base drawn once, then a counter: unique within the process, unpredictable
        // across processes, and no getrandom call per temp file (two per received document).
        String(suffixBase &+ suffixCounter.add(1, ordering: .relaxed).newValue &* 0x9E37_79B9_7F4A_7C15, radix: 16)
    }

    private static let suffixBase: UInt64 = {
        var g = SystemRandomNumberGenerator()
        return g.next()
    }()
    private static let suffixCounter = Atomic<UInt64>(0)

    /// Writes `bytes` to `path` the way git writes: a temp file in the same directory, fsync,
    /// rename over `path`, fsync the directory. A reader sees the old file or the new one.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644, tempPrefix: String = ".ferry-tmp-") throws(StoreError) {
        try writeAtomically(to: path, mode: mode, tempPrefix: tempPrefix) { (fd, temp) throws(StoreError) in try writeAll(fd, bytes, path: temp) }
    }

    /// `writeAtomically` of what `write` writes to the temp file's descriptor (given with the
    /// temp file's path), for content written a piece at a time.
    static func writeAtomically(to path: String, mode: mode_t = 0o644, tempPrefix: String,
                                writing write: (Int32, String) throws(StoreError) -> Void) throws(StoreError) {
        let dir = dirname(of: path)
        let temp = (dir.isEmpty ? "" : dir + "/") + tempPrefix + randomSuffix()
        let fd = try open(temp, O_WRONLY | O_CREAT | O_EXCL, mode: mode)
        do {
            defer { close(fd) }
            try write(fd, temp)
            try sync(fd, path: temp)
        } catch {
            Glibc.unlink(temp)
            throw error
        }
        do {
            try rename(temp, path)
        } catch {
            Glibc.unlink(temp)
            throw error
        }
        try syncDirectory(dir.isEmpty ? "." : dir)
    }
}

/// Starts the writeback of a large file's pages as it is written, every `stride` bytes, so
/// that its fsync (or the batch's `syncfs`) finds most of the data already on disk: disk
/// writes then overlap the network and the copy instead of following them.
struct WritebackStarter {
    /// Bytes between two writeback requests; smaller files are left to the fsync alone.
    static let stride = 8 << 20

    /// Whether the written ranges leave the page cache (for a second copy of bytes cached
    /// already: keeping both would fill twice the memory).
    enum DropBehind {
        /// They stay.
        case no
        /// Each range is dropped once it is on disk, waiting for it if need be (on a thread of
        /// the store's own).
        case waiting
        /// Each range is dropped two strides later, without waiting: pages not yet written
        /// back stay (on a thread of the shared pool, which must not block on the disk).
        case whenWritten
    }

    let fd: Int32
    let dropBehind: DropBehind
    private var written = 0
    private var started = 0
    private var previous: (offset: Int, count: Int)?
    private var older: (offset: Int, count: Int)?

    init(fd: Int32, dropBehind: DropBehind = .no) {
        self.fd = fd
        self.dropBehind = dropBehind
    }

    /// Records `count` more bytes written at the end of the file.
    mutating func wrote(_ count: Int) {
        written += count
        guard written - started >= Self.stride else { return }
        _ = ferry_start_writeback(fd, Int64(started), Int64(written - started))  // a hint: failure is harmless
        switch dropBehind {
        case .no: break
        case .waiting: if let p = previous { _ = ferry_write_and_drop(fd, Int64(p.offset), Int64(p.count)) }
        case .whenWritten: if let o = older { _ = ferry_drop_cached(fd, Int64(o.offset), Int64(o.count)) }
        }
        older = previous
        previous = (started, written - started)
        started = written
    }
}
