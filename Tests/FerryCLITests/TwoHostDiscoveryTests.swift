import FerryTesting
import Foundation
import Testing

/// Two hosts on one machine (`scripts/netns-pair.sh`): network namespaces joined by a veth
/// pair, each with its own D-Bus and avahi-daemon, so that mDNS crosses a real link as on a
/// LAN. Needs root; without it the suite is skipped and says why.
@Suite(.serialized, .enabled(if: NetnsPair.usable, "needs root, avahi-daemon and network namespaces (ip netns add); see scripts/netns-pair.sh"))
struct TwoHostDiscoveryTests {
    @Test func agentsOnTwoHostsFindEachOtherAndSyncTheSampleOverTLSWithThePinnedFingerprint() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let pair = try NetnsPair(directory: tmp.appending("hosts"))
            defer { pair.down() }
            let a = tmp.appending("a"), b = tmp.appending("b")
            #expect(try FerryProcess.ferry(["init", a, "--name", "inventory", "--sample"]).status == 0)
            #expect(try FerryProcess.ferry(["init", b, "--name", "inventory"]).status == 0)

            // Both agents advertise (default service type, TLS anonymous) and discover.
            let agentA = try RunningAgent(folder: a, arguments: ["--discover", "--interface", pair.a.address],
                                          environment: pair.a.environment, launcher: pair.a.launcher)
            let agentB = try RunningAgent(folder: b, arguments: ["--discover", "--interface", pair.b.address],
                                          environment: pair.b.environment, launcher: pair.b.launcher)
            defer { agentB.stop(); agentA.stop() }

            // What host b's avahi sees of host a: its address on the link, its port, its TXT.
            let portA = try #require(agentA.url?.split(separator: ":").last?.split(separator: "/").first.map(String.init))
            let fingerprintA = try fingerprint(a)
            var seen = ""
            #expect(eventually(15) {
                seen = (try? FerryProcess.run(pair.b.launcher[0], Array(pair.b.launcher.dropFirst()) + ["avahi-browse", "-rtp", "_cblistservicesync._tcp"],
                                              environment: pair.b.environment).stdout) ?? ""
                return seen.contains(";10.99.0.1;\(portA);")
            }, "host b does not see host a: \(seen)")
            #expect(seen.contains("\"fp=\(fingerprintA)\"") && seen.contains("\"db=inventory\"") && seen.contains("\"tls=1\""), "\(seen)")

            // The sample crosses, over wss:// to the address found, the fingerprint pinned.
            #expect(eventually(30) { FolderComparison.differences(a, b).isEmpty && FolderComparison.historyDifferences([a, b]).isEmpty },
                   "\(FolderComparison.differences(a, b)) \(FolderComparison.historyDifferences([a, b]))\n\(agentB.log())")
            // Both discover: a may have dialled b first (the sample then crossed that way); b's own
            // replication with a follows its next browse (every few seconds).
            var known = ""
            #expect(eventually(20) {
                known = (try? String(contentsOfFile: b + "/.ferry/known-peers.json", encoding: .utf8)) ?? ""
                return known.contains(fingerprintA)
            }, "\(known)\n\(agentB.log())")
            #expect(agentB.log().contains("now pinned"), "\(agentB.log())")
            let urls = (agentB.status()?["replications"] as? [[String: Any]] ?? []).compactMap { $0["url"] as? String }
            #expect(urls.contains("wss://10.99.0.1:\(portA)/inventory"), "\(urls)")

            // And back: an edit on host b reaches host a.
            #expect(try FerryProcess.shell("sed -i 's/\"Apples\"/\"Green apples\"/' samplelist.json", in: b).status == 0)
            #expect(eventually(15) {
                ((try? String(contentsOfFile: a + "/samplelist.json", encoding: .utf8)) ?? "").contains("Green apples")
            }, "\(agentA.log())")
            #expect(try FerryProcess.ferry(["verify"], in: a).status == 0)

            // `ferry peers` on host b lists host a.
            let peers = try FerryProcess.run(pair.b.launcher[0], Array(pair.b.launcher.dropFirst()) + [FerryProcess.ferryExecutable, "peers", "--timeout", "2"],
                                             in: b, environment: pair.b.environment)
            #expect(peers.status == 0 && peers.stdout.contains("wss://10.99.0.1:\(portA)/inventory") && peers.stdout.contains(fingerprintA), "\(peers.stdout)\(peers.stderr)")
        }
    }

    @Test func withAvahiStoppedServeStillSyncsWithItsPeerAndPeersSaysWhy() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let pair = try NetnsPair(directory: tmp.appending("hosts"))
            defer { pair.down() }
            pair.stopAvahi(on: "b")
            let a = tmp.appending("a"), b = tmp.appending("b")
            #expect(try FerryProcess.ferry(["init", a, "--name", "inventory", "--sample"]).status == 0)
            #expect(try FerryProcess.ferry(["init", b, "--name", "inventory"]).status == 0)

            let peers = try FerryProcess.run(pair.b.launcher[0], Array(pair.b.launcher.dropFirst()) + [FerryProcess.ferryExecutable, "peers", "--timeout", "1"],
                                             in: b, environment: pair.b.environment)
            #expect(peers.status == 1 && peers.stderr.contains("no mDNS daemon"), "\(peers.stderr)")

            let agentA = try RunningAgent(folder: a, arguments: ["--interface", pair.a.address, "--tls", "off"],
                                          environment: pair.a.environment, launcher: pair.a.launcher)
            let url = try #require(agentA.url)
            let agentB = try RunningAgent(folder: b, arguments: ["--peer", url, "--discover"],
                                          environment: pair.b.environment, launcher: pair.b.launcher)
            defer { agentB.stop(); agentA.stop() }
            #expect(eventually(20) { FolderComparison.differences(a, b).isEmpty && FolderComparison.historyDifferences([a, b]).isEmpty }, "\(agentB.log())")
            let log = agentB.log()
            #expect(log.contains("discovery is off"), "\(log)")
        }
    }

    /// avahi-daemon restarted under a running agent (an upgrade, a crash) forgets the
    /// agent's registration: the agent notices, advertises again, and the other host sees it.
    @Test func aListenerIsAdvertisedAgainAfterItsMDNSDaemonRestarts() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let pair = try NetnsPair(directory: tmp.appending("hosts"))
            defer { pair.down() }
            let a = tmp.appending("a")
            #expect(try FerryProcess.ferry(["init", a, "--name", "inventory"]).status == 0)
            let agent = try RunningAgent(folder: a, arguments: ["--interface", pair.a.address, "--tls", "off"],
                                         environment: pair.a.environment, launcher: pair.a.launcher)
            defer { agent.stop() }
            let port = try #require(agent.url?.split(separator: ":").last?.split(separator: "/").first.map(String.init))
            var seen = ""
            func seenFromB() -> Bool {
                seen = (try? FerryProcess.run(pair.b.launcher[0], Array(pair.b.launcher.dropFirst()) + ["avahi-browse", "-rtp", "_cblistservicesync._tcp"],
                                              environment: pair.b.environment).stdout) ?? ""
                return seen.contains(";\(pair.a.address);\(port);")
            }
            #expect(eventually(15) { seenFromB() }, "host b does not see host a: \(seen)")
            // The daemon's goodbye takes the service off host b's cache.
            pair.stopAvahi(on: "a")
            #expect(eventually(10) { !seenFromB() }, "host b still sees host a: \(seen)")
            try pair.startAvahi(on: "a")
            #expect(eventually(30) { seenFromB() }, "host b does not see host a again: \(seen)\n\(agent.log())")
            #expect(agent.log().contains("advertisement was dropped") && agent.log().contains("advertising again"), "\(agent.log())")
        }
    }

    func fingerprint(_ folder: String) throws -> String {
        try FerryProcess.shell("openssl x509 -in .ferry/tls/anonymous.pem -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f", in: folder)
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// The two hosts of `scripts/netns-pair.sh`, made for one test and removed after it.
struct NetnsPair {
    /// One host: its namespace, its address on the link, and how to run a program there.
    struct Host {
        var namespace: String, address: String, bus: String
        /// `ip netns exec NS`: execs the rest inside the namespace.
        var launcher: [String] { ["/usr/sbin/ip", "netns", "exec", namespace] }
        /// Its own system bus, where its avahi-daemon is.
        var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": bus] }
    }

    let directory: String
    let a: Host, b: Host

    static var script: String { (FerryProcess.samplesDirectory as NSString).deletingLastPathComponent + "/scripts/netns-pair.sh" }

    /// Root, `ip`, avahi-daemon and a namespace that can really be made here.
    static let usable: Bool = {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip"),
              FileManager.default.isExecutableFile(atPath: "/usr/sbin/avahi-daemon") else { return false }
        let probe = "ferry-probe-\(getpid())"
        let made = (try? FerryProcess.shell("ip netns add \(probe) && ip netns del \(probe)").status) == 0
        return made
    }()

    init(directory: String) throws {
        self.directory = directory
        let up = try FerryProcess.shell("bash \(Self.script) up \(directory)")
        guard up.status == 0 else {
            _ = try? FerryProcess.shell("bash \(Self.script) down \(directory)")
            throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "netns-pair up failed: \(up.stderr)"])
        }
        func host(_ h: String) throws -> Host {
            let f = try FerryProcess.shell("bash \(Self.script) env \(directory) \(h)").stdout.split(separator: " ").map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            return Host(namespace: f[0], address: f[1], bus: f[2])
        }
        a = try host("a")
        b = try host("b")
    }

    /// Stops one host's avahi-daemon (its D-Bus stays): the same as a machine without mDNS.
    /// Waits (bounded) until it has exited, so that a daemon started again never meets it on
    /// the bus.
    func stopAvahi(on h: String) {
        let pidFile = "\(directory)/\(h)/avahi.pid"
        _ = try? FerryProcess.shell("p=$(cat \(pidFile)); kill $p; for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; rm -f \(pidFile)")
    }

    /// Starts one host's avahi-daemon again (after `stopAvahi`) and waits until it answers.
    func startAvahi(on h: String) throws {
        let r = try FerryProcess.shell("bash \(Self.script) avahi-start \(directory) \(h)")
        guard r.status == 0 else { throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "avahi-start failed: \(r.stderr)"]) }
    }

    func down() { _ = try? FerryProcess.shell("bash \(Self.script) down \(directory)") }
}
