import FerryTesting
import Foundation
import Testing

/// Conflicts a user can see: `ferry sync` counts and names them, and `ferry conflicts` tells
/// the same story on both peers, with the values each side lost, and on a third that only
/// received the resolution.
@Suite struct ConflictStoryTests {
    @Test func aConcurrentEditIsCountedByTheSyncAndToldAlikeOnBothSides() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b"), c = tmp.appending("c")
            #expect(try FerryProcess.ferry(["init", a, "--name", "inventory", "--sample"]).status == 0)
            #expect(try FerryProcess.ferry(["init", b, "--name", "inventory"]).status == 0)
            #expect(try FerryProcess.ferry(["init", c, "--name", "inventory"]).status == 0)
            let listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
            let url = try #require(listener.url)
            #expect(try FerryProcess.ferry(["sync", url], in: b).status == 0)
            #expect(try FerryProcess.ferry(["sync", url], in: c).status == 0)
            listener.stop()
            // The same value changed on both sides, and a name only on B.
            try FerryProcess.shell("sed -i 's/\"value\": 20/\"value\": 25/' samplelist.json", in: a)
            try FerryProcess.shell("sed -i 's/\"value\": 20/\"value\": 30/; s/\"name\": \"Inventory\"/\"name\": \"Stock\"/' samplelist.json", in: b)
            #expect(try FerryProcess.ferry(["scan"], in: a).status == 0)
            // B's edit is recorded by the sync itself, before anything arrives: it is B's own.

            let again = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
            let sync = try FerryProcess.ferry(["sync", try #require(again.url)], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(sync.stdout.contains("1 conflict resolved: samplelist.json"), "\(sync.stdout)")
            let json = try FerryProcess.ferry(["sync", try #require(again.url), "--json"], in: b)
            #expect(json.stdout.contains("\"conflicts_resolved\": 0"), "\(json.stdout)")  // nothing new the second time
            #expect(again.log().contains("resolved conflict") || again.log().contains("conflict merged by the peer"), "\(again.log())")
            // C had no conflict: the merge and the deletion closing the loser's branch reach it.
            let pulled = try FerryProcess.ferry(["sync", try #require(again.url), "--pull"], in: c)
            #expect(pulled.status == 0 && !pulled.stdout.contains("resolved"), "\(pulled.stdout)\(pulled.stderr)")
            again.stop()

            // Both sides: the same lines but for when each recorded them.
            func story(_ folder: String) throws -> [String] {
                try FerryProcess.ferry(["conflicts"], in: folder).stdout.split(separator: "\n").map { line in
                    line.hasPrefix("    ") ? String(line) : line.split(separator: "\t").dropFirst().joined(separator: "\t")
                }
            }
            let storyA = try story(a), storyB = try story(b), storyC = try story(c)
            #expect(storyA == storyB, "\(storyA) vs \(storyB)")
            #expect(storyC == storyA, "\(storyC) vs \(storyA)")
            // And their logs name the merge and the closing alike (not "edited", "deleted").
            func what(_ folder: String) throws -> [String] {
                try FerryProcess.ferry(["log", "samplelist.json"], in: folder).stdout.split(separator: "\n").map { line in
                    line.split(separator: "\t").dropFirst(2).prefix(3).joined(separator: "\t")
                }.sorted()
            }
            let logA = try what(a), logB = try what(b), logC = try what(c)
            #expect(logB == logA && logC == logA, "\(logC) vs \(logA)")
            #expect(logA.contains { $0.contains("\tclosed branch ") } && logA.contains { $0.contains("\tmerged ") }, "\(logA)")
            #expect(storyA.contains { $0.hasPrefix("samplelist.json\twinner ") && $0.contains("losing branch closed by") }, "\(storyA)")
            // The greater value stands; the side that set 25 lost it.
            #expect(storyA.contains("    the winner lost list[0].value: 25, kept 30") || storyA.contains("    the loser lost list[0].value: 25, kept 30"),
                    "\(storyA)")
            #expect(try String(contentsOfFile: a + "/samplelist.json", encoding: .utf8).contains("\"Stock\""))
            let conflictsJSON = try FerryProcess.ferry(["conflicts", "--json"], in: b).stdout
            #expect(conflictsJSON.contains("\"lost\"") && conflictsJSON.contains("\"list[0].value\""), "\(conflictsJSON)")
        }
    }
}
