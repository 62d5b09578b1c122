#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import Logging

/// One ferry folder opened for reading or as its single writer: the objects, the revision log
/// and the index of revision trees rebuilt from it.
///
/// Not thread-safe by design: exactly one owner (the CLI command, or the agent's store actor)
/// drives it, the way GRDB connects to a database file only once.
public final class FolderStore {
    /// Paths.
    public let layout: FolderLayout
    /// `folder.json`.
    public private(set) var info: FolderInfo
    /// The object store.
    public let objects: ObjectStore
    /// The log.
    let log: RevisionLog
    /// Revision trees by document.
    public internal(set) var index: DocumentIndex
    /// Held while open for writing.
    let lock: FolderLock?
    /// Damaged lines found in the log at open (line number, reason).
    public let damagedLogLines: [(line: Int, reason: String)]
    /// Bytes of a torn last log line found at open (repaired when opened for writing).
    public let tornLogTailBytes: Int
    /// The highest sequence of a damaged log line: never used again.
    let seqFloor: Int
    /// Diagnostics.
    public var logger: Logger
    /// Entries recorded in the current batch, appended to the log when it commits.
    var pendingEntries: [LogEntry] = []
    /// Files whose last read failed to parse, with the error; cleared when they parse again.
    public internal(set) var unreadable: [DocumentID: String] = [:]
    /// Documents whose current revision cannot be put on disk here, with why: a directory
    /// above it is a symbolic link or a file, or a directory (or something else that is not a
    /// file) holds its name. Their revisions are kept; `ferry conflicts` and `ferry status`
    /// list them; each is tried again whenever the document changes or the folder is scanned.
    public internal(set) var heldBack: [DocumentID: String] = [:]
    /// `.ferryignore`'s rules as last read (read again when it changes).
    var ignoreCache = IgnoreFileCache()
    /// Whether the open batch has looked at `.ferryignore` since its last flush: a peer's
    /// revision is never written over a path this folder ignored at that look.
    var ignoreCheckedInBatch = false
    /// Directories above documents found to be directories since the last flush of a group
    /// of a peer's revisions (`SharedStore.applyRemote` sets it; nil otherwise, so a scan,
    /// which may take minutes, looks every time): the group looks each up once, not once per
    /// document, within the tens of milliseconds before it renames its files.
    var directoriesFoundInBatch: Set<String>?
    /// Fingerprints of files as last recorded (writers only; saved by `saveStatCache`).
    public internal(set) var statCache = StatCache()
    /// What each large JSON file held when this store last read or wrote it.
    var knownTexts: [DocumentID: KnownFileText] = [:]
    /// The revision a document's file holds, for files that do not hold their current
    /// revision (a peer's revision arrived while the file was being edited, was unreadable or
    /// missing): a save is recorded as a child of what the file held (see `FileBase`).
    var fileBases: [DocumentID: FileBase] = [:]
    /// `fileBases` as last saved to `.ferry/filebases.json`.
    var savedFileBases: [DocumentID: FileBase] = [:]
    /// Revisions ferry wrote over documents' files lately, oldest first (see `StaleSave`).
    var recentWrites: [DocumentID: [RecentWrite]] = [:]
    /// When a save of each document was last recorded here (the store's clock): a file saved
    /// lately is swapped in with `RENAME_EXCHANGE` (see `installPendingFile`).
    var lastLocalSave: [DocumentID: UInt64] = [:]
    /// When `forgetExpired` walks `recentWrites` and `lastLocalSave` again.
    var expiryLimits = ExpiryLimits()
    /// Documents with more than one live leaf whose resolution waits for the end of a peer's
    /// pass (`applyRemote(resolve: false)`, `resolvePendingConflicts`).
    public internal(set) var unresolved: Set<DocumentID> = []
    /// Conflicts closed since the folder was opened, here or by a peer whose merge arrived
    /// (what `ferry sync` and the agent's log report).
    public internal(set) var conflictsClosed = ConflictTally()
    /// The log's last sequence when this session began (`beginSession`; the folder's
    /// opening until then): a merge that arrives closes a conflict of this folder's only if
    /// one of its branches was a leaf here by then.
    private(set) var sessionStartSeq: Int
    /// True while an agent watches the folder: a document whose file is missing when a peer's
    /// revision arrives is not recorded as deleted then (an editor saving by rename leaves no
    /// file for a moment); the watcher reports it once it has stayed away (`ingest(whenMissing:)`).
    public var deletionsAwaitWatcher = false
    /// Monotonic nanoseconds; replaceable so that a simulation runs on its own clock.
    public var clock: @Sendable () -> UInt64 = { monotonicNanoseconds() }

    /// A thread beside this one for file work: batches rename objects on it at commit, and
    /// the shared store writes received bodies' files on it (started when first needed).
    var fileWorker: FileWorker {
        if let startedWorker { return startedWorker }
        let worker = FileWorker()
        startedWorker = worker
        return worker
    }
    private var startedWorker: FileWorker?

    /// True when opened as the writer.
    public var isWritable: Bool { lock != nil }
    /// The folder's path.
    public var root: String { layout.root }
    /// The author of the revisions made here: the folder's name and the host's (`inventory@laptop`).
    public private(set) lazy var author: String = Self.author(folder: info.name)

    /// `NAME@HOST`, made fit for a log column (`LogEntry.authorProblem`).
    static func author(folder name: String) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count - 1) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "localhost"
        let shortHost = host.split(separator: ".").first.map(String.init) ?? host
        let text = String(String.UnicodeScalarView(("\(name)@\(shortHost)").unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        var bounded = text
        while bounded.utf8.count > LogEntry.maxAuthorBytes { bounded.removeLast() }
        return bounded
    }

    private init(layout: FolderLayout, info: FolderInfo, lock: FolderLock?, logger: Logger, readingLog: Bool = true) throws(StoreError) {
        self.layout = layout
        self.info = info
        self.logger = logger
        self.lock = lock
        let writable = lock != nil
        self.objects = ObjectStore(directory: layout.objectsDirectory, tempDirectory: layout.tempDirectory, packsDirectory: layout.packsDirectory)
        self.log = RevisionLog(path: layout.logFile)
        var index = DocumentIndex()
        let read = readingLog ? try RevisionLog.scan(path: layout.logFile) { index.apply($0) } : RevisionLog.ReadResult()
        self.index = index
        self.sessionStartSeq = index.lastSeq
        self.damagedLogLines = read.damagedLines
        self.tornLogTailBytes = read.tornTailBytes
        self.seqFloor = read.highestDamagedSeq
        for d in read.damagedLines {
            logger.warning("damaged log line skipped", metadata: ["line": "\(d.line)", "reason": "\(d.reason)"])
        }
        if writable {
            try upgradeFormat()
            if read.tornTailBytes > 0 {
                logger.notice("repairing a torn last line in revs.log", metadata: ["bytes": "\(read.tornTailBytes)"])
            }
            try log.openForAppend(validLength: read.validLength)
            statCache = StatCache.load(path: layout.statCacheFile)
            fileBases = loadFileBases()
            savedFileBases = fileBases
            try FileSystem.makeDirectories(layout.tempDirectory)
            for name in (try? FileSystem.listDirectory(layout.tempDirectory)) ?? [] {
                unlink(layout.tempDirectory + "/" + name)  // leftovers of a killed writer
            }
        }
    }

    deinit { startedWorker?.stop() }

    /// Rewrites `folder.json` of a folder of an older format with this build's (atomically,
    /// before anything of the newer format is written), so that an older ferry refuses it
    /// rather than misreads it.
    private func upgradeFormat() throws(StoreError) {
        guard info.format < FolderInfo.currentFormat else { return }
        var upgraded = info
        upgraded.format = FolderInfo.currentFormat
        try FileSystem.writeAtomically(upgraded.json.prettyBytes, to: layout.folderFile, tempPrefix: "folder.json.tmp-")
        logger.notice("folder format upgraded", metadata: ["from": "\(info.format)", "to": "\(upgraded.format)"])
        info = upgraded
    }

    /// The folder at `root` or its nearest ancestor holding `.ferry/`, as git finds its repo.
    public static func locate(from directory: String) -> String? {
        var dir = directory
        while true {
            if FileSystem.isDirectory(dir + "/.ferry") { return dir }
            let parent = FileSystem.dirname(of: dir)
            if parent == dir || parent.isEmpty { return nil }
            dir = parent
        }
    }

    /// Opens an initialized folder; `writable` takes the lock (failing with `.locked`).
    public static func open(at root: String, writable: Bool, logger: Logger = Logger(label: "ferry.store", factory: { _ in SwiftLogNoOpLogHandler() })) throws(StoreError) -> FolderStore {
        let info = try readInfo(root: root)
        return try FolderStore(layout: FolderLayout(root: root), info: info,
                               lock: writable ? try FolderLock(path: FolderLayout(root: root).lockFile) : nil, logger: logger)
    }

    /// A reader of the folder's files and objects that has not read the log (its index is
    /// empty): what `statusFromStatCache` reads files with, when the cache says what the index
    /// holds.
    static func openWithoutLog(at root: String) throws(StoreError) -> FolderStore {
        try FolderStore(layout: FolderLayout(root: root), info: try readInfo(root: root), lock: nil,
                        logger: Logger(label: "ferry.store", factory: { _ in SwiftLogNoOpLogHandler() }), readingLog: false)
    }

    /// Opens the folder whose identity is `info` (`readInfo`) for writing, under a lock the
    /// caller took (the agent takes it first, so that it answers `status` while the log is read).
    public static func open(at root: String, info: FolderInfo, holding lock: FolderLock, logger: Logger) throws(StoreError) -> FolderStore {
        let layout = FolderLayout(root: root)
        precondition(lock.path == layout.lockFile, "the lock of another folder")
        return try FolderStore(layout: layout, info: info, lock: lock, logger: logger)
    }

    /// The folder's identity from `.ferry/folder.json`, without reading its log.
    public static func readInfo(root: String) throws(StoreError) -> FolderInfo {
        let layout = FolderLayout(root: root)
        guard FileSystem.exists(layout.folderFile) else {
            throw StoreError(.notInitialized, "\(root) is not a ferry folder (no .ferry/folder.json); run `ferry init` there")
        }
        let bytes = try FileSystem.readFile(layout.folderFile)
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch {
            throw StoreError(.corrupt, "\(layout.folderFile): \(error)")
        }
        return try FolderInfo(json: json)
    }

    /// Creates `.ferry/` in `root` and opens the folder for writing; `id` is the folder's id
    /// (random unless given: a simulation names its peers).
    public static func create(at root: String, name: String?, id: String? = nil,
                              logger: Logger = Logger(label: "ferry.store", factory: { _ in SwiftLogNoOpLogHandler() })) throws(StoreError) -> FolderStore {
        let layout = FolderLayout(root: root)
        if FileSystem.exists(layout.folderFile) {
            throw StoreError(.alreadyInitialized, "\(root) is already a ferry folder")
        }
        try FileSystem.makeDirectories(layout.objectsDirectory)
        try FileSystem.makeDirectories(layout.tempDirectory)
        let folderName = name ?? FileSystem.basename(of: FolderLayout(root: root).root)
        let info = FolderInfo(name: folderName.isEmpty ? "ferry" : folderName, id: id)
        try FileSystem.writeAtomically(info.json.prettyBytes, to: layout.folderFile, tempPrefix: "folder.json.tmp-")
        return try FolderStore(layout: layout, info: info, lock: try FolderLock(path: layout.lockFile), logger: logger)
    }

    /// Saves the stat cache if it changed, or if the log did since it was saved: its summary
    /// says which log the index had read, so that `status` beside no agent can answer from the
    /// cache alone (`statusFromStatCache`). Inside a batch the log's lines wait for its end, and
    /// so does the cache.
    public func saveStatCache() throws(StoreError) {
        guard isWritable else { return }
        if objects.batch != nil && !pendingEntries.isEmpty {
            statCacheWaitsForBatch = true
            return
        }
        let log = FileFingerprint.of(layout.logFile)
        guard statCache.isDirty || statCache.summary?.log != log else { return }
        let known = index
        let summary = log.map {
            StatCache.Summary(log: $0, lastSeq: known.lastSeq, revisions: known.revisionCount,
                              documents: known.liveDocumentCount, complete: false)
        }
        try statCache.save(path: layout.statCacheFile, summary: summary) { doc in
            known[doc]?.current.flatMap { $0.deleted ? nil : $0.object }
        }
    }

    // MARK: Reading

    /// The current (winning) revision of a document.
    public func current(_ doc: DocumentID) -> RevisionNode? { index[doc]?.current }

    /// The body bytes of a revision (canonical JSON or the blob's bytes).
    public func body(of node: RevisionNode, doc: DocumentID) throws(StoreError) -> [UInt8] {
        guard let object = node.object else {
            if node.deleted { throw StoreError(.notFound, "\(doc)@\(node.rev) is a deletion; it has no body") }
            throw StoreError(.notFound, "the body of \(doc)@\(node.rev) is not stored here (compacted or history only)")
        }
        return try objects.read(object, packedAt: node.pack, size: node.size)
    }

    /// `body(of:doc:)` when its bytes hash to the revision's object (nil otherwise, or when it
    /// cannot be read): what may be sent to a peer. The last large body this store wrote is
    /// taken from memory, hashed when it was written; a packed one is hashed once, as it is read.
    public func verifiedBody(of node: RevisionNode, doc: DocumentID) -> [UInt8]? {
        guard let object = node.object else { return nil }
        if let recent = objects.lastLargeBody, recent.digest == object { return recent.bytes }
        return try? objects.verifiedRead(object, packedAt: node.pack, size: node.size)
    }

    /// A JSON document's body at a revision.
    public func jsonBody(of node: RevisionNode, doc: DocumentID) throws(StoreError) -> JSONValue {
        let bytes = try body(of: node, doc: doc)
        do { return try JSONParser.parse(bytes) } catch {
            throw StoreError(.corrupt, "object \(node.object!) of \(doc)@\(node.rev) is not valid JSON: \(error)")
        }
    }

    /// Every entry of the log, in order (re-read from disk: the index keeps no bodies of lines).
    public func readLogEntries() throws(StoreError) -> [LogEntry] {
        try RevisionLog.read(path: layout.logFile).entries
    }

    // MARK: Writing

    /// Runs `body` as one batch: object fsyncs are grouped into two `syncfs` calls and log
    /// lines are appended together once their objects are durable. Entries become visible in
    /// the index at once but are not durable until the batch commits (every `flushEvery`
    /// entries and at the end).
    public func batch<T>(flushEvery: Int = 4096, _ body: () throws -> T) throws -> T {
        precondition(objects.batch == nil, "batches do not nest")
        objects.batch = DurabilityBatch(root: layout.stateDirectory, worker: fileWorker, packs: objects.packs)
        batchFlushThreshold = flushEvery
        defer {
            objects.batch = nil
            ignoreCheckedInBatch = false
            directoriesFoundInBatch = nil
            batchFlushThreshold = nil
            objects.packs.forgetUnlogged()
        }
        do {
            let result = try body()
            try flushBatch()
            try saveFileBasesIfChanged()
            if statCacheWaitsForBatch {
                statCacheWaitsForBatch = false
                objects.batch = nil  // the log is written: the cache may say so
                // A hint: failing to save it fails nothing the batch recorded.
                do { try saveStatCache() } catch {
                    logger.warning("could not save the stat cache", metadata: ["error": "\(error)"])
                }
            }
            return result
        } catch {
            objects.batch?.abandon()
            pendingEntries.removeAll()
            try? reloadIndex()
            throw error
        }
    }

    var batchFlushThreshold: Int?
    /// Set when the stat cache was to be saved while a batch held log lines back.
    var statCacheWaitsForBatch = false

    func flushBatch() throws(StoreError) {
        ignoreCheckedInBatch = false
        if directoriesFoundInBatch != nil { directoriesFoundInBatch = [] }
        try objects.batch?.commit(install: installBatchedFile)
        try log.append(pendingEntries)
        objects.packs.logged(pendingEntries.lazy.compactMap(\.object))
        pendingEntries.removeAll(keepingCapacity: true)
    }

    /// Marks what is here now as this folder's own, before a peer's revisions arrive (`ferry
    /// sync` calls it after recording what changed since the last scan): conflicts are counted
    /// against it.
    public func beginSession() {
        sessionStartSeq = index.lastSeq
    }

    func reloadIndex() throws(StoreError) {
        var index = DocumentIndex()
        _ = try RevisionLog.scan(path: layout.logFile) { index.apply($0) }
        self.index = index
    }

    /// Appends entries to the log (durably, or into the open batch) and applies them to the index.
    func commit(_ entries: [LogEntry]) throws(StoreError) {
        precondition(isWritable, "folder opened read-only")
        // A log line must read back: an edit on top of a hand-edited log's last generation
        // would name one beyond what an id may hold.
        if let e = entries.first(where: { $0.rev.generation >= RevisionID.generationLimit }) {
            throw StoreError(.invalidInput, "\(e.doc): its history is \(e.rev.generation - 1) revisions long, the most a document may have; nothing was recorded")
        }
        // A hand-edited log can name a sequence near the limit (or a damaged line any number).
        if entries.contains(where: { $0.seq >= LogEntry.seqLimit }) {
            throw StoreError(.invalidInput, "the log's sequences have reached \(LogEntry.seqLimit - 1), the most a log may hold; nothing was recorded")
        }
        // A body packed for these entries, or one an earlier revision of the document has in a
        // pack (a merge that keeps one side's body): their lines say where (`BodyPacks`).
        let entries = entries.map { e in
            var e = e
            if e.pack == nil, e.kind == .json, let object = e.object {
                e.pack = objects.packs.packed(object)?.location
                    ?? (e.size < BodyPacks.packedBelow ? packedLocation(of: object, in: e.doc) : nil)
            }
            return e
        }
        if let threshold = batchFlushThreshold {
            pendingEntries += entries
            for e in entries { index.apply(e) }
            if pendingEntries.count >= threshold { try flushBatch() }
            return
        }
        try log.append(entries)
        objects.packs.logged(entries.lazy.compactMap(\.object))
        for e in entries { index.apply(e) }
    }

    /// The sequence of the next line; `LogEntry.seqLimit` at most (a damaged line may name any
    /// number), which `commit` refuses.
    var nextSeq: Int { min(max(index.lastSeq, seqFloor), LogEntry.seqLimit - 1) + 1 }

    /// Where a revision of `doc` already in the index keeps the body `object` in a pack, if one does.
    private func packedLocation(of object: BlobDigest, in doc: DocumentID) -> PackLocation? {
        var found: PackLocation?
        index[doc]?.forEachNode { node in
            if found == nil, node.object == object, let pack = node.pack { found = pack }
        }
        return found
    }

    /// Records a new local revision of `doc` whose body is already in `objects`, as a child of
    /// the revision its file holds (`fileRevision`; the current one unless a peer's revision
    /// could not be written to the file), unless that revision already has exactly this body.
    /// A child of anything but the current revision opens a conflict, which the caller
    /// resolves. Returns the entry recorded.
    @discardableResult
    public func recordLocal(_ doc: DocumentID, object: BlobDigest, size: Int) throws(StoreError) -> LogEntry? {
        try recordLocal(doc, object: object, size: size, parent: fileRevision(doc))
    }

    func recordLocal(_ doc: DocumentID, object: BlobDigest, size: Int, parent: RevisionID?) throws(StoreError) -> LogEntry? {
        let base = parent.flatMap { index[doc]?.nodes[$0] }
        if let base, !base.deleted, base.object == object { return nil }
        let rev = RevisionID.compute(parent: parent, deleted: false, body: object)
        if index[doc]?.contains(rev) == true { return nil }
        let entry = LogEntry(seq: nextSeq, doc: doc, rev: rev, parent: parent, deleted: false, kind: doc.kind,
                             object: object, size: size, origin: "local", time: Timestamp.now(), author: author)
        try commit([entry])
        logger.info("recorded revision", metadata: ["doc": "\(doc)", "rev": "\(rev)"])
        return entry
    }

    /// Records the deletion of `doc`, as a child of the revision its file held, unless that
    /// is already a deletion or there is none.
    @discardableResult
    public func recordDeletion(_ doc: DocumentID) throws(StoreError) -> LogEntry? {
        guard let parent = fileRevision(doc), let node = index[doc]?.nodes[parent], !node.deleted else { return nil }
        let rev = RevisionID.compute(parent: parent, deleted: true, body: nil)
        if index[doc]?.contains(rev) == true { return nil }
        let entry = LogEntry(seq: nextSeq, doc: doc, rev: rev, parent: parent, deleted: true, kind: doc.kind,
                             object: nil, size: 0, origin: "local", time: Timestamp.now(), author: author)
        try commit([entry])
        logger.info("recorded deletion", metadata: ["doc": "\(doc)", "rev": "\(rev)"])
        return entry
    }

    /// Stores a JSON body (canonical form) and records it.
    @discardableResult
    public func recordLocalJSON(_ doc: DocumentID, _ value: JSONValue) throws(StoreError) -> LogEntry? {
        let bytes = value.canonicalBytes
        let digest = try objects.writeBody(bytes)
        return try recordLocal(doc, object: digest, size: bytes.count)
    }
}
