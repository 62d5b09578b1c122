import Testing
import FerryCore

/// The id mapping between ferry's paths and Couchbase Lite's ids: readable in the common
/// case, reversible and injective always, and safe for anything a peer sends.
@Suite struct CBLDocumentIDTests {
    @Test func commonIDsReadNaturally() throws {
        let pairs: [(String, String)] = [
            ("a1", "a1.json"), ("list::alice", "list::alice.json"), ("samplelist", "samplelist.json"),
            ("notes/today", "notes/today.json"), ("file::images/apples.jpg", "images/apples.jpg"),
            ("file::scan.bin", "scan.bin"), ("50%", "50%.json"), ("héllo wörld", "héllo wörld.json"),
        ]
        for (cbl, ferry) in pairs {
            #expect(try CBLDocumentIDs.ferryID(cbl).rawValue == ferry, "\(cbl)")
            #expect(try CBLDocumentIDs.cblID(DocumentID(ferry)) == cbl, "\(ferry)")
        }
    }

    @Test func whatAPathCannotHoldIsEscapedNeverTraversed() throws {
        let pairs: [(String, String)] = [
            ("../../etc/passwd", "%2E%2E/%2E%2E/etc/passwd.json"),
            ("./x", "%2E/x.json"),
            (".ferry/config", "%2Eferry/config.json"),
            ("a/.ferry/b", "a/%2Eferry/b.json"),
            ("/etc/passwd", "%2Fetc%2Fpasswd.json"),
            ("a//b", "a%2F%2Fb.json"),
            ("trailing/", "trailing%2F.json"),
            ("nul\u{0}byte", "nul%00byte.json"),
            ("tab\there\u{7F}", "tab%09here%7F.json"),
            ("%41", "%2541.json"),
            ("file::a.json", "a%2Ejson"),
            ("file::../x", "%2E%2E/x"),
        ]
        for (cbl, ferry) in pairs {
            let doc = try CBLDocumentIDs.ferryID(cbl)
            #expect(doc.rawValue == ferry, "\(cbl)")
            #expect(try CBLDocumentIDs.cblID(doc) == cbl, "\(ferry)")
        }
    }

    @Test func idsNoFileCanHoldAreRefused() {
        let long = String(repeating: "x", count: 300)
        for bad in ["", "file::", long, "a/\(long)/b", "e\u{301}"] {
            #expect(throws: CBLInteropError.self, "\(bad.prefix(20))") { try CBLDocumentIDs.ferryID(bad) }
        }
    }

    @Test func pathsThatAreNoIDsEscapeAreNotOffered() throws {
        // A literal escape ferry would never write has no Couchbase Lite id.
        for path in ["a%41.json", "file::x.json", "my%2Ffile.txt"] {
            #expect(throws: CBLInteropError.self, "\(path)") { try CBLDocumentIDs.cblID(DocumentID(path)) }
        }
    }

    @Test func randomIDsRoundTripAndNeverCollide() throws {
        var rng = SplitMix(seed: 19)
        let pieces = ["a", "b", "Z", "0", "9", "/", ".", "..", "%", "%2", "%25", "%2E", "%2f", "%7F", ":", "file::", ".json", ".ferry",
                      " ", "\u{0}", "\u{1F}", "\u{7F}", "é", "日本", "-", "_", "~", "\\"]
        var seen: [String: String] = [:]
        var mapped = 0
        for _ in 0..<20_000 {
            let id = (0..<Int.random(in: 1...8, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            guard let doc = try? CBLDocumentIDs.ferryID(id) else { continue }
            mapped += 1
            #expect(try DocumentID(doc.rawValue) == doc)
            #expect(try CBLDocumentIDs.cblID(doc) == id, "\(String(reflecting: id))")
            if let other = seen[doc.rawValue] { #expect(other == id, "\(String(reflecting: id)) and \(String(reflecting: other)) collide") }
            seen[doc.rawValue] = id
        }
        #expect(mapped > 15_000)
        // Paths: every representable one comes back as itself.
        var representable = 0
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 1...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            guard let doc = try? DocumentID(text) else { continue }
            guard let id = try? CBLDocumentIDs.cblID(doc) else { continue }
            representable += 1
            #expect(try CBLDocumentIDs.ferryID(id) == doc, "\(text)")
        }
        #expect(representable > 5_000)
    }
}

/// A small seeded generator (SplitMix64), so a failing case can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
