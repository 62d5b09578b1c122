import FerryCore
import FerryStore
import FerryTesting
import Foundation
import Testing

/// Two or three folders kept in sync by separate `ferry` processes over 127.0.0.1: the
/// listener (`serve`), the replicator (`serve --peer`, `sync`), the wire protocol between them.
@Suite(.serialized) struct SyncTests {
    /// Each scenario runs once per wire protocol: `ferry-1`, and Couchbase Lite's BLIP
    /// (`--protocol cbl`, ferry at both ends), so both sit behind the same replication logic.
    static let wires = ["ferry", "cbl"]

    /// `ferry serve` on 127.0.0.1 with a free port (or `port`), plus `extra` arguments.
    func serve(_ folder: String, port: Int = 0, _ extra: [String] = []) throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: ["--interface", "127.0.0.1", "--port", "\(port)", "--tls", "off"] + extra)
    }

    /// `ferry serve` replicating continuously with `url` (and listening too, unless told not to).
    func peer(_ folder: String, with url: String, _ extra: [String] = ["--no-listen"], wire: String = "auto") throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: extra + ["--peer", url, "--max-attempt-wait", "0.5", "--protocol", wire])
    }

    func initFolder(_ path: String, sample: Bool = false, name: String = "inventory") throws {
        let r = try FerryProcess.ferry(["init", path, "--name", name] + (sample ? ["--sample"] : []))
        #expect(r.status == 0, "\(r.stderr)")
    }

    func lineCount(_ folder: String) -> Int { RevisionLogReader.lines(folder).count }

    /// The sequence of the last line in `folder`'s log (-1 if none).
    func lastSequence(_ folder: String) -> Int {
        let log = (try? String(contentsOfFile: folder + "/.ferry/revs.log", encoding: .utf8)) ?? ""
        let last = log.split(separator: "\n").last.map { Data($0.utf8) } ?? Data()
        return ((try? JSONSerialization.jsonObject(with: last)) as? [String: Any])?["seq"] as? Int ?? -1
    }

    /// A checkpoint of `replicator`'s folder (`direction`: "push" or "pull") as the listener's
    /// folder keeps it (`CheckpointStore`): its revision (one more per save) and the sequences
    /// it covers.
    func checkpoint(_ direction: String, of replicator: String, on listener: String) -> CheckpointStore.Entry? {
        guard let bytes = FileManager.default.contents(atPath: FolderLayout(root: replicator).folderFile),
              let info = try? FolderInfo(json: JSONParser.parse(Array(bytes))) else { return nil }
        return CheckpointStore(layout: FolderLayout(root: listener)).get("\(direction):\(info.id)")
    }

    /// Visible `.json` files of `folder` that do not parse (a partial write would show here).
    func unparseableDocuments(_ folder: String) -> [String] {
        FolderComparison.files(folder).filter { path in
            guard path.hasSuffix(".json"), !(path.split(separator: "/").last?.hasPrefix(".") ?? false) else { return false }
            let bytes = FileManager.default.contents(atPath: folder + "/" + path) ?? Data()
            return (try? JSONParser.parse(Array(bytes))) == nil
        }
    }

    /// Waits until the two folders show the same files and their logs hold the same
    /// revisions (`jq -r .rev | sort -u` alike: losing branches and merges included).
    func converged(_ a: String, _ b: String, timeout: TimeInterval = 15) -> [String] {
        var diff: [String] = []
        eventually(timeout) {
            diff = FolderComparison.differences(a, b) + FolderComparison.historyDifferences([a, b])
            return diff.isEmpty
        }
        return diff
    }

    /// Waits until the log of each folder stops growing for `quiet` seconds; true if it did.
    func logsSettle(_ folders: [String], quiet: TimeInterval = 1.5, timeout: TimeInterval = 15) -> Bool {
        var last = folders.map(lineCount)
        var stableSince = Date()
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            usleep(100_000)
            let now = folders.map(lineCount)
            if now != last { last = now; stableSince = Date() }
            if Date().timeIntervalSince(stableSince) >= quiet { return true }
        }
        return false
    }

    @Test(arguments: SyncTests.wires) func aOneShotPullOfTheSampleGivesIdenticalDocumentsAndEveryBlob(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            let listener = try serve(a)
            let url = try #require(listener.url)
            let sync = try FerryProcess.ferry(["sync", "--protocol", wire, url, "--pull"], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(sync.stdout.contains("received 1"), "\(sync.stdout)")
            let same = try FerryProcess.shell("diff <(jq -S . a/samplelist.json) <(jq -S . b/samplelist.json)", in: tmp.path)
            #expect(same.status == 0, "\(same.stdout)")
            // Every blob the list refers to is in b's objects, and both folders verify.
            let missing = try FerryProcess.shell("jq -r '.list[].image.digest' b/samplelist.json | sed 's/^sha256-//' | sort -u | while read d; do test -f b/.ferry/objects/${d:0:2}/${d:2} || echo $d; done", in: tmp.path)
            #expect(missing.status == 0 && missing.stdout.isEmpty, "missing blobs: \(missing.stdout)")
            #expect(try FerryProcess.ferry(["verify"], in: b).status == 0)
            // --doc-id: only the named document comes over.
            try tmp.write("a/notes.json", #"{"text": "only this"}"#)
            #expect(eventually { RevisionLogReader.lines(a).count == 2 })
            let c = tmp.appending("c")
            try initFolder(c)
            let filtered = try FerryProcess.ferry(["sync", "--protocol", wire, url, "--pull", "--doc-id", "notes.json"], in: c)
            #expect(filtered.status == 0, "\(filtered.stderr)")
            #expect(FolderComparison.files(c) == ["notes.json"])
            listener.stop()
            #expect(try FerryProcess.ferry(["verify"], in: a).status == 0)
        }
    }

    @Test(arguments: SyncTests.wires) func continuousBothWaysCarriesEditsNewDocumentsAndDeletions(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            let listener = try serve(a)
            let replicator = try peer(b, with: try #require(listener.url), wire: wire)
            #expect(converged(a, b).isEmpty)

            // An edit on the listener's side (sed -i), a new document on the replicator's (cp).
            _ = try FerryProcess.shell("sed -i 's/\"Apples\"/\"Green apples\"/' samplelist.json", in: a)
            #expect(eventually { (try? String(contentsOfFile: b + "/samplelist.json", encoding: .utf8))?.contains("Green apples") == true })
            try tmp.write("notes.json", #"{"text": "from b"}"#)
            _ = try FerryProcess.shell("mkdir -p \(b)/notes && cp \(tmp.path)/notes.json \(b)/notes/today.json")
            #expect(eventually { FileManager.default.fileExists(atPath: a + "/notes/today.json") })
            // A deletion on either side.
            _ = try FerryProcess.shell("rm \(a)/notes/today.json")
            #expect(eventually { !FileManager.default.fileExists(atPath: b + "/notes/today.json") })
            #expect(converged(a, b).isEmpty)
            let status = try #require(replicator.replication())
            #expect(["idle", "busy"].contains(status["activity"] as? String), "\(status)")
            replicator.stop()
            listener.stop()
            #expect(try FerryProcess.ferry(["verify"], in: a).status == 0)
            #expect(try FerryProcess.ferry(["verify"], in: b).status == 0)
        }
    }

    @Test func aLargeFileCrossesWithFlatMemory() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a)
            try initFolder(b)
            let listener = try serve(a)
            let replicator = try peer(b, with: try #require(listener.url))
            _ = try FerryProcess.shell("head -c 209715200 /dev/urandom > \(tmp.path)/big.bin && mv \(tmp.path)/big.bin \(a)/big.bin")
            #expect(eventually(60) { ((try? FileManager.default.attributesOfItem(atPath: b + "/big.bin"))?[.size] as? Int) == 209_715_200 })
            let sums = try FerryProcess.shell("sha256sum a/big.bin b/big.bin | cut -d' ' -f1 | uniq | wc -l", in: tmp.path)
            #expect(sums.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
            for agent in [listener, replicator] {
                let hwm = try FerryProcess.shell("grep VmHWM /proc/\(agent.pid)/status | awk '{print $2}'")
                let kib = Int(hwm.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? .max
                #expect(kib < 100 * 1024, "peak RSS \(kib) KiB")
            }
            replicator.stop()
            listener.stop()
        }
    }

    /// `ferry sync --json`'s byte counts and the revisions it received.
    func syncFigures(_ url: String, in folder: String) throws -> (received: Int, bytes: Int) {
        let r = try FerryProcess.ferry(["sync", url, "--pull", "--json"], in: folder)
        #expect(r.status == 0, "\(r.stderr)")
        let o = try JSONParser.parse(Array(r.stdoutData))
        return (o["revisions_received"]?.intValue ?? -1, (o["bytes_sent"]?.intValue ?? 0) + (o["bytes_received"]?.intValue ?? 0))
    }

    @Test func withDeltaSyncAOneFieldEditOfA1MBDocumentCrossesInUnder2KB() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b"), c = tmp.appending("c")
            for f in [a, b, c] { try initFolder(f) }
            // ~1 MB: 5,000 items, pretty-printed by jq as a person's editor would keep it.
            let made = try FerryProcess.shell(#"jq -n '{title: "stock", items: [range(5000) | {name: "item \(.)", count: ., note: ("n" * 170)}]}' > list.json"#, in: a)
            #expect(made.status == 0, "\(made.stderr)")
            let withDelta = try serve(a, ["--delta-sync"])
            let url = try #require(withDelta.url)
            #expect(eventually(10) { RevisionLogReader.lines(a).count == 1 })
            #expect(try syncFigures(url, in: b).bytes > 1_000_000)  // the first copy is whole
            #expect(try syncFigures(url, in: c).bytes > 1_000_000)

            // One field of one item, changed by sed in place.
            #expect(try FerryProcess.shell(#"sed -i 's/"count": 2345,/"count": -1,/' list.json"#, in: a).status == 0)
            #expect(eventually(10) { RevisionLogReader.lines(a).count == 2 })
            let delta = try syncFigures(url, in: b)
            #expect(delta.received == 1 && delta.bytes < 2048, "\(delta)")
            #expect(FolderComparison.differences(a, b).isEmpty)
            withDelta.stop()

            // The same edit from a listener without --delta-sync: the whole document.
            let plain = try serve(a)
            let whole = try syncFigures(try #require(plain.url), in: c)
            #expect(whole.received == 1 && whole.bytes > 1_000_000, "\(whole)")
            #expect(FolderComparison.differences(a, c).isEmpty)
            plain.stop()
        }
    }

    /// True when `strace` is installed and may trace here (ptrace can be forbidden).
    static let straceWorks: Bool = (try? FerryProcess.run("/usr/bin/strace", ["-o", "/dev/null", "/bin/true"]).status) == 0

    /// A system call as `strace` recorded it, with the trace's lines where it began and returned.
    typealias TracedCall = (text: String, began: Int, returned: Int)

    /// Runs `ferry sync URL --pull` in `folder` under `strace -f -y -e trace=SYSCALLS`, the
    /// trace written to `trace`; its calls (`straceCalls`).
    static func tracedPull(from url: String, into folder: String, tracing syscalls: String, trace: String) throws -> [TracedCall] {
        let r = try FerryProcess.run("/usr/bin/strace", ["-f", "-y", "-e", "trace=" + syscalls, "-o", trace,
                                                         FerryProcess.ferryExecutable, "sync", url, "--pull"], in: folder)
        #expect(r.status == 0, "\(r.stderr)")
        return try straceCalls(trace)
    }

    /// The calls `strace -f -o trace` recorded, in the order they began, each with the lines
    /// where it began and returned (`Int.max` for one that never returned). strace splits a
    /// call that another thread interrupts ("… <unfinished ...>", later "<... renameat2
    /// resumed>) = 0"): joined again here.
    static func straceCalls(_ trace: String) throws -> [TracedCall] {
        var calls: [TracedCall] = []
        var unfinished: [Substring: Int] = [:]
        for (n, line) in try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n").enumerated() {
            let pid = line.prefix { $0 != " " }
            if line.hasSuffix("<unfinished ...>") {
                unfinished[pid] = calls.count
                calls.append((String(line.dropLast("<unfinished ...>".count)), n, Int.max))  // until it resumes
            } else if let resumed = line.range(of: " resumed>"), let i = unfinished.removeValue(forKey: pid) {
                calls[i].text += line[resumed.upperBound...]
                calls[i].returned = n
            } else {
                calls.append((String(line), n, n))
            }
        }
        return calls
    }

    /// A received file's data and name are made durable before the log line that records it:
    /// seen in the receiver's system calls. A revision with a blob and no JSON body writes no
    /// object in its batch; the batch skipped its syncfs then, and the log said "applied" about
    /// a file whose bytes were still only in the page cache.
    @Test(.enabled(if: SyncTests.straceWorks, "needs strace allowed to trace (scripts/setup.sh installs it)"))
    func aReceivedFileIsDurableBeforeTheLogLineThatRecordsIt() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a)
            try initFolder(b)
            _ = try FerryProcess.shell("head -c 1000000 /dev/urandom > \(tmp.path)/photo.bin && mv \(tmp.path)/photo.bin \(a)/photo.bin")
            try Data("{\"note\": 1}\n".utf8).write(to: URL(fileURLWithPath: a + "/note.json"))
            let listener = try serve(a)
            #expect(eventually(10) { RevisionLogReader.lines(a).count == 2 })
            let calls = try Self.tracedPull(from: try #require(listener.url), into: b, tracing: "syncfs,fdatasync,fsync,rename,renameat2",
                                            trace: tmp.appending("trace")).map(\.text)
            // A new document's file is named by a rename that does not replace (`renameat2`).
            for name in ["photo.bin", "note.json"] {
                let named = try #require(calls.firstIndex { $0.contains("rename") && $0.contains("/b/\(name)\"") && $0.hasSuffix("= 0") },
                                         "\(calls)")
                let logged = try #require(calls[named...].firstIndex { $0.contains("fdatasync(") && $0.contains("/.ferry/revs.log>") }, "\(calls)")
                // Its name is durable before its log line: the batch's syncfs, or (a batch of a
                // few files, made durable file by file) an fsync of its directory.
                #expect(calls[named..<logged].contains { ($0.contains("syncfs(") || ($0.contains("fsync(") && $0.contains("/b>"))) && $0.hasSuffix("= 0") },
                        "nothing made \(name)'s name durable before its log line:\n\(calls.joined(separator: "\n"))")
                // And its bytes are durable before its name (on ext4 without a journal a name can
                // otherwise reach the disk first and show an empty file after a power cut): its
                // temp file was fdatasync'ed, or the last flush before the naming is the batch's
                // syncfs. (Flushes of ferry's own files, such as a blob being fetched on another
                // thread, can come in between and say nothing about this file.)
                let temp = try #require(calls[named].split(separator: "\"").dropFirst().first, "\(calls[named])")
                let ownFlush = calls[..<named].contains { $0.contains("fdatasync(") && $0.contains(temp + ">") && $0.hasSuffix("= 0") }
                let flushBefore = calls[..<named].last { call in
                    call.contains("sync") && call.hasSuffix("= 0") && !((call.contains("fdatasync(") || call.contains("fsync(")) && call.contains("/.ferry/"))
                }
                #expect(ownFlush || flushBefore?.contains("syncfs(") == true, "\(name) was named before its data was flushed:\n\(calls.joined(separator: "\n"))")
            }
            #expect(FolderComparison.differences(a, b).isEmpty)
            listener.stop()
        }
    }

    /// Groups of received documents, most of them holding too many files to be made durable
    /// file by file: each file's bytes are flushed by a `syncfs` that began after the file was
    /// written and closed and returned before the file is named (or, in a small group, by its
    /// own fdatasync after that close), and its name before the log line that records it.
    /// Stricter than the test above about the order: a flush that began while a file was still
    /// being written (say, one started early to overlap the store's work) does not count.
    @Test(.enabled(if: SyncTests.straceWorks, "needs strace allowed to trace (scripts/setup.sh installs it)"))
    func aGroupsFilesAreFlushedAfterTheyAreWrittenAndBeforeTheyAreNamed() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a)
            try initFolder(b)
            // Enough that the receiver's groups outgrow the file-by-file limit (8 files).
            let count = 200
            for i in 0..<count {
                try Data("{\"n\": \(i), \"text\": \"\(String(repeating: "x", count: 300))\"}\n".utf8).write(to: URL(fileURLWithPath: a + "/d\(i).json"))
            }
            let listener = try serve(a)
            #expect(eventually(10) { RevisionLogReader.lines(a).count == count })
            let calls = try Self.tracedPull(from: try #require(listener.url), into: b, tracing: "close,syncfs,fdatasync,fsync,rename,renameat2",
                                            trace: tmp.appending("trace"))
            let syncs = calls.filter { $0.text.contains("syncfs(") && $0.text.hasSuffix("= 0") }
            var flushedBySyncfs = 0
            for i in 0..<count {
                let name = "d\(i).json"
                let named = try #require(calls.first { $0.text.contains("rename") && $0.text.contains("/b/\(name)\"") && $0.text.hasSuffix("= 0") },
                                         "\(name) was not named")
                let temp = try #require(named.text.split(separator: "\"").dropFirst().first, "\(named.text)")
                let touching = { calls.filter { $0.text.contains(temp) || $0.text.contains("syncfs(") }.map(\.text).joined(separator: "\n") }
                // The writer's close: the first (temp names are made once, with O_EXCL; a file
                // flushed on its own is opened and closed again).
                let written = try #require(calls.first { $0.text.contains("close(") && $0.text.contains(temp + ">") },
                                           "\(name)'s temp file was never closed")
                #expect(written.returned < named.began, "\(name) was named before its temp file was closed:\n\(touching())")
                // A group small enough to be made durable file by file flushes each file itself.
                let ownFlush = calls.contains { call in
                    call.began > written.returned && call.returned < named.began && call.text.contains("sync(")
                        && call.text.contains(temp + ">") && call.text.hasSuffix("= 0")
                }
                let flush = syncs.first { $0.began > written.returned && $0.returned < named.began }
                if flush != nil { flushedBySyncfs += 1 }
                #expect(ownFlush || flush != nil, "\(name): nothing that began after its temp file was closed flushed it before its rename:\n\(touching())")
                // Its name is durable before the log line that records it.
                let logged = try #require(calls.first { $0.began > named.began && $0.text.contains("fdatasync(") && $0.text.contains("/.ferry/revs.log>") },
                                          "no log line was written after \(name) was named")
                let nameFlushed = calls.contains { call in
                    call.began > named.returned && call.returned < logged.began && call.text.hasSuffix("= 0")
                        && (call.text.contains("syncfs(") || (call.text.contains("fsync(") && call.text.contains("/b>")))
                }
                #expect(nameFlushed, "\(name)'s name was not flushed before its log line")
            }
            // The group path was taken: most files were flushed by a group's syncfs.
            #expect(flushedBySyncfs > count / 2, "only \(flushedBySyncfs) of \(count) files were flushed by a group's syncfs")
            #expect(FolderComparison.differences(a, b).isEmpty)
            listener.stop()
        }
    }

    @Test(arguments: SyncTests.wires) func concurrentOfflineEditsMergeAndTheLogsStopGrowing(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            let listener = try serve(a)
            let url = try #require(listener.url)
            #expect(try FerryProcess.ferry(["sync", "--protocol", wire, url], in: b).status == 0)
            // The link is down (no replicator runs): different items on both sides, and the same
            // item differently.
            func edit(_ folder: String, _ script: String) throws {
                let r = try FerryProcess.shell("python3 -c \"import json; p='samplelist.json'; d=json.load(open(p)); items={i['key']: i for i in d['list']}; \(script); open(p,'w').write(json.dumps(d, indent=2))\"", in: folder)
                #expect(r.status == 0, "\(r.stderr)")
            }
            try edit(a, "items['Apples']['value']=111; items['Cherries']['value']=1")
            #expect(RevisionLogReader.wait(a, count: 2).count == 2)
            try edit(b, "items['Bananas']['value']=222; items['Cherries']['value']=2")
            // The link returns.
            let replicator = try peer(b, with: url, wire: wire)
            #expect(logsSettle([a, b]))
            let fileA = try Data(contentsOf: URL(fileURLWithPath: a + "/samplelist.json"))
            let fileB = try Data(contentsOf: URL(fileURLWithPath: b + "/samplelist.json"))
            #expect(fileA == fileB, "the folders are not byte-identical")
            let merged = try JSONParser.parse(Array(fileA))
            let values = Dictionary(uniqueKeysWithValues: (merged["list"]?.arrayValue ?? []).compactMap { i in i["key"]?.stringValue.map { ($0, i["value"]?.intValue ?? -1) } })
            #expect(values["Apples"] == 111 && values["Bananas"] == 222, "\(values)")
            #expect(values["Cherries"] == 1 || values["Cherries"] == 2, "\(values)")
            // The losing body is still in the log and the objects; the conflict is listed.
            let conflicts = try FerryProcess.ferry(["conflicts", "--json"], in: b)
            #expect(conflicts.stdout.contains("merged"), "exit \(conflicts.status): \(conflicts.stdout) \(conflicts.stderr)")
            let bodies = try FerryProcess.shell("for rev in $(jq -r 'select(.doc==\"samplelist.json\" and .deleted==false) | .rev' .ferry/revs.log); do ferry show samplelist.json@$rev | jq '.list[] | select(.key==\"Cherries\") | .value'; done | sort -u | tr '\\n' ' '", in: b, environment: ["PATH": (FerryProcess.ferryExecutable as NSString).deletingLastPathComponent + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "")])
            #expect(bodies.stdout.contains("1 ") && bodies.stdout.contains("2 "), "Cherries values in b's history: \(bodies.stdout)")
            // No ping-pong: the logs stay as they are.
            let before = (lineCount(a), lineCount(b))
            usleep(1_500_000)
            #expect((lineCount(a), lineCount(b)) == before)
            replicator.stop()
            listener.stop()
        }
    }

    @Test(arguments: SyncTests.wires) func threeFoldersInAChainAndInAStarConverge(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            // Chain: c → b → a (each replicates with the next; b also listens).
            let a = tmp.appending("a"), b = tmp.appending("b"), c = tmp.appending("c")
            try initFolder(a, sample: true)
            try initFolder(b)
            try initFolder(c)
            let la = try serve(a)
            let lb = try peer(b, with: try #require(la.url), ["--interface", "127.0.0.1", "--port", "0", "--tls", "off"], wire: wire)
            let lc = try peer(c, with: try #require(lb.url), wire: wire)
            #expect(converged(a, c).isEmpty)
            try tmp.write("c/from-c.json", #"{"hop": 2}"#)
            #expect(eventually { FileManager.default.fileExists(atPath: a + "/from-c.json") })
            _ = try FerryProcess.shell("sed -i 's/\"Kale\"/\"Curly kale\"/' samplelist.json", in: a)
            #expect(eventually { (try? String(contentsOfFile: c + "/samplelist.json", encoding: .utf8))?.contains("Curly kale") == true })
            #expect(converged(a, b).isEmpty && converged(b, c).isEmpty)
            for agent in [lc, lb, la] { agent.stop() }

            // Star: y and z both replicate with x.
            let x = tmp.appending("x"), y = tmp.appending("y"), z = tmp.appending("z")
            try initFolder(x)
            try initFolder(y, sample: true)
            try initFolder(z)
            let lx = try serve(x)
            let ly = try peer(y, with: try #require(lx.url), wire: wire)
            let lz = try peer(z, with: try #require(lx.url), wire: wire)
            #expect(converged(y, z).isEmpty)
            try tmp.write("z/from-z.json", #"{"spoke": "z"}"#)
            #expect(eventually { FileManager.default.fileExists(atPath: y + "/from-z.json") })
            #expect(converged(x, y).isEmpty && converged(y, z).isEmpty)
            for agent in [lz, ly, lx] { agent.stop() }
        }
    }

    @Test(arguments: SyncTests.wires) func aStoppedListenerMakesPeersOfflineAndTheyResumeFromTheirCheckpoints(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            var listener = try serve(a)
            let url = try #require(listener.url)
            let port = try #require(url.split(separator: ":").last?.split(separator: "/").first.flatMap { Int($0) })
            let replicator = try peer(b, with: url, wire: wire)
            #expect(converged(a, b).isEmpty)
            // What a announced: its revision of first.json, from b, is not announced back.
            let lastA = lastSequence(a)
            try tmp.write("b/first.json", #"{"n": 1}"#)
            #expect(eventually { FileManager.default.fileExists(atPath: a + "/first.json") })
            #expect(eventually { (replicator.replication()?["activity"] as? String) == "idle" })
            let sentBefore = try #require(replicator.replication()?["revisions_sent"] as? Int)
            let receivedBefore = try #require(replicator.replication()?["revisions_received"] as? Int)
            let linesA = lineCount(a)
            // Both checkpoints are saved once the replication has paused (`DeferredCheckpoint`).
            let lastB = lastSequence(b)
            #expect(eventually { checkpoint("push", of: b, on: a)?.local == lastB && checkpoint("pull", of: b, on: a)?.remote == lastA },
                    "push \(String(describing: checkpoint("push", of: b, on: a))), last of b \(lastB); pull \(String(describing: checkpoint("pull", of: b, on: a))), last of a \(lastA)")

            listener.stop()
            var offline: [String: Any] = [:]
            #expect(eventually {
                offline = replicator.replication() ?? [:]
                return offline["activity"] as? String == "offline"
            }, "\(offline)")
            #expect(offline["last_error"] is String, "\(offline)")
            try tmp.write("b/second.json", #"{"n": 2}"#)
            #expect(RevisionLogReader.wait(b, count: lineCount(b) + 1).count > 0)

            listener = try serve(a, port: port)
            #expect(eventually { FileManager.default.fileExists(atPath: a + "/second.json") })
            #expect(eventually { (replicator.replication()?["activity"] as? String) == "idle" })
            let after = try #require(replicator.replication())
            // Exactly the one new revision went over; nothing already there was sent or received again.
            #expect(after["revisions_sent"] as? Int == sentBefore + 1, "\(after)")
            #expect(after["revisions_received"] as? Int == receivedBefore, "\(after)")
            #expect(lineCount(a) == linesA + 1)
            #expect((after["connections"] as? Int ?? 0) >= 2)
            replicator.stop()
            listener.stop()
        }
    }

    /// A continuous replication saves its checkpoint once a burst of edits is over, not as
    /// they go out: twenty edits a tenth of a second apart cost one save on the listener (two
    /// if the burst outlasts `DeferredCheckpoint.longest` on a slow machine), and the saved
    /// checkpoint covers the last of them.
    @Test(arguments: SyncTests.wires) func aBurstOfEditsIsCheckpointedOnceItIsOver(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a)
            try initFolder(b)
            try tmp.write("b/burst.json", #"{"n": 0}"#)
            let listener = try serve(a)
            let url = try #require(listener.url)
            let replicator = try peer(b, with: url, wire: wire)
            /// The listener's copy of b's push checkpoint.
            func pushed() -> CheckpointStore.Entry? { checkpoint("push", of: b, on: a) }
            #expect(eventually { pushed()?.local == lastSequence(b) }, "the first sync's checkpoint: \(String(describing: pushed()))")
            let before = try #require(pushed())
            let burstStart = Date()
            for n in 1...20 {
                try tmp.write("b/burst.json", "{\"n\": \(n)}")
                let arrived = eventually(5) {
                    let data = FileManager.default.contents(atPath: a + "/burst.json") ?? Data()
                    return ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["n"] as? Int == n
                }
                #expect(arrived, "edit \(n)")
                usleep(100_000)
            }
            let burst = Date().timeIntervalSince(burstStart)
            let last = lastSequence(b)
            #expect(eventually { pushed()?.local == last }, "after the burst: \(String(describing: pushed())), last sequence \(last)")
            let after = try #require(pushed())
            // One save after the burst, one more per `longest` the burst lasted (a slow machine),
            // and one for an edit that took a second to arrive.
            let allowed = 2 + Int(burst / 5)
            #expect(after.rev - before.rev <= allowed, "\(after.rev - before.rev) checkpoint saves for a burst of 20 edits in \(burst) s")
            replicator.stop()
            listener.stop()
        }
    }

    @Test(arguments: SyncTests.wires) func wrongPasswordsReadOnlyListenersAndHostileClientsAreRefused(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            let users = FerryProcess.samplesDirectory + "/userallowlist.json"
            let listener = try serve(a, ["--users", users, "--read-only"])
            let url = try #require(listener.url)
            try "wrong\n".write(toFile: tmp.appending("bad"), atomically: true, encoding: .utf8)
            try "password\n".write(toFile: tmp.appending("good"), atomically: true, encoding: .utf8)

            let wrong = try FerryProcess.ferry(["sync", "--protocol", wire, url, "--user", "bob", "--password-file", tmp.appending("bad")], in: b)
            #expect(wrong.status == 3, "\(wrong.stderr)")
            #expect(wrong.stderr.contains("401"), "\(wrong.stderr)")
            let none = try FerryProcess.ferry(["sync", "--protocol", wire, url], in: b)
            #expect(none.status == 3, "\(none.stderr)")

            let push = try FerryProcess.ferry(["sync", "--protocol", wire, url, "--push", "--user", "bob", "--password-file", tmp.appending("good")], in: b,
                                              environment: [:])
            // b has nothing to push yet: a push of nothing is not refused; give it something.
            #expect(push.status == 0, "\(push.stderr)")
            try tmp.write("b/mine.json", #"{"mine": true}"#)
            let refused = try FerryProcess.ferry(["sync", "--protocol", wire, url, "--push", "--user", "bob"], in: b, environment: ["FERRY_PASSWORD": "password"])
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("read-only"), "\(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: a + "/mine.json"))
            // Pulling from a read-only listener works.
            let pull = try FerryProcess.ferry(["sync", "--protocol", wire, url, "--pull", "--user", "bob"], in: b, environment: ["FERRY_PASSWORD": "password"])
            #expect(pull.status == 0, "\(pull.stderr)")
            #expect(FileManager.default.fileExists(atPath: b + "/samplelist.json"))
            // A continuous peer of it: its changes are refused, which its status says, and the
            // listener's still come.
            let continuous = try RunningAgent(folder: b, arguments: ["--no-listen", "--peer", url, "--max-attempt-wait", "0.5", "--protocol", wire, "--user", "bob"],
                                              environment: ["FERRY_PASSWORD": "password"])
            let refusedSaid = eventually(10) { (try? FerryProcess.ferry(["status"], in: b).stdout.contains("last error: the peer refused the push (403)")) == true }
            #expect(refusedSaid, "\(continuous.log())")
            try FerryProcess.shell("sed -i 's/\"value\": 20/\"value\": 21/' samplelist.json", in: a)
            #expect(eventually(10) { ((try? String(contentsOfFile: b + "/samplelist.json", encoding: .utf8)) ?? "").contains("\"value\": 21") },
                    "\(continuous.log())")
            #expect(continuous.log().contains("pulling only"), "\(continuous.log())")
            continuous.stop()
            #expect(!FileManager.default.fileExists(atPath: a + "/mine.json"))
            listener.stop()

            // A hostile client: a path-traversal document id is refused with a close frame, and
            // nothing is written outside (or inside) the folder.
            let linesBefore = lineCount(a)
            let open = try serve(a)
            let hostile = try FerryProcess.shell("""
                python3 - "\(try #require(open.url))" <<'EOF'
                import base64, json, os, socket, struct, sys
                url = sys.argv[1]; hostport, db = url[len("ws://"):].split("/", 1); host, port = hostport.split(":")
                s = socket.create_connection((host, int(port)), timeout=5)
                key = base64.b64encode(os.urandom(16)).decode()
                s.sendall(f"GET /{db} HTTP/1.1\\r\\nHost: {hostport}\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: {key}\\r\\nSec-WebSocket-Version: 13\\r\\nSec-WebSocket-Protocol: ferry-1\\r\\n\\r\\n".encode())
                head = b""
                while b"\\r\\n\\r\\n" not in head: head += s.recv(1)
                assert b" 101 " in head.split(b"\\r\\n")[0], head
                def send(obj):
                    data = json.dumps(obj).encode(); mask = os.urandom(4)
                    hdr = bytes([0x81]) + (bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + struct.pack(">H", len(data)))
                    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
                send({"type": "hello", "n": 1, "versions": [1], "peer": "evil", "db": db})
                send({"type": "rev", "n": 2, "doc": "../../escaped.json", "rev": "1-aa", "history": [], "sequence": 1, "body": {"x": 1}})
                frames = []
                try:
                    while True:
                        b = s.recv(65536)
                        if not b: break
                        frames.append(b)
                except socket.timeout:
                    print("not disconnected"); sys.exit(1)
                data = b"".join(frames)
                i = data.find(b"\\x88")
                code = struct.unpack(">H", data[i + 2:i + 4])[0] if i >= 0 else None
                print("close", code, data[i + 4:i + 4 + data[i + 1]].decode(errors="replace") if i >= 0 else "")
                EOF
                """)
            #expect(hostile.status == 0, "\(hostile.stdout)\(hostile.stderr)")
            #expect(hostile.stdout.contains("close 1002"), "\(hostile.stdout)")
            #expect(!FileManager.default.fileExists(atPath: tmp.path + "/escaped.json"))
            #expect(!FileManager.default.fileExists(atPath: FileManager.default.temporaryDirectory.path + "/escaped.json"))
            #expect(lineCount(a) == linesBefore)
            open.stop()
        }
    }

    @Test(arguments: SyncTests.wires) func killingEitherSideMidTransferOf10000DocumentsLosesAndDuplicatesNothing(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            let gen = try FerryProcess.shell("""
                mkdir -p a && cd a && python3 -c "
                import os
                for i in range(10000):
                    d = 'd%02d' % (i % 50)
                    os.makedirs(d, exist_ok=True)
                    open('%s/doc%05d.json' % (d, i), 'w').write('{\\"n\\": %d, \\"pad\\": \\"%s\\"}' % (i, 'x' * 1000))
                "
                """, in: tmp.path)
            #expect(gen.status == 0, "\(gen.stderr)")
            try initFolder(a)
            try initFolder(b)
            #expect(lineCount(a) == 10_000)

            // Kill the receiving side mid-transfer, then the sending side, then let them finish.
            var listener = try serve(a)
            let url = try #require(listener.url)
            let port = try #require(url.split(separator: ":").last?.split(separator: "/").first.flatMap { Int($0) })
            var replicator = try peer(b, with: url, wire: wire)
            #expect(eventually(60) { lineCount(b) >= 2_000 })
            replicator.kill9()
            #expect(unparseableDocuments(b).isEmpty, "a half-written document is visible after kill -9")
            var partial = FolderComparison.partialFiles(b)
            replicator = try peer(b, with: url, wire: wire)
            #expect(eventually(60) { lineCount(b) >= 5_000 })
            listener.kill9()
            #expect(unparseableDocuments(b).isEmpty, "a half-written document is visible after the sender's kill -9")
            listener = try serve(a, port: port)
            #expect(eventually(90) { lineCount(b) >= 10_000 })
            #expect(logsSettle([a, b]))
            partial += FolderComparison.partialFiles(b)

            #expect(converged(a, b, timeout: 5).isEmpty)
            // Every revision exactly once: b's log has each (doc, rev) once, the same set as a's.
            let revs = try FerryProcess.shell("diff <(jq -r '.doc + \" \" + .rev' a/.ferry/revs.log | sort) <(jq -r '.doc + \" \" + .rev' b/.ferry/revs.log | sort) && jq -r '.doc' b/.ferry/revs.log | sort | uniq -d | wc -l", in: tmp.path)
            #expect(revs.status == 0, "\(revs.stdout.prefix(500))")
            #expect(revs.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "duplicated docs: \(revs.stdout.prefix(200))")
            // A temp file left by the killed writer is removed when the folder is opened again.
            #expect(FolderComparison.partialFiles(b).isEmpty, "\(partial.prefix(3))")
            replicator.stop()
            listener.stop()
            #expect(try FerryProcess.ferry(["verify"], in: b).status == 0)
        }
    }
}
