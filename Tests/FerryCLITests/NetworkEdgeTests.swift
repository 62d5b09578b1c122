import Foundation
import Testing
import FerryCore
import FerryTesting

/// Issue 18, end to end as an unprivileged user: ferry's WebSocket edge against a strict
/// third-party implementation (python3-websockets) both ways, silent servers, a server that
/// answers 503, floods of wrong passwords and idle connections (`Tests/Tools/edge-peers.py`).
@Suite(.serialized) struct NetworkEdgeTests {
    /// `edge-peers.py MODE ARGS` run in the background as the sandbox's user, its output in a file.
    final class EdgePeer {
        let process: ChildProcess
        let output: String
        let portFile: String

        init(_ sandbox: UserSandbox, _ arguments: [String]) throws {
            let id = UUID().uuidString.prefix(8)
            output = sandbox.path("edge-\(id).out")
            portFile = sandbox.path("edge-\(id).port")
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let out = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            defer { try? out.close() }
            let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { close(null) }
            let line = sandbox.command(["/usr/bin/python3", sandbox.tools + "/edge-peers.py"] + arguments + ["--listen", portFile])
            process = try ChildProcess(line[0], Array(line.dropFirst()), in: sandbox.root, environment: [:],
                                       stdin: null, stdout: out.fileDescriptor, stderr: out.fileDescriptor)
        }

        /// The port it listens on, once it does.
        func port() throws -> Int {
            var port: Int?
            eventually(10) {
                port = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) }
                return port != nil
            }
            return try #require(port, "edge peer did not start: \(text)")
        }

        var text: String { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }

        deinit { process.stop(grace: 1) }
    }

    /// A listener with the inventory sample, run by the sandbox's user.
    static func sampleListener(_ sandbox: UserSandbox, _ extra: [String] = [], launcher: [String]? = nil) throws -> (String, RunningAgent) {
        let a = sandbox.path("a")
        #expect(try sandbox.ferry(["init", a, "--sample"], in: sandbox.root).status == 0)
        let arguments = ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"] + extra
        let agent = try launcher.map { try RunningAgent(folder: a, arguments: arguments, launcher: $0, executable: sandbox.ferry) }
            ?? sandbox.agent(folder: a, arguments: arguments)
        return (a, agent)
    }

    @Test func aStrictWebSocketImplementationInteroperatesWithTheDialerAndTheListener() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let (a, listener) = try Self.sampleListener(sandbox)
            let url = try #require(listener.url)
            let database = String(url.split(separator: "/").last ?? "")
            // ferry's dialer → a strict server → a strict client → ferry's listener.
            let proxy = try EdgePeer(sandbox, ["proxy", "--to", url, "--seconds", "60"])
            let b = sandbox.path("b")
            #expect(try sandbox.ferry(["init", b], in: sandbox.root).status == 0)
            let sync = try sandbox.ferry(["sync", "ws://127.0.0.1:\(try proxy.port())/\(database)", "--max-attempts", "1"], in: b)
            #expect(sync.status == 0, "\(sync.stdout)\(sync.stderr)\n\(proxy.text)")
            #expect(FolderComparison.differences(a, b).isEmpty)
            #expect(FolderComparison.historyDifferences([a, b]).isEmpty)
            // Every relayed session ended without a protocol error on either strict side.
            let sessions = proxy.text.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
            #expect(!sessions.isEmpty && sessions.allSatisfy { $0["errors"] == .array([]) }, "\(proxy.text)")

            // A client that does not mask its frames is refused with 1002.
            let raw = try sandbox.run(["/usr/bin/python3", sandbox.tools + "/edge-peers.py", "unmasked", "--url", url], in: sandbox.root)
            let answer = try JSONParser.parse(Array(raw.stdout.utf8))
            #expect(answer["close"]?.intValue == 1002 && (answer["reason"]?.stringValue ?? "").contains("masked"), "\(raw.stdout)\(raw.stderr)")
            #expect(listener.stop() == 0)
        }
    }

    @Test func aSilentServerFailsTheDialWithinItsDeadlineNamingTheStageAndServeStillStops() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let silent = try EdgePeer(sandbox, ["silent", "--seconds", "60"])
            let port = try silent.port()
            let b = sandbox.path("b")
            #expect(try sandbox.ferry(["init", b], in: sandbox.root).status == 0)
            for (scheme, stage) in [("ws", "WebSocket upgrade"), ("wss", "TLS handshake")] {
                let started = Date()
                let sync = try sandbox.ferry(["sync", "\(scheme)://127.0.0.1:\(port)/inventory", "--connect-timeout", "1",
                                              "--max-attempts", "1", "--accept-self-signed"].filter { scheme == "wss" || $0 != "--accept-self-signed" }, in: b)
                let took = Date().timeIntervalSince(started)
                #expect(sync.status == 1 && sync.stderr.contains(stage) && took < 5, "\(scheme): \(sync.status) after \(took) s: \(sync.stderr)")
            }
            // An agent dialing it (a long deadline) stops within 2 s of SIGTERM.
            let agent = try sandbox.agent(folder: b, arguments: ["--no-listen", "--peer", "ws://127.0.0.1:\(port)/inventory", "--connect-timeout", "60"])
            #expect(eventually(5) { silent.text.contains("accepted") })
            let started = Date()
            let status = agent.stop()
            let took = Date().timeIntervalSince(started)
            #expect(status == 0 && took < 2, "serve took \(took) s to stop (status \(status))")
        }
    }

    /// A peer that never answers the close frame holds a graceful stop for its 2 s; a second
    /// signal ends `serve` at once (swift-service-lifecycle cancels the services).
    @Test func aSecondSignalStopsServeWithoutWaitingForPeers() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            for signals in [1, 2] {
                let (_, listener) = try Self.sampleListener(sandbox)
                let url = try #require(listener.url)
                let deaf = try EdgePeer(sandbox, ["deaf", "--url", url, "--seconds", "30"])
                #expect(eventually(5) { deaf.text.contains("\"upgraded\": true") }, "\(deaf.text)")
                let started = Date()
                listener.process.signal(SIGTERM)
                if signals == 2 {
                    usleep(300_000)
                    listener.process.signal(SIGTERM)
                }
                #expect(listener.process.wait(timeout: 10))
                let took = Date().timeIntervalSince(started)
                if signals == 1 {
                    #expect(listener.process.exitStatus == 0 && took >= 1.8, "one signal: stopped after \(took) s")
                } else {
                    #expect(took < 1.2 && listener.log().contains("second signal"), "two signals: stopped after \(took) s\n\(listener.log())")
                }
                try FileManager.default.removeItem(atPath: sandbox.path("a"))
            }
        }
    }

    @Test func aOneShotSyncAgainstA503StopsAfterMaxAttempts() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let server = try EdgePeer(sandbox, ["status", "--code", "503", "--seconds", "60"])
            let b = sandbox.path("b")
            #expect(try sandbox.ferry(["init", b], in: sandbox.root).status == 0)
            let sync = try sandbox.ferry(["sync", "ws://127.0.0.1:\(try server.port())/inventory", "--max-attempts", "3", "--max-attempt-wait", "0.2"], in: b)
            #expect(sync.status == 1 && sync.stderr.contains("503"), "\(sync.status): \(sync.stderr)")
            let requests = server.text.split(separator: "\n").count
            #expect(requests == 3, "\(requests) requests: \(server.text)")
        }
    }

    @Test func wrongPasswordsAndIdleConnectionsDoNotLockARealPeerOut() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let hash = try sandbox.ferry(["users", "hash-password", "--name", "alice"], in: sandbox.root, environment: ["FERRY_PASSWORD": "s3cret"])
            #expect(hash.status == 0, "\(hash.stderr)")
            let users = sandbox.path("users.jsonl")
            #expect(try sandbox.shell("cat > \(users) <<'EOF'\n\(hash.stdout)EOF").status == 0)
            // The listener runs under a 1,024-descriptor limit.
            let limited = sandbox.command(["/usr/bin/prlimit", "--nofile=1024:1024"])
            let (a, listener) = try Self.sampleListener(sandbox, ["--users", users, "--heartbeat", "5"], launcher: limited)
            let url = try #require(listener.url)
            let b = sandbox.path("b")
            #expect(try sandbox.ferry(["init", b], in: sandbox.root).status == 0)
            let replicator = try sandbox.agent(folder: b, arguments: ["--no-listen", "--peer", url, "--user", "alice", "--max-attempt-wait", "0.5"],
                                               environment: ["FERRY_PASSWORD": "s3cret"])
            #expect(eventually(30) { FolderComparison.differences(a, b).isEmpty }, "the sample did not arrive")

            // 1,000 wrong passwords, 20 at a time, while the user edits: every edit arrives.
            let flood = try EdgePeer(sandbox, ["flood", "--url", url, "--attempts", "1000", "--concurrency", "20"])
            var latencies: [Double] = []
            for i in 0..<10 {
                let started = Date()
                #expect(try sandbox.shell("echo '{\"edit\": \(i)}' > \(a)/flood-\(i).json").status == 0)
                let arrived = eventually(10) { FileManager.default.fileExists(atPath: "\(b)/flood-\(i).json") }
                latencies.append(Date().timeIntervalSince(started) * 1000)
                #expect(arrived, "edit \(i) did not arrive during the flood")
                usleep(200_000)
            }
            #expect(flood.process.wait(timeout: 120), "the flood did not end")
            print("edit → peer during 1,000 wrong passwords (ms): \(latencies.map { Int($0) }); flood: \(flood.text)")
            let refusals = try JSONParser.parse(Array(flood.text.utf8))["answers"]
            #expect(refusals?["101"] == nil, "a wrong password was accepted: \(flood.text)")
            #expect(listener.log().contains("failed login"), "failed logins are not logged")
            #expect(!listener.log().contains("wrong-"), "a password reached the log")

            // 1,100 connections that send nothing: a new peer still gets in and syncs.
            let idle = try EdgePeer(sandbox, ["idle", "--url", url, "--connections", "1100", "--seconds", "30"])
            #expect(eventually(20) { idle.text.contains("opened") }, "\(idle.text)")
            let c = sandbox.path("c")
            #expect(try sandbox.ferry(["init", c], in: sandbox.root).status == 0)
            let sync = try sandbox.ferry(["sync", url, "--user", "alice", "--max-attempts", "5", "--max-attempt-wait", "0.5"], in: c,
                                         environment: ["FERRY_PASSWORD": "s3cret"])
            #expect(sync.status == 0, "\(sync.stdout)\(sync.stderr)")
            #expect(FolderComparison.differences(a, c).isEmpty)
            // The replicator is still connected and still syncing.
            #expect(try sandbox.shell("echo '{\"after\": true}' > \(a)/after.json").status == 0)
            #expect(eventually(10) { FileManager.default.fileExists(atPath: "\(b)/after.json") })
            _ = replicator.stop()
            #expect(listener.stop() == 0)
        }
    }

    /// The listener's resident memory in MB.
    static func residentMB(_ pid: pid_t) -> Double {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Double(line.split(separator: " ").dropFirst().first ?? "0").map { $0 / 1024 } ?? 0
    }

    /// A peer that floods requests without reading answers, and one that asks for a 200 MiB
    /// blob and never reads it: the listener's memory stays bounded, the flooder is cut off
    /// (1008) and a real peer's edits keep arriving quickly.
    @Test func aFloodingPeerAndAPeerThatNeverReadsStayBoundedWhileARealPeerSyncs() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let a = sandbox.path("a")
            #expect(try sandbox.ferry(["init", a, "--sample"], in: sandbox.root).status == 0)
            #expect(try sandbox.shell("head -c 209715200 /dev/urandom > \(a)/big.bin").status == 0)
            let digest = "sha256-" + (try sandbox.shell("sha256sum \(a)/big.bin | cut -c1-64").stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            let agent = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let url = try #require(agent.url)
            let b = sandbox.path("b")
            #expect(try sandbox.ferry(["init", b], in: sandbox.root).status == 0)
            let replicator = try sandbox.agent(folder: b, arguments: ["--no-listen", "--peer", url, "--max-attempt-wait", "0.5"])
            #expect(eventually(60) { FolderComparison.differences(a, b).isEmpty }, "the folder did not arrive")
            let baseline = Self.residentMB(agent.pid)

            let slow = try EdgePeer(sandbox, ["slowblob", "--url", url, "--digest", digest, "--seconds", "20"])
            let flood = try EdgePeer(sandbox, ["requests", "--url", url, "--count", "200000"])
            #expect(eventually(10) { slow.text.contains("asked") }, "\(slow.text)")
            var peak = baseline
            var latencies: [Double] = []
            for i in 0..<20 {
                let started = Date()
                #expect(try sandbox.shell("echo '{\"edit\": \(i)}' > \(a)/edit-\(i).json").status == 0)
                let arrived = eventually(10) { FileManager.default.fileExists(atPath: "\(b)/edit-\(i).json") }
                latencies.append(Date().timeIntervalSince(started) * 1000)
                #expect(arrived, "edit \(i) did not arrive during the flood")
                peak = max(peak, Self.residentMB(agent.pid))
                usleep(100_000)
            }
            #expect(flood.process.wait(timeout: 60), "the flood did not end: \(flood.text)")
            peak = max(peak, Self.residentMB(agent.pid))
            #expect(slow.process.wait(timeout: 30))
            usleep(2_000_000)
            let after = Self.residentMB(agent.pid)
            let sorted = latencies.sorted()
            print("listener RSS (MB): baseline \(Int(baseline)), peak \(Int(peak)) under a request flood and a 200 MiB blob never read, "
                  + "after \(Int(after)); edit → peer (ms) \(latencies.map { Int($0) }); flood: \(flood.text)")
            #expect(peak < 150, "listener RSS peaked at \(peak) MB")
            #expect(after < baseline + 30, "listener RSS \(after) MB after the flood, \(baseline) MB before")
            // While the flood lasts (its first 2 s) an edit can wait for the flooder's burst; the
            // goal of 50 ms at p99 is not met yet (docs/performance.md).
            #expect(sorted[sorted.count / 2] < 100 && sorted.last! < 1_000, "edits reached the peer in \(latencies) ms")
            #expect(agent.log().contains("requests in flight"), "the flooder was not cut off")
            _ = replicator.stop()
            #expect(agent.stop() == 0)
        }
    }
}
