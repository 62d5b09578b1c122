import FerryTesting
import Foundation
import Testing

/// The first sync between folders that share no history and hold documents at the same paths
/// is refused until `--allow-unrelated`; related folders, even with every shared document
/// changed on both sides, are not.
@Suite struct UnrelatedFolderTests {
    func folder(_ path: String, _ files: [String: String], name: String = "inventory") throws {
        let r = try FerryProcess.ferry(["init", path, "--name", name])
        #expect(r.status == 0, "\(r.stderr)")
        for (name, text) in files { try text.write(toFile: path + "/" + name, atomically: false, encoding: .utf8) }
        #expect(try FerryProcess.ferry(["scan"], in: path).status == 0)
    }

    func serve(_ folder: String) throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
    }

    func logLines(_ folder: String) -> Int { RevisionLogReader.lines(folder).count }

    @Test func twoUnrelatedFoldersAreRefusedThenMergedWithAllowUnrelated() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try folder(a, ["notes.json": "{\"owner\": \"a\"}\n", "only-a.json": "{\"x\": 1}\n"])
            try folder(b, ["notes.json": "{\"owner\": \"b\"}\n", "only-b.json": "{\"y\": 2}\n"])
            let listener = try serve(a)
            let url = try #require(listener.url)
            let (beforeA, beforeB) = (logLines(a), logLines(b))

            let refused = try FerryProcess.ferry(["sync", url], in: b)
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("unrelated") && refused.stderr.contains("notes.json") && refused.stderr.contains("--allow-unrelated"),
                    "\(refused.stderr)")
            // Nothing moved either way.
            #expect(logLines(a) == beforeA && logLines(b) == beforeB)
            #expect(!FileManager.default.fileExists(atPath: b + "/only-a.json") && !FileManager.default.fileExists(atPath: a + "/only-b.json"))
            #expect(try String(contentsOfFile: b + "/notes.json", encoding: .utf8).contains("\"b\""))

            let allowed = try FerryProcess.ferry(["sync", url, "--allow-unrelated"], in: b)
            #expect(allowed.status == 0, "\(allowed.stderr)")
            #expect(FileManager.default.fileExists(atPath: b + "/only-a.json") && FileManager.default.fileExists(atPath: a + "/only-b.json"))
            // Related from now on: no flag needed.
            try "{\"z\": 3}\n".write(toFile: b + "/later.json", atomically: false, encoding: .utf8)
            let again = try FerryProcess.ferry(["sync", url], in: b)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(FileManager.default.fileExists(atPath: a + "/later.json"))
            // A folder with nothing of its own is never refused.
            let empty = tmp.appending("empty")
            try folder(empty, [:])
            #expect(try FerryProcess.ferry(["sync", url], in: empty).status == 0)
        }
    }

    /// A ferry listener serves its folder's name: a first sync with a URL naming another
    /// database (a typo, a wrong port) is refused while this folder has documents, whatever
    /// paths the two hold; an empty folder may still take a copy (outside test, round 3: a
    /// wrong URL merged a diary into an inventory, and on to every peer of it).
    @Test func aListenerOfAnotherDatabaseIsRefusedUntilAllowUnrelated() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let inv = tmp.appending("inv"), notes = tmp.appending("notes"), copy = tmp.appending("copy")
            try folder(inv, ["list.json": "{\"item\": \"apples\"}\n"], name: "inv")
            try folder(notes, ["diary.json": "{\"secret\": \"diary\"}\n"], name: "notes")
            let listener = try serve(inv)
            let url = try #require(listener.url)
            let (beforeInv, beforeNotes) = (logLines(inv), logLines(notes))

            let refused = try FerryProcess.ferry(["sync", url], in: notes)
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("serves database \"inv\", and this folder is database \"notes\"")
                    && refused.stderr.contains("--allow-unrelated"), "\(refused.stderr)")
            #expect(logLines(inv) == beforeInv && logLines(notes) == beforeNotes)
            #expect(!FileManager.default.fileExists(atPath: inv + "/diary.json") && !FileManager.default.fileExists(atPath: notes + "/list.json"))

            try folder(copy, [:], name: "copy")
            #expect(try FerryProcess.ferry(["sync", url], in: copy).status == 0)
            #expect(FileManager.default.fileExists(atPath: copy + "/list.json"))

            #expect(try FerryProcess.ferry(["sync", url, "--allow-unrelated"], in: notes).status == 0)
            #expect(FileManager.default.fileExists(atPath: inv + "/diary.json"))

            // A copy named otherwise shares history: its listener is not refused.
            #expect(listener.stop() == 0)
            try "{\"mine\": 1}\n".write(toFile: copy + "/mine.json", atomically: false, encoding: .utf8)
            #expect(try FerryProcess.ferry(["scan"], in: copy).status == 0)
            let copyListener = try serve(copy)
            let first = try FerryProcess.ferry(["sync", try #require(copyListener.url)], in: inv)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(FileManager.default.fileExists(atPath: inv + "/mine.json"))
            #expect(copyListener.stop() == 0)
        }
    }

    @Test func foldersRelatedThroughAThirdAreNotRefusedEvenWhenEveryDocumentChangedOnBothSides() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), e = tmp.appending("e"), g = tmp.appending("g")
            try folder(a, ["notes.json": "{\"v\": 1}\n"])
            try folder(e, [:])
            try folder(g, [:])
            let la = try serve(a)
            #expect(try FerryProcess.ferry(["sync", try #require(la.url)], in: e).status == 0)
            let le = try serve(e)
            #expect(try FerryProcess.ferry(["sync", try #require(le.url)], in: g).status == 0)
            le.stop()
            // G has A's history only through E; both change the one document before G meets A.
            try "{\"v\": 2}\n".write(toFile: a + "/notes.json", atomically: false, encoding: .utf8)
            #expect(eventually(5) { logLines(a) == 2 })
            try "{\"v\": 3}\n".write(toFile: g + "/notes.json", atomically: false, encoding: .utf8)
            let r = try FerryProcess.ferry(["sync", try #require(la.url)], in: g)
            #expect(r.status == 0, "\(r.stderr)")
        }
    }
}
