import Foundation
import Testing
import FerryTesting

/// What a folder ignores is neither sent nor written: version control, downloads in progress,
/// desktop droppings out of the box, and whatever `.ferryignore` names, whichever side edits.
@Suite struct IgnoreTests {
    @Test func gitDownloadsAndIgnoredFilesNeverSyncAndAreNeverOverwritten() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            #expect(try FerryProcess.ferry(["init", a, "--name", "inventory"]).status == 0)
            #expect(try FerryProcess.ferry(["init", b, "--name", "inventory"]).status == 0)
            // A real git repository, a download in progress and a desktop dropping: no revision.
            try tmp.write("a/notes.json", #"{"text": "shared"}"#)
            let git = try FerryProcess.shell("""
                git init -q . && git -c user.name=t -c user.email=t@example.com add notes.json \
                && git -c user.name=t -c user.email=t@example.com commit -q -m one \
                && head -c 5000 /dev/urandom > film.mkv.part && head -c 100 /dev/urandom > page.crdownload && touch .DS_Store
                """, in: a)
            #expect(git.status == 0, "\(git.stderr)")
            #expect(try FerryProcess.ferry(["scan"], in: a).status == 0)
            let docs = RevisionLogReader.lines(a).map(\.doc)
            #expect(docs == ["notes.json"], "\(docs)")
            let listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
            let url = try #require(listener.url)
            #expect(try FerryProcess.ferry(["sync", url], in: b).status == 0)
            #expect(try String(contentsOfFile: b + "/notes.json", encoding: .utf8).contains("shared"))
            #expect(!FileManager.default.fileExists(atPath: b + "/.git") && !FileManager.default.fileExists(atPath: b + "/film.mkv.part"))

            // b ignores notes.json and keeps its own copy; a's edit is kept in b's history only.
            try tmp.write("b/.ferryignore", "notes.json\n")
            try tmp.write("b/notes.json", #"{"text": "b's own, ignored"}"#)
            try tmp.write("a/notes.json", #"{"text": "edited on a"}"#)
            #expect(eventually { RevisionLogReader.lines(a).count == 2 })
            let sync = try FerryProcess.ferry(["sync", url], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(try String(contentsOfFile: b + "/notes.json", encoding: .utf8).contains("b's own, ignored"))
            let history = try FerryProcess.ferry(["log", "notes.json"], in: b)
            #expect(history.stdout.split(separator: "\n").count == 2, "\(history.stdout)")
            // `*` ignores everything: nothing is a pending deletion.
            try tmp.write("b/.ferryignore", "*\n")
            let status = try FerryProcess.ferry(["status", "--json"], in: b)
            #expect(status.status == 0 && !status.stdout.contains("\"deleted\""), "\(status.stdout)")
            #expect(listener.stop() == 0)
        }
    }
}
