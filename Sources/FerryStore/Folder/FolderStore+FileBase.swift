#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What a document's file holds while it does not hold the document's current revision.
///
/// A peer's revision becomes current before it reaches the file, and sometimes it cannot
/// reach it at once: the user changed the file meanwhile, the file does not parse, or it is
/// missing for a moment (an editor saving by rename). What the user saves next was made from
/// what the file held, so it is recorded as a child of that revision; the two branches then
/// merge like any conflict, and the peer's change is kept instead of undone.
enum FileBase: Sendable, Equatable {
    /// The file holds this revision (or an unrecorded edit of it).
    case revision(RevisionID)
    /// The file holds no revision: the document was new to the folder.
    case nothing
}

/// A revision ferry wrote over a document's file, for telling stale saves (`StaleSave`).
struct RecentWrite: Sendable {
    /// The revision written.
    let rev: RevisionID
    /// The revision the file held before.
    let over: RevisionID
    /// When (the store's clock).
    let time: UInt64
}

/// The sizes past which `FolderStore.forgetExpired` walks its maps again.
struct ExpiryLimits {
    /// The smallest limit: maps this small are never walked.
    static let floor = 256
    /// For `recentWrites`.
    var recentWrites = floor
    /// For `lastLocalSave`.
    var lastLocalSave = floor
}

extension FolderStore {
    /// A save that follows a write of ferry's more closely than this may have been made from
    /// the file's content before the write (see `StaleSave`): 2 s, in nanoseconds.
    public static let staleSaveWindow: UInt64 = 2_000_000_000
    /// A document saved here this recently is swapped in with `RENAME_EXCHANGE` (see
    /// `savedLately`): 10 s, in nanoseconds.
    static let savedLatelyWindow: UInt64 = 10_000_000_000

    /// The revision `doc`'s file holds: the current one unless a peer's revision could not be
    /// written to it yet.
    public func fileRevision(_ doc: DocumentID) -> RevisionID? {
        switch fileBases[doc] {
        case .revision(let rev)?: return rev
        case .nothing?: return nil
        case nil: return current(doc)?.rev
        }
    }

    /// Remembers what `doc`'s file holds before its current revision changes (unless an
    /// earlier change already did): until the file is written, saves are children of that.
    func pinFileBase(_ doc: DocumentID) {
        guard fileBases[doc] == nil else { return }
        fileBases[doc] = current(doc).map { .revision($0.rev) } ?? .nothing
    }

    /// Notes that `doc`'s file holds `rev` (nil: its current revision).
    func fileHolds(_ doc: DocumentID, _ rev: RevisionID?) {
        if let rev, rev != current(doc)?.rev { fileBases[doc] = .revision(rev) } else { fileBases[doc] = nil }
    }

    /// Notes that ferry wrote `rev` over `doc`'s file, which held `over` until then.
    func noteWrite(_ doc: DocumentID, rev: RevisionID, over: RevisionID?) {
        fileBases[doc] = nil
        guard doc.kind == .json, let over, over != rev else {
            recentWrites[doc] = nil
            return
        }
        let now = clock()
        var writes = (recentWrites[doc] ?? []).filter { now &- $0.time < Self.staleSaveWindow }
        if writes.count >= 8 { writes.removeFirst() }
        writes.append(RecentWrite(rev: rev, over: over, time: now))
        recentWrites[doc] = writes
        forgetExpired(now)
    }

    /// Drops what no save can need any more, once the maps have grown (an agent runs for weeks).
    /// A map is walked again only after it doubled since the last walk: when every entry is
    /// still fresh (an `init` records 100,000 files within the window) a walk per save would
    /// make recording quadratic.
    func forgetExpired(_ now: UInt64) {
        if recentWrites.count > expiryLimits.recentWrites {
            recentWrites = recentWrites.filter { now &- ($0.value.last?.time ?? 0) < Self.staleSaveWindow }
            expiryLimits.recentWrites = max(ExpiryLimits.floor, 2 * recentWrites.count)
        }
        if lastLocalSave.count > expiryLimits.lastLocalSave {
            lastLocalSave = lastLocalSave.filter { now &- $0.value < Self.savedLatelyWindow }
            expiryLimits.lastLocalSave = max(ExpiryLimits.floor, 2 * lastLocalSave.count)
        }
    }

    /// The parent for a save of `doc` whose body is `saved`, when the file holds `base`: `base`,
    /// or an older revision the save was made from. A save that closely follows ferry's writes
    /// of peers' revisions and holds, where those writes changed a value, the value from
    /// before, was made from the file's earlier content: it becomes a child of the oldest of
    /// the file's recent revisions it goes back to, and the merge keeps both sides' changes.
    /// (A base older than the one the save was really made from does no harm: the changes in
    /// between are on both sides of the merge alike.)
    func parentForSave(_ doc: DocumentID, _ saved: [UInt8], base: RevisionID?) -> RevisionID? {
        guard let base, doc.kind == .json, let writes = recentWrites[doc], let tree = index[doc], let current = tree.nodes[base] else { return base }
        // A file ferry removed for a peer's deletion and saved again moments later from the
        // editor's copy: its "after" is nothing at all, so any value it kept from before tells.
        let currentValue: JSONValue
        if current.deleted {
            currentValue = .object([:])
        } else {
            guard current.hasBody, let value = try? jsonBody(of: current, doc: doc) else { return base }
            currentValue = value
        }
        let now = clock()
        var savedValue: JSONValue?
        var parent = base
        var cursor = base
        for write in writes.reversed() {
            // The file's revision may have changed since without a write: a merge whose body is
            // the one written (as when the peer's own merge arrives after its branches).
            let same = write.rev == cursor || (tree.nodes[write.rev]?.object).map { $0 == tree.nodes[cursor]?.object } == true
            guard same, now &- write.time < Self.staleSaveWindow else { break }
            cursor = write.over
            guard let before = tree.nodes[write.over] else { break }
            // A removal of the file (a peer's deletion) is a step of the chain, not a content.
            if before.deleted { continue }
            guard before.hasBody, let beforeValue = try? jsonBody(of: before, doc: doc) else { break }
            if savedValue == nil { savedValue = try? JSONParser.parse(saved) }
            guard let savedValue else { break }
            if StaleSave.undoes(before: beforeValue, after: currentValue, save: savedValue) { parent = write.over }
        }
        if parent != base {
            logger.notice("a save made from the file's content before a peer's revision was written is merged with it",
                          metadata: ["doc": "\(doc)", "parent": "\(parent)", "written": "\(base)"])
        }
        return parent
    }

    // MARK: Kept across restarts

    /// `.ferry/filebases.json`: `{"<doc>": "<rev>" | null}` for files that do not hold their
    /// current revision, so that a save made while the agent was stopped is still recorded as
    /// a child of what the file held.
    var fileBasesPath: String { layout.stateDirectory + "/filebases.json" }

    func loadFileBases() -> [DocumentID: FileBase] {
        guard let bytes = try? FileSystem.readFile(fileBasesPath), case .object(let o)? = try? JSONParser.parse(bytes) else { return [:] }
        var bases: [DocumentID: FileBase] = [:]
        for (key, value) in o {
            guard let doc = try? DocumentID(key), index[doc] != nil else { continue }
            switch value {
            case .null: bases[doc] = .nothing
            case .string(let text): if let rev = try? RevisionID(text), index[doc]?.contains(rev) == true { bases[doc] = .revision(rev) }
            default: continue
            }
        }
        return bases
    }

    /// Saves `fileBases` if it changed since it was last saved (rarely: an entry lives only
    /// while a peer's revision waits for a file the user is editing).
    func saveFileBasesIfChanged() throws(StoreError) {
        guard isWritable, fileBases != savedFileBases else { return }
        if fileBases.isEmpty {
            unlink(fileBasesPath)
        } else {
            var o: [String: JSONValue] = [:]
            for (doc, base) in fileBases {
                switch base {
                case .revision(let rev): o[doc.rawValue] = .string(rev.description)
                case .nothing: o[doc.rawValue] = .null
                }
            }
            try FileSystem.writeAtomically(JSONValue.object(o).prettyBytes, to: fileBasesPath, tempPrefix: ".filebases-tmp-")
        }
        savedFileBases = fileBases
    }
}

/// Monotonic nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
