import ArgumentParser
import FerryCore
import FerryStore

/// `ferry log [DOC] [-p]`: revision history, newest first.
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Show revision history, newest first (one line per revision).")

    @Argument(help: "Only this document.")
    var doc: String?

    @Option(name: .shortAndLong, help: "Show at most this many revisions.")
    var count: Int?

    @Flag(name: [.customShort("p"), .long], help: "Under each revision, its change against its parent (as `ferry diff` prints it).")
    var patch = false

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let root = try folder.resolveRoot()
        guard FileSystem.exists(root + "/.ferry/folder.json") else {
            throw StoreError(.notInitialized, "\(root) is not a ferry folder; run `ferry init` there")
        }
        let filter = try doc.map { try DocumentID($0) }
        let read = try RevisionLog.read(path: FolderLayout(root: root).logFile)
        var entries = read.entries.reversed().filter { filter == nil || $0.doc == filter! }
        if let filter, entries.isEmpty { throw StoreError(.notFound, "no document \(filter) in \(root)") }
        if let count { entries = Array(entries.prefix(max(0, count))) }
        // A resolution that came from a peer has no record on its lines here: the tree tells it.
        var index = DocumentIndex()
        let shown = Set(entries.map(\.doc))
        for e in read.entries where shown.contains(e.doc) { index.apply(e) }
        entries = entries.map { e in
            var e = e
            e.conflict = index.conflict(closedBy: e)
            return e
        }
        let patches = patch ? try PatchReader(folder: folder) : nil
        if output.json {
            printJSON(.array(try entries.map { e in
                guard let patches, case .object(var o) = e.json else { return e.json }
                o["changes"] = .array(try patches.patch(e).changes)
                return .object(o)
            }))
            return
        }
        for e in entries {
            let afterDeletion = e.parent.map { index[e.doc]?.nodes[$0]?.deleted == true } ?? false
            print(Self.line(e, afterDeletion: afterDeletion))
            for p in try patches?.patch(e).lines ?? [] { print("    " + p) }
        }
    }

    /// `seq  time  rev  doc  what  author  origin` (author `-` when unknown); `afterDeletion`
    /// when the revision's parent is a deletion.
    static func line(_ e: LogEntry, afterDeletion: Bool) -> String {
        let what: String
        if let c = e.conflict {
            what = e.deleted ? "closed branch \(c.loser)" : "merged \(c.loser) into \(c.winner)"
        } else if e.deleted, let parent = e.parent, e.rev == RevisionID.closingTwin(parent) {
            what = "closed branch \(parent) (another holds the same body)"
        } else if e.deleted {
            what = "deleted"
        } else if e.parent == nil {
            what = "created (\(e.size) bytes)"
        } else if afterDeletion {
            what = "recreated (\(e.size) bytes)"
        } else {
            what = "edited (\(e.size) bytes)"
        }
        return "\(e.seq)\t\(e.time)\t\(e.rev)\t\(e.doc)\t\(what)\t\(e.author ?? "-")\t\(e.origin)"
    }
}

/// `ferry show DOC[@REV]`.
struct ShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print a document's body at a revision (default: its current revision).")

    @Argument(help: ArgumentHelp("The document, optionally with @REV: an id, a unique prefix of one or of its digest, a generation (2) or -N.", valueName: "doc[@rev]"))
    var target: String

    @OptionGroup var folder: FolderOptions

    func run() throws {
        let store = try folder.open(writable: false)
        let (doc, node, _) = try store.revision(named: target)
        if node.deleted { throw StoreError(.notFound, "\(doc)@\(node.rev) is a deletion") }
        if doc.kind == .json {
            FileHandleOutput.stdout(try store.jsonBody(of: node, doc: doc).prettyBytes)
        } else {
            FileHandleOutput.stdout(try store.body(of: node, doc: doc))
        }
    }
}

/// `ferry conflicts`.
struct ConflictsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List resolved conflicts (how each was closed) and any still open.")

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let store = try folder.open(writable: false)
        var resolved: [(doc: DocumentID, record: ConflictRecord, merged: RevisionID?, closing: RevisionID, time: String)] = []
        var mergedRevs: [ConflictRecord: RevisionID] = [:]
        for e in try store.readLogEntries() {
            guard let c = store.index.conflict(closedBy: e) else { continue }
            if !e.deleted { mergedRevs[c] = e.rev; continue }
            // Else (a record only the line holds) the newest merge that took the loser in, if any.
            let tree = store.index[e.doc]
            let merged = mergedRevs[c] ?? tree?.current.flatMap { tree?.merge(of: c.loser, below: $0.rev) }
            resolved.append((e.doc, c, merged, e.rev, e.time))
        }
        /// What each side lost, and how the conflict was closed, from the bodies (the same on every peer).
        func story(_ r: (doc: DocumentID, record: ConflictRecord, merged: RevisionID?, closing: RevisionID, time: String))
            -> (how: String, lost: (winner: [LostValue], loser: [LostValue])?) {
            let nodes = store.index[r.doc]?.nodes
            let tookIn = r.merged.map { m in nodes?[m]?.object != nodes?[r.record.winner]?.object } ?? false
            let how = tookIn ? "merged into \(r.merged!)" : "winner's body kept"
            return (how, store.lostValues(r.doc, winner: r.record.winner, loser: r.record.loser, result: r.merged ?? r.record.winner))
        }
        let open = store.index.trees.filter { $0.value.liveLeaves.count > 1 }.sorted { $0.key < $1.key }
        // Documents whose revision cannot be put at their path here (a file or a symbolic link
        // in the way): a conflict between names, kept open until the user moves one aside.
        let heldBack = try store.diskState().heldBack
        if output.json {
            printJSON([
                "resolved": .array(resolved.map { r in
                    var o: [String: JSONValue] = [
                        "doc": .string(r.doc.rawValue), "winner": .string(r.record.winner.description),
                        "loser": .string(r.record.loser.description), "resolution": .string(r.record.resolution.rawValue),
                        "closing": .string(r.closing.description), "time": .string(r.time),
                    ]
                    if let m = r.merged { o["merged"] = .string(m.description) }
                    let told = story(r)
                    o["how"] = .string(told.how)
                    if let lost = told.lost {
                        func list(_ values: [LostValue]) -> JSONValue {
                            .array(values.map { ["path": .string($0.path), "had": $0.had ?? .null, "kept": $0.kept ?? .null] })
                        }
                        o["lost"] = ["winner": list(lost.winner), "loser": list(lost.loser)]
                    }
                    return .object(o)
                }),
                "open": .array(open.map { ["doc": .string($0.key.rawValue), "leaves": .array($0.value.liveLeaves.map { .string($0.rev.description) })] }),
                "held_back": ReportJSON.documents(heldBack, key: "reason"),
            ])
            return
        }
        if resolved.isEmpty && open.isEmpty && heldBack.isEmpty { print("No conflicts.") }
        for r in resolved {
            let told = story(r)
            print("\(r.time)\t\(r.doc)\twinner \(r.record.winner)\tloser \(r.record.loser)\t\(told.how)\tlosing branch closed by \(r.closing)")
            if told.lost == nil && r.doc.kind == .json { print("    what each side lost is not known here: a body it needs was compacted") }
            for (side, values) in [("winner", told.lost?.winner ?? []), ("loser", told.lost?.loser ?? [])] {
                for v in values {
                    let had = v.had.map { JSONDiff.excerpt($0) } ?? "(removed)", kept = v.kept.map { JSONDiff.excerpt($0) } ?? "(absent)"
                    print("    the \(side) lost \(v.path): \(had), kept \(kept)")
                }
            }
        }
        for (doc, tree) in open {
            print("OPEN\t\(doc)\tleaves \(tree.liveLeaves.map(\.rev.description).joined(separator: ", "))")
        }
        for h in heldBack {
            print("HELD BACK\t\(h.doc)\t\(h.reason); its revisions are kept: move the one in the way aside and it is written")
        }
    }
}
