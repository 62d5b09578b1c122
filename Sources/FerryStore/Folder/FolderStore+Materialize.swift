#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What `materialize` did to a document's file.
public enum MaterializeOutcome: Sendable, Equatable {
    /// The file was written (or created).
    case written
    /// The file was removed (a deletion).
    case removed
    /// The file already held the current revision's content.
    case upToDate
    /// Left alone: the file changed since it was last recorded, or it does not parse; the
    /// user's bytes win until they are recorded.
    case keptLocalEdit
}

extension FolderStore {
    /// Applies a peer's revision: records any unrecorded local edit of the document first, so
    /// that it takes part in conflict resolution instead of being overwritten; inserts the
    /// revision (and resolves conflicts); then writes the current revision to disk.
    /// `parsedBody` is the JSON value of `incoming.object` when the caller has it (it wrote the
    /// object from that value's canonical bytes): the store then neither reads nor parses it
    /// again, to check it or to write the file.
    @discardableResult
    public func applyRemote(_ incoming: IncomingRevision, parsedBody: JSONValue? = nil) throws(StoreError) -> [LogEntry] {
        let doc = incoming.doc
        if index[doc]?.nodes[incoming.rev].map({ $0.seq != 0 }) == true { return [] }
        var outcome = try ingest(doc)
        for _ in 0..<3 where outcome == .changing { outcome = try ingest(doc) }
        // No file a moment ago (the common case when receiving a new document): no second stat.
        let fingerprint: FileFingerprint?
        if case .deleted = outcome { fingerprint = nil } else { fingerprint = FileFingerprint.of(layout.path(of: doc.rawValue)) }
        let entries = try insertRemote(incoming, parsedBody: parsedBody)
        if case .unreadable = outcome { return entries }
        if outcome == .changing { return entries }
        let known = parsedBody.flatMap { body in incoming.object.map { (object: $0, body: body) } }
        _ = try materialize(doc, expecting: fingerprint, knownBody: known)
        return entries
    }

    /// Makes the file of `doc` show its current revision, atomically (temp file in the same
    /// directory, fsync, rename, fsync the directory). `expecting` is the file's fingerprint
    /// when its content was last recorded; if the file changed since, it is left alone.
    /// `knownBody` is a JSON body the caller already has parsed, with its object's digest; it
    /// is used when that is the current revision's body.
    public func materialize(_ doc: DocumentID, expecting: FileFingerprint?,
                            knownBody: (object: BlobDigest, body: JSONValue)? = nil) throws(StoreError) -> MaterializeOutcome {
        let path = layout.path(of: doc.rawValue)
        guard FileFingerprint.of(path) == expecting else { return .keptLocalEdit }
        guard let current = current(doc), !current.deleted else {
            guard expecting != nil else { return .upToDate }
            statCache.set(doc, nil)
            try FileSystem.unlink(path)
            if let batch = objects.batch { batch.filesWritten = true } else { try FileSystem.syncDirectory(FileSystem.dirname(of: path)) }
            removeEmptyDirectories(above: doc)
            return .removed
        }
        if expecting != nil, case .success(let digest)? = try? digestOnDisk(doc), digest == current.object { return .upToDate }
        let dir = FileSystem.dirname(of: path)
        try FileSystem.makeDirectories(dir)
        let temp = dir + "/.ferry-tmp-" + FileSystem.randomSuffix()
        let fd = try FileSystem.open(temp, O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        do {
            defer { close(fd) }
            switch doc.kind {
            case .json:
                let body = knownBody?.object == current.object ? knownBody!.body : try jsonBody(of: current, doc: doc)
                try FileSystem.writeAll(fd, body.prettyBytes, path: temp)
            case .file:
                try copyObject(current.object!, to: fd, path: temp)
            }
            // In a batch, the batch's syncfs (before its log lines) makes the file durable.
            if let batch = objects.batch { batch.filesWritten = true } else { try FileSystem.sync(fd, path: temp) }
            // Last look before the rename: an edit that landed meanwhile wins.
            guard FileFingerprint.of(path) == expecting else {
                unlink(temp)
                return .keptLocalEdit
            }
            try FileSystem.rename(temp, path)
        } catch {
            unlink(temp)
            throw error
        }
        if objects.batch == nil { try FileSystem.syncDirectory(dir) }
        if let written = FileFingerprint.of(path), let object = current.object {
            statCache.set(doc, StatCache.Entry(fingerprint: written, object: object))
        }
        return .written
    }

    private func copyObject(_ digest: BlobDigest, to out: Int32, path: String) throws(StoreError) {
        let input = try objects.open(digest)
        defer { close(input) }
        try FileSystem.copyAll(from: input, to: out, path: path)
    }

    /// Removes the directories a deletion left empty, up to (not including) the folder.
    func removeEmptyDirectories(above doc: DocumentID) {
        var rel = FileSystem.dirname(of: doc.rawValue)
        while !rel.isEmpty {
            if rmdir(layout.path(of: rel)) != 0 { break }
            rel = FileSystem.dirname(of: rel)
        }
    }
}
