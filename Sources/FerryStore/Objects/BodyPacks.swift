#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// Small JSON bodies kept together: `.ferry/packs/<8-digit number>.jsonl`, JSON Lines of
/// canonical bodies, appended to and never rewritten but by `compact`. A body of a few hundred
/// bytes in a file of its own takes a 4 KiB block (a document saved 20,000 times took 83 MB for
/// 0.8 MB of bodies); in a pack it takes its length and a newline. A revision's log line names
/// its pack and the byte offset of its line (`LogEntry.pack`), so no index is kept: a line is
/// read with one `pread`, and is checked against the revision's digest as it is read.
/// Canonical JSON has no raw newline, so a line is exactly a body (docs/format.md shows how
/// `jq`, `tail -c` and `sha256sum` read them).
///
/// Lines are written by the folder's single writer only: in a batch they wait (`pending`) for
/// its commit, which writes them before the batch's flush, so a log line never names a line
/// that is not durable. A line written by a writer killed before its log line is named by
/// nothing; a torn last line is cut off by the next writer (`openForAppend`).
final class BodyPacks {
    /// `.ferry/packs`.
    let directory: String
    /// A body shorter than this is packed: a file of its own would take a whole block.
    static let packedBelow = 4096
    /// A pack this long is closed; the next line starts a new one (what `compact` rewrites at
    /// most for one dropped line).
    static let limit: UInt64 = 64 << 20

    /// The pack appended to and its length on disk (nil: not looked for yet, or none).
    private var current: (number: UInt32, length: UInt64)?
    private var looked = false
    /// Lines appended and not yet written, at the end of `current`.
    private var pending: [UInt8] = []
    /// Packs written to since they were last made durable, and whether each is new.
    private var unsynced: [UInt32: Bool] = [:]
    /// Bodies packed whose log lines are not written yet, by digest (with their sizes): what
    /// `ObjectStore.contains` and `read` find of them. Nodes carry the others' locations.
    private(set) var unlogged: [BlobDigest: (location: PackLocation, size: Int)] = [:]
    /// Bodies whose log lines were written lately, oldest first: another revision with the
    /// same body (another document's, recorded in the same breath, or one committed after a
    /// batch's intermediate flush) names the same line. Bounded: beyond it a body is packed
    /// again.
    private var recentlyLogged: [BlobDigest: (location: PackLocation, size: Int)] = [:]
    /// `recentlyLogged`'s keys in the order they came: a ring of `recentLimit` once full,
    /// whose oldest key (at `recentOldest`) goes when a new one comes.
    private var recentOrder: [BlobDigest] = []
    private var recentOldest = 0
    /// How many bodies `recentlyLogged` keeps (above a batch's 4,096-entry flushes).
    static let recentLimit = 16_384

    /// Where a body packed lately is, logged or not.
    func packed(_ digest: BlobDigest) -> (location: PackLocation, size: Int)? {
        unlogged[digest] ?? recentlyLogged[digest]
    }

    /// The pack last read from, kept open: a sender reads many lines of one pack in a row.
    /// Closed when that pack is removed or lines are forgotten (`compact`).
    private var reader: (number: UInt32, fd: Int32)?

    init(directory: String) {
        self.directory = directory
    }

    deinit { closeReader() }

    private func closeReader() {
        if let reader { close(reader.fd) }
        reader = nil
    }

    /// The path of pack `number`.
    static func path(of number: UInt32, in directory: String) -> String {
        let digits = String(number)
        return directory + "/" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits + ".jsonl"
    }

    /// The numbers of the packs present, in order.
    func numbers() throws(StoreError) -> [UInt32] {
        guard FileSystem.exists(directory) else { return [] }
        return try FileSystem.listDirectory(directory).compactMap { name -> UInt32? in
            guard name.hasSuffix(".jsonl"), name.utf8.count == 14 else { return nil }
            return UInt32(name.prefix(8))
        }.sorted()
    }

    /// True when lines wait to be written.
    var hasPending: Bool { !pending.isEmpty }
    /// Bytes of the lines waiting to be written.
    var pendingBytes: Int { pending.count }

    /// Finds the last pack, cutting off a torn last line (a writer killed while appending:
    /// nothing names it, since a log line is written only once its body is durable).
    private func findCurrent() throws(StoreError) {
        guard !looked else { return }
        // Looked for again after a failure: taking "no pack" for an answer would start pack 1
        // again over lines the log names.
        guard let last = try numbers().last else {
            looked = true
            return
        }
        let path = Self.path(of: last, in: directory)
        let fd = try FileSystem.open(path, O_RDWR)
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw StoreError.system("cannot stat", path: path) }
        var length = UInt64(st.st_size)
        if length > 0 {
            // Back to the byte after the last newline, a block at a time.
            var end = length
            var block = [UInt8](repeating: 0, count: 4096)
            search: while end > 0 {
                let start = end >= 4096 ? end - 4096 : 0
                let n = block.withUnsafeMutableBytes { pread(fd, $0.baseAddress, Int(end - start), off_t(start)) }
                guard n == Int(end - start) else { throw StoreError.system("cannot read", path: path) }
                for i in stride(from: n - 1, through: 0, by: -1) where block[i] == 0x0A {
                    end = start + UInt64(i) + 1
                    break search
                }
                end = start
            }
            if end < length {
                if ftruncate(fd, off_t(end)) != 0 { throw StoreError.system("cannot cut the torn end of", path: path) }
                try FileSystem.sync(fd, path: path)
                length = end
            }
        }
        current = (last, length)
        // A writer killed before its batch's `syncfs` may have left the pack's name (or the
        // packs directory) not yet durable: the first sync of this writer makes them so.
        unsynced[last] = true
        looked = true
    }

    /// Appends a body's line, written at the next `writePending`; returns where it is.
    func append(_ canonical: [UInt8], digest: BlobDigest) throws(StoreError) -> PackLocation {
        try findCurrent()
        var (number, length) = current ?? (0, Self.limit)
        if length + UInt64(pending.count) >= Self.limit {
            // Close the full pack: its lines go out now, the new one starts empty.
            try writePending(sync: false)
            guard number < PackLocation.maxPack else { throw StoreError(.io, "no pack number left in \(directory)") }
            number += 1
            length = 0
            current = (number, 0)
            unsynced[number] = true
        }
        guard let location = PackLocation(pack: number, offset: length + UInt64(pending.count)) else {
            throw StoreError(.io, "pack \(number) in \(directory) is too long")
        }
        pending += canonical
        pending.append(0x0A)
        unlogged[digest] = (location, canonical.count)
        return location
    }

    /// Writes the pending lines at the end of the current pack; with `sync`, makes every pack
    /// written since the last sync durable (its data, and its name when it is new).
    func writePending(sync: Bool) throws(StoreError) {
        if !pending.isEmpty, let (number, length) = current {
            try FileSystem.makeDirectories(directory)
            let path = Self.path(of: number, in: directory)
            let fd = try length == 0 ? Self.openNewPack(path) : FileSystem.open(path, O_WRONLY)
            defer { close(fd) }
            var written = 0
            while written < pending.count {
                let n = pending.withUnsafeBytes { pwrite(fd, $0.baseAddress! + written, $0.count - written, off_t(length) + off_t(written)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    let error = StoreError.system("cannot write", path: path)
                    // Nothing names these lines: the pack goes back to what it was, so that the
                    // retry finds it so (a full disk left a new pack behind empty).
                    if length == 0 { unlink(path) } else { _ = ftruncate(fd, off_t(length)) }
                    throw error
                }
                written += n
            }
            current = (number, length + UInt64(pending.count))
            pending.removeAll(keepingCapacity: true)
            unsynced[number] = unsynced[number] ?? false
        }
        guard sync else { return }
        var newPack = false
        for (number, isNew) in unsynced {
            try FileSystem.syncFile(atPath: Self.path(of: number, in: directory))
            newPack = newPack || isNew
        }
        if newPack {
            try FileSystem.syncDirectory(directory)
            try FileSystem.syncDirectory(FileSystem.dirname(of: directory))
        }
        unsynced.removeAll()
    }

    /// Opens pack `path` for its first lines. It must not hold any yet: never write over
    /// lines the log names. An empty one is taken as it is (left by a writer that failed or
    /// was killed between creating it and writing it; refusing it refused every small body
    /// for good).
    static func openNewPack(_ path: String) throws(StoreError) -> Int32 {
        do { return try FileSystem.open(path, O_WRONLY | O_CREAT | O_EXCL, mode: 0o644) } catch where error.errno == EEXIST {
            let fd = try FileSystem.open(path, O_WRONLY)
            var st = stat()
            guard fstat(fd, &st) == 0, st.st_size == 0 else {
                close(fd)
                throw error
            }
            return fd
        }
    }

    /// Notes that a `syncfs` made everything written durable.
    func synced() { unsynced.removeAll() }

    /// Drops the pending lines and what they held (a batch or a save that failed). A pack
    /// that was to be started and never written is no longer waited for.
    func abandonPending() {
        closeReader()
        pending.removeAll()
        unlogged.removeAll()
        unsynced = unsynced.filter { FileSystem.exists(Self.path(of: $0.key, in: directory)) }
        if let (number, length) = current, length == 0, !FileSystem.exists(Self.path(of: number, in: directory)) {
            current = nil
            looked = false
        }
    }

    /// Notes that these bodies' log lines are written: their nodes know where they are, and
    /// `recentlyLogged` for a while.
    func logged<S: Sequence>(_ digests: S) where S.Element == BlobDigest {
        for digest in digests {
            guard let place = unlogged.removeValue(forKey: digest) else { continue }
            guard recentlyLogged.updateValue(place, forKey: digest) == nil else { continue }
            if recentOrder.count < Self.recentLimit {
                if recentOrder.isEmpty { recentOrder.reserveCapacity(Self.recentLimit) }
                recentOrder.append(digest)
            } else {
                recentlyLogged[recentOrder[recentOldest]] = nil
                recentOrder[recentOldest] = digest
                recentOldest = (recentOldest + 1) % Self.recentLimit
            }
        }
    }

    /// Forgets where every unlogged body is (a batch is over: what it packed and logged no
    /// line for, nothing names).
    func forgetUnlogged() { unlogged.removeAll(keepingCapacity: true) }

    /// Forgets every location it knows (the lines moved: `compact`).
    func forgetAll() {
        closeReader()
        unlogged.removeAll()
        recentlyLogged.removeAll()
        recentOrder.removeAll()
        recentOldest = 0
    }

    /// The body of `size` bytes at `location`, checked to hash to `digest`.
    func read(_ location: PackLocation, size: Int, digest: BlobDigest) throws(StoreError) -> [UInt8] {
        let path = Self.path(of: location.pack, in: directory)
        guard let bytes = try line(at: location, size: size) else {
            throw StoreError(.corrupt, "\(path) holds no line of \(size) bytes at offset \(location.offset) (body \(digest))")
        }
        let actual = BlobDigest.of(bytes)
        guard actual == digest else {
            throw StoreError(.corrupt, "the line at offset \(location.offset) of \(path) hashes to \(actual), not \(digest)")
        }
        return bytes
    }

    /// The `size` bytes at `location` when a line of that length starts there, unchecked; nil
    /// when none does. Throws `.notFound` when the pack is missing.
    func line(at location: PackLocation, size: Int) throws(StoreError) -> [UInt8]? {
        if let (number, length) = current, number == location.pack, location.offset >= length {
            // A line of the open batch, not yet written.
            let start = Int(location.offset - length)
            guard start + size < pending.count, pending[start + size] == 0x0A else { return nil }
            return Array(pending[start..<(start + size)])
        }
        let fd: Int32
        if let reader, reader.number == location.pack {
            fd = reader.fd
        } else {
            closeReader()
            let path = Self.path(of: location.pack, in: directory)
            do { fd = try FileSystem.open(path, O_RDONLY) } catch where error.errno == ENOENT {
                throw StoreError(.notFound, "pack \(path) is missing")
            }
            reader = (location.pack, fd)
        }
        var bytes = [UInt8](repeating: 0, count: size + 1)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, size + 1, off_t(location.offset)) }
        guard n == size + 1, bytes[size] == 0x0A else { return nil }
        bytes.removeLast()
        return bytes
    }

    /// Makes the next line start a new pack (`compact` writes the lines it keeps there).
    func closeCurrent() throws(StoreError) {
        try findCurrent()
        try writePending(sync: false)
        if let (number, _) = current { current = (number, Self.limit) }
    }

    /// Removes pack `number` (`compact`, once no log line names it).
    func remove(_ number: UInt32) throws(StoreError) {
        if reader?.number == number { closeReader() }
        try FileSystem.unlink(Self.path(of: number, in: directory))
        unsynced[number] = nil
        if current?.number == number { current = nil; looked = false }
    }
}
