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
    /// Not written: the document cannot be put at its path here (`FolderStore.heldBack`).
    case heldBack(String)
}

extension FolderStore {
    /// Applies a peer's revision: records any unrecorded save of the document first (as a
    /// child of the revision its file held), so that it takes part in conflict resolution
    /// instead of being overwritten; inserts the revision (and resolves conflicts); then
    /// writes the current revision to disk.
    /// `parsedBody` is the JSON value of `incoming.object` when the caller has it (it wrote the
    /// object from that value's canonical bytes): the store then neither reads nor parses it
    /// again, to check it or to write the file. `bodyChecked`: as in `insertRemote`.
    /// `preparedFile` is a temp file beside the document already holding the body
    /// pretty-printed (`SharedStore.prepare`): it is renamed into place if the revision becomes
    /// current, and removed otherwise. `settleFile: false` only inserts the revision (a later
    /// revision of the same document in the same group will settle the file); `resolve:
    /// false` leaves a conflict for `resolvePendingConflicts`, and its file as it is until then.
    @discardableResult
    public func applyRemote(_ incoming: IncomingRevision, parsedBody: JSONValue? = nil, bodyChecked: Bool = false,
                            settleFile: Bool = true, resolve: Bool = true) throws(StoreError) -> [LogEntry] {
        try applyRemote(incoming, parsedBody: parsedBody, bodyChecked: bodyChecked, preparedFile: nil, settleFile: settleFile, resolve: resolve)
    }

    /// `applyRemote` with the body's file already written beside the document (`SharedStore`).
    func applyRemote(_ incoming: IncomingRevision, parsedBody: JSONValue?, bodyChecked: Bool,
                     preparedFile: PreparedFile?, settleFile: Bool, resolve: Bool) throws(StoreError) -> [LogEntry] {
        let entries = try applyRemoteRevision(incoming, parsedBody: parsedBody, bodyChecked: bodyChecked, preparedFile: preparedFile,
                                              settleFile: settleFile, resolve: resolve)
        if objects.batch == nil { try saveFileBasesIfChanged() }
        return entries
    }

    private func applyRemoteRevision(_ incoming: IncomingRevision, parsedBody: JSONValue?, bodyChecked: Bool,
                                     preparedFile: PreparedFile?, settleFile: Bool, resolve: Bool) throws(StoreError) -> [LogEntry] {
        let doc = incoming.doc
        defer { if let preparedFile { dropUnlessPending(preparedFile.temp, of: doc) } }
        if index[doc]?.nodes[incoming.rev].map({ $0.seq != 0 }) == true { return [] }
        guard settleFile else { return try insertRemote(incoming, parsedBody: parsedBody, bodyChecked: bodyChecked, resolve: resolve) }
        // The document's file from an earlier revision in this batch is not in place yet; the
        // ingest below must see it, so the batch commits first (rare: a batch holds one
        // revision per document unless a peer sends several in a row).
        if objects.batch?.pendingFiles[layout.path(of: doc.rawValue)] != nil { try flushBatch() }
        let known = parsedBody.flatMap { body in incoming.object.map { (object: $0, body: body) } }
        let prepared = preparedFile.flatMap { file in incoming.object.map { (object: $0, file: file) } }
        // Even for a document the folder never had, the file is looked for: one the user just
        // created (during a one-shot sync nothing watches the folder) is recorded first, so
        // that the two creations are merged as a conflict rather than one hiding the other.
        let whenMissing: MissingFile = deletionsAwaitWatcher ? .wait : .recordDeletion
        // No file a moment ago (the common case when receiving a new document): no second
        // lookup, here or in `materialize`; the rename at install fails if one appeared since.
        let (outcome, fingerprint) = try ingestBeforeWriting(doc, whenMissing: whenMissing)
        let entries = try insertRemote(incoming, parsedBody: parsedBody, bodyChecked: bodyChecked, resolve: resolve)
        // The file keeps what it holds until the user's next save or the end of the conflict.
        if unresolved.contains(doc) { return entries }
        switch outcome {
        case .notRegular: try holdBackOrWrite(doc); return entries
        case .unreadable, .changing, .missing: return entries
        default: break
        }
        _ = try materialize(doc, expecting: fingerprint, knownBody: known, preparedFile: prepared, lookedJustNow: fingerprint == nil)
        return entries
    }

    /// After the look before writing found something that is not a file at `doc`'s name (a
    /// directory, a link): holds the live current revision back (recorded, not written, and
    /// listed by `status` until it moves). Where that has gone since, the file is written (a
    /// file that took the name meanwhile is the user's, and stays); a deletion is not held back.
    func holdBackOrWrite(_ doc: DocumentID) throws(StoreError) {
        if let why = placementProblem(doc, path: layout.path(of: doc.rawValue)) {
            noteHeldBack(doc, why)
        } else {
            heldBack[doc] = nil
            _ = try materialize(doc, expecting: nil)
        }
    }

    /// Notes why `doc` is not written here (`heldBack`), with a warning the first time.
    func noteHeldBack(_ doc: DocumentID, _ why: String) {
        if heldBack[doc] != why { logger.warning("a peer's revision is held back", metadata: ["doc": "\(doc)", "why": "\(why)"]) }
        heldBack[doc] = why
    }

    /// Removes a prepared temp file of `doc` unless the open batch is to rename it into place.
    func dropUnlessPending(_ temp: String, of doc: DocumentID) {
        if objects.batch?.pendingFiles[layout.path(of: doc.rawValue)]?.temp != temp { unlink(temp) }
    }

    /// Makes the file of `doc` show its current revision, atomically (temp file in the same
    /// directory, fsync, rename, fsync the directory). `expecting` is the file's fingerprint
    /// when its content was last recorded; if the file changed since, it is left alone.
    /// `knownBody` is a JSON body the caller already has parsed, with its object's digest; it
    /// is used when that is the current revision's body.
    ///
    /// In a batch the temp file is written without fsync and renamed when the batch commits,
    /// after the batch's first `syncfs` (see `DurabilityBatch`); `.written` then means "will be
    /// written", and the last look for a user's edit happens at that rename.
    public func materialize(_ doc: DocumentID, expecting: FileFingerprint?,
                            knownBody: (object: BlobDigest, body: JSONValue)? = nil) throws(StoreError) -> MaterializeOutcome {
        try materialize(doc, expecting: expecting, knownBody: knownBody, preparedFile: nil, lookedJustNow: false)
    }

    /// `materialize`; `preparedFile` is a temp file beside the document holding the object's
    /// body pretty-printed (in a batch only); `lookedJustNow`: the caller found no file a
    /// moment ago (`expecting` is nil), so it is not looked up again here; the rename at
    /// install fails if one appeared.
    func materialize(_ doc: DocumentID, expecting: FileFingerprint?, knownBody: (object: BlobDigest, body: JSONValue)?,
                     preparedFile: (object: BlobDigest, file: PreparedFile)?, lookedJustNow: Bool) throws(StoreError) -> MaterializeOutcome {
        let wasHeldBack = heldBack[doc]
        let path = layout.path(of: doc.rawValue)
        var (expecting, lookedJustNow) = (expecting, lookedJustNow)
        if objects.batch?.pendingFiles[path] != nil {
            // Outside the catch below: this commits the group's log lines, whose failure is
            // never a held-back document.
            try flushBatch()
            // The flush put an earlier revision's file in place (the look before this write
            // may have written one back: `recordMissing`), or left a user's file there: what
            // the caller saw is gone. The file is expected as the flush recorded it.
            (expecting, lookedJustNow) = (statCache[doc]?.fingerprint, false)
        }
        do {
            return try writeFile(doc, expecting: expecting, knownBody: knownBody, preparedFile: preparedFile, lookedJustNow: lookedJustNow)
        } catch where Self.isRefusedPermission(error) && !FileSystem.canCreate(in: FileSystem.dirname(of: path), within: layout.root) {
            // A directory the user made read-only, or a read-only mount (the document's own
            // directory, checked: a refusal elsewhere, in `.ferry/`, is an error): retrying
            // will not help until they change it (the watcher sees a directory's `chmod`,
            // `retryHeldBack`).
            let why = writeRefusal(doc, error)
            if wasHeldBack != why { logger.warning("a peer's revision is held back", metadata: ["doc": "\(doc)", "why": "\(why)"]) }
            heldBack[doc] = why
            return .heldBack(why)
        }
    }

    /// Whether `error` is the system refusing to write or remove a file here, for lack of
    /// permission or on a read-only filesystem.
    static func isRefusedPermission(_ error: StoreError) -> Bool {
        error.errno.map { [EACCES, EPERM, EROFS].contains($0) } ?? false
    }

    /// Why `doc` is held back when writing or removing its file was refused (`isRefusedPermission`).
    func writeRefusal(_ doc: DocumentID, _ error: StoreError) -> String {
        Self.cannotBeWritten(FileSystem.dirname(of: doc.rawValue), errno: error.errno ?? EACCES)
    }

    /// "DIR/ cannot be written here (REASON)", the folder's own directory named as such.
    static func cannotBeWritten(_ directory: String, errno: Int32) -> String {
        "\(directory.isEmpty ? "the folder" : directory + "/") cannot be written here (\(String(cString: strerror(errno)).lowercased()))"
    }

    /// `materialize`'s work, which throws when the system refuses a write.
    private func writeFile(_ doc: DocumentID, expecting: FileFingerprint?, knownBody: (object: BlobDigest, body: JSONValue)?,
                           preparedFile: (object: BlobDigest, file: PreparedFile)?, lookedJustNow: Bool) throws(StoreError) -> MaterializeOutcome {
        let path = layout.path(of: doc.rawValue)
        // A caller that found no file a moment ago (`ingestBeforeWriting`) checked where the
        // document goes and the ignore rules on its way: they are not looked up twice.
        let looked = lookedJustNow && expecting == nil
        if !looked, let why = placementProblem(doc, path: path) {
            noteHeldBack(doc, why)
            return .heldBack(why)
        }
        heldBack[doc] = nil
        if !looked {
            guard FileFingerprint.of(path) == expecting else { return .keptLocalEdit }
        }
        let over = fileRevision(doc)
        let now = current(doc)
        guard let current = now, !current.deleted else {
            guard expecting != nil else {
                fileBases[doc] = nil
                return .upToDate
            }
            // Removed first: a removal refused leaves the file holding what it held (its base
            // kept), which `retryHeldBack` removes once it can.
            try FileSystem.unlink(path)
            fileBases[doc] = nil
            if let tombstone = now { noteWrite(doc, rev: tombstone.rev, over: over) }
            forgetWhatTheFileHeld(doc)
            if let batch = objects.batch { batch.filesRemoved = true } else { try FileSystem.syncDirectory(FileSystem.dirname(of: path)) }
            removeEmptyDirectories(above: doc)
            return .removed
        }
        if let expecting, fileHolds(current.object, doc: doc, fingerprint: expecting) {
            fileBases[doc] = nil
            return .upToDate
        }
        if let batch = objects.batch, let preparedFile, preparedFile.object == current.object {
            batch.add(PendingFile(doc: doc, temp: preparedFile.file.temp, path: path, expecting: expecting, object: preparedFile.object,
                                  rev: current.rev, over: over, known: preparedFile.file.known))
            return .written
        }
        let dir = FileSystem.dirname(of: path)
        let temp = FolderScanner.temporaryPath(beside: path)
        let fd = try FileSystem.createNew(temp, mode: FileSystem.modeForTemp(replacingAFile: expecting != nil))
        var known: KnownFileText?
        do {
            defer { close(fd) }
            switch doc.kind {
            case .json:
                let body = knownBody?.object == current.object ? knownBody!.body : try jsonBody(of: current, doc: doc)
                let pretty = body.prettyBytes
                try FileSystem.writeAll(fd, pretty, path: temp)
                known = KnownFileText.of(pretty, object: current.object!, size: current.size) { try? body.blobReferences().map(\.digest) }
            case .file:
                try copyObject(current.object!, to: fd, path: temp)
            }
            if let batch = objects.batch {
                batch.add(PendingFile(doc: doc, temp: temp, path: path, expecting: expecting, object: current.object!,
                                      rev: current.rev, over: over, known: known))
                return .written
            }
            try FileSystem.sync(fd, path: temp)
        } catch {
            unlink(temp)
            throw error
        }
        let install = PendingFile(doc: doc, temp: temp, path: path, expecting: expecting, object: current.object!,
                                  rev: current.rev, over: over, known: known)
        guard try installPendingFile(install) else { return heldBack[doc].map { .heldBack($0) } ?? .keptLocalEdit }
        try FileSystem.syncDirectory(dir)
        return .written
    }

    /// Whether the document's file, found with `fingerprint`, holds `object` already: the stat
    /// cache proves what it holds where it can (a large file is then not read and hashed only
    /// to learn it holds the revision before), otherwise the file is read.
    func fileHolds(_ object: BlobDigest?, doc: DocumentID, fingerprint: FileFingerprint) -> Bool {
        if let proven = statCache.provenObject(doc, fingerprint: fingerprint, now: wallClockNanoseconds()) { return proven == object }
        // Recorded with this fingerprint as another body (by ferry's own write, a read, or the
        // look for an unrecorded save as a peer's revision arrives), but too recently for the
        // fingerprint to prove it unchanged. Saying no without reading is safe: the new file is
        // then written, and its install looks at the file again and keeps any save that landed
        // (at worst a file holding the same value in other formatting is rewritten).
        if let seen = statCache[doc], seen.fingerprint == fingerprint, seen.object != object { return false }
        guard case .success(let digest)? = try? digestOnDisk(doc) else { return false }
        return digest == object
    }

    /// Renames a document's durable temp file over the document, unless the file changed since
    /// its content was last recorded (the user's edit wins; the temp file is dropped). Records
    /// the new file's fingerprint. Returns false when the file was left alone.
    func installPendingFile(_ file: PendingFile) throws(StoreError) -> Bool {
        do throws(StoreError) {
            if file.expecting == nil {
                // No file was there: a rename that fails if one appeared meanwhile is the last
                // look and the install in one atomic step.
                guard try FileSystem.renameIfAbsent(file.temp, file.path) else { return nameTaken(file) }
            } else {
                // Last look before the rename: an edit that landed meanwhile wins.
                guard let there = (try? FileSystem.lstat(file.path)) ?? nil, FileFingerprint(there) == file.expecting else {
                    return nameTaken(file)
                }
                guard try holdsWhatWasRead(file, at: file.path) else { return keptLocalEdit(file) }
                FileSystem.givePermissions(of: there, to: file.temp)
                if savedLately(file.doc), try FileSystem.exchange(file.temp, file.path) {
                    // The names swapped at once; a save that landed between the look and the
                    // swap is in the file now named `temp`: swap back, and it is kept.
                    var displacedIntact = Self.sameContentState(FileFingerprint.of(file.temp), file.expecting)
                    if displacedIntact { displacedIntact = try holdsWhatWasRead(file, at: file.temp) }
                    if !displacedIntact {
                        _ = try FileSystem.exchange(file.temp, file.path)
                        return keptLocalEdit(file)
                    }
                    unlink(file.temp)
                } else {
                    try FileSystem.rename(file.temp, file.path)
                }
            }
        } catch {
            unlink(file.temp)
            throw error
        }
        if let written = FileFingerprint.of(file.path) {
            statCache.set(file.doc, StatCache.Entry(fingerprint: written, object: file.object))
        }
        knownTexts[file.doc] = file.known
        if file.rev == current(file.doc)?.rev { noteWrite(file.doc, rev: file.rev, over: file.over) } else { fileHolds(file.doc, file.rev) }
        return true
    }

    /// True unless the file at `path`, whose fingerprint is the one read when the document's
    /// content was last recorded, may have been rewritten since without its fingerprint
    /// showing it: file times are kept at the kernel's clock tick (a few milliseconds), so a
    /// same-size rewrite within one tick leaves inode, size and times alike ("racily clean",
    /// as git says). A file modified that recently is compared by content.
    func holdsWhatWasRead(_ file: PendingFile, at path: String) throws(StoreError) -> Bool {
        guard let expecting = file.expecting, wallClockNanoseconds() - expecting.mtime < Self.racyWindow else { return true }
        guard let recorded = statCache[file.doc], recorded.fingerprint == expecting,
              case .success(let digest)? = try digest(of: file.doc, at: path) else { return false }
        return digest == recorded.object
    }

    /// How recent a file's modification time must be for its fingerprint not to prove it
    /// unchanged: several clock ticks.
    static let racyWindow = 50_000_000

    /// Someone saved `doc` here in the last 10 s, so a save may land between the last look
    /// and the rename: then the file is swapped in with `RENAME_EXCHANGE` and the displaced
    /// file checked (a save caught in between is swapped back). Otherwise a plain rename: the
    /// exchange shows in inotify as the name moving away and back, which other watchers may
    /// take for a deletion.
    func savedLately(_ doc: DocumentID) -> Bool {
        lastLocalSave[doc].map { clock() &- $0 < Self.savedLatelyWindow } ?? false
    }

    /// Same inode, size and modification time: a rename changes a file's ctime, not its content.
    static func sameContentState(_ a: FileFingerprint?, _ b: FileFingerprint?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return a.inode == b.inode && a.size == b.size && a.mtime == b.mtime
    }

    /// Something else took the document's name between the look and the rename: a directory
    /// or a link holds the document back, as the look before writing would have said; a file
    /// is the user's, kept.
    private func nameTaken(_ file: PendingFile) -> Bool {
        guard let why = placementProblem(file.doc, path: file.path, live: true) else { return keptLocalEdit(file) }
        unlink(file.temp)
        noteHeldBack(file.doc, why)
        return false
    }

    private func keptLocalEdit(_ file: PendingFile) -> Bool {
        unlink(file.temp)
        logger.info("kept a local edit made while a peer's revision was written", metadata: ["doc": "\(file.doc)"])
        return false
    }

    /// `installPendingFile` for a batch's commit: a file that cannot be put in place (its
    /// directory vanished meanwhile, say) does not fail the batch; the next scan sees what is
    /// on disk.
    func installBatchedFile(_ file: PendingFile) {
        do { _ = try installPendingFile(file) } catch where Self.isRefusedPermission(error) {
            let why = writeRefusal(file.doc, error)
            noteHeldBack(file.doc, why)
        } catch {
            logger.warning("could not put a peer's revision in place", metadata: ["doc": "\(file.doc)", "error": "\(error)"])
        }
    }

    private func copyObject(_ digest: BlobDigest, to out: Int32, path: String) throws(StoreError) {
        let input = try objects.open(digest)
        defer { close(input) }
        try FileSystem.copyAll(from: input, to: out, path: path)
    }

    /// Why `doc`'s current revision cannot be written at `path`: a directory above it is a
    /// symbolic link or a file (`FolderLayout.placementProblem`), or, for a live revision,
    /// something that is not a regular file holds its name (`live`: whether it is, when the
    /// caller knows better than the index). Nil when it can.
    func placementProblem(_ doc: DocumentID, path: String, live: Bool? = nil) -> String? {
        if let why = layout.placementProblem(of: doc.rawValue) { return why }
        if let why = ignoredHere(doc) { return why }
        guard live ?? current(doc).map({ !$0.deleted }) ?? false, let st = try? FileSystem.lstat(path) else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "a directory named \(doc) is here"
        case S_IFLNK: return "a symbolic link named \(doc) is here"
        default: return "something that is not a file is named \(doc) here"
        }
    }

    /// Why `doc` is neither recorded nor written here, or nil: `.ferryignore` names it.
    func ignoredHere(_ doc: DocumentID) -> String? {
        localIgnoreRules().isIgnored(doc.rawValue, isDirectory: false)
            ? "\(doc) is ignored here (.ferryignore): a peer's revision is kept in the history, the file is left alone" : nil
    }

    /// The folder's ignore rules, read again only when `.ferryignore` changed. Within a batch
    /// they are those of the first look since its last flush: `.ferryignore` is looked at
    /// once per flush (at most `batch`'s `flushEvery` documents), not once per document.
    func localIgnoreRules() -> IgnoreRules {
        if objects.batch != nil, ignoreCheckedInBatch, let rules = ignoreCache.last { return rules }
        ignoreCheckedInBatch = objects.batch != nil
        return ignoreCache.current(layout)
    }

    /// Tries again every held-back document whose way is clear now (the user moved the link
    /// or the file aside): a file the user put there meanwhile is recorded, otherwise the
    /// current revision is written. Returns the entries recorded.
    public func retryHeldBack() throws(StoreError) -> [LogEntry] {
        var recorded: [LogEntry] = []
        for doc in heldBack.keys.sorted() where placementProblem(doc, path: layout.path(of: doc.rawValue)) == nil {
            let path = layout.path(of: doc.rawValue)
            // One whose write was refused waits until its directory can be written.
            guard FileSystem.canCreate(in: FileSystem.dirname(of: path), within: layout.root) else { continue }
            heldBack[doc] = nil
            if FileSystem.exists(path) {
                // A file the user put there is recorded; one still holding the revision before
                // the refused write (or deletion) shows the current revision now.
                if case .recorded(let e) = try ingest(doc) { recorded.append(e) }
            } else {
                _ = try materialize(doc, expecting: nil)
            }
        }
        return recorded
    }

    /// Removes the directories a deletion left empty, up to (not including) the folder.
    func removeEmptyDirectories(above doc: DocumentID) {
        guard layout.placementProblem(of: doc.rawValue) == nil else { return }
        var rel = FileSystem.dirname(of: doc.rawValue)
        while !rel.isEmpty {
            if rmdir(layout.path(of: rel)) != 0 { break }
            rel = FileSystem.dirname(of: rel)
        }
    }
}
