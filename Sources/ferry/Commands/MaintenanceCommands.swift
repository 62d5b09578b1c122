import ArgumentParser
import FerryAgent
import FerryCore
import FerryStore

/// `ferry verify`.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Re-hash every object, check the log, and compare every file with its current revision; non-zero on damage.")

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let store = try folder.open(writable: false)
        let r = try store.verify()
        if output.json {
            printJSON([
                "clean": .bool(r.isClean), "objects_checked": .int(r.objectsChecked),
                "corrupt_objects": .array(r.corruptObjects.map { ["path": .string($0.path), "actual": .string($0.actual.description)] }),
                "missing_objects": .array(r.missingObjects.map { ["digest": .string($0.digest.description), "needed_by": .string($0.neededBy)] }),
                "stray_files": .array(r.strayObjectFiles.map { .string($0) }),
                "log_problems": .array(r.logProblems.map { .string($0) }),
                "torn_tail_bytes": .int(r.tornTailBytes),
                "pending": .array(r.pending.map { .string($0.doc.rawValue) }),
                "unreadable": ReportJSON.documents(r.unreadable, key: "error"),
            ])
        } else {
            for c in r.corruptObjects { print("CORRUPT object \(c.path) (its bytes hash to \(c.actual))") }
            for m in r.missingObjects { print("MISSING object \(m.digest) needed by \(m.neededBy)") }
            for s in r.strayObjectFiles { print("STRAY file in objects/: \(s)") }
            for p in r.logProblems { print("LOG \(p)") }
            if r.tornTailBytes > 0 { print("note: revs.log ends with a torn line of \(r.tornTailBytes) bytes (ignored; repaired by the next writer)") }
            for p in r.pending {
                switch p.change {
                case .added: print("pending: \(p.doc) is a new file (not recorded yet)")
                case .modified: print("pending: \(p.doc) differs from its current revision (not recorded yet)")
                case .deleted: print("pending: \(p.doc) is gone (its deletion not recorded yet)")
                }
            }
            for u in r.unreadable { print("unreadable: \(u.doc): \(u.reason)") }
            print(r.isClean ? "ok: \(r.objectsChecked) objects verified, log consistent" : "damage found")
        }
        if !r.isClean { throw ExitCode(1) }
    }
}

/// `ferry compact`.
struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Drop bodies of non-leaf revisions beyond a kept depth, rewriting the log atomically.")

    @Option(help: "Generations below each leaf whose bodies are kept.")
    var keepDepth = 20

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard keepDepth >= 0 else { throw ValidationError("--keep-depth must be 0 or more") }
    }

    func run() throws {
        let store = try folder.open(writable: true)
        let r = try store.compact(keepDepth: keepDepth)
        if output.json {
            printJSON(["revisions_compacted": .int(r.revisionsCompacted), "objects_removed": .int(r.objectsRemoved), "bytes_freed": .int(r.bytesFreed)])
        } else {
            print("Compacted \(r.revisionsCompacted) revisions; removed \(r.objectsRemoved) objects (\(r.bytesFreed) bytes).")
        }
    }
}

/// `ferry status` (the offline part: what the folder and the files on disk say).
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the folder, its documents, unreadable files and changes not yet recorded.",
        discussion: "With an agent running, also its listener, the peers connected to it (address, user, direction, protocol, since) and each replication it runs.")

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let root = try folder.resolveRoot()
        let layout = FolderLayout(root: root)
        let info = try FolderStore.readInfo(root: root)
        let holder = FolderLock.holder(path: layout.lockFile)
        // The running agent's state through its control socket: it holds the index and records
        // every change as it settles, so it answers at once, even while it opens the folder.
        let answer: JSONValue? = holder == nil ? nil :
            ControlSocket.ask("status", path: layout.stateDirectory + "/agent.sock").flatMap { try? JSONParser.parse($0) }
        var report: [String: JSONValue] = [
            "folder": .string(root), "name": .string(info.name), "id": .string(info.id),
            "agent": .string(holder.map { "running (pid \($0))" } ?? "not running"),
            "listener": answer?["listener"] ?? .null, "replications": answer?["replications"] ?? .array([]),
        ]
        if let answer, answer["documents"] != nil || answer["starting"] != nil {
            for key in ["documents", "revisions", "last_seq", "unreadable", "held_back", "skipped", "starting"] {
                if let value = answer[key] { report[key] = value }
            }
            if answer["starting"] == nil { report["pending"] = .array([]) }
        } else {
            try report.merge(Self.offlineState(root: root, folder: folder, holder: holder)) { _, new in new }
        }
        if output.json {
            printJSON(.object(report))
        } else {
            Self.printText(report)
        }
    }

    /// What the folder and the files on disk say, read here (no agent, or one that does not
    /// answer): from the stat cache the last writer left when the log is the one it names
    /// (no log read at all), else the log on this thread while another walks the folder.
    static func offlineState(root: String, folder: FolderOptions, holder: Int32?) throws -> [String: JSONValue] {
        // A writer that holds the lock may be appending: only a folder nobody writes is read
        // from its cache.
        if holder == nil, FolderStore.statCacheNamesTheLog(root: root) {
            let walk = Background { try FolderStore.walk(root: root) }
            if let cached = try FolderStore.statusFromStatCache(root: root, walk: { try walk.value() }) {
                return report(cached)
            }
        }
        let survey = Background { try FolderStore.survey(root: root) }
        let store = try folder.open(writable: false)
        let disk = try store.diskState(survey: try survey.value())
        return report(FolderStatus(documents: store.index.liveDocumentCount, revisions: store.index.revisionCount,
                                   lastSeq: store.index.lastSeq, disk: disk))
    }

    /// A status's JSON report.
    static func report(_ status: FolderStatus) -> [String: JSONValue] {
        let disk = status.disk
        return [
            "documents": .int(status.documents), "revisions": .int(status.revisions), "last_seq": .int(status.lastSeq),
            "pending": .array(disk.pending.map { ["doc": .string($0.doc.rawValue), "change": .string($0.change.rawValue)] }),
            "unreadable": ReportJSON.documents(disk.unreadable, key: "error"),
            "skipped": ReportJSON.skipped(disk.skipped),
            "held_back": ReportJSON.documents(disk.heldBack, key: "reason"),
        ]
    }

    /// The report as text, a line per fact.
    static func printText(_ report: [String: JSONValue]) {
        func text(_ key: String) -> String { report[key]?.stringValue ?? "" }
        print("folder:    \(text("folder"))")
        print("database:  \(text("name")) (id \(text("id")))")
        if let documents = report["documents"]?.intValue {
            print("documents: \(documents), revisions: \(report["revisions"]?.intValue ?? 0), last seq: \(report["last_seq"]?.intValue ?? 0)")
        }
        var agent = "agent:     \(text("agent"))"
        if let starting = report["starting"] {
            agent += ", starting: \(starting["step"]?.stringValue ?? "") (\(starting["seconds"]?.canonicalString ?? "?") s)"
        }
        print(agent)
        if let listener = report["listener"], case .object = listener {
            for url in listener["urls"]?.arrayValue ?? [] { print("listening: \(url.stringValue ?? "")") }
            let c = listener["connections"]
            print("connections: \(c?["active"]?.intValue ?? 0) active, \(c?["total"]?.intValue ?? 0) total"
                  + (listener["read_only"]?.boolValue == true ? " (read-only)" : ""))
            for p in listener["peers"]?.arrayValue ?? [] {
                // Who is connected now, which way, over what, since when.
                var line = "peer:      \(p["address"]?.stringValue ?? "?")"
                if let user = p["user"]?.stringValue { line += " user \(user)" }
                line += ", \(p["direction"]?.stringValue ?? "connected"), \(p["protocol"]?.stringValue ?? "")"
                line += ", since \(p["since"]?.stringValue ?? "?")"
                line += ", received \(p["revisions_received"]?.intValue ?? 0), sent \(p["revisions_sent"]?.intValue ?? 0)"
                print(line)
            }
        }
        for r in report["replications"]?.arrayValue ?? [] {
            var line = "replication: \(r["url"]?.stringValue ?? "")"
            if let user = r["user"]?.stringValue { line += " user \(user)" }
            line += " (\(r["direction"]?.stringValue ?? "")) \(r["activity"]?.stringValue ?? "")"
            line += ", progress \(r["progress"]?["done"]?.intValue ?? 0)/\(r["progress"]?["total"]?.intValue ?? 0)"
            line += ", sent \(r["revisions_sent"]?.intValue ?? 0), received \(r["revisions_received"]?.intValue ?? 0)"
            if let e = r["last_error"]?.stringValue { line += ", last error: \(e)" }
            print(line)
        }
        if let pending = report["pending"]?.arrayValue {
            if pending.isEmpty { print("pending:   none") }
            for p in pending { print("pending:   \(p["change"]?.stringValue ?? "") \(p["doc"]?.stringValue ?? "")") }
        }
        for u in report["unreadable"]?.arrayValue ?? [] { print("unreadable: \(u["doc"]?.stringValue ?? ""): \(u["error"]?.stringValue ?? "")") }
        for k in report["skipped"]?.arrayValue ?? [] { print("not synced: \(PrintablePath.text(k["path"]?.stringValue ?? "")): \(k["reason"]?.stringValue ?? "")") }
        for h in report["held_back"]?.arrayValue ?? [] { print("held back: \(h["doc"]?.stringValue ?? ""): \(h["reason"]?.stringValue ?? "")") }
    }
}
