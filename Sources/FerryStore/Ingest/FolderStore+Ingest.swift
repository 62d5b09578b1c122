#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What reading one document's file found.
public enum IngestOutcome: Sendable, Equatable {
    /// A new revision was recorded.
    case recorded(LogEntry)
    /// The file's content is the current revision's.
    case unchanged
    /// The file is gone and its deletion was recorded (nil: it was not a live document).
    case deleted(LogEntry?)
    /// The file cannot be recorded now (invalid JSON with line:column, a missing blob); the
    /// last good revision stays current.
    case unreadable(String)
    /// The file changed while it was read; try again once it settles.
    case changing
    /// Not a regular file (symlink, device…): not a document.
    case notRegular(String)
}

extension FolderStore {
    /// Largest `.json` document read into memory; bigger ones are reported, not recorded.
    public static let maxJSONDocumentBytes = 64 << 20

    /// Reads `doc`'s file and records a revision when its content differs from the current
    /// one, or a deletion when the file is gone.
    @discardableResult
    public func ingest(_ doc: DocumentID) throws(StoreError) -> IngestOutcome {
        let path = layout.path(of: doc.rawValue)
        guard let st = try FileSystem.lstat(path) else {
            unreadable[doc] = nil
            statCache.set(doc, nil)
            return .deleted(try recordDeletion(doc))
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            unreadable[doc] = nil
            statCache.set(doc, nil)
            // A document replaced by a symlink or a directory is no longer a document here.
            _ = try recordDeletion(doc)
            return .notRegular("not a regular file")
        }
        let before = FileFingerprint(st)
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
            case .success(let bytes):
                guard FileFingerprint.of(path) == before else { return .changing }
                unreadable[doc] = nil
                let digest = BlobDigest.of(bytes)
                statCache.set(doc, StatCache.Entry(fingerprint: before, object: digest))
                if let cur = current(doc), !cur.deleted, cur.object == digest { return .unchanged }
                try objects.write(bytes)
                return try recordLocal(doc, object: digest, size: bytes.count).map(IngestOutcome.recorded) ?? .unchanged
            }
        case .file:
            let (digest, size) = try objects.importFile(at: path)
            guard FileFingerprint.of(path) == before, size == before.size else { return .changing }
            statCache.set(doc, StatCache.Entry(fingerprint: before, object: digest))
            return try recordLocal(doc, object: digest, size: size).map(IngestOutcome.recorded) ?? .unchanged
        }
    }

    /// Canonical bytes of a `.json` file, or why it cannot be recorded: "line L, column C: …".
    func readJSONBody(_ doc: DocumentID, path: String, size: Int) throws(StoreError) -> Result<[UInt8], JSONBodyError> {
        if size > Self.maxJSONDocumentBytes {
            return .failure(JSONBodyError("larger than \(Self.maxJSONDocumentBytes >> 20) MiB; JSON documents must be smaller"))
        }
        let raw: [UInt8]
        do { raw = try FileSystem.readFile(path) } catch where error.errno == ENOENT {
            return .failure(JSONBodyError("vanished while being read"))
        }
        let value: JSONValue
        do { value = try JSONParser.parse(raw) } catch {
            return .failure(JSONBodyError("\(error)"))
        }
        guard case .object = value else {
            return .failure(JSONBodyError("line 1, column 1: the top level must be a JSON object"))
        }
        do {
            for ref in try value.blobReferences() where !objects.contains(ref.digest) {
                return .failure(JSONBodyError("references blob \(ref.digest), which is not in .ferry/objects"))
            }
        } catch {
            return .failure(JSONBodyError("invalid blob reference: \(error)"))
        }
        return .success(value.canonicalBytes)
    }

    /// The digest the file would have as a revision body, without storing anything (for
    /// `status` and `verify`); nil when missing or unreadable.
    public func digestOnDisk(_ doc: DocumentID) throws(StoreError) -> Result<BlobDigest, JSONBodyError>? {
        let path = layout.path(of: doc.rawValue)
        guard let st = try FileSystem.lstat(path), st.st_mode & S_IFMT == S_IFREG else { return nil }
        switch doc.kind {
        case .json:
            return try readJSONBody(doc, path: path, size: Int(st.st_size)).map { BlobDigest.of($0) }
        case .file:
            let fd = try FileSystem.open(path, O_RDONLY)
            defer { close(fd) }
            return .success(try ObjectStore.hash(fd, path: path))
        }
    }

    /// Records every change in the folder: new and changed files, and deletions of documents
    /// whose files are gone. Used by `init`, `scan`, and the agent's startup scan (which walks
    /// the folder on another thread while the log is read, and passes the walk in).
    public func scanAndRecord(rules: IgnoreRules? = nil, prescanned: (found: [FolderScanner.Found], skipped: [FolderScanner.Skipped])? = nil) throws -> ScanReport {
        let activeRules = rules ?? IgnoreRules.load(root: root)
        let (found, skipped) = try prescanned ?? FolderScanner(root: root, rules: activeRules).scan()
        var report = ScanReport(skipped: skipped.filter { $0.reason != FolderScanner.interruptedWrite })
        // A writer killed between writing a temp file and renaming it left this: the lock
        // proves no writer owns it now.
        for leftover in skipped where leftover.reason == FolderScanner.interruptedWrite && isWritable {
            unlink(layout.path(of: leftover.path))
        }
        var seen = Set<DocumentID>()
        let now = wallClockNanoseconds()
        for file in found {
            seen.insert(file.doc)
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
        // (sorting every live document was 5 % of a 100,000-document restart's profile).
        let missing = index.trees.compactMap { doc, tree -> DocumentID? in
            guard !seen.contains(doc), let current = tree.current, !current.deleted else { return nil }
            return doc
        }
        for doc in missing.sorted() {
            // A file that is now ignored is no longer synced, but it was not deleted: recording
            // a deletion would delete it on every peer. Only a file that is gone is a deletion.
            if activeRules.isIgnored(doc.rawValue, isDirectory: false), FileSystem.exists(layout.path(of: doc.rawValue)) {
                continue
            }
            if let e = try recordDeletion(doc) { report.recorded.append(e) }
            statCache.set(doc, nil)
        }
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

    mutating func add(_ doc: DocumentID, _ outcome: IngestOutcome) {
        switch outcome {
        case .recorded(let e): recorded.append(e)
        case .deleted(let e?): recorded.append(e)
        case .unreadable(let why): unreadable.append((doc, why))
        case .changing: unreadable.append((doc, "kept changing while being read"))
        case .notRegular(let why): skipped.append(.init(path: doc.rawValue, reason: why))
        case .unchanged, .deleted(nil): break
        }
    }
}
