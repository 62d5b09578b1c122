#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import Synchronization

/// The content-addressed object store `.ferry/objects/ab/cdef…`: immutable files (0444)
/// named by the SHA-256 of their exact bytes, written temp → fsync → rename, never rewritten.
public final class ObjectStore {
    /// `.ferry/objects`.
    public let directory: String
    /// Where temporary files are written before their hash is known (same filesystem).
    let tempDirectory: String
    /// When set, writes skip their per-file fsyncs; `DurabilityBatch.commit` makes them durable.
    var batch: DurabilityBatch?
    /// Small JSON bodies, a line each in `.ferry/packs` (written by the folder's writer only).
    let packs: BodyPacks
    /// The last large JSON body written, with its digest (computed from these bytes), kept
    /// until the next one: a save is sent to peers moments later, which would otherwise read
    /// it back and hash it again.
    private(set) var lastLargeBody: (digest: BlobDigest, bytes: [UInt8])?
    /// Bodies from this size on are kept as `lastLargeBody` (smaller ones read back quickly)...
    static let lastLargeBodyMinimum = 64 << 10
    /// ...up to this size (the memory it holds while the folder is open).
    static let lastLargeBodyMaximum = 16 << 20

    /// Size of the chunks blobs are streamed in: memory stays flat whatever the file size.
    public static let chunkSize = 1 << 20

    init(directory: String, tempDirectory: String, packsDirectory: String) {
        self.directory = directory
        self.tempDirectory = tempDirectory
        self.packs = BodyPacks(directory: packsDirectory)
    }

    /// A second handle on a folder's objects, for a task that reads or writes blobs beside the
    /// folder's single writer (a replication fetching blobs): it never joins the writer's
    /// batches, so each object it writes is made durable on its own; it packs nothing.
    public convenience init(layout: FolderLayout) {
        self.init(directory: layout.objectsDirectory, tempDirectory: layout.tempDirectory, packsDirectory: layout.packsDirectory)
    }

    /// Where the object's bytes are now: its address, or its temp file while the open batch
    /// has not yet renamed it (so a batch can read what it wrote).
    func location(of digest: BlobDigest) -> String {
        let final = path(for: digest)
        if let batch, let temp = batch.pendingTemp[final] { return temp }
        return final
    }

    /// The path of an object.
    public func path(for digest: BlobDigest) -> String {
        Self.path(for: digest, in: directory)
    }

    /// The path of an object in the objects directory `directory`.
    static func path(for digest: BlobDigest, in directory: String) -> String {
        let hex = digest.hex
        let split = hex.index(hex.startIndex, offsetBy: 2)
        return "\(directory)/\(hex[..<split])/\(hex[split...])"
    }

    /// True when a JSON body is stored: as a file, or packed lately (for a log line not yet
    /// written, or written lately; an older packed body is found through its node,
    /// `read(_:packedAt:size:)`).
    public func contains(_ digest: BlobDigest) -> Bool {
        packs.packed(digest) != nil || hasFile(digest)
    }

    /// True when the object is a file of its own: what a blob must be (a packed JSON body with
    /// the same bytes is not a blob's file).
    public func hasFile(_ digest: BlobDigest) -> Bool {
        FileSystem.exists(location(of: digest))
    }

    /// Stores a JSON body's canonical bytes; returns its digest. A small one goes to a pack (its
    /// log line will say where: `FolderStore.commit`), a larger one to a file of its own.
    @discardableResult
    public func writeBody(_ canonical: [UInt8]) throws(StoreError) -> BlobDigest {
        try writeBody(canonical, digest: BlobDigest.of(canonical))
    }

    /// `writeBody` of bytes whose digest the caller computed from them (a large body is not
    /// hashed twice).
    @discardableResult
    func writeBody(_ canonical: [UInt8], digest: BlobDigest) throws(StoreError) -> BlobDigest {
        guard canonical.count < BodyPacks.packedBelow else {
            try write(canonical, digest: digest)
            let kept = Self.lastLargeBodyMinimum...Self.lastLargeBodyMaximum ~= canonical.count
            lastLargeBody = kept ? (digest, canonical) : nil
            return digest
        }
        if !contains(digest) { try pack(canonical, digest: digest) }
        return digest
    }

    /// Stores `bytes` as a file of its own; returns its digest. An object that already exists
    /// is left untouched.
    @discardableResult
    public func write(_ bytes: [UInt8]) throws(StoreError) -> BlobDigest {
        try write(bytes, digest: BlobDigest.of(bytes))
    }

    /// `write` of bytes whose digest the caller computed from them.
    @discardableResult
    func write(_ bytes: [UInt8], digest: BlobDigest) throws(StoreError) -> BlobDigest {
        if hasFile(digest) { return digest }
        let temp = newTempPath()
        let fd = try FileSystem.open(temp, O_WRONLY | O_CREAT | O_EXCL, mode: 0o444)
        do {
            defer { close(fd) }
            try FileSystem.writeAll(fd, bytes, path: temp)
            if batch == nil { try FileSystem.sync(fd, path: temp) }
        } catch {
            unlink(temp)
            throw error
        }
        try install(temp: temp, as: digest)
        return digest
    }

    /// Packs a small JSON body whose digest is `digest` (checked by the caller): into the open
    /// batch, or durably at once outside one.
    func pack(_ bytes: [UInt8], digest: BlobDigest) throws(StoreError) {
        guard packs.unlogged[digest] == nil else { return }  // the same body twice in a batch
        _ = try packs.append(bytes, digest: digest)
        guard batch == nil else { return }
        do { try packs.writePending(sync: true) } catch {
            // Not durable: nothing may name it (a later save of the same body packs it again).
            packs.abandonPending()
            throw error
        }
    }

    /// Takes into the open batch an object whose bytes another thread wrote to the temp file
    /// `temp`: it is renamed to its address after the batch's first `syncfs`. An object stored
    /// already is renamed over (same name, same bytes).
    func adopt(temp: String, as digest: BlobDigest) throws(StoreError) {
        guard let batch else { preconditionFailure("a prepared object is adopted inside a batch (its temp file is not durable)") }
        if batch.pendingTemp[path(for: digest)] != nil {
            unlink(temp)  // the same body twice in one batch
            return
        }
        try install(temp: temp, as: digest)
    }

    /// Streams the file at `source` into the store, hashing as it copies; memory stays at one
    /// chunk. Returns the digest and size, and the `stat` of the source taken before reading
    /// so that callers can tell whether the file changed while it was copied.
    public func importFile(at source: String, expected: BlobDigest? = nil) throws(StoreError) -> (digest: BlobDigest, size: Int) {
        let input = try FileSystem.open(source, O_RDONLY)
        defer { close(input) }
        return try importStream(from: input, sourcePath: source, expected: expected)
    }

    /// Streams everything readable from `input` into the store (see `importFile`). When
    /// `expected` is given and the bytes do not hash to it, nothing is stored and the call fails.
    public func importStream(from input: Int32, sourcePath: String, expected: BlobDigest? = nil) throws(StoreError) -> (digest: BlobDigest, size: Int) {
        let temp = newTempPath()
        let out = try FileSystem.open(temp, O_WRONLY | O_CREAT | O_EXCL, mode: 0o444)
        var hasher = BlobHasher()
        do throws(StoreError) {
            defer { close(out) }
            try FileSystem.forEachChunk(of: input, path: sourcePath, chunkSize: Self.chunkSize) { (chunk) throws(StoreError) in
                try hasher.update(chunk) { () throws(StoreError) in try FileSystem.writeSkippingZeros(out, chunk, path: temp) }
            }
            if ftruncate(out, off_t(hasher.count)) != 0 { throw StoreError.system("cannot set the size of", path: temp) }
            if batch == nil { try FileSystem.sync(out, path: temp) }
        } catch {
            unlink(temp)
            throw error
        }
        let digest = hasher.finalize()
        if let expected, expected != digest {
            unlink(temp)
            throw StoreError(.corrupt, "bytes from \(sourcePath) hash to \(digest), not the expected \(expected); nothing was stored")
        }
        if hasFile(digest) {
            unlink(temp)
        } else {
            try install(temp: temp, as: digest)
        }
        return (digest, hasher.count)
    }

    /// Starts writing an object that arrives in pieces (a blob from a peer) to a temp file;
    /// the bytes are hashed as they are written and must hash to `expected`.
    public func beginWrite(expected: BlobDigest) throws(StoreError) -> PendingObject {
        let temp = newTempPath()
        let fd = try FileSystem.open(temp, O_WRONLY | O_CREAT | O_EXCL, mode: 0o444)
        return PendingObject(temp: temp, fd: fd, expected: expected)
    }

    /// Moves a written temp file to its content address.
    func install(temp: String, as digest: BlobDigest) throws(StoreError) {
        let final = path(for: digest)
        let dir = FileSystem.dirname(of: final)
        do {
            if let batch {
                // Durable data before the name points at it: the batch syncs the temp files,
                // then renames, then syncs again (see DurabilityBatch).
                batch.pendingRenames.append((temp, final))
                batch.pendingTemp[final] = temp
                return
            }
            try FileSystem.renameMakingDirectory(temp, final)
            try FileSystem.syncDirectory(dir)
        } catch {
            unlink(temp)
            throw error
        }
    }

    /// The whole content of an object (for JSON bodies; blobs are streamed with `open`): a file,
    /// or a body packed for a log line not yet written.
    public func read(_ digest: BlobDigest) throws(StoreError) -> [UInt8] {
        do {
            return try FileSystem.readFile(location(of: digest))
        } catch where error.errno == ENOENT {
            if let (location, size) = packs.packed(digest) { return try packs.read(location, size: size, digest: digest) }
            throw StoreError(.notFound, "object \(digest) is missing from \(directory)")
        }
    }

    /// A revision's body: the `size` bytes at `packedAt` when its log line names a pack, else
    /// the object's file.
    public func read(_ digest: BlobDigest, packedAt location: PackLocation?, size: Int) throws(StoreError) -> [UInt8] {
        guard let location else { return try read(digest) }
        return try packs.read(location, size: size, digest: digest)
    }

    /// `read(_:packedAt:size:)`, checked against `digest`: a packed body is checked as its line
    /// is read (`BodyPacks.read`), an object's file is hashed here.
    func verifiedRead(_ digest: BlobDigest, packedAt location: PackLocation?, size: Int) throws(StoreError) -> [UInt8] {
        if let location { return try packs.read(location, size: size, digest: digest) }
        let bytes = try read(digest)
        let actual = BlobDigest.of(bytes)
        guard actual == digest else { throw StoreError(.corrupt, "object \(digest) hashes to \(actual)") }
        return bytes
    }

    /// Opens an object for streaming.
    public func open(_ digest: BlobDigest) throws(StoreError) -> Int32 {
        do {
            return try FileSystem.open(location(of: digest), O_RDONLY)
        } catch where error.errno == ENOENT {
            throw StoreError(.notFound, "object \(digest) is missing from \(directory)")
        }
    }

    /// Re-hashes an object; returns the digest its bytes actually have.
    public func rehash(_ digest: BlobDigest) throws(StoreError) -> BlobDigest {
        let fd = try open(digest)
        defer { close(fd) }
        return try Self.hash(fd, path: path(for: digest))
    }

    /// The digest of everything readable from `fd`, streamed.
    public static func hash(_ fd: Int32, path: String) throws(StoreError) -> BlobDigest {
        var hasher = BlobHasher()
        try FileSystem.forEachChunk(of: fd, path: path, chunkSize: chunkSize) { hasher.update($0) }
        return hasher.finalize()
    }

    /// Every object file present, with the digest its path names (unparseable names are
    /// returned as `stray` paths).
    public func allObjects() throws(StoreError) -> (objects: [BlobDigest], stray: [String]) {
        var objects: [BlobDigest] = []
        var stray: [String] = []
        guard FileSystem.exists(directory) else { return ([], []) }
        for fan in try FileSystem.listDirectory(directory).sorted() {
            let fanPath = "\(directory)/\(fan)"
            guard fan.utf8.count == 2, FileSystem.isDirectory(fanPath) else {
                stray.append(fanPath)
                continue
            }
            for rest in try FileSystem.listDirectory(fanPath).sorted() {
                if let d = try? BlobDigest(hex: fan + rest) { objects.append(d) } else { stray.append("\(fanPath)/\(rest)") }
            }
        }
        return (objects, stray)
    }

    /// Removes an object (only `compact` does this, for bodies no revision needs any more).
    func remove(_ digest: BlobDigest) throws(StoreError) {
        try FileSystem.unlink(path(for: digest))
    }

    func newTempPath() -> String {
        Self.newTempPath(in: tempDirectory)
    }

    /// A fresh name for an object's temp file in `tempDirectory`.
    static func newTempPath(in tempDirectory: String) -> String {
        "\(tempDirectory)/obj-\(FileSystem.randomSuffix())"
    }
}

/// An object being written piece by piece (a blob from a peer). `finishVerified` checks the
/// digest and hands over the temp file for a batch to adopt; `abandon` (or a mismatch) removes
/// it, so nothing unverified is ever stored. A blob that is a document's content can also be
/// written, as it arrives, into a temp file beside the document (`copyBeside`): the batch then
/// renames that into place instead of copying the object after the last byte.
public final class PendingObject {
    /// The object's temp file; nil once finished or abandoned.
    private var object: StreamedFile?
    /// The path of the object's temp file.
    let temp: String
    let expected: BlobDigest
    var hasher = BlobHasher()
    /// The document's copy while it is written (`copyBeside`).
    private var copy: StreamedFile?
    /// The document's temp file holding the verified bytes, once `finishVerified` succeeded
    /// with a copy; the caller hands it to the store (`RemoteRevision.fileTemp`) or removes it.
    public private(set) var documentTemp: String?

    init(temp: String, fd: Int32, expected: BlobDigest) {
        self.temp = temp
        self.object = StreamedFile(path: temp, fd: fd, dropBehind: .no)
        self.expected = expected
    }

    /// Bytes written so far.
    public var count: Int { hasher.count }

    /// Also writes every piece into a new temp file beside `document` (an absolute path the
    /// caller checked: no link or file above it). Call before the first piece. A copy that
    /// cannot be made or written is dropped: the store copies the object instead.
    public func copyBeside(_ document: String) {
        precondition(object != nil && hasher.count == 0, "the copy starts with the first piece")
        let path = FolderScanner.temporaryPath(beside: document)
        guard let fd = try? FileSystem.createNew(path, mode: FileSystem.modeForTemp(replacing: document)) else { return }
        // Its pages are dropped once written back: the object's stay cached, and one copy in
        // memory is enough (as `FileSystem.copyAll` does, but without waiting for the disk:
        // this runs on a session's thread).
        copy = StreamedFile(path: path, fd: fd, dropBehind: .whenWritten)
    }

    /// Appends a piece.
    public func append(_ bytes: ArraySlice<UInt8>) throws(StoreError) {
        precondition(object != nil, "object already finished")
        let result = bytes.withUnsafeBytes { piece in
            Result { () throws(StoreError) in
                try hasher.update(piece) { () throws(StoreError) in
                    try object!.append(piece)
                    if copy != nil, (try? copy!.append(piece)) == nil { copy.take()?.remove() }
                }
            }
        }
        do { try result.get() } catch {
            abandon()
            throw error
        }
    }

    /// Appends a piece.
    public func append(_ bytes: [UInt8]) throws(StoreError) {
        try append(bytes[...])
    }

    /// Verifies the digest and closes the temp file, neither durable nor installed; returns
    /// its path. It holds exactly the announced bytes; a batch that adopts it
    /// (`ObjectStore.adopt`) makes it durable with everything else the batch wrote. The
    /// document's copy, if any, is then `documentTemp`.
    func finishVerified() throws(StoreError) -> String {
        precondition(object != nil, "object already finished")
        let digest = hasher.finalize()
        guard digest == expected else {
            abandon()
            throw StoreError(.corrupt, "received bytes hash to \(digest), not the announced \(expected); discarded")
        }
        guard object.take()!.finish(size: hasher.count) else {
            let error = StoreError.system("cannot set the size of", path: temp)
            abandon()
            throw error
        }
        if let copy = copy.take() {
            if copy.finish(size: hasher.count) { documentTemp = copy.path } else { unlink(copy.path) }
        }
        return temp
    }

    /// Drops what was written.
    public func abandon() {
        object.take()?.remove()
        unlink(temp)  // also after a failed finish, which closed it
        copy.take()?.remove()
    }

    deinit { if object != nil { abandon() } }
}

/// A temp file written piece by piece as bytes arrive: runs of zeros left as holes, its
/// writeback started as it grows (`WritebackStarter`).
private struct StreamedFile {
    let path: String
    let fd: Int32
    var writeback: WritebackStarter

    init(path: String, fd: Int32, dropBehind: WritebackStarter.DropBehind) {
        self.path = path
        self.fd = fd
        self.writeback = WritebackStarter(fd: fd, dropBehind: dropBehind)
    }

    mutating func append(_ piece: UnsafeRawBufferPointer) throws(StoreError) {
        try FileSystem.writeSkippingZeros(fd, piece, path: path)
        writeback.wrote(piece.count)
    }

    /// Sets its size (a trailing run of zeros was skipped, not written) and closes it; false
    /// when the size could not be set.
    func finish(size: Int) -> Bool {
        defer { close(fd) }
        return ftruncate(fd, off_t(size)) == 0
    }

    /// Closes and removes it.
    func remove() {
        close(fd)
        unlink(path)
    }
}

/// Groups the fsyncs of many writes (a large folder's `init`, a batch of revisions from a
/// peer): objects' and documents' temp files are written without fsync, then one `syncfs`
/// makes their data durable, then they are renamed to their final names, then a second
/// `syncfs` makes the names durable, and only then may log lines refer to them. No name
/// ever points at bytes that are not yet on disk, even on a filesystem without a journal.
public final class DurabilityBatch {
    var pendingRenames: [(String, String)] = []
    /// Temp path by final path, for reads of objects written in this batch.
    var pendingTemp: [String: String] = [:]
    /// Documents' files written in the batch, by document path, renamed over their
    /// documents at commit.
    var pendingFiles: [String: PendingFile] = [:]
    /// Set when documents' files were removed in the batch (without their own fsyncs): the
    /// commit must then sync even with nothing to rename.
    var filesRemoved = false
    let root: String
    /// Renames objects at commit while the writer renames documents' files.
    let worker: FileWorker
    /// The packs whose pending lines the commit writes before its flush.
    let packs: BodyPacks

    init(root: String, worker: FileWorker, packs: BodyPacks) {
        self.root = root
        self.worker = worker
        self.packs = packs
    }

    /// True when nothing was written or removed since the last commit.
    var isEmpty: Bool { pendingRenames.isEmpty && pendingFiles.isEmpty && !filesRemoved && !packs.hasPending }

    /// Queues a document's temp file to replace `file.path` at commit.
    func add(_ file: PendingFile) {
        precondition(pendingFiles[file.path] == nil, "one pending file per path: flush the batch first")
        pendingFiles[file.path] = file
    }

    /// Batches of at most this many files, holding at most `fileByFileBytes` together, with
    /// none removed, are made durable file by file.
    static let fileByFileLimit = 8
    /// Beyond this, one `syncfs` is quicker than a flush per file (a one-field edit of a 2.9 MB
    /// list reached the peer's disk in 74 ms through `syncfs`, 107–148 ms file by file).
    static let fileByFileBytes = 256 << 10

    /// True when the batch is small enough to be made durable file by file.
    private var isSmall: Bool {
        guard !filesRemoved, pendingRenames.count + pendingFiles.count <= Self.fileByFileLimit else { return false }
        var bytes = packs.pendingBytes
        for temp in pendingRenames.map(\.0) + pendingFiles.values.map(\.temp) {
            bytes += Int((try? FileSystem.lstat(temp))??.st_size ?? 0)
            if bytes > Self.fileByFileBytes { return false }
        }
        return bytes <= Self.fileByFileBytes
    }

    /// Makes everything written in the batch durable and visible: `install` renames each
    /// pending document file into place (or drops it if the user's edit got there first).
    func commit(install: (PendingFile) -> Void) throws(StoreError) {
        guard !isEmpty else { return }
        if isSmall { return try commitFileByFile(install: install) }
        try packs.writePending(sync: false)
        try FileSystem.syncFilesystem(containing: root)
        packs.synced()
        // The worker renames the objects while this thread puts documents' files in place. An
        // object already there has the same bytes (its name is their digest): renaming over it
        // is harmless and saves a stat per object.
        let renames = pendingRenames
        let failure = Mutex<StoreError?>(nil)
        worker.run({
            do throws(StoreError) { for (temp, final) in renames { try FileSystem.renameMakingDirectory(temp, final) } } catch {
                failure.withLock { $0 = error }
            }
        }, beside: {
            for file in pendingFiles.values { install(file) }
        })
        if let error = failure.withLock({ $0 }) { throw error }
        pendingRenames.removeAll()
        pendingTemp.removeAll()
        pendingFiles.removeAll()
        filesRemoved = false
        try FileSystem.syncFilesystem(containing: root)
    }

    /// A small batch (a save, one small revision from a peer): each temp file's data, then the
    /// renames, then each directory they are in and its parents up to the folder. `syncfs`
    /// flushes what every process wrote to the filesystem, so fifty agents each receiving one
    /// edit wait on each other's writes (docs/performance.md); a file's own fsync waits for its
    /// own. The parents too, because a directory made for this batch's file is named in its
    /// parent.
    private func commitFileByFile(install: (PendingFile) -> Void) throws(StoreError) {
        try packs.writePending(sync: true)
        for (temp, _) in pendingRenames { try FileSystem.syncFile(atPath: temp) }
        for file in pendingFiles.values { try FileSystem.syncFile(atPath: file.temp) }
        var directories: Set<String> = []
        for (temp, final) in pendingRenames {
            try FileSystem.renameMakingDirectory(temp, final)
            directories.insert(FileSystem.dirname(of: final))
        }
        for file in pendingFiles.values {
            install(file)
            directories.insert(FileSystem.dirname(of: file.path))
        }
        let folder = FileSystem.dirname(of: root)
        var synced: Set<String> = []
        for directory in directories {
            var d = directory
            while d.hasPrefix(folder), synced.insert(d).inserted {
                try FileSystem.syncDirectory(d)
                if d == folder { break }
                d = FileSystem.dirname(of: d)
            }
        }
        pendingRenames.removeAll()
        pendingTemp.removeAll()
        pendingFiles.removeAll()
    }

    /// Drops the batch's temp files and pending pack lines.
    func abandon() {
        packs.abandonPending()
        for (temp, _) in pendingRenames { unlink(temp) }
        for file in pendingFiles.values { unlink(file.temp) }
        pendingRenames.removeAll()
        pendingTemp.removeAll()
        pendingFiles.removeAll()
        filesRemoved = false
    }
}

/// A document's file written to a temp file in a batch, waiting for the batch's first `syncfs`
/// before it is renamed over the document.
struct PendingFile {
    /// The document.
    let doc: DocumentID
    /// The temp file beside it, holding the revision's content.
    let temp: String
    /// The document's file.
    let path: String
    /// The file's fingerprint when its content was last recorded (nil: no file); if it
    /// differs at commit, the user edited the file meanwhile and the temp file is dropped.
    let expecting: FileFingerprint?
    /// The object whose content the temp file holds.
    let object: BlobDigest
    /// The revision it holds.
    let rev: RevisionID
    /// The revision the file held before (nil: none), for telling stale saves.
    let over: RevisionID?
    /// What the temp file holds, remembered once it is in place (a large JSON file).
    var known: KnownFileText? = nil
}

/// A temp file beside a document holding a received body pretty-printed
/// (`SharedStore.prepare`), and what it holds when it is large enough to remember.
struct PreparedFile: Sendable {
    /// The temp file.
    var temp: String
    /// Its text (nil: a small file, not remembered).
    var known: KnownFileText?
}
