import Foundation
import Testing
import FerryTesting

/// `ferry serve --no-listen` against real tools saving real files: one save, one revision.
@Suite(.serialized) struct ServeTests {
    /// A sample folder with a running agent; `base` is the number of log lines after start.
    final class Fixture {
        let tmp = TemporaryDirectory()
        let dir: String
        let agent: RunningAgent
        let base: Int

        init() throws {
            dir = tmp.appending("inv")
            let r = try FerryProcess.ferry(["init", "--sample", dir])
            precondition(r.status == 0, r.stderr)
            agent = try RunningAgent(folder: dir)
            base = RevisionLogReader.lines(dir).count
        }

        func sh(_ command: String) throws {
            let r = try FerryProcess.shell(command, in: dir)
            precondition(r.status == 0, "\(command): \(r.stderr)")
        }

        /// Runs `command`, then expects exactly `expected` new log lines within 1 s and no more
        /// in the 300 ms after.
        func expect(_ command: String, _ expected: [(String, Bool)], sourceLocation: SourceLocation = #_sourceLocation) throws {
            let before = RevisionLogReader.lines(dir).count
            let start = Date()
            try sh(command)
            let got = RevisionLogReader.wait(dir, count: before + expected.count, timeout: 1)
            let elapsed = Date().timeIntervalSince(start)
            usleep(300_000)
            let after = RevisionLogReader.lines(dir)
            let new = after.dropFirst(before).map { "\($0.doc)\($0.deleted ? " (deleted)" : "")" }
            let want = expected.map { "\($0.0)\($0.1 ? " (deleted)" : "")" }
            #expect(new.sorted() == want.sorted(), "\(command)", sourceLocation: sourceLocation)
            #expect(got.count >= before + expected.count && elapsed < 1.5, "\(command) took \(elapsed) s", sourceLocation: sourceLocation)
        }
    }

    @Test func everyToolsSaveIsExactlyOneRevision() async throws {
        try await endToEnd {
            let f = try Fixture()
            try f.expect("sed -i 's/\"value\": 20/\"value\": 21/' samplelist.json", [("samplelist.json", false)])
            try f.expect("vim -u NONE -es -c '%s/\"value\": 21/\"value\": 22/' -c wq samplelist.json", [("samplelist.json", false)])
            try f.expect("vim -u DEFAULTS -n -es -c 'set nobackup writebackup' -c '%s/\"value\": 22/\"value\": 23/' -c wq samplelist.json", [("samplelist.json", false)])
            try f.expect("sed 's/\"value\": 23/\"value\": 24/' samplelist.json > ../copy.json && cp ../copy.json samplelist.json", [("samplelist.json", false)])
            try f.expect("sed 's/\"value\": 24/\"value\": 25/' samplelist.json > ../tmp.json && mv ../tmp.json samplelist.json", [("samplelist.json", false)])
            try f.expect("python3 -c \"import json; p='samplelist.json'; d=json.load(open(p)); d['name']='Py'; open(p,'w').write(json.dumps(d, indent=4))\"", [("samplelist.json", false)])
            try f.expect("mkdir -p a/b && echo '{\"c\": 1}' > a/b/c.json", [("a/b/c.json", false)])
            try f.expect("mv a a2", [("a/b/c.json", true), ("a2/b/c.json", false)])
            try f.expect("cp /dev/null empty.bin && printf 'bytes' > notes.txt", [("empty.bin", false), ("notes.txt", false)])
            try f.expect("rm notes.txt", [("notes.txt", true)])
            // Swap files, backups, vim's 4913 probe, temporary files: nothing.
            try f.expect("echo x > .samplelist.json.swp && echo x > .samplelist.json.swx && echo x > samplelist.json~ && echo x > 4913 && echo x > a.tmp && rm 4913", [])
            // Writing the very content that is already current (as ferry itself does): nothing.
            try f.expect("cp samplelist.json ../same.json && cp ../same.json samplelist.json", [])
            #expect(f.agent.stop() == 0)
            #expect(try FerryProcess.ferry(["verify"], in: f.dir).status == 0)
        }
    }

    @Test func anIncompleteJSONFileIsReportedThenRecordedOnceComplete() async throws {
        try await endToEnd {
            let f = try Fixture()
            try f.expect("printf '{\"type\": ' > draft.json", [])
            let status = try FerryProcess.ferry(["status"], in: f.dir)
            #expect(status.stdout.contains("draft.json: line 1, column 10"), "\(status.stdout)")
            #expect(f.agent.log().contains("draft.json"))
            try f.expect("printf '{\"type\": \"list\"}' > draft.json", [("draft.json", false)])
            #expect(!(try FerryProcess.ferry(["status"], in: f.dir)).stdout.contains("unreadable"))
        }
    }

    @Test func changesMadeWhileKilledAreFoundAtRestart() async throws {
        try await endToEnd {
            let f = try Fixture()
            try f.expect("echo '{\"a\": 1}' > one.json && echo '{\"b\": 1}' > two.json && echo '{\"c\": 1}' > three.json",
                         [("one.json", false), ("two.json", false), ("three.json", false)])
            f.agent.kill9()
            try f.sh("echo '{\"a\": 2}' > one.json && sed -i 's/\"value\": 20/\"value\": 99/' samplelist.json && rm three.json")
            let before = RevisionLogReader.lines(f.dir).count
            let again = try RunningAgent(folder: f.dir)
            let after = RevisionLogReader.wait(f.dir, count: before + 3, timeout: 3)
            usleep(300_000)
            let new = RevisionLogReader.lines(f.dir).dropFirst(before).map { "\($0.doc)\($0.deleted ? " (deleted)" : "")" }
            #expect(new.sorted() == ["one.json", "samplelist.json", "three.json (deleted)"], "\(new)")
            #expect(after.count == before + 3)
            // A clean restart with nothing changed records nothing.
            again.stop()
            let quiet = try RunningAgent(folder: f.dir)
            usleep(300_000)
            #expect(RevisionLogReader.lines(f.dir).count == before + 3)
            quiet.stop()
        }
    }

    @Test func tenThousandFilesCreatedAtOnceAreAllRecorded() async throws {
        try await endToEnd {
            let f = try Fixture()
            try f.sh("mkdir -p many && cd many && python3 -c \"\nfor i in range(10000):\n    open(f'f{i}.json', 'w').write('{\\\"i\\\": %d}' % i)\n\"")
            let lines = RevisionLogReader.wait(f.dir, count: f.base + 10_000, timeout: 90)
            usleep(500_000)
            let all = RevisionLogReader.lines(f.dir)
            #expect(lines.count >= f.base + 10_000)
            #expect(all.count == f.base + 10_000, "got \(all.count - f.base)")
            #expect(Set(all.map(\.doc)).count == all.count)
        }
    }

    @Test func ignoringAFileStopsSyncingItWithoutDeletingIt() async throws {
        try await endToEnd {
            let f = try Fixture()
            try f.expect("echo '{\"a\": 1}' > local.json && mkdir -p cache && echo x > cache/big.bin", [("local.json", false), ("cache/big.bin", false)])
            try f.expect("printf 'local.json\\ncache/\\n' > .ferryignore", [])
            try f.expect("echo '{\"a\": 2}' > local.json && echo y > cache/big.bin && echo '{}' > cache/new.json", [])
            #expect(FileManager.default.fileExists(atPath: f.dir + "/local.json"))
        }
    }

    @Test func aSecondWriterIsToldTheFolderIsInUse() async throws {
        try await endToEnd {
            let f = try Fixture()
            let r = try FerryProcess.ferry(["scan"], in: f.dir)
            #expect(r.status == 4)
            #expect(r.stderr.contains("in use by another ferry process (pid \(f.agent.pid))"), "\(r.stderr)")
            let status = try FerryProcess.ferry(["status"], in: f.dir)
            #expect(status.stdout.contains("agent:     running (pid \(f.agent.pid))"), "\(status.stdout)")
            f.agent.stop()
            #expect(try FerryProcess.ferry(["status"], in: f.dir).stdout.contains("agent:     not running"))
        }
    }

    /// A restarted listener keeps its address: the port it picked first is kept in `.ferry/`
    /// and taken again without `--port`; a taken port is named, with what to do.
    @Test func aRestartedListenerKeepsItsPortAndATakenPortIsNamed() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("inv")
            #expect(try FerryProcess.ferry(["init", dir]).status == 0)
            let args = ["--interface", "127.0.0.1", "--tls", "off", "--no-advertise"]
            let first = try RunningAgent(folder: dir, arguments: args)
            let url = try #require(first.url)
            #expect(first.stop() == 0)
            let kept = try String(contentsOfFile: dir + "/.ferry/listener-port", encoding: .utf8)
            #expect(url.contains(":" + kept.trimmingCharacters(in: .whitespacesAndNewlines) + "/"), "\(url) \(kept)")
            let second = try RunningAgent(folder: dir, arguments: args)
            #expect(second.url == url, "\(second.log())")
            // Another folder asking for that port by name is told it is taken, and exits.
            let other = tmp.appending("other")
            #expect(try FerryProcess.ferry(["init", other]).status == 0)
            let port = String(url.split(separator: ":")[2].split(separator: "/")[0])
            let taken = try FerryProcess.ferry(["serve", "--port", port] + args, in: other)
            #expect(taken.status == 1 && taken.stderr.contains("port \(port) on 127.0.0.1 is in use") && taken.stderr.contains("--port"), "\(taken.stderr)")
            // Without --port, that folder's listener (whose kept port is taken) moves and says so.
            try port.write(toFile: other + "/.ferry/listener-port", atomically: true, encoding: .utf8)
            let moved = try RunningAgent(folder: other, arguments: args)
            #expect(moved.url != nil && moved.url != url && moved.log().contains("is in use; listening on another one"), "\(moved.log())")
            #expect(second.stop() == 0 && moved.stop() == 0)
        }
    }

    /// A stop that comes while the agent is still opening its folder (Ctrl-C during the
    /// startup scan of a large folder) ends cleanly: exit 0, no listener started, and what the
    /// scan found is recorded. It used to exit 1: the watcher, stopped at once, ended the
    /// indexing service before its turn in the graceful shutdown.
    @Test func aStopWhileTheFolderIsOpenedEndsCleanly() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("inv")
            #expect(try FerryProcess.ferry(["init", dir]).status == 0)
            #expect(try FerryProcess.shell("python3 -c \"\nfor i in range(10000):\n    open(f'f{i}.json', 'w').write('{\\\"i\\\": %d}' % i)\n\"", in: dir).status == 0)
            let logPath = tmp.appending("serve.log")
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
            defer { try? log.close() }
            let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { close(null) }
            let agent = try ChildProcess(FerryProcess.ferryExecutable, ["serve", "--interface", "127.0.0.1", "--tls", "off", "--no-advertise"],
                                         in: dir, environment: ProcessInfo.processInfo.environment,
                                         stdin: null, stdout: log.fileDescriptor, stderr: log.fileDescriptor)
            // The control socket is made before the folder is opened; the startup scan of
            // 10,000 new files then takes seconds (a debug build), the poll 20 ms.
            #expect(eventually(20) { FileManager.default.fileExists(atPath: dir + "/.ferry/agent.sock") })
            let status = agent.stop(grace: 30)
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            #expect(status == 0, "\(text.suffix(2000))")
            #expect(text.contains("stopped") && !text.contains("listening on") && !text.contains(" error "), "\(text.suffix(2000))")
            #expect(RevisionLogReader.lines(dir).count == 10_000)
            #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
        }
    }
}
