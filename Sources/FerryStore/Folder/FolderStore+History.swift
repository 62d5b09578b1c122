#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What `FolderStore.restore` did.
public enum RestoreOutcome: Sendable, Equatable {
    /// The body was written and recorded as this new revision (the folder was opened as its writer).
    case recorded(LogEntry)
    /// The file already held that body: nothing new to record.
    case unchanged
    /// The body was written to the file only: the writer holding the lock (the agent) records it.
    case written
}

extension FolderStore {
    /// The document and revision `target` names (`DOC` for its current revision, `DOC@REV`
    /// with any `RevisionSelector` form); `selected` tells whether a revision was named.
    public func revision(named target: String) throws(StoreError) -> (doc: DocumentID, node: RevisionNode, selected: Bool) {
        let (name, selector) = RevisionSelector.split(target) { text in
            (try? DocumentID(text)).map { index[$0] != nil } ?? false
        }
        let doc: DocumentID
        do { doc = try DocumentID(name) } catch { throw StoreError(.invalidInput, "\(error)") }
        guard let tree = index[doc] else { throw StoreError(.notFound, "no document \(doc) in \(root)") }
        guard let selector else {
            guard let current = tree.current else { throw StoreError(.notFound, "no document \(doc) in \(root)") }
            return (doc, current, false)
        }
        return (doc, try revision(of: doc, selector), true)
    }

    /// The revision of `doc` that `selector` (a `RevisionSelector`'s text) names.
    public func revision(of doc: DocumentID, _ selector: String) throws(StoreError) -> RevisionNode {
        guard let tree = index[doc] else { throw StoreError(.notFound, "no document \(doc) in \(root)") }
        do {
            return try RevisionSelector(selector).resolve(in: tree, doc: doc)
        } catch {
            throw StoreError(error.kind == .invalid ? .invalidInput : .notFound, error.message)
        }
    }

    /// Puts `node`'s body back in `doc`'s file, atomically (a temp file beside it, renamed
    /// over it), JSON pretty-printed as a peer's revision is written. Opened as the writer, it
    /// first records any edit the file holds that is not yet in the log (restoring never
    /// loses one), then records the restored body the way a scan records a save: a child of
    /// the revision the file held, so that history only grows and peers take it like any
    /// edit. Opened read-only (an agent holds the lock), it only writes the file: the agent's
    /// watcher records it, and a second writer must not append to the log meanwhile.
    public func restore(_ doc: DocumentID, to node: RevisionNode) throws(StoreError) -> RestoreOutcome {
        if node.deleted {
            throw StoreError(.invalidInput, "\(doc)@\(node.rev) is a deletion, not a body to restore; pick an earlier revision (ferry log \(doc))")
        }
        guard let object = node.object else {
            throw StoreError(.notFound, "the body of \(doc)@\(node.rev) is not stored here (compacted, or history learnt from a peer)")
        }
        let path = layout.path(of: doc.rawValue)
        if let why = layout.placementProblem(of: doc.rawValue) ?? ignoredHere(doc) {
            throw StoreError(.invalidInput, "cannot write \(doc): \(why)")
        }
        if let st = try FileSystem.lstat(path), st.st_mode & S_IFMT != S_IFREG {
            throw StoreError(.invalidInput, "cannot write \(doc): something that is not a regular file has its name")
        }
        if isWritable {
            if case .unreadable(let why) = try ingest(doc) {
                logger.notice("restoring over a file that could not be recorded", metadata: ["doc": "\(doc)", "why": "\(why)"])
            }
        }
        let body: [UInt8]? = doc.kind == .json ? try jsonBody(of: node, doc: doc).prettyBytes : nil
        try writeFileAtomically(path, object: object, body: body)
        guard isWritable else { return .written }
        defer { try? saveStatCache() }
        switch try ingest(doc) {
        case .recorded(let entry): return .recorded(entry)
        case .unchanged: return .unchanged
        case .unreadable(let why): throw StoreError(.invalidInput, "\(doc) was written but cannot be recorded: \(why)")
        case .changing: throw StoreError(.io, "\(doc) was written but changed while being recorded; run `ferry scan`")
        case .deleted, .missing, .notRegular: throw StoreError(.io, "\(doc) was written but is not there now")
        }
    }

    /// Writes `body` (or, when nil, the object's bytes streamed) to a temp file in `path`'s
    /// directory, fsyncs it and renames it over `path`: a reader, the agent's watcher
    /// included, sees the old file or the whole new one, never a half-written one.
    private func writeFileAtomically(_ path: String, object: BlobDigest, body: [UInt8]?) throws(StoreError) {
        let dir = FileSystem.dirname(of: path)
        try FileSystem.makeDirectories(dir)  // a deleted document's directory may be gone with it
        let temp = FolderScanner.temporaryPath(beside: path)
        let fd = try FileSystem.createNew(temp, mode: FileSystem.modeForTemp(replacing: path))
        do throws(StoreError) {
            defer { close(fd) }
            if let body {
                try FileSystem.writeAll(fd, body, path: temp)
            } else {
                let input = try objects.open(object)
                defer { close(input) }
                try FileSystem.copyAll(from: input, to: fd, path: temp)
            }
            try FileSystem.sync(fd, path: temp)
            if let there = (try? FileSystem.lstat(path)) ?? nil { FileSystem.givePermissions(of: there, to: temp) }
            try FileSystem.rename(temp, path)
        } catch {
            unlink(temp)
            throw error
        }
        try FileSystem.syncDirectory(dir)
    }
}
