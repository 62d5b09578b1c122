import FerryTesting
import Foundation
import Testing

/// DNS-SD with a real avahi-daemon (loopback only; `scripts/start-mdns.sh` starts it): what
/// `ferry serve` advertises, what `ferry peers` finds, `--discover`, and life without a daemon.
/// Each test browses a service type of its own, so tests running side by side never see
/// each other's services.
@Suite(.serialized) struct DiscoveryTests {
    func uniqueType() -> String { "_ferry\(UInt32.random(in: 0..<UInt32.max))._tcp" }

    func initFolder(_ path: String, name: String = "inventory", sample: Bool = false) throws {
        let r = try FerryProcess.ferry(["init", path, "--name", name] + (sample ? ["--sample"] : []))
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// `avahi-browse -rtp TYPE`'s resolved lines (`=;…`), or a failed expectation saying how to
    /// start the daemon.
    func browse(_ type: String) throws -> [String] {
        let r = try FerryProcess.shell("avahi-browse -rtp \(type)")
        #expect(r.status == 0, "avahi-browse failed (run `bash scripts/start-mdns.sh`): \(r.stderr)")
        return r.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix("=") }
    }

    /// Two agents of `a` and `b` on this host with the default service name, each waited for
    /// until it says it is advertised.
    func twoAdvertisedAgents(_ a: String, _ b: String, type: String) throws -> (RunningAgent, RunningAgent) {
        let first = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--service-type", type])
        #expect(eventually(10) { first.log().contains("advertised over DNS-SD") }, "\(first.log())")
        let second = try RunningAgent(folder: b, arguments: ["--interface", "127.0.0.1", "--service-type", type])
        #expect(eventually(15) { second.log().contains("advertised over DNS-SD") }, "\(second.log())")
        return (first, second)
    }

    /// What `ferry peers --json` lists for `type`, asked again (bounded) until `enough` holds.
    func peers(_ type: String, until enough: ([[String: Any]]) -> Bool) -> [[String: Any]] {
        var found: [[String: Any]] = []
        #expect(eventually(10) {
            let r = try? FerryProcess.ferry(["peers", "--timeout", "1.5", "--service-type", type, "--json"])
            found = (r.flatMap { try? JSONSerialization.jsonObject(with: $0.stdoutData) } as? [[String: Any]]) ?? []
            return enough(found)
        }, "\(found)")
        return found
    }

    @Test func aRunningListenerIsAdvertisedWithItsPortAndTXTAndWithdrawnWhenItStops() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a")
            try initFolder(a)
            let type = uniqueType()
            let agent = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--service-type", type, "--service-name", "ferry test a"])
            let url = try #require(agent.url)
            let port = try #require(url.split(separator: ":").last?.split(separator: "/").first.map(String.init))
            let fingerprint = try FerryProcess.shell("openssl x509 -in .ferry/tls/anonymous.pem -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f", in: a)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            var lines: [String] = []
            #expect(eventually(10) { lines = (try? browse(type)) ?? []; return !lines.isEmpty }, "not advertised; log: \(agent.log())")
            let line = lines.first ?? ""
            #expect(line.contains("ferry test a") || line.contains("ferry\\032test\\032a"), "\(line)")
            #expect(line.contains(";127.0.0.1;\(port);"), "\(line)")
            for entry in ["\"db=inventory\"", "\"tls=1\"", "\"fp=\(fingerprint)\"", "\"v=1\""] { #expect(line.contains(entry), "\(entry) in \(line)") }
            agent.stop()
            #expect(eventually(10) { ((try? browse(type)) ?? ["still there"]).isEmpty }, "still advertised after stop")

            // --no-advertise: nothing appears.
            let quiet = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--service-type", type, "--no-advertise"])
            usleep(1_500_000)
            #expect(try browse(type).isEmpty)
            quiet.stop()
        }
    }

    /// Two folders of one database on one host, both with the default service name: the
    /// second is advertised as "NAME #2" (Avahi's compatibility layer refuses a taken name
    /// instead of renaming; the second agent used to go unadvertised).
    @Test func twoListenersOfOneDatabaseOnOneHostAreBothAdvertised() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (a, b) = (tmp.appending("a"), tmp.appending("b"))
            try initFolder(a)
            try initFolder(b)
            let type = uniqueType()
            let (first, second) = try twoAdvertisedAgents(a, b, type: type)
            #expect(second.log().contains(" #2"), "\(second.log())")
            var lines: [String] = []
            #expect(eventually(10) { lines = (try? browse(type)) ?? []; return Set(lines.map { $0.split(separator: ";")[3] }).count == 2 }, "\(lines)")
            first.stop()
            second.stop()
        }
    }

    /// A database name too long for DNS-SD's 63-byte instance name with " on HOST" after it:
    /// the name is cut, with room for " #2", and two agents of it on one host are both
    /// advertised, their TXT records naming the whole database. Such a name used to be refused
    /// (DNS-SD error -65540), and the listener went unadvertised.
    @Test func aDatabaseNameTooLongForDNSSDIsAdvertisedCut() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (a, b) = (tmp.appending("a"), tmp.appending("b"))
            let database = "inventory-of-the-north-warehouse-and-of-the-south-one-2026"
            try initFolder(a, name: database)
            try initFolder(b, name: database)
            let type = uniqueType()
            let (first, second) = try twoAdvertisedAgents(a, b, type: type)
            let found = peers(type) { $0.count == 2 }
            let names = found.compactMap { $0["name"] as? String }.sorted()
            let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "ferry"
            #expect(names.count == 2 && names.allSatisfy { $0.utf8.count <= 63 && $0.hasPrefix("inventory-of-the-north") }, "\(names)")
            #expect(names.first?.hasSuffix(" on \(host)") == true && names.last?.hasSuffix(" on \(host) #2") == true, "\(names)")
            #expect(found.allSatisfy { $0["database"] as? String == database }, "\(found)")
            first.stop()
            second.stop()
        }
    }

    /// A discovered peer that stops (its advertisement withdrawn) is dropped from the agent's
    /// replications once a few browses miss it and it cannot be reached, instead of being
    /// retried and listed as offline for ever; started again, it is found and synced again.
    @Test func aDiscoveredPeerThatStopsIsDroppedAndFoundAgainWhenItComesBack() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let (a, b) = (tmp.appending("a"), tmp.appending("b"))
            try initFolder(a, sample: true)
            try initFolder(b)
            let type = uniqueType()
            func replications(_ agent: RunningAgent) -> [String] {
                (agent.status()?["replications"] as? [[String: Any]] ?? []).compactMap { $0["url"] as? String }
            }
            var listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--service-type", type])
            let agent = try RunningAgent(folder: b, arguments: ["--discover", "--no-listen", "--service-type", type])
            defer { agent.stop() }
            let firstURL = try #require(listener.url)
            #expect(eventually(20) { replications(agent) == [firstURL] }, "\(replications(agent))\n\(agent.log())")
            #expect(eventually(20) { FileManager.default.fileExists(atPath: b + "/samplelist.json") }, "\(agent.log())")
            listener.stop()
            #expect(eventually(40) { replications(agent).isEmpty }, "\(replications(agent))\n\(agent.log())")
            #expect(agent.log().contains("discovered peer gone"), "\(agent.log())")
            listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--service-type", type])
            defer { listener.stop() }
            let secondURL = try #require(listener.url)
            #expect(eventually(20) { replications(agent) == [secondURL] }, "\(replications(agent))\n\(agent.log())")
            #expect(try FerryProcess.shell("sed -i 's/\"Apples\"/\"Red apples\"/' samplelist.json", in: a).status == 0)
            #expect(eventually(20) {
                ((try? String(contentsOfFile: b + "/samplelist.json", encoding: .utf8)) ?? "").contains("Red apples")
            }, "\(agent.log())")
        }
    }

    @Test func aServicePublishedByAvahiAppearsInFerryPeers() async throws {
        try await endToEnd {
            let type = uniqueType()
            let null = open("/dev/null", O_RDWR | O_CLOEXEC)
            defer { close(null) }
            let publisher = try ChildProcess("/usr/bin/avahi-publish-service",
                                             ["-s", "published by avahi", type, "4984", "db=inventory", "tls=1", "fp=\(String(repeating: "ab", count: 32))", "v=1"],
                                             environment: ProcessInfo.processInfo.environment, stdin: null, stdout: null, stderr: null)
            // SIGTERM, as from a shell: ChildProcess gives the child default signal handling.
            defer { #expect(publisher.stop(grace: 5) == 0) }
            let found = peers(type) { !$0.isEmpty }
            let peer = try #require(found.first)
            #expect(peer["name"] as? String == "published by avahi")
            #expect(peer["port"] as? Int == 4984)
            #expect(peer["address"] as? String == "127.0.0.1")
            #expect(peer["url"] as? String == "wss://127.0.0.1:4984/inventory")
            #expect(peer["fingerprint"] as? String == String(repeating: "ab", count: 32))
            let text = try FerryProcess.ferry(["peers", "--timeout", "1.5", "--service-type", type])
            #expect(text.status == 0 && text.stdout.contains("published by avahi") && text.stdout.contains("wss://127.0.0.1:4984/inventory"), "\(text.stdout)")
        }
    }

    @Test func syncDiscoverPinsTheAdvertisedFingerprintAndRefusesAChangedOne() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            let type = uniqueType()
            var listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--service-type", type])
            var first = try FerryProcess.ferry(["sync", "--discover", "--service-type", type], in: b)
            #expect(eventually(10) {
                if first.status == 0 { return true }
                first = (try? FerryProcess.ferry(["sync", "--discover", "--service-type", type], in: b)) ?? first
                return first.status == 0
            }, "\(first.stderr)")
            #expect(first.stderr.contains("pinned"), "\(first.stderr)")
            #expect(FileManager.default.fileExists(atPath: b + "/samplelist.json"))
            let known = try String(contentsOfFile: b + "/.ferry/known-peers.json", encoding: .utf8)
            let fingerprint = try FerryProcess.shell("openssl x509 -in .ferry/tls/anonymous.pem -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f", in: a)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(known.contains(fingerprint))

            // A new identity on the same peer: refused, with a warning naming both fingerprints.
            listener.stop()
            #expect(try FerryProcess.ferry(["identity", "delete", "--anonymous"], in: a).status == 0)
            listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--service-type", type])
            var refused = first
            #expect(eventually(10) {
                refused = (try? FerryProcess.ferry(["sync", "--discover", "--service-type", type], in: b)) ?? refused
                return refused.status == 3
            }, "\(refused.stderr)")
            #expect(refused.stderr.contains("changed from \(fingerprint)"), "\(refused.stderr)")

            // A damaged pin file fails closed: nothing is trusted, and it is not reset (issue 17).
            try "{not json".write(toFile: b + "/.ferry/known-peers.json", atomically: true, encoding: .utf8)
            let damaged = try FerryProcess.ferry(["sync", "--discover", "--service-type", type], in: b)
            #expect(damaged.status == 3, "\(damaged.stderr)")
            #expect(damaged.stderr.contains("known-peers.json is not a readable JSON object"), "\(damaged.stderr)")
            #expect(try String(contentsOfFile: b + "/.ferry/known-peers.json", encoding: .utf8) == "{not json")
            listener.stop()
        }
    }

    @Test func withoutADaemonServeRunsOnAndPeersSaysWhy() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            // No D-Bus to reach avahi through: the same as no daemon for the dns_sd library.
            let noBus = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(tmp.path)/no-such-bus"]
            let peers = try FerryProcess.ferry(["peers", "--timeout", "1"], environment: noBus)
            #expect(peers.status == 1, "\(peers.stderr)")
            #expect(peers.stderr.contains("no mDNS daemon"), "\(peers.stderr)")

            let listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--tls", "off"], environment: noBus)
            let replicator = try RunningAgent(folder: b, arguments: ["--no-listen", "--peer", try #require(listener.url)], environment: noBus)
            #expect(eventually { FileManager.default.fileExists(atPath: b + "/samplelist.json") })
            let log = listener.log()
            #expect(log.components(separatedBy: "discovery is off").count == 2, "said once: \(log)")
            replicator.stop()
            listener.stop()
        }
    }
}
