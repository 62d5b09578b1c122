import Foundation
import Testing
import FerryCore
import FerryStore
import FerryTesting

/// More than two peers at once, as an unprivileged user would run them: agents that each
/// replicate continuously with their neighbours in a ring, all editing one list at once.
@Suite(.serialized) struct RingOfPeersTests {
    /// Four agents in a ring (1-2-3-4-1), each setting a different item of the inventory list
    /// at the same moment: every edit reaches every folder, and the merges stop. Merges of the
    /// same edits made in other orders by other peers hold the very same body (twins); each
    /// was merged again into one more twin, so the ring never settled (docs/format.md, Twins).
    @Test func fourAgentsInARingConvergeOnConcurrentEdits() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let folders = (1...4).map { sandbox.path("p\($0)") }
            // A name of its own: agents that go on dialing a stopped neighbour's port meanwhile
            // reach no other test's listener that gets that port (they are refused, 404).
            let name = "ring-" + String(UUID().uuidString.prefix(8)).lowercased()
            #expect(try sandbox.ferry(["init", "--sample", folders[0], "--name", name], in: sandbox.root).status == 0)
            for folder in folders.dropFirst() { #expect(try sandbox.ferry(["init", folder, "--name", name], in: sandbox.root).status == 0) }
            // Each dials the one before; the fourth also dials the first, closing the ring.
            var agents: [RunningAgent] = []
            defer { for agent in agents { _ = agent.stop() } }
            let listen = ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"]
            for (i, folder) in folders.enumerated() {
                var peers: [String] = []
                if i > 0 { peers += ["--peer", try #require(agents[i - 1].url)] }
                if i == 3 { peers += ["--peer", try #require(agents[0].url)] }
                agents.append(try sandbox.agent(folder: folder, arguments: listen + peers))
            }
            let list = { (folder: String) -> [JSONValue] in
                guard let data = FileManager.default.contents(atPath: folder + "/samplelist.json"),
                      let value = try? JSONParser.parse(Array(data)) else { return [] }
                return value.objectValue?["list"]?.arrayValue ?? []
            }
            #expect(eventually(20) { folders.allSatisfy { list($0).count > 5 } }, "the sample did not reach every folder")

            // Four saves at once, each of a different item, each by rename as editors save.
            let edit = "import json,sys,os\np,i=sys.argv[1],int(sys.argv[2]); d=json.load(open(p)); d['list'][i]['value']=1000+i\n"
                + "open(p+'.new','w').write(json.dumps(d,indent=2)); os.rename(p+'.new',p)\n"
            try edit.write(toFile: sandbox.path("edit.py"), atomically: true, encoding: .utf8)
            let saves = folders.enumerated().map { "python3 edit.py \($0.element)/samplelist.json \($0.offset + 1) &" }.joined(separator: "\n")
            #expect(try sandbox.shell("chmod a+r edit.py\n" + saves + "\nwait", in: sandbox.root).status == 0)

            // Settled: the same list everywhere with every edit, and no revision made for 3 s.
            let counts = { folders.map { RevisionLogReader.lines($0).count } }
            var last: [Int] = []
            var quietSince = Date()
            let settled = eventually(40) {
                let now = counts()
                if now != last { (last, quietSince) = (now, Date()) }
                let lists = folders.map(list)
                return Set(lists.map { JSONValue.array($0).canonicalBytes }).count == 1
                    && (1...4).allSatisfy { lists[0][$0].objectValue?["value"] == .int(1000 + $0) }
                    && Date().timeIntervalSince(quietSince) > 3
            }
            #expect(settled, "not settled: revisions \(counts()); values \(folders.map { list($0).prefix(5).map { $0.objectValue?["value"]?.canonicalString ?? "-" } })")
            for agent in agents { #expect(agent.stop() == 0) }
            agents = []
            let generation = try FolderStore.open(at: folders[0], writable: false).readLogEntries().map(\.rev.generation).max() ?? 0
            #expect(counts().allSatisfy { $0 < 150 } && generation < 30, "revisions \(counts()), generation \(generation)")
            for folder in folders { #expect(try sandbox.ferry(["verify"], in: folder).status == 0) }
        }
    }
}
