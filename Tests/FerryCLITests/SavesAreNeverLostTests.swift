import Foundation
import Testing
import FerryCore
import FerryStore
import FerryTesting

/// Issue 16, end to end: real editors and tools saving, two and three real agents, all run as
/// an unprivileged user in folders under its home (where vim and emacs save by renaming the
/// file away), and nothing a user saved is lost anywhere.
@Suite(.serialized) struct SavesAreNeverLostTests {
    /// A listener with the inventory sample (`laptop`) and a replicator pointed at it
    /// (`desktop`), both agents run by the sandbox's user; `desktop` has synced the sample.
    final class TwoAgents {
        let sandbox: UserSandbox
        let laptop: String, desktop: String
        let listener: RunningAgent, replicator: RunningAgent
        let url: String

        init(sample: Bool = true) throws {
            sandbox = try UserSandbox()
            laptop = sandbox.path("laptop")
            desktop = sandbox.path("desktop")
            #expect(try sandbox.ferry(["init", laptop] + (sample ? ["--sample"] : []), in: sandbox.root).status == 0)
            #expect(try sandbox.ferry(["init", desktop], in: sandbox.root).status == 0)
            listener = try sandbox.agent(folder: laptop, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            url = try #require(listener.url)
            replicator = try sandbox.agent(folder: desktop, arguments: ["--no-listen", "--peer", url, "--max-attempt-wait", "0.5"])
        }

        /// The local revisions of `doc` in `folder`'s log, in order.
        func localRevisions(_ folder: String, _ doc: String) throws -> [LogEntry] {
            try FolderStore.open(at: folder, writable: false).readLogEntries().filter { $0.doc.rawValue == doc && $0.origin == "local" }
        }

        func allEntries(_ folder: String) throws -> [LogEntry] {
            try FolderStore.open(at: folder, writable: false).readLogEntries()
        }

        /// Waits until both folders show the same files and hold the same revisions.
        func converged(timeout: TimeInterval = 20) -> [String] {
            var diff: [String] = []
            eventually(timeout) {
                diff = FolderComparison.differences(laptop, desktop) + FolderComparison.historyDifferences([laptop, desktop])
                return diff.isEmpty
            }
            return diff
        }
    }

    /// `inotifywait` on a folder, recording deletions and renames away of its files.
    final class Watch {
        let process: ChildProcess
        let output: String

        init(_ folder: String, events: [String] = ["delete", "moved_from"]) throws {
            output = folder + "/../inotify-\(UUID().uuidString.prefix(6)).txt"
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let out = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            defer { try? out.close() }
            let null = open("/dev/null", O_RDONLY)
            defer { close(null) }
            process = try ChildProcess("/usr/bin/inotifywait", ["-m", "-q"] + events.flatMap { ["-e", $0] } + ["--format", "%e %f", folder],
                                       environment: [:], stdin: null, stdout: out.fileDescriptor, stderr: out.fileDescriptor)
            usleep(300_000)  // the watch is in place
        }

        /// The events seen so far on `name`.
        func events(on name: String) -> [String] {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").map(String.init).filter { $0.hasSuffix(" " + name) }
        }

        deinit { process.stop(grace: 1) }
    }

    /// Real vim (default settings, fresh HOME, so it saves by renaming the file to `f~` and
    /// writing a new one), nano and emacs (whose first save in a session renames too) save the
    /// list 100 times while two agents run: one revision per changed save, none for an
    /// unchanged one, no deletion anywhere, and the peer's file is never gone.
    @Test(arguments: ["vim", "nano", "emacs"])
    func everySaveOfARealEditorIsOneRevisionAndThePeerNeverLosesTheFile(_ editor: String) async throws {
        try await endToEnd {
            let t = try TwoAgents()
            #expect(t.converged().isEmpty)
            let peerWatch = try Watch(t.desktop)
            let ownWatch = try Watch(t.laptop, events: ["moved_from"])
            let before = try t.localRevisions(t.laptop, "samplelist.json").count
            let drive = try t.sandbox.run(["python3", t.sandbox.tools + "/drive-editor.py", "--editor", editor, "--folder", t.laptop,
                                           "--file", "samplelist.json", "--saves", "100", "--unchanged-every", "10"], timeout: 300)
            #expect(drive.status == 0, "\(drive.stdout.suffix(600))\n\(drive.stderr)")
            #expect(drive.stdout.contains("90 changed and 10 unchanged saves"), "\(drive.stdout.suffix(300))")
            #expect(t.converged().isEmpty, "\(t.replicator.log().suffix(2000))")
            let made = try t.localRevisions(t.laptop, "samplelist.json").dropFirst(before)
            #expect(made.count == 90, "\(made.count) revisions for 90 changed saves")
            for folder in [t.laptop, t.desktop] {
                #expect(try t.allEntries(folder).filter(\.deleted).isEmpty, "a deletion was recorded in \(folder)")
            }
            #expect(peerWatch.events(on: "samplelist.json").isEmpty, "the peer's file went away: \(peerWatch.events(on: "samplelist.json"))")
            if editor != "nano" {
                // The saves really went through a rename (the case that used to become a deletion).
                #expect(!ownWatch.events(on: "samplelist.json").isEmpty, "\(editor) never renamed the file away")
            }
            #expect(t.listener.stop() == 0)
            #expect(t.replicator.stop() == 0)
        }
    }

    /// vim's save, by hand: the file renamed away, an invalid one written 200 ms later, the
    /// backup removed. No deletion anywhere; the peer keeps its file; `ferry status` names the
    /// file with line:column; the fixed file is one revision on both sides.
    @Test func aRenameSaveOfInvalidJSONDeletesNothing() async throws {
        try await endToEnd {
            let t = try TwoAgents(sample: false)
            try t.sandbox.shell(#"printf '{"a": 1}\n' > f.json"#, in: t.laptop)
            #expect(eventually(10) { FileManager.default.fileExists(atPath: t.desktop + "/f.json") })
            let peerWatch = try Watch(t.desktop)
            let r = try t.sandbox.shell(#"mv f.json f.json~; sleep 0.2; printf '{ "a": ' > f.json; rm f.json~"#, in: t.laptop)
            #expect(r.status == 0)
            usleep(1_500_000)
            let status = try t.sandbox.ferry(["status"], in: t.laptop)
            #expect(status.stdout.contains("f.json: line 1, column 8"), "\(status.stdout)")
            #expect(try String(contentsOfFile: t.desktop + "/f.json", encoding: .utf8) == "{\n  \"a\": 1\n}\n")
            #expect(try t.allEntries(t.laptop).filter(\.deleted).isEmpty)
            // Fixed: one revision, on both sides.
            try t.sandbox.shell(#"printf '{ "a": 2 }\n' > f.json"#, in: t.laptop)
            #expect(t.converged().isEmpty)
            #expect(try t.localRevisions(t.laptop, "f.json").count == 2)
            #expect(try t.allEntries(t.desktop).filter { $0.doc.rawValue == "f.json" }.count == 2)
            #expect(try t.allEntries(t.desktop).filter(\.deleted).isEmpty)
            #expect(peerWatch.events(on: "f.json").isEmpty, "\(peerWatch.events(on: "f.json"))")
        }
    }

    /// B listens; A sets a=1 and pushes, C sets c=1 and pushes, so B merges them; A, before
    /// pulling, sets a=K and syncs. Both a=K and c=1 survive on every peer, whichever of A's
    /// and C's first revisions wins B's merge (both orders are run).
    @Test func threePeersKeepAnEditMadeAfterAMergeItHadNotSeen() async throws {
        try await endToEnd {
            let initial: JSONValue = ["x": 0]
            let root = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(initial.canonicalBytes))
            func child(_ body: JSONValue) -> RevisionID { RevisionID.compute(parent: root, deleted: false, body: BlobDigest.of(body.canonicalBytes)) }
            let a1 = child(["x": 0, "a": 1])
            func c1(_ v: Int) -> RevisionID { child(["x": 0, "c": .int(v)]) }
            // A value of c for each order of the two competing rev ids.
            let cLoses = try #require((1...100).first { c1($0) < a1 }), cWins = try #require((1...100).first { c1($0) > a1 })
            for c in [cLoses, cWins] {
                let sandbox = try UserSandbox()
                let (a, b, cPath) = (sandbox.path("a"), sandbox.path("b"), sandbox.path("c"))
                for folder in [a, b, cPath] { #expect(try sandbox.ferry(["init", folder, "--name", "shared"], in: sandbox.root).status == 0) }
                try sandbox.shell(#"printf '{"x": 0}\n' > doc.json"#, in: b)
                let listener = try sandbox.agent(folder: b, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
                let url = try #require(listener.url)
                #expect(eventually(10) { RevisionLogReader.lines(b).count == 1 })
                func sync(_ folder: String, _ extra: [String] = []) throws {
                    let r = try sandbox.ferry(["sync", url] + extra, in: folder)
                    #expect(r.status == 0, "\(r.stderr)")
                }
                try sync(a)
                try sync(cPath)
                try sandbox.shell(#"printf '{"x": 0, "a": 1}\n' > doc.json"#, in: a)
                try sync(a, ["--push"])
                try sandbox.shell("printf '{\"x\": 0, \"c\": \(c)}\\n' > doc.json", in: cPath)
                try sync(cPath, ["--push"])
                #expect(eventually(10) { (try? JSONParser.parse(Array(FileManager.default.contents(atPath: b + "/doc.json") ?? Data()))) == ["x": 0, "a": 1, "c": .int(c)] })
                // A, still at a=1, sets a=K and syncs both ways; then C catches up.
                try sandbox.shell(#"printf '{"x": 0, "a": "K"}\n' > doc.json"#, in: a)
                try sync(a)
                try sync(cPath)
                try sync(a)
                let expected: JSONValue = ["x": 0, "a": "K", "c": .int(c)]
                for folder in [a, b, cPath] {
                    #expect(eventually(10) { (try? JSONParser.parse(Array(FileManager.default.contents(atPath: folder + "/doc.json") ?? Data()))) == expected },
                            "c=\(c): \(folder): \(String(decoding: FileManager.default.contents(atPath: folder + "/doc.json") ?? Data(), as: UTF8.self))")
                }
                #expect(FolderComparison.historyDifferences([a, b, cPath]).isEmpty, "c=\(c): \(FolderComparison.historyDifferences([a, b, cPath]))")
                #expect(listener.stop() == 0)
            }
        }
    }

    /// Two tools save one document on two peers at 100 and 50 saves a second for 15 s, one by
    /// renaming a temp file over it, the other writing in place. Every member ends at its
    /// last write on both peers, and no local revision in either log changes the member the
    /// other peer's tool writes (a save never reverts what arrived from the other side).
    @Test func twoWritersOnOneDocumentLoseNothingAndRevertNothing() async throws {
        try await endToEnd {
            let t = try TwoAgents(sample: false)
            try t.sandbox.shell(#"printf '{"a": 0, "b": 0}\n' > doc.json"#, in: t.laptop)
            #expect(eventually(10) { FileManager.default.fileExists(atPath: t.desktop + "/doc.json") })
            let writer = t.sandbox.tools + "/writer.py"
            let line1 = t.sandbox.command(["python3", writer, "--file", t.laptop + "/doc.json", "--member", "a", "--rate", "100", "--seconds", "15"])
            let line2 = t.sandbox.command(["python3", writer, "--file", t.desktop + "/doc.json", "--member", "b", "--rate", "50", "--seconds", "15",
                                           "--mode", "inplace"])
            nonisolated(unsafe) var results: [FerryProcess.Result?] = [nil, nil]
            let group = DispatchGroup()
            let root = t.sandbox.root
            for (i, line) in [line1, line2].enumerated() {
                DispatchQueue.global().async(group: group) {
                    results[i] = try? FerryProcess.run(line[0], Array(line.dropFirst()), in: root, timeout: 60)
                }
            }
            group.wait()
            let lastA = try #require(results[0].flatMap { try? JSONParser.parse(Array($0.stdout.utf8)) }?["last"]?.intValue, "\(String(describing: results[0]))")
            let lastB = try #require(results[1].flatMap { try? JSONParser.parse(Array($0.stdout.utf8)) }?["last"]?.intValue, "\(String(describing: results[1]))")
            #expect(lastA > 1000 && lastB > 500, "the writers fell behind: a=\(lastA) b=\(lastB)")
            let expected: JSONValue = ["a": .int(lastA), "b": .int(lastB)]
            for folder in [t.laptop, t.desktop] {
                #expect(eventually(30) { (try? JSONParser.parse(Array(FileManager.default.contents(atPath: folder + "/doc.json") ?? Data()))) == expected },
                        "\(folder): \(String(decoding: FileManager.default.contents(atPath: folder + "/doc.json") ?? Data(), as: UTF8.self)) instead of a=\(lastA) b=\(lastB)")
            }
            #expect(t.converged(timeout: 30).isEmpty)
            // No save reverts the other side's member: each local edit keeps its parent's value of it.
            for (folder, other) in [(t.laptop, "b"), (t.desktop, "a")] {
                let store = try FolderStore.open(at: folder, writable: false)
                let doc = try DocumentID("doc.json")
                var reverts = 0, checked = 0
                for e in try store.readLogEntries() where e.doc == doc && e.origin == "local" && e.merged == nil && !e.deleted {
                    guard let parent = e.parent, let pnode = store.index[doc]?.nodes[parent], pnode.hasBody,
                          let node = store.index[doc]?.nodes[e.rev], node.hasBody else { continue }
                    checked += 1
                    if try store.jsonBody(of: node, doc: doc)[other] != store.jsonBody(of: pnode, doc: doc)[other] { reverts += 1 }
                }
                #expect(reverts == 0 && checked > 100, "\(folder): \(reverts) of \(checked) local revisions changed \(other)")
            }
        }
    }
}
