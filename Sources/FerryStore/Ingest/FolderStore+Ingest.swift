#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What reading one document's file found.
public enum IngestOutcome: Sendable, Equatable {
    /// A new revision was recorded.
    case recorded(LogEntry)
    /// The file's content is the current revision's (or, when a peer's revision could not be
    /// written to it before, the revision it held, and that peer's revision is written now).
    case unchanged
    /// The file is gone and its deletion was recorded (nil: it was not a live document).
    case deleted(LogEntry?)
    /// The file is not there now and nothing was recorded (`whenMissing: .wait`).
    case missing
    /// The file cannot be recorded now (invalid JSON with line:column, a missing blob); the
    /// last good revision stays current.
    case unreadable(String)
    /// The file changed while it was read; try again once it settles.
    case changing
    /// Not a regular file (symlink, device…): not a document.
    case notRegular(String)
}

/// What `ingest` does when a document's file is not there.
public enum MissingFile: Sendable {
    /// Record the deletion now (nothing watches the folder, or the file has stayed away).
    case recordDeletion
    /// Record nothing: an editor saving by rename leaves no file for a moment, and the watcher
    /// reports the path again once it has stayed away (`FolderWatcher`).
    case wait
}

extension FolderStore {
    /// Largest `.json` document read into memory; bigger ones are reported, not recorded.
    public static let maxJSONDocumentBytes = 64 << 20

    /// Reads `doc`'s file and records a revision when its content differs from the revision
    /// the file held (a child of that one: see `fileRevision`), or a deletion when the file
    /// is gone. A save that opens a conflict (its parent is not the current revision) is
    /// merged at once and the merge written back to the file.
    @discardableResult
    public func ingest(_ doc: DocumentID, whenMissing: MissingFile = .recordDeletion) throws(StoreError) -> IngestOutcome {
        var read: FileFingerprint?
        let outcome = try readAndRecord(doc, whenMissing: whenMissing, showCurrent: true, read: &read)
        if objects.batch == nil { try saveFileBasesIfChanged() }
        return outcome
    }

    /// `ingest` for a caller that writes the current revision to the file itself afterwards
    /// (`applyRemote`, `resolvePendingConflicts`): a file that still holds the revision it held
    /// when a peer's revision arrived is left for the caller. Returns, with the outcome, the
    /// fingerprint of the file whose content was read: the caller writes over the file only
    /// if it is still that one (a save that lands after the read is never overwritten; a
    /// fresh `stat` taken after the read would take such a save for the content recorded).
    /// A few tries while the file changes under the read.
    func ingestBeforeWriting(_ doc: DocumentID, whenMissing: MissingFile) throws(StoreError) -> (IngestOutcome, FileFingerprint?) {
        var read: FileFingerprint?
        var outcome = try readAndRecord(doc, whenMissing: whenMissing, showCurrent: false, read: &read)
        for _ in 0..<3 where outcome == .changing { outcome = try readAndRecord(doc, whenMissing: whenMissing, showCurrent: false, read: &read) }
        return (outcome, read)
    }

    private func readAndRecord(_ doc: DocumentID, whenMissing: MissingFile, showCurrent: Bool,
                               read: inout FileFingerprint?) throws(StoreError) -> IngestOutcome {
        read = nil
        let path = layout.path(of: doc.rawValue)
        if let why = layout.placementProblem(of: doc.rawValue, knownDirectories: &directoriesFoundInBatch) {
            // Never read through a link or past a file: what is there is not this document,
            // and its absence is not a deletion anyone made.
            heldBack[doc] = why
            return .notRegular(why)
        }
        if let why = ignoredHere(doc) {
            // What the folder ignores is not recorded, whoever asks (a peer's revision arriving
            // for it reads the file first): its file is the user's alone.
            heldBack[doc] = why
            return .notRegular(why)
        }
        guard let st = try FileSystem.lstat(path) else {
            unreadable[doc] = nil
            // Only a file that should be there (it held a live revision) can be away for a moment.
            if let held = fileRevision(doc).flatMap({ index[doc]?.nodes[$0] }), !held.deleted {
                // The group's look at the directories above may be milliseconds old: one swapped
                // for a link since hides the file, which is no deletion. Look again before any.
                if directoriesFoundInBatch != nil, let why = layout.placementProblem(of: doc.rawValue) {
                    heldBack[doc] = why
                    return .notRegular(why)
                }
                if whenMissing == .wait { return .missing }
            }
            forgetWhatTheFileHeld(doc)
            return .deleted(try recordMissing(doc))
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            unreadable[doc] = nil
            forgetWhatTheFileHeld(doc)
            // A document replaced by a symlink or a directory is no longer a document here.
            _ = try recordMissing(doc)
            return .notRegular("not a regular file")
        }
        let before = FileFingerprint(st)
        let digest: BlobDigest, size: Int
        var saved: [UInt8]?
        switch doc.kind {
        case .json:
            switch try readJSONBody(doc, path: path, size: Int(st.st_size)) {
            case .failure(let failure):
                let message = failure.message
                if unreadable[doc] != message {
                    logger.warning("unreadable JSON document", metadata: ["doc": "\(doc)", "error": "\(message)"])
                }
                unreadable[doc] = message
                return .unreadable(message)
            case .success(let body):
                guard FileFingerprint.of(path) == before else { return .changing }
                unreadable[doc] = nil
                (digest, size, saved) = (body.digest, body.size, body.canonical)
            }
        case .file:
            do { (digest, size) = try objects.importFile(at: path) } catch where error.errno == EACCES {
                if unreadable[doc] != Self.permissionDenied {
                    logger.warning("unreadable file", metadata: ["doc": "\(doc)", "error": "\(Self.permissionDenied)"])
                }
                unreadable[doc] = Self.permissionDenied
                return .unreadable(Self.permissionDenied)
            }
            guard FileFingerprint.of(path) == before, size == before.size else { return .changing }
            unreadable[doc] = nil
        }
        statCache.set(doc, StatCache.Entry(fingerprint: before, object: digest))
        read = before
        if let cur = current(doc), !cur.deleted, cur.object == digest {
            fileHolds(doc, nil)
            return .unchanged
        }
        let base = fileRevision(doc)
        if let base, base != current(doc)?.rev, let node = index[doc]?.nodes[base], !node.deleted, node.object == digest {
            // The file still holds what it held when a peer's revision arrived: that revision
            // is written now (unless its conflict waits for the end of the peer's pass).
            if showCurrent && !unresolved.contains(doc) { _ = try materialize(doc, expecting: before) }
            return .unchanged
        }
        if doc.kind == .json {
            // A text remembered (`KnownFileText`) names an object that is stored: read it back.
            if let bytes = saved { try objects.writeBody(bytes, digest: digest) } else { saved = try objects.read(digest) }
        }
        let parent = parentForSave(doc, saved ?? [], base: base)
        let rev = RevisionID.compute(parent: parent, deleted: false, body: digest)
        if index[doc]?.nodes[rev].map({ $0.seq != 0 }) == true {
            // The very revision someone already made (the same save from the same parent, on
            // another peer): the file holds it, and shows the current revision from now on.
            fileHolds(doc, rev)
            if showCurrent && !unresolved.contains(doc) && current(doc)?.rev != rev { _ = try materialize(doc, expecting: before) }
            return .unchanged
        }
        guard let entry = try recordLocal(doc, object: digest, size: size, parent: parent) else { return .unchanged }
        recentWrites[doc] = nil
        lastLocalSave[doc] = clock()
        forgetExpired(lastLocalSave[doc]!)
        fileHolds(doc, entry.rev)
        if entry.rev != current(doc)?.rev || index[doc]?.hasConflict == true {
            // Made from a revision other than the current one: merge, and show the merge.
            _ = try resolveConflicts(doc)
            if showCurrent && current(doc)?.rev != entry.rev { _ = try materialize(doc, expecting: before) }
        }
        return .recorded(entry)
    }

    /// Records the deletion of what `doc`'s file held, now that the file is gone; when a live
    /// revision still stands (a peer's, which the file never showed), it is written back.
    private func recordMissing(_ doc: DocumentID) throws(StoreError) -> LogEntry? {
        let entry = try recordDeletion(doc)
        if entry != nil { recentWrites[doc] = nil }
        if let cur = current(doc), !cur.deleted, !unresolved.contains(doc) {
            fileBases[doc] = entry.map { .revision($0.rev) } ?? fileBases[doc]
            _ = try materialize(doc, expecting: nil)
        } else if current(doc)?.deleted ?? true {
            fileBases[doc] = nil
        }
        return entry
    }

    /// Drops what the stat cache and the remembered texts say `doc`'s file held: it is gone,
    /// or no longer a regular file.
    func forgetWhatTheFileHeld(_ doc: DocumentID) {
        statCache.set(doc, nil)
        knownTexts[doc] = nil
    }

    /// Why a file this user may not read is not recorded (it is read again when its mode
    /// changes: the watcher reports `chmod`).
    static let permissionDenied = "permission denied: this user cannot read it"

    /// A `.json` file read as a body: its object and canonical size, and its canonical bytes
    /// unless the file holds a text remembered (`KnownFileText`), whose object is stored.
    struct JSONBodyRead {
        var digest: BlobDigest
        var size: Int
        var canonical: [UInt8]?
    }

    /// A `.json` file read as a body, or why it cannot be recorded: "line L, column C: …".
    func readJSONBody(_ doc: DocumentID, path: String, size: Int) throws(StoreError) -> Result<JSONBodyRead, JSONBodyError> {
        if size > Self.maxJSONDocumentBytes {
            return .failure(JSONBodyError("larger than \(Self.maxJSONDocumentBytes >> 20) MiB; JSON documents must be smaller"))
        }
        let raw: [UInt8]
        do { raw = try FileSystem.readFile(path) } catch where error.errno == ENOENT {
            return .failure(JSONBodyError("vanished while being read"))
        } catch where error.errno == EACCES {
            return .failure(JSONBodyError(Self.permissionDenied))
        }
        // The file's bytes are hashed once, to look for a remembered text and to remember this one.
        let text = raw.count >= KnownFileText.minimumSize ? BlobDigest.of(raw) : nil
        if let text, let known = knownTexts[doc], known.text == text,
           objects.contains(known.object), known.blobs.allSatisfy(objects.hasFile) {
            return .success(JSONBodyRead(digest: known.object, size: known.size, canonical: nil))
        }
        let canonical: [UInt8], blobs: [BlobDigest], prettySize: (_ limit: Int) -> Int
        // Most files: their canonical bytes written straight from the text, with what is needed
        // of the value found as they are written, without a tree. The parser takes the rest,
        // and says what is wrong with a file that is not a body.
        if let (bytes, facts) = raw.withUnsafeBufferPointer(JSONCanonicalizer.canonicalObject(of:)) {
            (canonical, blobs, prettySize) = (bytes, facts.blobReferences.map(\.digest), { _ in facts.prettySize })
        } else {
            let value: JSONValue
            do { value = try JSONParser.parse(raw) } catch {
                return .failure(JSONBodyError("\(error)"))
            }
            guard case .object = value else {
                return .failure(JSONBodyError("line 1, column 1: the top level must be a JSON object"))
            }
            do { blobs = try value.blobReferences().map(\.digest) } catch {
                return .failure(JSONBodyError("invalid blob reference: \(error)"))
            }
            canonical = value.canonicalBytes
            prettySize = { [canonical] in value.prettySize(canonicalCount: canonical.count, limit: $0) }
        }
        for blob in blobs where !objects.hasFile(blob) {
            return .failure(JSONBodyError("references blob \(blob), which is not in .ferry/objects"))
        }
        if let why = Self.jsonSizeRefusal(canonicalCount: canonical.count, prettySize: prettySize) { return .failure(JSONBodyError(why)) }
        let read = JSONBodyRead(digest: BlobDigest.of(canonical), size: canonical.count, canonical: canonical)
        knownTexts[doc] = text.map { KnownFileText(text: $0, object: read.digest, size: read.size, blobs: blobs) }
        return .success(read)
    }

    /// The digest the file would have as a revision body, without storing anything (for
    /// `status` and `verify`); nil when missing or unreadable.
    public func digestOnDisk(_ doc: DocumentID) throws(StoreError) -> Result<BlobDigest, JSONBodyError>? {
        try digest(of: doc, at: layout.path(of: doc.rawValue))
    }

    /// `digestOnDisk` of the file at `path` read as a body of `doc`.
    func digest(of doc: DocumentID, at path: String) throws(StoreError) -> Result<BlobDigest, JSONBodyError>? {
        guard layout.placementProblem(of: doc.rawValue) == nil, let st = try FileSystem.lstat(path), st.st_mode & S_IFMT == S_IFREG else { return nil }
        switch doc.kind {
        case .json:
            return try readJSONBody(doc, path: path, size: Int(st.st_size)).map(\.digest)
        case .file:
            let fd: Int32
            do { fd = try FileSystem.open(path, O_RDONLY) } catch where error.errno == EACCES {
                return .failure(JSONBodyError(Self.permissionDenied))
            }
            defer { close(fd) }
            return .success(try ObjectStore.hash(fd, path: path))
        }
    }

    /// Records every change in the folder: new and changed files, and deletions of documents
    /// whose files are gone. Used by `init`, `scan`, and the agent's startup scan (which walks
    /// the folder on another thread while the log is read, and passes the walk in).
    /// `removingLeftovers`: ferry's temp files found are a killed writer's, and removed; not so
    /// for a rescan while this process's sessions write theirs (a blob's copy lives as long as
    /// its fetch).
    public func scanAndRecord(rules: IgnoreRules? = nil, prescanned: (found: [FolderScanner.Found], skipped: [FolderScanner.Skipped])? = nil,
                              removingLeftovers: Bool = true) throws -> ScanReport {
        let activeRules = rules ?? IgnoreRules.load(root: root)
        let (found, skipped) = try prescanned ?? FolderScanner(root: root, rules: activeRules).scan()
        var report = ScanReport(skipped: skipped.filter { $0.reason != FolderScanner.interruptedWrite })
        // A writer killed between writing a temp file and renaming it left this: the lock
        // proves no other process owns it now.
        for leftover in skipped where leftover.reason == FolderScanner.interruptedWrite && isWritable && removingLeftovers {
            unlink(layout.path(of: leftover.path))
        }
        let now = wallClockNanoseconds()
        for file in found {
            // Unchanged since it was last recorded: no need to read it (git's index trick).
            if let cur = current(file.doc), !cur.deleted,
               statCache.proves(file.doc, fingerprint: file.fingerprint, current: cur.object, now: now) {
                unreadable[file.doc] = nil
                continue
            }
            var outcome = try ingest(file.doc)
            var attempts = 0
            while outcome == .changing && attempts < 20 {
                attempts += 1
                usleep(50_000)
                outcome = try ingest(file.doc)
            }
            report.add(file.doc, outcome)
        }
        // Documents live in the index whose file was not found, sorted among themselves only
        // (sorting every live document was 5 % of a 100,000-document restart's profile). A path
        // is found once, so when as many live documents were found as there are, none is
        // missing, and the set of what was found (6 MB at 100,000 documents, at the moment the
        // index and the stat cache are loaded) is not built.
        let liveFound = found.reduce(0) { count, file in count + (current(file.doc).map { !$0.deleted } == true ? 1 : 0) }
        var missing: [DocumentID] = []
        if liveFound < index.liveDocumentCount {
            let seen = Set(found.lazy.map(\.doc))
            missing = index.trees.compactMap { doc, tree -> DocumentID? in
                guard !seen.contains(doc), let current = tree.current, !current.deleted else { return nil }
                return doc
            }
        }
        for doc in missing.sorted() {
            // A file that is now ignored is no longer synced, but it was not deleted: recording
            // a deletion would delete it on every peer. Only a file that is gone is a deletion.
            if activeRules.isIgnored(doc.rawValue, isDirectory: false), FileSystem.exists(layout.path(of: doc.rawValue)) {
                continue
            }
            report.add(doc, try ingest(doc, whenMissing: deletionsAwaitWatcher ? .wait : .recordDeletion))
        }
        // Conflicts left open by a pass that was cut short (a crash, a lost connection).
        for (doc, tree) in index.trees where tree.hasConflict { unresolved.insert(doc) }
        report.recorded += try resolvePendingConflicts()
        try saveStatCache()
        return report
    }
}

/// Why a `.json` file is not recorded.
public struct JSONBodyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// "line L, column C: message" or another single sentence.
    public let message: String
    init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// What a scan recorded and found.
public struct ScanReport: Sendable {
    /// Revisions recorded.
    public var recorded: [LogEntry] = []
    /// Files not recorded, with why.
    public var unreadable: [(doc: DocumentID, reason: String)] = []
    /// Paths that are not synced.
    public var skipped: [FolderScanner.Skipped]
    /// Documents whose files were not found and whose deletion waits for the watcher
    /// (`FolderStore.deletionsAwaitWatcher`).
    public var missing: [DocumentID] = []

    mutating func add(_ doc: DocumentID, _ outcome: IngestOutcome) {
        switch outcome {
        case .recorded(let e): recorded.append(e)
        case .deleted(let e?): recorded.append(e)
        case .missing: missing.append(doc)
        case .unreadable(let why): unreadable.append((doc, why))
        case .changing: unreadable.append((doc, "kept changing while being read"))
        case .notRegular(let why): skipped.append(.init(path: doc.rawValue, reason: why))
        case .unchanged, .deleted(nil): break
        }
    }
}
