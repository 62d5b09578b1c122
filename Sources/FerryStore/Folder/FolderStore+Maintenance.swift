#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What `verify` found.
public struct VerifyReport: Sendable {
    /// Objects whose bytes do not hash to their name.
    public var corruptObjects: [(path: String, actual: BlobDigest)] = []
    /// Files in `objects/` that are not named like objects.
    public var strayObjectFiles: [String] = []
    /// Objects a revision or a blob reference needs but that are missing.
    public var missingObjects: [(digest: BlobDigest, neededBy: String)] = []
    /// Log lines that do not decode, and other log inconsistencies.
    public var logProblems: [String] = []
    /// Bytes of a torn last log line (repaired by the next writer; not damage).
    public var tornTailBytes: Int = 0
    /// Documents whose files differ from their current revision, and how (changes not recorded yet).
    public var pending: [(doc: DocumentID, change: DiskState.Change)] = []
    /// Documents whose files cannot be read as revisions (invalid JSON…).
    public var unreadable: [(doc: DocumentID, reason: String)] = []
    /// Objects checked.
    public var objectsChecked = 0

    /// True when nothing is damaged (pending edits and a torn tail are not damage).
    public var isClean: Bool { corruptObjects.isEmpty && missingObjects.isEmpty && logProblems.isEmpty && strayObjectFiles.isEmpty }
}

/// A folder's files, found by a walk that follows its ignore rules (`FolderStore.walk`).
public struct FolderWalk: Sendable {
    /// Every document file, in no particular order.
    public var found: [FolderScanner.Found]
    /// Paths that are not synced.
    public var skipped: [FolderScanner.Skipped]
    /// The ignore rules the walk followed.
    var rules: IgnoreRules
}

/// A folder's files, and what the stat cache its writer left proves of each, read without
/// the index (`FolderStore.survey`).
public struct FolderSurvey: Sendable {
    /// Every document file, in no particular order.
    public var found: [FolderScanner.Found]
    /// For each of `found`, the body the stat cache proves it still holds (nil: to be read).
    public var proven: [BlobDigest?]
    /// Paths that are not synced.
    public var skipped: [FolderScanner.Skipped]
}

/// What `status` says of a folder beside no agent: its counts and how its files differ from
/// the log.
public struct FolderStatus: Sendable {
    /// Documents whose current revision is live.
    public var documents: Int
    /// Log entries.
    public var revisions: Int
    /// The log's highest sequence.
    public var lastSeq: Int
    /// How the files differ from the log.
    public var disk: DiskState

    /// A status from its parts.
    public init(documents: Int, revisions: Int, lastSeq: Int, disk: DiskState) {
        self.documents = documents
        self.revisions = revisions
        self.lastSeq = lastSeq
        self.disk = disk
    }
}

/// How ferry's JSON reports show documents and paths with a reason (files it cannot record or
/// write, paths it does not sync): the same keys from `status` (whether the agent or the
/// folder answers), `init`, `scan`, `verify` and `conflicts`.
public enum ReportJSON {
    /// `[{"doc": …, key: reason}]`, in the order given.
    public static func documents(_ list: [(doc: DocumentID, reason: String)], key: String) -> JSONValue {
        .array(list.map { ["doc": .string($0.doc.rawValue), key: .string($0.reason)] })
    }

    /// `[{"path": …, "reason": …}]`.
    public static func skipped(_ list: [FolderScanner.Skipped]) -> JSONValue {
        .array(list.map { ["path": .string($0.path), "reason": .string($0.reason)] })
    }
}

/// How the files on disk differ from the log.
public struct DiskState: Sendable {
    /// A change not yet recorded.
    public enum Change: String, Sendable {
        /// A new document.
        case added
        /// An edited document.
        case modified
        /// A document whose file is gone.
        case deleted
    }
    /// Unrecorded changes.
    public var pending: [(doc: DocumentID, change: Change)] = []
    /// Files that cannot be recorded, with why.
    public var unreadable: [(doc: DocumentID, reason: String)] = []
    /// Paths that are not synced.
    public var skipped: [FolderScanner.Skipped]
    /// Live documents that cannot be put at their path here, with why (`FolderStore.heldBack`).
    public var heldBack: [(doc: DocumentID, reason: String)] = []

    /// Puts each list in document order.
    mutating func sort() {
        pending.sort { $0.doc < $1.doc }
        unreadable.sort { $0.doc < $1.doc }
        heldBack.sort { $0.doc < $1.doc }
    }
}

/// What `compact` removed.
public struct CompactReport: Sendable {
    /// Revisions whose bodies were dropped.
    public var revisionsCompacted = 0
    /// Objects deleted because nothing needs them any more.
    public var objectsRemoved = 0
    /// Bytes freed.
    public var bytesFreed = 0
}

extension FolderStore {
    /// Re-hashes every object, checks the log, and compares every file with its current revision.
    public func verify() throws -> VerifyReport {
        var report = VerifyReport()
        report.tornTailBytes = tornLogTailBytes
        for d in damagedLogLines { report.logProblems.append("revs.log line \(d.line): \(d.reason)") }
        let (all, stray) = try objects.allObjects()
        report.strayObjectFiles = stray
        for digest in all {
            report.objectsChecked += 1
            let actual = try objects.rehash(digest)
            if actual != digest { report.corruptObjects.append((objects.path(for: digest), actual)) }
        }
        let present = Set(all)
        var lastSeq = 0
        for e in try readLogEntries() {
            if e.seq <= lastSeq { report.logProblems.append("revs.log seq \(e.seq) does not increase (after \(lastSeq))") }
            lastSeq = e.seq
            guard let object = e.object else { continue }
            var packed: [UInt8]?
            if let pack = e.pack {
                // A packed body is checked where its log line says it is.
                report.objectsChecked += 1
                let place = "\(BodyPacks.path(of: pack.pack, in: objects.packs.directory)) at offset \(pack.offset)"
                do {
                    guard let bytes = try objects.packs.line(at: pack, size: e.size) else {
                        report.logProblems.append("\(e.doc)@\(e.rev): \(place) holds no line of \(e.size) bytes")
                        continue
                    }
                    let actual = BlobDigest.of(bytes)
                    guard actual == object else {
                        report.corruptObjects.append((place, actual))
                        continue
                    }
                    packed = bytes
                } catch {
                    report.missingObjects.append((object, "\(e.doc)@\(e.rev) (\(place))"))
                    continue
                }
            }
            if packed == nil && !present.contains(object) {
                report.missingObjects.append((object, "\(e.doc)@\(e.rev)"))
            } else if e.kind == .json, index[e.doc]?.nodes[e.rev]?.object != nil {
                let body = try packed ?? objects.read(object)
                guard let value = try? JSONParser.parse(body) else {
                    report.logProblems.append("\(e.doc)@\(e.rev): body \(object) is not JSON")
                    continue
                }
                for ref in (try? value.blobReferences()) ?? [] where !present.contains(ref.digest) {
                    report.missingObjects.append((ref.digest, "blob in \(e.doc)@\(e.rev)"))
                }
            }
        }
        let disk = try diskState()
        report.pending = disk.pending
        report.unreadable = disk.unreadable
        return report
    }

    /// The folder's files and the stat cache its writer left: what `diskState` compares with
    /// the index, read without it, so that a reader (`ferry status`) can take it on another
    /// thread while the log is read.
    public static func survey(root: String) throws -> FolderSurvey {
        let walked = try walk(root: root)
        // The cache is consulted here too, so that the thread reading the log has only the
        // index to look up per file.
        let proven = StatCache.load(path: FolderLayout(root: root).statCacheFile).provenObjects(walked.found)
        return FolderSurvey(found: walked.found, proven: proven, skipped: walked.skipped)
    }

    /// Every document file of the folder at `root`, in no particular order, and the paths not
    /// synced.
    public static func walk(root: String) throws -> FolderWalk {
        let rules = IgnoreRules.load(root: root)
        let (found, skipped) = try FolderScanner(root: root, rules: rules).scan(sorted: false)
        return FolderWalk(found: found, skipped: skipped, rules: rules)
    }

    /// True when the stat cache the last writer left can answer `status` (`statusFromStatCache`):
    /// its summary is complete and names the log as it is now. Reads the cache's first line.
    public static func statCacheNamesTheLog(root: String) -> Bool {
        let layout = FolderLayout(root: root)
        guard let summary = StatCache.readSummary(path: layout.statCacheFile) else { return false }
        return summary.complete && FileFingerprint.of(layout.logFile) == summary.log
    }

    /// `status` from the stat cache the last writer left, without reading the log: when the
    /// log is still the one the cache's summary names (so the index would be what the summary
    /// says) and the summary is complete (every live document had its current body on disk,
    /// each marked in the cache), the files are compared with the cache's entries instead of
    /// the index. The cache is read on this thread while `walk` runs on another; nil means the
    /// caller reads the log (`diskState`).
    public static func statusFromStatCache(root: String, walk: () throws -> FolderWalk) throws -> FolderStatus? {
        let layout = FolderLayout(root: root)
        let cache = StatCache.load(path: layout.statCacheFile)
        guard let summary = cache.summary, summary.complete, FileFingerprint.of(layout.logFile) == summary.log else { return nil }
        let walked = try walk()
        let reader = try openWithoutLog(at: root)
        var state = DiskState(skipped: walked.skipped)
        var liveFound = 0
        let now = wallClockNanoseconds()
        for file in walked.found {
            let entry = cache[file.doc].flatMap { $0.wasCurrent ? $0 : nil }
            if let entry {
                liveFound += 1
                if entry.proves(file.fingerprint, now: now) { continue }
            }
            // With a complete summary, a file with no current entry is no live document's.
            switch try reader.digestOnDisk(file.doc) {
            case .failure(let why)?: state.unreadable.append((file.doc, why.message))
            case .success(let digest)?:
                if let entry {
                    if digest != entry.object { state.pending.append((file.doc, .modified)) }
                } else {
                    state.pending.append((file.doc, .added))
                }
            case nil: break
            }
        }
        if liveFound < summary.documents {
            let onDisk = Set(walked.found.lazy.map(\.doc))
            for (doc, entry) in cache.entries where entry.wasCurrent && !onDisk.contains(doc) {
                reader.noteMissing(doc, rules: walked.rules, in: &state)
            }
        }
        state.sort()
        return FolderStatus(documents: summary.documents, revisions: summary.revisions, lastSeq: summary.lastSeq, disk: state)
    }

    /// Notes the live document `doc`, whose file a walk did not find: held back when its path
    /// cannot hold it or its file was never written here (`bases`), deleted otherwise; nothing
    /// when it is ignored and still there (no longer synced, but not deleted, as
    /// `scanAndRecord` says).
    func noteMissing(_ doc: DocumentID, rules: IgnoreRules, bases: [DocumentID: FileBase] = [:], in state: inout DiskState) {
        let path = layout.path(of: doc.rawValue)
        if rules.isIgnored(doc.rawValue, isDirectory: false), FileSystem.exists(path) { return }
        if let why = placementProblem(doc, path: path, live: true) {
            state.heldBack.append((doc, why))
        } else if bases[doc] == .nothing {
            state.heldBack.append((doc, notWrittenYet(doc)))  // a peer's new document, never written here
        } else {
            state.pending.append((doc, .deleted))
        }
    }

    /// Why `doc`'s file does not hold its current revision yet, as a reader can tell: its
    /// directory cannot be written, or the writer has not written it yet.
    func notWrittenYet(_ doc: DocumentID) -> String {
        let directory = FileSystem.dirname(of: doc.rawValue)
        // A directory not made yet is no refusal: the writer makes it.
        if access(directory.isEmpty ? root : layout.path(of: directory), W_OK | X_OK) != 0, errno != ENOENT {
            return Self.cannotBeWritten(directory, errno: errno)
        }
        return "a peer's revision is not written to its file yet (the agent or the next sync writes it)"
    }

    /// Compares every file with its document's current revision, without recording anything;
    /// from `survey` when the caller took one (the writer's own cache is newer than the file).
    public func diskState(survey: FolderSurvey? = nil) throws -> DiskState {
        let rules = localIgnoreRules()
        let (found, skipped) = try survey.map { ($0.found, $0.skipped) } ?? FolderScanner(root: root, rules: rules).scan(sorted: false)
        var state = DiskState(skipped: skipped)
        var liveOnDisk = 0
        // Files unchanged since they were recorded are not read, as a scan does (a reader,
        // such as `ferry status` beside no agent, loads the cache the writer left).
        let proven = survey?.proven ?? (isWritable ? statCache : StatCache.load(path: layout.statCacheFile)).provenObjects(found)
        // A file still holding the revision before a peer's, which could not be written yet
        // (a read-only directory; the agent keeps these in `heldBack`), is no change of the user's.
        let bases = isWritable ? fileBases : loadFileBases()
        func holdsItsBase(_ doc: DocumentID, _ digest: BlobDigest) -> Bool {
            guard case .revision(let rev)? = bases[doc], let object = index[doc]?.node(rev)?.object else { return false }
            return object == digest
        }
        for (file, held) in zip(found, proven) {
            let cur = current(file.doc)
            if let cur, !cur.deleted { liveOnDisk += 1 }
            if let cur, !cur.deleted, let held, held == cur.object { continue }
            if let held, holdsItsBase(file.doc, held) {
                state.heldBack.append((file.doc, notWrittenYet(file.doc)))
                continue
            }
            switch try digestOnDisk(file.doc) {
            case .failure(let why)?: state.unreadable.append((file.doc, why.message))
            case .success(let digest)?:
                if let cur, !cur.deleted, cur.object == digest { continue }
                if holdsItsBase(file.doc, digest) {
                    state.heldBack.append((file.doc, notWrittenYet(file.doc)))
                    continue
                }
                state.pending.append((file.doc, cur == nil || cur!.deleted ? .added : .modified))
            case nil: break
            }
        }
        // Every live document has its file (the common case) unless fewer were found: only
        // then are the missing ones looked for, through a set of what is there.
        if liveOnDisk < index.liveDocumentCount {
            let onDisk = Set(found.lazy.map(\.doc))
            for (doc, tree) in index.trees where tree.current.map({ !$0.deleted }) == true && !onDisk.contains(doc) {
                noteMissing(doc, rules: rules, bases: bases, in: &state)
            }
        }
        state.sort()
        return state
    }

    /// Drops the bodies of non-leaf revisions more than `keepDepth` generations below every
    /// leaf, rewrites the log atomically, and deletes the objects nothing needs any more. A
    /// pack that held a dropped body is written again with the lines still named (into new
    /// packs, before the log that names them is renamed into place), then removed, as is a pack
    /// no log line names.
    public func compact(keepDepth: Int = 20) throws -> CompactReport {
        precondition(isWritable)
        var report = CompactReport()
        var entries = try readLogEntries()
        var depths: [DocumentID: [RevisionID: Int]] = [:]
        var emptied: Set<UInt32> = []  // packs losing a line
        var dropped: [PackLocation: Int] = [:]  // lines no longer named, with their lengths
        for i in entries.indices where entries[i].object != nil {
            let e = entries[i]
            if depths[e.doc] == nil { depths[e.doc] = index[e.doc]?.depthFromLeaves() ?? [:] }
            guard let d = depths[e.doc]?[e.rev], d > keepDepth else { continue }
            if let pack = e.pack {
                emptied.insert(pack.pack)
                dropped[pack] = e.size + 1
            }
            entries[i].object = nil
            entries[i].pack = nil
            entries[i].compacted = true
            report.revisionsCompacted += 1
        }
        guard report.revisionsCompacted > 0 else { return report }
        // Objects still needed: bodies of kept revisions and the blobs their JSON references.
        var needed = Set<BlobDigest>()
        try objects.packs.closeCurrent()
        // Lines moved but not written when a kept body cannot be read are dropped.
        defer { objects.packs.abandonPending() }
        for i in entries.indices {
            guard let object = entries[i].object else { continue }
            // A kept body that cannot be read stops the compaction: the blobs it references
            // would otherwise look unneeded and be removed.
            let bytes: [UInt8]? = entries[i].kind == .json ? try objects.read(object, packedAt: entries[i].pack, size: entries[i].size) : nil
            if let pack = entries[i].pack {
                dropped[pack] = nil  // named by a kept revision too (a merge that kept one side's body)
                if emptied.contains(pack.pack), let bytes {
                    // Its line moves to a new pack.
                    entries[i].pack = try objects.packs.append(bytes, digest: object)
                }
            } else {
                needed.insert(object)
            }
            if let bytes {
                for ref in try JSONParser.parse(bytes).blobReferences() { needed.insert(ref.digest) }
            }
        }
        try objects.packs.writePending(sync: true)
        objects.packs.forgetAll()
        report.objectsRemoved += dropped.count
        report.bytesFreed += dropped.values.reduce(0, +)
        try log.rewrite(entries)
        try reloadIndex()
        let named = Set(entries.compactMap { $0.pack?.pack })
        for number in try objects.packs.numbers() where !named.contains(number) {
            try objects.packs.remove(number)
        }
        for digest in try objects.allObjects().objects where !needed.contains(digest) {
            let size = (try? FileSystem.lstat(objects.path(for: digest)))??.st_size ?? 0
            try objects.remove(digest)
            report.objectsRemoved += 1
            report.bytesFreed += Int(size)
        }
        return report
    }
}
