import ArgumentParser
import FerryCore
import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// `ferry restore DOC@REV`.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put an old revision's body back in a document's file, recorded as a new revision.",
        discussion: """
            REV is an id (3-1a2b…), a unique prefix of one or of its digest (1a2b), a generation on the \
            current revision's history (2), or -N (N revisions back). The body becomes a new revision on top \
            of the current one, so nothing is lost and peers get it like any edit. A deleted document is \
            recreated. With an agent running, the file is written and the agent records it.
            """)

    @Argument(help: ArgumentHelp("The document and the revision to restore.", valueName: "doc@rev"))
    var target: String

    @OptionGroup var folder: FolderOptions

    func run() throws {
        let store: FolderStore
        var agentRuns = false
        do { store = try folder.open(writable: true) } catch let error as StoreError where error.code == .locked {
            // The writer (the agent) records what lands in the folder: only the file is written.
            store = try folder.open(writable: false)
            agentRuns = true
        }
        let (doc, node, selected) = try store.revision(named: target)
        guard selected else {
            throw CLIError("name the revision to restore: ferry restore \(doc)@REV (ferry log \(doc) lists them)", exitCode: 2)
        }
        switch try store.restore(doc, to: node) {
        case .recorded(let entry):
            print("restored \(doc) to \(node.rev) (new revision \(entry.rev))")
        case .unchanged:
            print("\(doc) already holds the body of \(node.rev); nothing to record")
        case .written:
            precondition(agentRuns)
            print("wrote \(doc) from \(node.rev); the agent records it")
        }
    }
}

/// `ferry diff DOC [REV] [REV]`.
struct DiffCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Show what changed in a document, value by value.",
        discussion: """
            No REV: the current revision against the file on disk when it holds unrecorded edits, else \
            against its parent. One REV: that revision against the current one. Two: the first against \
            the second. JSON documents print one line per change: `path: old → new`, `path: + value`, \
            `path: - value` (paths like list[0].value, ["a key"], $ for the whole body); files print \
            their sizes and SHA-256.
            """)

    @Argument(help: ArgumentHelp("The document.", valueName: "doc"))
    var doc: String

    // Collected as unrecognized arguments so that `-1` is a revision, not an unknown option.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Revisions to compare (id, prefix, generation or -N).", valueName: "rev"))
    var revisions: [String] = []

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if revisions.count > 2 { throw ValidationError("at most two revisions") }
        for r in revisions where r.hasPrefix("-") && (try? RevisionSelector(r)) == nil {
            throw ValidationError("Unknown option '\(r)'")
        }
    }

    func run() throws {
        let store = try folder.open(writable: false)
        let (id, named, selected) = try store.revision(named: doc)
        guard let current = store.current(id) else { throw StoreError(.notFound, "no document \(id) in \(store.root)") }
        // `DOC@REV` counts as the first REV.
        let picked = (selected ? [named] : []) + (try revisions.map { try store.revision(of: id, $0) })
        let bodies = BodyReader(store: store, doc: id)
        let old: Side, new: Side
        switch picked.count {
        case 0:
            if let onDisk = try bodies.unrecordedDisk(current: current) {
                (old, new) = (try bodies.side(current), onDisk)
            } else {
                (old, new) = (try bodies.side(parentOf: current), try bodies.side(current))
            }
        case 1:
            (old, new) = (try bodies.side(picked[0]), try bodies.side(current))
        case 2:
            (old, new) = (try bodies.side(picked[0]), try bodies.side(picked[1]))
        default:
            throw CLIError("at most two revisions to compare", exitCode: 2)
        }
        let patch = Patch(old: old, new: new)
        if output.json {
            printJSON(.array(patch.changes))
            return
        }
        for line in patch.lines { print(line) }
    }
}

/// One side of a comparison: a body, or why there is none.
enum Side {
    /// A JSON document's body.
    case json(JSONValue)
    /// A file document's bytes, by size and SHA-256 (never read whole: a file may be gigabytes).
    case file(size: Int, digest: BlobDigest)
    /// No revision before this one.
    case nothing
    /// A deletion, or a file that is gone from the disk.
    case deleted
    /// A revision whose body is not kept here, with how to say so.
    case unavailable(String)
}

/// Bodies of one document's revisions, parsed once each (`log -p` meets every body twice:
/// as a revision, then as the next one's parent).
final class BodyReader {
    let store: FolderStore
    let doc: DocumentID
    private var parsed: [BlobDigest: JSONValue] = [:]

    init(store: FolderStore, doc: DocumentID) {
        self.store = store
        self.doc = doc
    }

    /// The side for a revision.
    func side(_ node: RevisionNode) throws -> Side {
        if node.deleted { return .deleted }
        guard let object = node.object else { return .unavailable("(body compacted)") }
        guard doc.kind == .json else { return .file(size: node.size, digest: object) }
        if let value = parsed[object] { return .json(value) }
        let value = try store.jsonBody(of: node, doc: doc)
        if parsed.count >= 8 { parsed.removeAll(keepingCapacity: true) }
        parsed[object] = value
        return .json(value)
    }

    /// The side for a revision's parent (`nothing` for a first revision).
    func side(parentOf node: RevisionNode) throws -> Side {
        guard let parent = node.parent else { return .nothing }
        guard let parentNode = store.index[doc]?.nodes[parent] else { return .unavailable("(parent's body is not stored here)") }
        if !parentNode.deleted && parentNode.object == nil { return .unavailable("(parent's body compacted)") }
        return try side(parentNode)
    }

    /// The file on disk when it differs from `current` (unrecorded edits), else nil.
    func unrecordedDisk(current: RevisionNode) throws -> Side? {
        let path = store.layout.path(of: doc.rawValue)
        switch try store.digestOnDisk(doc) {
        case nil:
            return current.deleted ? nil : .deleted
        case .failure(let error)?:
            throw CLIError("\(doc) on disk cannot be read as a revision: \(error)")
        case .success(let digest)?:
            if !current.deleted && digest == current.object { return nil }
            guard doc.kind == .json else {
                return .file(size: Int((try FileSystem.lstat(path))?.st_size ?? 0), digest: digest)
            }
            return .json(try JSONParser.parse(try FileSystem.readFile(path)))
        }
    }
}

/// The change between two sides, as text lines and as `--json` entries.
struct Patch {
    /// One line per change.
    var lines: [String] = []
    /// `{"path", "op", "old", "new"}` per change.
    var changes: [JSONValue] = []

    init(old: Side, new: Side) {
        switch (old, new) {
        case (_, .nothing), (.deleted, .deleted):
            break
        case (.unavailable(let why), _), (_, .unavailable(let why)):
            lines = [why]
            changes = [["path": "$", "op": "changed", "note": .string(why)]]
        case (.nothing, _), (.deleted, .json), (.deleted, .file):
            lines = [Self.isNothing(old) ? "created" : "recreated"]
            changes = [["path": "$", "op": "added", "new": Self.value(new)]]
        case (.json, .deleted), (.file, .deleted):
            lines = ["deleted"]
            changes = [["path": "$", "op": "removed", "old": Self.value(old)]]
        case let (.json(a), .json(b)):
            let diff = JSONDiff.changes(from: a, to: b)
            lines = diff.map(\.line)
            changes = diff.map(\.json)
        case let (.file(sizeA, digestA), .file(sizeB, digestB)):
            guard digestA != digestB else { return }
            lines = ["sizes \(sizeA) → \(sizeB) bytes, sha256 \(digestA.hex) → \(digestB.hex)"]
            changes = [["path": "$", "op": "changed", "old": Self.value(old), "new": Self.value(new)]]
        case (.json, .file), (.file, .json):
            lines = ["(a JSON body and a file body: not comparable)"]
        }
    }

    private static func isNothing(_ side: Side) -> Bool {
        if case .nothing = side { return true }
        return false
    }

    /// A side as a JSON value: the body itself, or a file's size and digest.
    private static func value(_ side: Side) -> JSONValue {
        switch side {
        case .json(let v): return v
        case .file(let size, let digest): return ["size": .int(size), "sha256": .string(digest.hex)]
        case .nothing, .deleted, .unavailable: return .null
        }
    }
}

/// Each log entry's change against its parent, for `ferry log -p`: bodies come from the
/// store opened read-only (an agent may hold the lock meanwhile).
final class PatchReader {
    let store: FolderStore
    private var readers: [DocumentID: BodyReader] = [:]

    init(folder: FolderOptions) throws {
        store = try folder.open(writable: false)
    }

    /// The patch of one entry; a revision no longer in the index (a damaged line) has none.
    func patch(_ e: LogEntry) throws -> Patch {
        guard let node = store.index[e.doc]?.nodes[e.rev] else { return Patch(old: .nothing, new: .nothing) }
        if readers[e.doc] == nil && readers.count >= 64 { readers.removeAll(keepingCapacity: true) }  // bounded memory over many documents
        let reader = readers[e.doc] ?? BodyReader(store: store, doc: e.doc)
        readers[e.doc] = reader
        if !node.deleted && node.object == nil { return Patch(old: .nothing, new: .unavailable("(body compacted)")) }
        return Patch(old: try reader.side(parentOf: node), new: try reader.side(node))
    }
}
