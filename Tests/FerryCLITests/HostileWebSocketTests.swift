import Foundation
import Testing
import FerryCore
import FerryStore
import FerryTesting

/// Issue 17, end to end: a hostile peer on a real WebSocket (`Tests/Tools/hostile-peer.py`,
/// python3-websockets, which masks its frames) against a real listener run by an unprivileged
/// user. Each attack is refused or made harmless; afterwards the folder verifies, every
/// acknowledged revision reads back from the log, and nothing outside the folder changed.
@Suite(.serialized) struct HostileWebSocketTests {
    /// One attack's JSON result.
    static func attack(_ sandbox: UserSandbox, _ url: String, _ name: String) throws -> JSONValue {
        let r = try sandbox.run(["/usr/bin/python3", sandbox.tools + "/hostile-peer.py", "--url", url, "--attack", name], in: sandbox.root)
        #expect(r.status == 0, "\(name): \(r.stderr)")
        return try JSONParser.parse(Array(r.stdout.utf8))["result"] ?? .null
    }

    @Test func everyAttackIsRefusedOrHarmlessAndTheFolderStaysWhole() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let a = sandbox.path("a")
            #expect(try sandbox.ferry(["init", a, "--name", "shared"], in: sandbox.root).status == 0)
            // Files changed after this marker anywhere in the user's home but the folder: none.
            #expect(try sandbox.shell("touch .before-attacks", in: sandbox.root).status == 0)
            let changedOutside = "find \"$HOME\" -newer \(sandbox.root)/.before-attacks -not -path '\(a)' -not -path '\(a)/*' -print"
            let listener = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let url = try #require(listener.url)
            func status(_ v: JSONValue) -> Int? { v["status"]?.intValue }
            func message(_ v: JSONValue) -> String { v["message"]?.stringValue ?? "" }

            let history = try Self.attack(sandbox, url, "history")
            #expect(status(history) == 400 && message(history).contains("needs its parent"), "\(history)")
            let generation = try Self.attack(sandbox, url, "generation")
            #expect(status(generation) == 400 && message(generation).contains("beyond"), "\(generation)")
            let ignore = try Self.attack(sandbox, url, "ferryignore")
            #expect(status(ignore) == 400 && message(ignore).contains("never syncs"), "\(ignore)")
            let bomb = try Self.attack(sandbox, url, "number-bomb")
            #expect(status(bomb) == 200, "\(bomb)")
            let same = try Self.attack(sandbox, url, "same-id")
            #expect(same["lie"].map(status) == 400 && same["truth"].map(status) == 200, "\(same)")
            let local = try Self.attack(sandbox, url, "peer-id-local")
            #expect(local["status"]?.intValue == 400 || local["closed"] != nil, "\(local)")
            let huge = try Self.attack(sandbox, url, "peer-id-huge")
            #expect(huge["status"]?.intValue == 400 || huge["closed"] != nil, "\(huge)")
            let flood = try Self.attack(sandbox, url, "checkpoint-flood")
            #expect(flood["huge"].map(status) == 400, "\(flood)")
            let impersonation = try Self.attack(sandbox, url, "impersonate")
            #expect(impersonation["stored"].map(status) == 200 && impersonation["announced_to_victim"] == true, "\(impersonation)")
            #expect(listener.stop() == 0)

            // What was acknowledged reads back; what was refused left nothing.
            let store = try FolderStore.open(at: a, writable: false)
            #expect(store.damagedLogLines.isEmpty)
            let docs = Set(try store.readLogEntries().map(\.doc.rawValue))
            #expect(docs == ["bomb.json", "same.json", "planted.json"], "\(docs)")
            #expect(!FileManager.default.fileExists(atPath: a + "/.ferryignore"))
            #expect((try? FileManager.default.attributesOfItem(atPath: a + "/bomb.json")[.size] as? Int).flatMap { $0 } ?? .max < 100)
            #expect((FileManager.default.contents(atPath: a + "/same.json")).flatMap { try? JSONParser.parse(Array($0)) } == ["v": 1])
            let checkpoints = try FileManager.default.contentsOfDirectory(atPath: a + "/.ferry/checkpoints").count
            #expect(checkpoints <= CheckpointStore.defaultCapacity, "\(checkpoints) checkpoint files")
            #expect(try sandbox.ferry(["verify"], in: a).status == 0)
            let changed = try sandbox.shell(changedOutside, in: sandbox.root)
            #expect(changed.status == 0 && changed.stdout.isEmpty, "changed outside the folder: \(changed.stdout) \(changed.stderr)")
        }
    }
}
