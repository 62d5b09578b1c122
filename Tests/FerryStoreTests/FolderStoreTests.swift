import Foundation
import Testing
import FerryCore
@testable import FerryStore
import FerryTesting

@Suite struct IngestTests {
    @Test func aSaveIsOneRevisionAndUnchangedContentIsNone() throws {
        let f = try TestFolder()
        let doc = try f.doc("notes/today.json")
        try f.dir.write("notes/today.json", #"{"a": 1}"#)
        guard case .recorded(let e1) = try f.store.ingest(doc) else { Issue.record("not recorded"); return }
        #expect(e1.parent == nil && e1.seq == 1)
        // Same content, other formatting: no change.
        try f.dir.write("notes/today.json", "{\n  \"a\" : 1.0\n}\n")
        #expect(try f.store.ingest(doc) == .unchanged)
        try f.dir.write("notes/today.json", #"{"a": 2}"#)
        guard case .recorded(let e2) = try f.store.ingest(doc) else { Issue.record("not recorded"); return }
        #expect(e2.parent == e1.rev)
        try FileManager.default.removeItem(atPath: f.dir.appending("notes/today.json"))
        guard case .deleted(let e3?) = try f.store.ingest(doc) else { Issue.record("deletion not recorded"); return }
        #expect(e3.deleted && e3.parent == e2.rev)
        #expect(f.store.index.liveDocuments.isEmpty)
    }

    /// A large file is read again by the hash of its bytes (`KnownFileText`): whatever changes
    /// in it — one digit in place, same size; a peer's revision written over it; a return to
    /// text this store wrote before — is recorded as what it now holds.
    @Test func aLargeFileReadAgainByItsTextStillSeesEveryChange() throws {
        let f = try TestFolder()
        let doc = try f.doc("list.json")
        func list(_ edited: Int) -> String {
            let items = (0..<2_000).map { #"{"key": "item \#($0)", "value": \#($0 == 1_000 ? edited : $0 % 10)}"# }
            return "{\"list\": [\n" + items.joined(separator: ",\n") + "\n]}\n"
        }
        func value(_ edited: Int) throws -> JSONValue { try JSONParser.parse(Array(list(edited).utf8)) }
        #expect(list(1).utf8.count >= KnownFileText.minimumSize)
        try f.dir.write("list.json", list(1))
        guard case .recorded(let first) = try f.store.ingest(doc) else { Issue.record("not recorded"); return }
        #expect(f.store.knownTexts[doc]?.object == first.object)
        #expect(try f.store.ingest(doc) == .unchanged)
        // One digit changed in place: same size, same inode.
        let fd = open(f.dir.appending("list.json"), O_WRONLY)
        let text = Array(list(2).utf8)
        #expect(pwrite(fd, text, text.count, 0) == text.count)
        close(fd)
        guard case .recorded(let second) = try f.store.ingest(doc) else { Issue.record("in-place edit missed"); return }
        #expect(second.object == BlobDigest.of(try value(2).canonicalBytes))
        // A peer's revision written over it: remembered by the text the store wrote.
        let peer = Made.child(of: second.rev, doc: doc, in: f.store, try value(3))
        _ = try peer.apply(to: f.store)
        #expect(f.store.knownTexts[doc]?.object == f.store.current(doc)?.object)
        #expect(try f.store.ingest(doc) == .unchanged)
        #expect(try f.store.digestOnDisk(doc) == .success(f.store.current(doc)!.object!))
        // Back to the first text: a new revision whose body is the first one's.
        try f.dir.write("list.json", list(1))
        guard case .recorded(let back) = try f.store.ingest(doc) else { Issue.record("return to old text missed"); return }
        #expect(back.object == first.object && back.parent == peer.rev)
        #expect(try f.store.verify().corruptObjects.isEmpty)
    }

    @Test func invalidJSONIsReportedWithLineAndColumnAndNotRecorded() throws {
        let f = try TestFolder()
        let doc = try f.doc("s.json")
        try f.dir.write("s.json", #"{"type": "#)
        #expect(try f.store.ingest(doc) == .unreadable("line 1, column 10: unexpected end of input, expected a value"))
        #expect(f.store.unreadable[doc] != nil)
        #expect(f.store.index.revisionCount == 0)
        try f.dir.write("s.json", #"["not an object"]"#)
        guard case .unreadable(let why) = try f.store.ingest(doc) else { Issue.record("array accepted"); return }
        #expect(why.contains("must be a JSON object"))
        try f.dir.write("s.json", #"{"type": "list"}"#)
        guard case .recorded = try f.store.ingest(doc) else { Issue.record("valid file not recorded"); return }
        #expect(f.store.unreadable[doc] == nil)
        #expect(f.store.index.revisionCount == 1)
    }

    @Test func aBlobReferenceToAMissingObjectIsNotRecorded() throws {
        let f = try TestFolder()
        let missing = BlobDigest.of([9, 9, 9])
        try f.dir.write("x.json", #"{"image": {"@type": "blob", "digest": "\#(missing)", "length": 3}}"#)
        guard case .unreadable(let why) = try f.store.ingest(try f.doc("x.json")) else { Issue.record("recorded"); return }
        #expect(why.contains("not in .ferry/objects"))
    }

    /// A batch looks at `.ferryignore` once per flush, not once per document: a rule the
    /// user adds during a long batch holds from its next flush on.
    @Test func aRuleAddedDuringABatchHoldsFromItsNextFlush() throws {
        let f = try TestFolder()
        for name in ["a.json", "b.json", "c.json"] { try f.dir.write(name, "{}") }
        try f.store.batch(flushEvery: 2) {
            _ = try f.store.ingest(try DocumentID("a.json"))
            try f.dir.write(".ferryignore", "b.json\nc.json\n")
            _ = try f.store.ingest(try DocumentID("b.json"))  // may still go by the batch's first look
            _ = try f.store.ingest(try DocumentID("c.json"))  // after the flush: the new rule
        }
        let ids = try ["a.json", "b.json", "c.json"].map { try DocumentID($0) }
        #expect(f.store.index[ids[0]] != nil)
        #expect(f.store.index[ids[2]] == nil)
    }

    @Test func scanRecordsFilesSkipsIgnoredAndSymlinksAndFindsDeletions() throws {
        let f = try TestFolder()
        try f.dir.write("a.json", "{}")
        try f.dir.write("images/b.jpg", "jpeg bytes")
        try f.dir.write("a.json.swp", "vim")
        try f.dir.write("notes~", "backup")
        try f.dir.write("build/out.o", "obj")
        try f.dir.write("keep/x.log", "log")
        try f.dir.write(".ferryignore", "build/\n*.log\n!keep/*.log\n")
        _ = try FerryProcess.shell("ln -s a.json \(f.root)/link.json")
        let report = try f.store.batch { try f.store.scanAndRecord() }
        #expect(Set(report.recorded.map(\.doc.rawValue)) == ["a.json", "images/b.jpg", "keep/x.log"])
        #expect(report.skipped.map(\.path) == ["link.json"])
        try FileManager.default.removeItem(atPath: f.dir.appending("images/b.jpg"))
        let second = try f.store.scanAndRecord()
        #expect(second.recorded.map(\.doc.rawValue) == ["images/b.jpg"] && second.recorded[0].deleted)
    }

    @Test func ignoreRulesFollowGitignore() {
        let r = IgnoreRules(ferryignore: "/top.txt\ndocs/**/draft.md\n*.bak\ncache/\n!important.bak\n# comment\n")
        #expect(r.isIgnored("top.txt", isDirectory: false))
        #expect(!r.isIgnored("sub/top.txt", isDirectory: false))
        #expect(r.isIgnored("docs/a/b/draft.md", isDirectory: false))
        #expect(r.isIgnored("docs/draft.md", isDirectory: false))
        #expect(r.isIgnored("x/y.bak", isDirectory: false))
        #expect(!r.isIgnored("important.bak", isDirectory: false))
        #expect(r.isIgnored("a/cache/file", isDirectory: false))
        #expect(!r.isIgnored("cache", isDirectory: false))
        for dropping in [".samplelist.json.swp", "x.swx", "file~", ".#lock", "#auto#", "4913", "a.tmp", ".~lock.x.ods#", ".ferry-tmp-12ab"] {
            #expect(IgnoreRules().isIgnored(dropping, isDirectory: false), "\(dropping)")
        }
        // A combining mark right after a slash: still two components (bytes, not Characters).
        #expect(IgnoreRules().isIgnored(".git/\u{301}x", isDirectory: false))
        #expect(IgnoreRules(ferryignore: "/docs/\u{301}x\n").isIgnored("docs/\u{301}x", isDirectory: false))
        #expect(!IgnoreRules(ferryignore: "/docs/\u{301}x\n").isIgnored("a/docs/\u{301}x", isDirectory: false))
        // A .ferryignore saved with CRLF line endings ("\r\n" is one Swift Character).
        let crlf = IgnoreRules(ferryignore: "build/\r\n*.log\r\n!keep.log\r\n# note\r\n")
        #expect(crlf.isIgnored("build/out.o", isDirectory: false) && crlf.isIgnored("a.log", isDirectory: false))
        #expect(!crlf.isIgnored("keep.log", isDirectory: false) && !crlf.isIgnored("# note", isDirectory: false))
        // "!" before a combining mark still negates (read as bytes).
        #expect(!IgnoreRules(ferryignore: "*\n!\u{301}x\n").isIgnored("\u{301}x", isDirectory: false))
        #expect(IgnoreRules.isSedTemporary("sedAb12Z9"))
        #expect(!IgnoreRules.isSedTemporary("sediment.json"))
    }

    /// The rules match as gitignore's definition does, written plainly with `fnmatch` per
    /// path component (what `IgnoreRules` compiles to byte comparisons where it can): random
    /// rule sets against random paths.
    @Test func ignoreRulesMatchAPlainFnmatchReading() {
        struct Plain {
            var rules: [(parts: [String], negated: Bool, directoryOnly: Bool)] = []
            init(_ lines: [String]) {
                for raw in IgnoreRules.builtIn + lines {
                    var line = raw, negated = false, directoryOnly = false
                    if line.utf8.first == 0x21 { negated = true; line = String(decoding: line.utf8.dropFirst(), as: UTF8.self) }
                    if line.utf8.first == 0x5C { line = String(decoding: line.utf8.dropFirst(), as: UTF8.self) }
                    if line.utf8.last == 0x2F { directoryOnly = true; line = String(decoding: line.utf8.dropLast(), as: UTF8.self) }
                    let anchored = line.utf8.contains(0x2F)
                    if line.utf8.first == 0x2F { line = String(decoding: line.utf8.dropFirst(), as: UTF8.self) }
                    var parts = Self.split(line)
                    if !anchored { parts.insert("**", at: 0) }
                    rules.append((parts, negated, directoryOnly))
                }
            }
            /// Components by the byte "/" ("/" and a combining mark after it are one Character).
            static func split(_ path: String) -> [String] {
                path.utf8.split(separator: 0x2F).map { String(decoding: $0, as: UTF8.self) }
            }
            static func match(_ pattern: ArraySlice<String>, _ path: ArraySlice<String>) -> Bool {
                guard let first = pattern.first else { return path.isEmpty }
                if first == "**" {
                    return (path.startIndex...path.endIndex).contains { match(pattern.dropFirst(), path[$0...]) }
                }
                guard let name = path.first, fnmatch(first, name, 0) == 0 else { return false }
                return match(pattern.dropFirst(), path.dropFirst())
            }
            func ignored(_ path: String, isDirectory: Bool) -> Bool {
                let parts = Self.split(path)
                for end in 1...parts.count {
                    var verdict = false
                    for r in rules where !r.directoryOnly || isDirectory || end < parts.count {
                        if Self.match(r.parts[...], parts[0..<end]) { verdict = !r.negated }
                    }
                    if verdict { return true }
                }
                return false
            }
        }
        let globs = ["*.bak", "a*", "*b", "a*b", "x?", "[ab]*", "\\#x", "**", "docs", "a", "b.json", "*.json", "*", ".*", "c*d*e",
                     "\u{301}x", "\u{301}*"]
        let names = ["a", "b", "ab", "a.bak", "b.json", "docs", "x1", "xy", "#x", ".hidden", "cde", "cxdxe", "aab", "\u{e9}.json",
                     "\u{301}x", "\u{301}b"]
        var g = SeededGenerator(seed: 7)
        for _ in 0..<300 {
            var lines: [String] = []
            for _ in 0..<Int.random(in: 0...4, using: &g) {
                var line = (0..<Int.random(in: 1...3, using: &g)).map { _ in globs.randomElement(using: &g)! }.joined(separator: "/")
                if Bool.random(using: &g) && Bool.random(using: &g) { line = "/" + line }
                if Bool.random(using: &g) && Bool.random(using: &g) { line += "/" }
                if Int.random(in: 0..<5, using: &g) == 0 { line = "!" + line }
                lines.append(line)
            }
            let fast = IgnoreRules(ferryignore: lines.joined(separator: "\n")), plain = Plain(lines)
            for _ in 0..<20 {
                let path = (0..<Int.random(in: 1...4, using: &g)).map { _ in names.randomElement(using: &g)! }.joined(separator: "/")
                let isDirectory = Bool.random(using: &g)
                #expect(fast.isIgnored(path, isDirectory: isDirectory) == plain.ignored(path, isDirectory: isDirectory), "\(lines) \(path)")
                let parts = Plain.split(path)
                if !(1..<parts.count).contains(where: { plain.ignored(parts[0..<$0].joined(separator: "/"), isDirectory: true) }) {
                    #expect(fast.isIgnoredEntry(parent: Array(parts.dropLast()), name: parts.last!, isDirectory: isDirectory)
                            == plain.ignored(path, isDirectory: isDirectory), "\(lines) \(path)")
                }
            }
        }
    }
}

/// Issue 17: what the log accepted it reads back, and a sequence is never used twice.
@Suite struct LogBoundaryTests {
    @Test func aSequenceInADamagedLineIsNeverUsedAgain() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        try f.store.recordLocalJSON(doc, ["a": 1])
        // A line that cannot be read back (a generation 2 without a parent), numbered 7.
        let damaged = #"{"seq":7,"doc":"a.json","rev":"2-ab","parent":null,"deleted":true,"kind":"json","size":0,"origin":"x","time":""}"#
        try FileSystem.writeAll(try FileSystem.open(f.root + "/.ferry/revs.log", O_WRONLY | O_APPEND), Array((damaged + "\n").utf8),
                                path: "revs.log")
        f.store = try FolderStore.open(at: f.root, writable: false)
        #expect(f.store.damagedLogLines.count == 1)
        f.store = try FolderStore.open(at: f.root, writable: true)
        let entry = try #require(try f.store.recordLocalJSON(doc, ["a": 2]))
        #expect(entry.seq == 8)
    }

    @Test func aLinePeersCouldOnceGetAcknowledgedIsRefusedByTheSameRule() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        let bytes = JSONValue.object(["a": 1]).canonicalBytes
        let object = try f.store.objects.write(bytes)
        let orphan = IncomingRevision(doc: doc, rev: try RevisionID("3-ab"), history: [], deleted: false, object: object,
                                      size: bytes.count, origin: "peer")
        #expect(throws: StoreError.self) { try f.store.applyRemote(orphan) }
        let posing = IncomingRevision(doc: doc, rev: try RevisionID("1-ab"), history: [], deleted: false, object: object,
                                      size: bytes.count, origin: "local")
        #expect(throws: StoreError.self) { try f.store.applyRemote(posing) }
        #expect(try f.store.readLogEntries().isEmpty)
    }
}

@Suite struct CheckpointBoundTests {
    /// Peers inventing client ids cannot fill the disk: the least recently saved go.
    @Test func checkpointsAreCappedAndClientIdsBounded() throws {
        let f = try TestFolder()
        let checkpoints = CheckpointStore(layout: f.store.layout, capacity: 5)
        for i in 0..<12 { try checkpoints.set("client-\(i)", expectedRev: nil, local: i, remote: i) }
        #expect(try FileSystem.listDirectory(checkpoints.directory).count == 5)
        #expect(checkpoints.get("client-11")?.local == 11)
        #expect(checkpoints.get("client-0") == nil)
        // Saving an existing one makes no room.
        try checkpoints.set("client-11", expectedRev: 1, local: 20, remote: 20)
        #expect(try FileSystem.listDirectory(checkpoints.directory).count == 5)
        #expect(throws: StoreError.self) { try checkpoints.set(String(repeating: "x", count: 121), expectedRev: nil, local: 0, remote: 0) }
    }
}

@Suite struct RemoteRevisionTests {
    @Test func aRemoteRevisionIsWrittenAtomicallyAndPrettyPrinted() throws {
        let f = try TestFolder()
        let doc = try f.doc("dir/new.json")
        let r = Made.root(doc, ["b": 1, "a": [true, nil]])
        _ = try r.apply(to: f.store)
        #expect(try f.dir.read("dir/new.json") == "{\n  \"a\": [\n    true,\n    null\n  ],\n  \"b\": 1\n}\n")
        // A remote deletion removes the file and the directory it leaves empty.
        _ = try r.child(nil).apply(to: f.store)
        #expect(!FileSystem.exists(f.dir.appending("dir")))
    }

    @Test func anUnrecordedLocalEditIsIngestedFirstAndMergedNotOverwritten() throws {
        let f = try TestFolder()
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1, "b": 1])
        _ = try base.apply(to: f.store)
        // The user edits "a" on disk; no agent recorded it yet.
        try f.dir.write("list.json", #"{"a": 5, "b": 1}"#)
        // A peer changed "b".
        _ = try base.child(["a": 1, "b": 7]).apply(to: f.store)
        let merged = try JSONParser.parse(try f.dir.read("list.json"))
        #expect(merged == ["a": 5, "b": 7])
        #expect(f.store.index[doc]!.liveLeaves.count == 1)
    }

    /// In a batch a document's file is renamed into place only at commit, after the data is
    /// durable; a second revision of the same document in the batch commits the first one's
    /// file first, so its ingest sees it (and records no deletion or local edit).
    @Test func inABatchFilesAppearAtCommitAndARepeatedDocumentSeesTheEarlierFile() throws {
        let f = try TestFolder()
        let doc = try f.doc("dir/list.json")
        let first = Made.root(doc, ["a": 1])
        let second = first.child(["a": 2])
        try f.store.batch {
            _ = try first.apply(to: f.store)
            #expect(!FileSystem.exists(f.dir.appending("dir/list.json")), "renamed before the batch's syncfs")
            _ = try second.apply(to: f.store)
        }
        #expect(try JSONParser.parse(try f.dir.read("dir/list.json")) == ["a": 2])
        #expect(try FileSystem.listDirectory(f.dir.appending("dir")) == ["list.json"], "a temp file was left behind")
        let log = try f.store.readLogEntries()
        #expect(log.map(\.rev) == [first.rev, second.rev], "\(log)")
        #expect(try f.store.ingest(doc) == .unchanged)
    }

    /// A user's save that lands between a peer's revision being written and the batch's
    /// commit wins: the temp file is dropped; the save, made from the file's old content, is
    /// recorded as a child of that content's revision, and merged with the peer's.
    @Test func aSaveBeforeTheBatchCommitsIsKeptAndMerged() throws {
        let f = try TestFolder()
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1, "b": 1])
        _ = try base.apply(to: f.store)
        try f.store.batch {
            _ = try base.child(["a": 1, "b": 2]).apply(to: f.store)
            try f.dir.write("list.json", #"{"a": 99, "b": 1, "mine": true}"#)
        }
        #expect(try f.dir.read("list.json") == #"{"a": 99, "b": 1, "mine": true}"#)
        #expect(try FileSystem.listDirectory(f.dir.path).filter { $0 != ".ferry" } == ["list.json"])
        #expect(f.store.fileRevision(doc) == base.rev)
        guard case .recorded(let entry) = try f.store.ingest(doc) else { Issue.record("the save was not recorded"); return }
        #expect(entry.parent == base.rev)
        // Nothing reverted: the peer's b and the user's a and mine.
        #expect(try JSONParser.parse(try f.dir.read("list.json")) == ["a": 99, "b": 2, "mine": true])
        #expect(!f.store.index[doc]!.hasConflict)
        #expect(f.store.fileRevision(doc) == f.store.current(doc)?.rev)
    }

    /// A peer's revision, or a restored one, replaces the file's content, not the permissions
    /// the user gave it: a private file stays private, a script executable, a read-only file
    /// read-only.
    @Test func aReplacedFileKeepsItsPermissions() throws {
        for batched in [false, true] {
            for mode: mode_t in [0o600, 0o755, 0o444] {
                let f = try TestFolder()
                let doc = try f.doc("secret.json")
                let base = Made.root(doc, ["v": 1])
                _ = try base.apply(to: f.store)
                #expect(chmod(f.dir.appending("secret.json"), mode) == 0)
                #expect(try f.store.ingest(doc) == .unchanged)  // as the agent does when it sees the chmod
                let next = base.child(["v": 2])
                if batched {
                    try f.store.batch {
                        _ = try next.apply(to: f.store)
                        // Written, not yet renamed: the new content is not readable by others meanwhile.
                        let temps = try FileManager.default.contentsOfDirectory(atPath: f.dir.path).filter { $0.hasPrefix(FolderScanner.temporaryPrefix) }
                        #expect(temps.count == 1 && temps.allSatisfy { fileMode(f.dir.appending($0)) == 0o600 }, "\(temps)")
                    }
                } else {
                    _ = try next.apply(to: f.store)
                }
                #expect(try JSONParser.parse(try f.dir.read("secret.json")) == ["v": 2], "\(batched) \(mode)")
                #expect(fileMode(f.dir.appending("secret.json")) == mode, "\(batched) \(String(mode, radix: 8))")
                _ = try f.store.restore(doc, to: f.store.index[doc]!.nodes[base.rev]!)
                #expect(try JSONParser.parse(try f.dir.read("secret.json")) == ["v": 1])
                #expect(fileMode(f.dir.appending("secret.json")) == mode, "restored, \(String(mode, radix: 8))")
            }
        }
        // Never set-user-id or set-group-id on content a peer chose.
        let f = try TestFolder()
        let base = Made.root(try f.doc("tool.json"), ["v": 1])
        _ = try base.apply(to: f.store)
        #expect(chmod(f.dir.appending("tool.json"), 0o6755) == 0)
        #expect(try f.store.ingest(base.doc) == .unchanged)
        _ = try base.child(["v": 2]).apply(to: f.store)
        var st = stat()
        #expect(lstat(f.dir.appending("tool.json"), &st) == 0 && st.st_mode & 0o7777 == 0o755, "\(String(st.st_mode & 0o7777, radix: 8))")
    }

    /// A file document larger than the copy's writeback stride (8 MiB) is copied whole from
    /// its object, whether or not a batch groups the fsyncs, though its pages are dropped
    /// from the cache as the copy goes.
    @Test func aLargeFileDocumentIsCopiedWholeFromItsObject() throws {
        for batched in [false, true] {
            let f = try TestFolder()
            let source = TemporaryDirectory()
            var bytes = [UInt8](repeating: 0, count: (20 << 20) + 12_345)
            var g = SystemRandomNumberGenerator()
            for i in stride(from: 0, to: bytes.count, by: 8) { bytes[i] = g.next() }
            try Data(bytes).write(to: URL(fileURLWithPath: source.appending("big.bin")))
            let (digest, size) = try f.store.objects.importFile(at: source.appending("big.bin"))
            let doc = try f.doc("media/big.bin")
            let incoming = IncomingRevision(doc: doc, rev: RevisionID.compute(parent: nil, deleted: false, body: digest), history: [],
                                            deleted: false, object: digest, size: size, origin: "peer")
            if batched { try f.store.batch { _ = try f.store.applyRemote(incoming) } } else { _ = try f.store.applyRemote(incoming) }
            let copied = try Data(contentsOf: URL(fileURLWithPath: f.dir.appending("media/big.bin")))
            #expect(copied.count == bytes.count && copied == Data(bytes), "batched: \(batched)")
            #expect(try f.store.ingest(doc) == .unchanged)
        }
    }

    @Test func anUnparseableLocalFileIsNeverClobbered() throws {
        let f = try TestFolder()
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1])
        _ = try base.apply(to: f.store)
        try f.dir.write("list.json", #"{"a": "#)
        _ = try base.child(["a": 2]).apply(to: f.store)
        #expect(try f.dir.read("list.json") == #"{"a": "#)
        #expect(f.store.current(doc)?.rev == base.child(["a": 2]).rev)
    }

    @Test func hostileRevisionsAreRejected() throws {
        let f = try TestFolder()
        let doc = try f.doc("x.json")
        let notObject = try f.store.objects.write(Array("[1]".utf8))
        #expect(throws: StoreError.self) {
            try f.store.insertRemote(IncomingRevision(doc: doc, rev: RevisionID.compute(parent: nil, deleted: false, body: notObject),
                                                      history: [], deleted: false, object: notObject, size: 3, origin: "evil"))
        }
        let nonCanonical = try f.store.objects.write(Array("{ }".utf8))
        #expect(throws: StoreError.self) {
            try f.store.insertRemote(IncomingRevision(doc: doc, rev: try RevisionID("1-00"), history: [], deleted: false,
                                                      object: nonCanonical, size: 3, origin: "evil"))
        }
        #expect(throws: StoreError.self) {
            try f.store.insertRemote(IncomingRevision(doc: doc, rev: try RevisionID("3-00"), history: [try RevisionID("1-aa")],
                                                      deleted: true, object: nil, size: 0, origin: "evil"))
        }
        #expect(f.store.index.revisionCount == 0)
    }
}

@Suite struct ConvergenceTests {
    /// Two stores fed the same concurrent revisions in different orders end with identical rev
    /// ids, byte-identical bodies and files, and no revision's body lost. As in replication,
    /// each concurrent revision arrives as a branch tip carrying its history.
    @Test func twoStoresConvergeWhateverTheOrder() throws {
        for seed in UInt64(1)...60 {
            var m = InventoryMutator(seed: seed)
            let doc = try DocumentID("list.json")
            let base = Made.root(doc, m.makeList(count: Int.random(in: 1...10, using: &m.rng)))
            var branchA = [base.child(m.edit(base.body!))]
            var branchB = [base.child(m.edit(base.body!))]
            for _ in 0..<Int.random(in: 0...2, using: &m.rng) { branchA.append(branchA.last!.child(m.edit(branchA.last!.body!))) }
            for _ in 0..<Int.random(in: 0...2, using: &m.rng) { branchB.append(branchB.last!.child(m.edit(branchB.last!.body!))) }
            if seed % 7 == 0 { branchB.append(branchB.last!.child(nil)) }  // one side deletes
            let one = try TestFolder(), two = try TestFolder()
            _ = try base.apply(to: one.store)
            _ = try base.apply(to: two.store)
            for r in [branchA.last!, branchB.last!] { _ = try r.apply(to: one.store) }
            for r in [branchB.last!, branchA.last!] { _ = try r.apply(to: two.store) }
            let c1 = try #require(one.store.current(doc)), c2 = try #require(two.store.current(doc))
            #expect(c1.rev == c2.rev, "seed \(seed)")
            #expect(c1.object == c2.object, "seed \(seed)")
            #expect(Set(one.store.index[doc]!.nodes.keys) == Set(two.store.index[doc]!.nodes.keys), "seed \(seed)")
            #expect(one.store.index[doc]!.liveLeaves.count <= 1)
            let file1 = try? one.dir.read("list.json"), file2 = try? two.dir.read("list.json")
            #expect(file1 == file2, "seed \(seed)")
            // Every body that was recorded is still stored, and reads back.
            for r in [base, branchA.last!, branchB.last!] where r.body != nil {
                for store in [one.store, two.store] {
                    let node = try #require(store.index[doc]?.nodes[r.rev])
                    #expect(try store.jsonBody(of: node, doc: doc) == r.body)
                }
            }
            // Feeding each store the other's resolution revisions changes nothing (no ping-pong).
            let before = one.store.index.revisionCount
            for e in try two.store.readLogEntries() where e.conflict != nil {
                let body = e.object.map { try? two.store.objects.read($0, packedAt: e.pack, size: e.size) } ?? nil
                if let body { try one.store.objects.writeBody(body) }
                _ = try one.store.applyRemote(IncomingRevision(doc: e.doc, rev: e.rev, history: two.store.index[doc]!.history(of: e.rev).dropFirst().map { $0 },
                                                               deleted: e.deleted, object: e.object, size: e.size, origin: "two", merged: e.merged))
            }
            #expect(one.store.index.revisionCount == before, "seed \(seed)")
        }
    }

    /// Two live branches with the very same body (merges of the same edits made in other
    /// orders): the loser is closed with no merge, by a deletion every peer makes alike.
    @Test func twinBranchesAreClosedWithoutAMerge() throws {
        let f = try TestFolder(), other = try TestFolder()
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1, "b": 1])
        let twin: JSONValue = ["a": 2, "b": 2]
        let left = base.child(["a": 2, "b": 1]), right = base.child(["a": 1, "b": 2])
        // The second twin arrives with its history (its parent unknown here until then).
        let made = [base, left, left.child(twin), right.child(twin)]
        for r in made { _ = try r.apply(to: f.store) }
        let tree = try #require(f.store.index[doc])
        #expect(tree.liveLeaves.count == 1 && tree.nodes.keys.count == made.count + 2, "\(tree.nodes.keys.sorted())")
        let closing = try #require(try f.store.readLogEntries().last)
        let loser = try #require(closing.parent)
        #expect(closing.deleted && closing.rev == RevisionID.closingTwin(loser) && [made[2].rev, made[3].rev].contains(loser))
        #expect(f.store.current(doc)?.object == BlobDigest.of(twin.canonicalBytes))
        #expect(tree.closesMergedBranch(tree.nodes[closing.rev]!) && f.store.index.conflict(closedBy: closing) == nil)
        // A peer that has one twin takes the closing before the other twin's body (its id
        // checks as a closing), and ends with the same tree.
        for r in made.prefix(3) { _ = try r.apply(to: other.store) }
        let taken = try other.store.applyRemote(IncomingRevision(doc: doc, rev: closing.rev, history: tree.history(of: closing.rev).dropFirst().map { $0 },
                                                                 deleted: true, object: nil, size: 0, origin: "f"))
        #expect(taken.map(\.rev) == [closing.rev])
        _ = try made[3].apply(to: other.store)
        #expect(Set(other.store.index[doc]!.nodes.keys) == Set(tree.nodes.keys))
        #expect(try other.dir.read("list.json") == f.dir.read("list.json"))

        // A peer that had the closed twin as its current revision removes "a" on top of it: the
        // removal stands, merged against the twins' content (not against the base, where the
        // twins' value for "a" would beat it as a change beats a removal).
        let closed = try #require(made.first { $0.rev == loser })
        _ = try closed.child(["b": 2]).apply(to: f.store)
        #expect(try JSONParser.parse(try f.dir.read("list.json")) == ["b": 2])
        #expect(f.store.index[doc]!.liveLeaves.count == 1)
    }

    /// Someone deletes a merge on one peer while another peer, holding the same merge made in
    /// the other order (a twin), has closed it as a twin: the deletion had seen every edit the
    /// surviving twin merges, so that twin is closed too and the document stays deleted (with
    /// no second live leaf, nothing had looked; simulation seed 7119).
    @Test func aDeletionOfAClosedTwinClosesTheTwinThatSurvived() throws {
        let f = try TestFolder()
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1, "b": 1])
        let left = base.child(["a": 2, "b": 1]), right = base.child(["a": 1, "b": 2])
        for r in [base, left, right] { _ = try r.apply(to: f.store) }
        let merge = try #require(f.store.current(doc))
        let merged = try #require(f.store.index[doc]?.mergedParent(of: merge.rev))
        let firstParent = try #require(merge.parent)
        // The same merge made elsewhere with the parents the other way round: a twin.
        let twin = RevisionID.compute(parent: merged, deleted: false, body: merge.object, merged: firstParent)
        _ = try f.store.applyRemote(IncomingRevision(doc: doc, rev: twin, history: [merged, base.rev], deleted: false, object: merge.object,
                                                     size: merge.size, origin: "peer", merged: firstParent))
        let tree = try #require(f.store.index[doc])
        let closedTwin = try #require([merge.rev, twin].first { tree.nodes[RevisionID.closingTwin($0)] != nil })
        let survivor = closedTwin == merge.rev ? twin : merge.rev
        #expect(f.store.current(doc)?.rev == survivor)
        // The deletion of the closed twin, made where it was current, arrives in a pass.
        let deletion = RevisionID.compute(parent: closedTwin, deleted: true, body: nil)
        _ = try f.store.applyRemote(IncomingRevision(doc: doc, rev: deletion, history: tree.history(of: closedTwin), deleted: true,
                                                     object: nil, size: 0, origin: "peer"), resolve: false)
        _ = try f.store.resolvePendingConflicts()
        #expect(f.store.current(doc)?.deleted == true, "\(f.store.index[doc]!.leafNodes.map(\.rev))")
        #expect(!FileManager.default.fileExists(atPath: f.store.layout.path(of: "list.json")))
    }

    @Test func threeConcurrentBranchesConvergeAfterExchanging() throws {
        var m = InventoryMutator(seed: 99)
        let doc = try DocumentID("list.json")
        let base = Made.root(doc, m.makeList(count: 8))
        let branches = (0..<3).map { _ in base.child(m.edit(base.body!)) }
        let stores = try (0..<3).map { _ in try TestFolder() }
        for (i, s) in stores.enumerated() {
            _ = try base.apply(to: s.store)
            _ = try branches[i].apply(to: s.store)
        }
        // Exchange everything until nothing new moves (bounded), as replication does: a pass
        // brings all of the sender's revisions, and the receiver resolves once it has them.
        var moved = true
        for _ in 0..<6 where moved {
            moved = false
            for a in stores {
                for b in stores where a !== b {
                    for e in try a.store.readLogEntries() {
                        if let o = e.object { try b.store.objects.writeBody(try a.store.objects.read(o, packedAt: e.pack, size: e.size)) }
                        let made = try b.store.applyRemote(IncomingRevision(doc: e.doc, rev: e.rev, history: Array(a.store.index[doc]!.history(of: e.rev).dropFirst()),
                                                                            deleted: e.deleted, object: e.object, size: e.size, origin: "x", merged: e.merged),
                                                           resolve: false)
                        if !made.isEmpty { moved = true }
                    }
                    _ = try b.store.resolvePendingConflicts()
                }
            }
        }
        #expect(!moved, "still moving after six rounds")
        let currents = stores.map { $0.store.current(doc)!.rev }
        #expect(Set(currents).count == 1)
        let histories = stores.map { Set($0.store.index[doc]!.nodes.keys) }
        #expect(Set(histories).count == 1, "histories differ")
        let files = try stores.map { try $0.dir.read("list.json") }
        #expect(Set(files).count == 1)
    }
}

@Suite struct CompactTests {
    /// What each side of a closed conflict lost is told from the merge base's body; once
    /// `compact` dropped it, it is not known, and not guessed against an empty base.
    @Test func whatEachSideLostIsNotGuessedOnceTheMergeBaseIsCompacted() throws {
        let f = try TestFolder()
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1, "b": 1, "c": 1])
        _ = try base.apply(to: f.store)
        _ = try base.child(["a": 2, "b": 1, "c": 1]).apply(to: f.store)
        _ = try base.child(["a": 3, "b": 1, "c": 1]).apply(to: f.store)
        let closing = try #require(try f.store.readLogEntries().last { $0.deleted })
        let record = try #require(f.store.index.conflict(closedBy: closing))
        let result = try #require(f.store.current(doc)).rev
        let told = try #require(f.store.lostValues(doc, winner: record.winner, loser: record.loser, result: result))
        #expect(told.winner.isEmpty && told.loser == [LostValue(path: "a", had: 2, kept: 3)], "\(told)")
        #expect(try f.store.compact(keepDepth: 1).revisionsCompacted == 1)
        #expect(f.store.index[doc]?.nodes[base.rev]?.hasBody == false)
        #expect(f.store.lostValues(doc, winner: record.winner, loser: record.loser, result: result) == nil)
    }

    @Test func compactDropsOldBodiesAndKeepsTheFolderValid() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        for i in 0..<30 { try f.store.recordLocalJSON(doc, ["n": .int(i)]) }
        let report = try f.store.compact(keepDepth: 5)
        #expect(report.revisionsCompacted == 24)
        #expect(report.objectsRemoved == 24)
        let reopened = try FolderStore.open(at: f.root, writable: false)
        #expect(reopened.index.revisionCount == 30)
        #expect(reopened.current(doc)?.rev == f.store.current(doc)?.rev)
        let v = try reopened.verify()
        #expect(v.isClean, "\(v.logProblems) \(v.missingObjects.map(\.digest))")
    }

    /// A kept body that cannot be read stops the compaction before anything is removed: the
    /// blobs it references would otherwise look unneeded (issue 17).
    @Test func anUnreadableKeptBodyStopsCompactionAndRemovesNothing() throws {
        let f = try TestFolder()
        let blob = try f.store.objects.write(Array("image bytes".utf8))
        let doc = try f.doc("a.json")
        for i in 0..<10 { try f.store.recordLocalJSON(doc, ["n": .int(i), "image": ["@type": "blob", "digest": .string(blob.description), "length": 11]]) }
        // The kept body's line is cut off its pack.
        let kept = try #require(f.store.current(doc)?.pack)
        let pack = BodyPacks.path(of: kept.pack, in: f.store.layout.packsDirectory)
        #expect(truncate(pack, off_t(kept.offset)) == 0)
        let before = (try f.store.objects.allObjects().objects.count, try f.store.objects.packs.numbers(), try f.store.readLogEntries())
        #expect(throws: (any Error).self) { try f.store.compact(keepDepth: 2) }
        #expect(try f.store.objects.allObjects().objects.count == before.0)
        #expect(try f.store.objects.packs.numbers() == before.1)
        #expect(try f.store.readLogEntries() == before.2)
        #expect(f.store.objects.contains(blob))
    }
}
