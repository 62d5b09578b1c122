import FerryCore
import FerryStore
import FerryTesting
import Foundation
import Testing

/// Telling what happens: `ferry sync`'s progress (its total known from the first line, never
/// moving backwards) and `-q`; the listener's log of connections and failed logins (never a
/// secret); `ferry status` naming the peers connected. The real binary, on 127.0.0.1.
@Suite(.serialized) struct ReportingTests {
    static let users = FerryProcess.samplesDirectory + "/userallowlist.json"

    /// `ferry serve` on 127.0.0.1 with a free port and no TLS, plus `extra` arguments.
    func serve(_ folder: String, _ extra: [String] = []) throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off"] + extra)
    }

    /// A folder of database "inventory" holding `count` small JSON documents, recorded.
    func folder(_ path: String, documents count: Int, prefix: String = "doc") throws {
        if count > 0 {
            let made = try FerryProcess.shell("mkdir -p \(path) && for i in $(seq 1 \(count)); do echo \"{\\\"n\\\": $i}\" > \(path)/\(prefix)$i.json; done")
            #expect(made.status == 0, "\(made.stderr)")
        }
        let r = try FerryProcess.ferry(["init", path, "--name", "inventory"])
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// Folder `a` of `documents` documents, served (with `extra` arguments), and folder `b` of
    /// `mine` documents of its own, in `tmp`; the listener and its URL.
    func servedPair(_ tmp: TemporaryDirectory, documents: Int, mine: Int, _ extra: [String] = [])
        throws -> (a: String, b: String, listener: RunningAgent, url: String) {
        let a = tmp.appending("a"), b = tmp.appending("b")
        try folder(a, documents: documents)
        try folder(b, documents: mine, prefix: "mine")
        let listener = try serve(a, extra)
        return (a, b, listener, try #require(listener.url))
    }

    /// The `(done, total)` of every plain progress line (`busy: 12/300 revisions`).
    func progressLines(_ stderr: String) -> [(done: Int, total: Int)] {
        stderr.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("busy: ") || line.hasPrefix("idle: "), line.hasSuffix(" revisions") else { return nil }
            let numbers = line.dropFirst(6).dropLast(" revisions".count).split(separator: "/").compactMap { Int($0) }
            return numbers.count == 2 ? (numbers[0], numbers[1]) : nil
        }
    }

    /// True when neither number ever goes down from one line to the next.
    func neverGoesBack(_ lines: [(done: Int, total: Int)]) -> Bool {
        zip(lines, lines.dropFirst()).allSatisfy { $1.done >= $0.done && $1.total >= $0.total }
    }

    /// Progress lines as often as they change (FERRY_PROGRESS_INTERVAL), so there are several.
    let often = ["FERRY_PROGRESS_INTERVAL": "0.05"]

    /// A continuous sync stopped (SIGTERM, as a service manager stops it) while idle, caught up
    /// both ways, ends as a finished sync does: exit 0, "up to date". Stopped while it cannot
    /// reach the listener, it says it did not finish (130). It said "did not finish" either way.
    @Test func aContinuousSyncStoppedWhileCaughtUpSaysUpToDate() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (_, b, listener, url) = try servedPair(tmp, documents: 3, mine: 1)
            for stopListenerFirst in [false, true] {
                let log = tmp.appending("sync-\(stopListenerFirst).log")
                _ = FileManager.default.createFile(atPath: log, contents: nil)
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
                let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
                let sync = try ChildProcess(FerryProcess.ferryExecutable, ["sync", url, "--continuous", "--max-attempt-wait", "30"], in: b,
                                            environment: ProcessInfo.processInfo.environment, stdin: null,
                                            stdout: handle.fileDescriptor, stderr: handle.fileDescriptor)
                close(null)
                try handle.close()
                let text = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
                let awaited = stopListenerFirst ? "offline" : "idle: "
                for _ in 0..<400 {
                    if text().contains(awaited) { break }
                    if stopListenerFirst && text().contains("idle: ") && listener.process.isRunning { _ = listener.process.stop(grace: 5) }
                    usleep(25_000)
                }
                #expect(text().contains(awaited), "\(text())")
                let status = sync.stop(grace: 10)
                if stopListenerFirst {
                    #expect(status == 130 && text().contains("did not finish"), "\(status): \(text())")
                } else {
                    #expect(status == 0 && text().contains("up to date with \(url)") && !text().contains("did not finish"), "\(status): \(text())")
                }
            }
            #expect(FileManager.default.fileExists(atPath: b + "/doc3.json"))
        }
    }

    @Test func theProgressTotalIsKnownFromTheFirstLineAndNeverMovesBack() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (_, b, listener, url) = try servedPair(tmp, documents: 300, mine: 0)
            let c = tmp.appending("c")
            try folder(c, documents: 120, prefix: "mine")

            // A pull: the listener announces its 300 on subChanges.
            let pull = try FerryProcess.ferry(["sync", url, "--pull", "--protocol", "ferry"], in: b, environment: often)
            #expect(pull.status == 0, "\(pull.stderr)")
            let pulled = progressLines(pull.stderr)
            #expect(pulled.first?.total == 300, "\(pull.stderr)")
            #expect(pulled.allSatisfy { $0.total == 300 } && neverGoesBack(pulled), "\(pull.stderr)")
            #expect(pull.stdout.contains("received 300"), "\(pull.stdout)")

            // A push: this folder counts its own 120.
            let push = try FerryProcess.ferry(["sync", url, "--push", "--protocol", "ferry"], in: c, environment: often)
            #expect(push.status == 0, "\(push.stderr)")
            let pushed = progressLines(push.stderr)
            #expect(pushed.first?.total == 120, "\(push.stderr)")
            #expect(pushed.allSatisfy { $0.total == 120 } && neverGoesBack(pushed), "\(push.stderr)")

            // Couchbase Lite's protocol announces no count: the total grows, never backwards.
            let d = tmp.appending("d")
            try folder(d, documents: 0)
            let blip = try FerryProcess.ferry(["sync", url, "--pull", "--protocol", "cbl"], in: d, environment: often)
            #expect(blip.status == 0, "\(blip.stderr)")
            let grown = progressLines(blip.stderr)
            #expect(neverGoesBack(grown) && grown.allSatisfy { $0.done <= $0.total }, "\(blip.stderr)")
            #expect(blip.stdout.contains("received 420"), "\(blip.stdout)")
            listener.stop()
        }
    }

    @Test func quietPrintsNothingButErrors() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (_, b, listener, url) = try servedPair(tmp, documents: 20, mine: 0)
            let quiet = try FerryProcess.ferry(["sync", "-q", url], in: b, environment: often)
            #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty, "stdout: \(quiet.stdout) stderr: \(quiet.stderr)")
            #expect(FileManager.default.fileExists(atPath: b + "/doc20.json"))
            #expect(try FerryProcess.ferry(["sync", "-q", "-v", url], in: b).status == 2)
            listener.stop()
            // A failure still says why.
            let failed = try FerryProcess.ferry(["sync", "--quiet", url, "--max-attempts", "1"], in: b)
            #expect(failed.status == 1 && failed.stderr.contains("failed"), "\(failed.stderr)")
            #expect(failed.stdout.isEmpty, "\(failed.stdout)")
            // `ferry scan -q` says only what it could not record.
            try "{\"n\": 1}".write(toFile: b + "/new.json", atomically: true, encoding: .utf8)
            try "{oops".write(toFile: b + "/broken.json", atomically: true, encoding: .utf8)
            let scan = try FerryProcess.ferry(["scan", "-q"], in: b)
            #expect(scan.status == 0 && scan.stdout.isEmpty && scan.stderr.hasPrefix("ferry: not recorded: broken.json: ")
                    && scan.stderr.split(separator: "\n").count == 1, "\(scan.stdout) \(scan.stderr)")
            #expect(try FerryProcess.ferry(["log", "new.json"], in: b).status == 0)
        }
    }

    @Test func anAgentsReplicationStoppedForGoodIsAnErrorEvenUnderQuiet() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (_, b, listener, url) = try servedPair(tmp, documents: 1, mine: 0, ["--users", Self.users])
            try "not-the-password\n".write(toFile: tmp.appending("bad"), atomically: true, encoding: .utf8)
            // Nothing else would ever say why its peer's documents never come.
            let agent = try FerryProcess.shell("timeout -s TERM 4 \(FerryProcess.ferryExecutable) serve -q --no-listen --no-advertise "
                                               + "--peer \(url) --user bob --password-file \(tmp.appending("bad"))", in: b)
            let lines = agent.stderr.split(separator: "\n")
            #expect(agent.stdout.isEmpty && lines.count == 1, "\(agent.stdout) \(agent.stderr)")
            #expect(lines.first.map { $0.contains("error") && $0.contains("replication stopped until the agent restarts")
                                      && $0.contains("peer=\(url)") && $0.contains("401") } == true, "\(agent.stderr)")
            #expect(!agent.stderr.contains("not-the-password"))
            listener.stop()
        }
    }

    @Test func theListenerLogsConnectionsAndFailedLoginsButNeverASecret() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (_, b, listener, url) = try servedPair(tmp, documents: 5, mine: 2, ["--users", Self.users])
            let port = try #require(url.split(separator: ":").last?.split(separator: "/").first)
            let wrongPassword = "Wr0ng-Horse-42"
            try "\(wrongPassword)\n".write(toFile: tmp.appending("bad"), atomically: true, encoding: .utf8)

            let wrong = try FerryProcess.ferry(["sync", url, "--user", "bob", "--password-file", tmp.appending("bad")], in: b)
            #expect(wrong.status == 3, "\(wrong.stderr)")
            // Couchbase Lite asks without credentials first and expects 401: not a failed login.
            let probe = try FerryProcess.shell("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:\(port)/inventory/_blipsync")
            #expect(probe.stdout == "401", "\(probe.stdout)")
            let right = try FerryProcess.ferry(["sync", url, "--user", "bob", "--protocol", "ferry"], in: b, environment: ["FERRY_PASSWORD": "password"])
            #expect(right.status == 0, "\(right.stderr)")

            let done = eventually(10) { listener.log().contains("peer disconnected") }
            let log = listener.log()
            #expect(done, "\(log)")
            let lines = log.split(separator: "\n")
            let failures = lines.filter { $0.contains("failed login") }
            #expect(failures.count == 1, "\(log)")
            #expect(failures.first.map { $0.contains("user=bob") && $0.contains("127.0.0.1") } == true, "\(log)")
            let connected = lines.first { $0.contains("peer connected") }
            #expect(connected.map { $0.contains("user=bob") && $0.contains("protocol=ferry-1") && $0.contains("path=/inventory")
                                     && $0.contains("address=127.0.0.1:") } == true, "\(log)")
            let ended = lines.first { $0.contains("peer disconnected") }
            #expect(ended.map { $0.contains("user=bob") && $0.contains("seconds=") && $0.contains("revisionsIn=2") && $0.contains("revisionsOut=5") } == true,
                    "\(log)")
            // Neither password, nor the header that carried it.
            for secret in [wrongPassword, Data("bob:\(wrongPassword)".utf8).base64EncodedString(), Data("bob:password".utf8).base64EncodedString(),
                           "Authorization", "Basic "] {
                #expect(!log.contains(secret), "the log shows \(secret): \(log)")
            }
            listener.stop()
        }
    }

    @Test func statusListsThePeersConnectedAndTheReplications() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (a, b, listener, url) = try servedPair(tmp, documents: 3, mine: 1, ["--users", Self.users])
            let replicator = try RunningAgent(folder: b, arguments: ["--no-listen", "--peer", url, "--user", "bob", "--max-attempt-wait", "0.5"],
                                              environment: ["FERRY_PASSWORD": "password"])

            // The listener's side: the peer, its user, both ways (it pushes and pulls).
            var peer: [String: Any]?
            let seen = eventually(15) {
                let peers = (listener.status()?["listener"] as? [String: Any])?["peers"] as? [[String: Any]]
                peer = peers?.first
                return peers?.count == 1 && peer?["direction"] as? String == "both"
            }
            #expect(seen, "\(String(describing: listener.status()))")
            #expect((peer?["address"] as? String)?.hasPrefix("127.0.0.1:") == true, "\(String(describing: peer))")
            #expect(peer?["user"] as? String == "bob" && peer?["protocol"] as? String == "ferry-1", "\(String(describing: peer))")
            #expect(peer?["since"] is String)
            let text = try FerryProcess.ferry(["status"], in: a)
            let line = text.stdout.split(separator: "\n").first { $0.hasPrefix("peer:") }
            #expect(line.map { $0.contains("127.0.0.1:") && $0.contains("user bob") && $0.contains("both") && $0.contains("ferry-1") } == true,
                    "\(text.stdout)")

            // The replicator's side: the replication names its listener and user.
            let replication = try #require(replicator.replication())
            #expect(replication["url"] as? String == url && replication["user"] as? String == "bob", "\(replication)")
            let theirs = try FerryProcess.ferry(["status"], in: b)
            #expect(theirs.stdout.contains("replication: \(url) user bob"), "\(theirs.stdout)")

            // Gone once it stops.
            replicator.stop()
            #expect(eventually(10) { ((listener.status()?["listener"] as? [String: Any])?["peers"] as? [Any])?.isEmpty == true })
            listener.stop()
        }
    }
}

/// `ferry status` beside a running agent is the agent's answer through its control socket: at
/// once while it opens the folder (which step, for how long), then the folder's counts and the
/// files it cannot record, without the log being read again.
@Suite struct AgentStatusTests {
    @Test func aStartingAgentAnswersAtOnceAndARunningOneWithoutTheLogBeingRead() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("big")
            // A log long enough that opening it takes a while: 300 documents saved 100 times
            // (two bodies in turn), recorded directly, each file holding its last body.
            do {
                let store = try FolderStore.create(at: dir, name: "big")
                let bodies = try (0..<2).map { n -> (BlobDigest, [UInt8]) in
                    let bytes = JSONValue.object(["n": .int(n)]).canonicalBytes
                    return (try store.objects.write(bytes), bytes)
                }
                try store.batch(flushEvery: 10_000) {
                    for round in 0..<100 {
                        for d in 0..<300 {
                            try store.recordLocal(try DocumentID("d\(d).json"), object: bodies[round % 2].0, size: bodies[round % 2].1.count)
                        }
                    }
                }
                for d in 0..<300 { try Data(bodies[1].1).write(to: URL(fileURLWithPath: dir + "/d\(d).json")) }
            }
            try "{\"broken\": \n".write(toFile: dir + "/bad.json", atomically: false, encoding: .utf8)
            let null = open("/dev/null", O_RDWR | O_CLOEXEC)
            defer { close(null) }
            let agent = try ChildProcess(FerryProcess.ferryExecutable, ["serve", "--no-listen"], in: dir,
                                         environment: ProcessInfo.processInfo.environment, stdin: null, stdout: null, stderr: null)
            defer { _ = agent.stop(grace: 5) }
            // The agent holds the lock before anything else, and answers from then on.
            for _ in 0..<500 where FolderLock.holder(path: dir + "/.ferry/lock") == nil { usleep(2_000) }
            var steps: [String] = []
            var running: [String: Any]?
            for _ in 0..<300 {
                let r = try FerryProcess.ferry(["status", "--json"], in: dir)
                guard r.status == 0, let o = try JSONSerialization.jsonObject(with: r.stdoutData) as? [String: Any] else { continue }
                if let starting = o["starting"] as? [String: Any] {
                    steps.append(starting["step"] as? String ?? "?")
                    #expect(o["documents"] == nil && o["agent"] as? String == "running (pid \(agent.pid))")
                } else if o["documents"] != nil, (o["agent"] as? String)?.hasPrefix("running") == true {
                    running = o
                    break
                }
                usleep(10_000)
            }
            #expect(steps.first == "reading the log and walking the folder", "\(steps)")
            let answer = try #require(running)
            #expect(answer["documents"] as? Int == 300 && answer["revisions"] as? Int == 30_000, "\(answer)")
            #expect((answer["unreadable"] as? [[String: Any]])?.first?["doc"] as? String == "bad.json", "\(answer)")
            let text = try FerryProcess.ferry(["status"], in: dir).stdout
            #expect(text.contains("documents: 300, revisions: 30000") && text.contains("unreadable: bad.json: line 2"), "\(text)")
            // The agent's answer is the whole report: the log is not opened.
            let trace = tmp.appending("trace")
            let traced = try FerryProcess.run("/usr/bin/strace", ["-f", "-e", "trace=openat", "-o", trace, FerryProcess.ferryExecutable, "status"], in: dir)
            #expect(traced.status == 0 && traced.stdout.contains("documents: 300"), "\(traced.stdout)")
            #expect(!(try String(contentsOfFile: trace, encoding: .utf8)).contains("revs.log"))
            // Beside no agent, the same counts read from the log.
            #expect(agent.stop(grace: 5) == 0)
            let offline = try FerryProcess.ferry(["status"], in: dir).stdout
            #expect(offline.contains("documents: 300, revisions: 30000") && offline.contains("agent:     not running"), "\(offline)")
        }
    }
}
