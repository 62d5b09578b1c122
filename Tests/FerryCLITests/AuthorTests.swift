import FerryTesting
import Foundation
import Testing

/// Every revision names who made it (`NAME@HOST`), in the log line, passed along by every peer.
@Suite struct AuthorTests {
    func initFolder(_ path: String, name: String, sample: Bool = false) throws {
        let r = try FerryProcess.ferry(["init", path, "--name", name] + (sample ? ["--sample"] : []))
        #expect(r.status == 0, "\(r.stderr)")
    }

    func serve(_ folder: String) throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
    }

    /// The author column of the newest log line of `doc` in `folder`.
    func newestAuthor(_ doc: String, in folder: String) throws -> String? {
        let r = try FerryProcess.ferry(["log", doc, "--count", "1"], in: folder)
        let columns = r.stdout.split(separator: "\n").first?.split(separator: "\t", omittingEmptySubsequences: false) ?? []
        return columns.count >= 7 ? String(columns[5]) : nil
    }

    @Test func anEditKeepsItsAuthorAcrossTwoHops() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b"), c = tmp.appending("c")
            try initFolder(a, name: "alpha", sample: true)
            try initFolder(b, name: "beta")
            try initFolder(c, name: "gamma")
            let host = try #require(try FerryProcess.shell("hostname -s").stdout.split(separator: "\n").first.map(String.init))
            try FerryProcess.shell("sed -i 's/\"value\": 20/\"value\": 25/' samplelist.json", in: a)
            #expect(try FerryProcess.ferry(["scan"], in: a).status == 0)
            #expect(try newestAuthor("samplelist.json", in: a) == "alpha@\(host)")

            let la = try serve(a)
            #expect(try FerryProcess.ferry(["sync", try #require(la.url)], in: b).status == 0)
            la.stop()
            let lb = try serve(b)
            #expect(try FerryProcess.ferry(["sync", try #require(lb.url)], in: c).status == 0)
            // C got it from B, and it names A's folder as its author; `origin` names the peer it came from.
            #expect(try newestAuthor("samplelist.json", in: c) == "alpha@\(host)")
            let json = try FerryProcess.ferry(["log", "samplelist.json", "--json", "--count", "1"], in: c)
            #expect(json.stdout.contains("\"author\": \"alpha@\(host)\""), "\(json.stdout)")
            // The change itself, as made on A, read on C.
            let patch = try FerryProcess.ferry(["log", "samplelist.json", "-p", "--count", "1"], in: c)
            #expect(patch.stdout.contains("list[0].value: 20 → 25") && patch.stdout.contains("alpha@\(host)"), "\(patch.stdout)")
            // C's own edit is C's.
            try FerryProcess.shell("sed -i 's/\"value\": 25/\"value\": 26/' samplelist.json", in: c)
            #expect(try FerryProcess.ferry(["scan"], in: c).status == 0)
            #expect(try newestAuthor("samplelist.json", in: c) == "gamma@\(host)")
            #expect(try FerryProcess.ferry(["verify"], in: c).status == 0)
        }
    }
}
