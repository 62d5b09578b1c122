import FerryTesting
import Foundation
import Testing

/// `ferry peer add|list|remove`, saved peers in `sync` and `serve`, and `--pin` with a
/// SHA-256 fingerprint: real listeners on 127.0.0.1 with their own TLS identities.
@Suite struct SavedPeerTests {
    func initFolder(_ path: String, sample: Bool = false) throws {
        let r = try FerryProcess.ferry(["init", path, "--name", "inventory"] + (sample ? ["--sample"] : []))
        #expect(r.status == 0, "\(r.stderr)")
    }

    func serve(_ folder: String) throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: ["--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
    }

    /// The 64 hex digits after "SHA-256 " in `text`.
    func fingerprint(in text: String) -> String? {
        guard let range = text.range(of: "SHA-256 ") else { return nil }
        let hex = text[range.upperBound...].prefix(64)
        return hex.count == 64 && hex.allSatisfy(\.isHexDigit) ? String(hex) : nil
    }

    @Test func aPeerAddedByNamePinsItsCertificateAndServeSyncsWithIt() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            let listener = try serve(a)
            let url = try #require(listener.url)

            // Trust on first use: the certificate presented now is pinned and shown.
            let add = try FerryProcess.ferry(["peer", "add", "alpha", url], in: b)
            #expect(add.status == 0, "\(add.stderr)")
            let fp = try #require(fingerprint(in: add.stdout), "\(add.stdout)")
            let list = try FerryProcess.ferry(["peer", "list"], in: b)
            #expect(list.stdout.contains("alpha\t\(url)\tpinned sha256 \(fp)"), "\(list.stdout)")
            #expect(try FerryProcess.ferry(["peer", "add", "alpha", url], in: b).status == 2)  // taken: --force replaces
            #expect(try FerryProcess.ferry(["peer", "add", "ws://x:1/db", url], in: b).status == 2)

            // By name.
            let sync = try FerryProcess.ferry(["sync", "alpha"], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(FileManager.default.fileExists(atPath: b + "/samplelist.json"))

            // `serve` with no peer options replicates with every saved peer.
            let agent = try RunningAgent(folder: b)
            try FerryProcess.shell("sed -i 's/\"value\": 20/\"value\": 25/' samplelist.json", in: a)
            let arrived = eventually(10) {
                (try? String(contentsOfFile: b + "/samplelist.json", encoding: .utf8))?.contains("\"value\": 25") == true
            }
            #expect(arrived, "\(agent.log())")
            #expect(agent.stop() == 0)

            // The same fingerprint typed by hand, openssl-style, on the command line.
            let colons = stride(from: 0, to: 64, by: 2).map { i in
                fp.dropFirst(i).prefix(2).uppercased()
            }.joined(separator: ":")
            let pinned = try FerryProcess.ferry(["sync", url, "--pin", colons], in: b)
            #expect(pinned.status == 0, "\(pinned.stderr)")

            // Forgotten: the name means nothing any more.
            #expect(try FerryProcess.ferry(["peer", "remove", "alpha"], in: b).status == 0)
            let gone = try FerryProcess.ferry(["sync", "alpha"], in: b)
            #expect(gone.status == 2 && gone.stderr.contains("saved peer"), "\(gone.stderr)")
            #expect(try FerryProcess.ferry(["peer", "remove", "alpha"], in: b).status == 1)
        }
    }

    @Test func aChangedCertificateBehindAPinnedPeerIsASecurityWarningAndSendsNothing() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b"), impostor = tmp.appending("impostor")
            try initFolder(a, sample: true)
            try initFolder(b)
            try initFolder(impostor)
            let real = try serve(a)
            let add = try FerryProcess.ferry(["peer", "add", "alpha", try #require(real.url)], in: b)
            let fp = try #require(fingerprint(in: add.stdout), "\(add.stdout)")
            real.stop()
            // Another listener (its own anonymous identity) now answers at a pinned name's URL.
            let other = try serve(impostor)
            let otherURL = try #require(other.url)
            #expect(try FerryProcess.ferry(["peer", "add", "alpha", otherURL, "--pin", fp, "--force"], in: b).status == 0)
            try FerryProcess.shell("echo '{\"secret\": 1}' > mine.json", in: b)
            let r = try FerryProcess.ferry(["sync", "alpha"], in: b)
            #expect(r.status == 3, "\(r.stderr)")
            #expect(r.stderr.contains("SECURITY WARNING") && r.stderr.contains("NOT the pinned one") && r.stderr.contains(fp), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: impostor + "/mine.json"))
            // A wrong fingerprint on the command line: the same warning.
            let wrong = try FerryProcess.ferry(["sync", otherURL, "--pin", String(repeating: "ab", count: 32)], in: b)
            #expect(wrong.status == 3 && wrong.stderr.contains("SECURITY WARNING"), "\(wrong.stderr)")
            // Neither a fingerprint nor a file.
            let garbage = try FerryProcess.ferry(["sync", otherURL, "--pin", "abc"], in: b)
            #expect(garbage.status != 0 && garbage.stderr.contains("abc"), "\(garbage.stderr)")
        }
    }
}
