import Foundation
import Testing
import FerryCore
import FerryTesting

/// Timestamps written digit by digit, document ids compared and hashed by their bytes in
/// place, and hex digits unpacked from words, give what the plain ways give.
struct TimestampAndIDTests {
    @Test func aTimestampIsRFC3339WithMillisecondsForAnyTime() {
        #expect(Timestamp.format(seconds: 0, milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.format(seconds: 1_795_003_445, milliseconds: 7) == "2026-11-18T12:04:05.007Z")
        #expect(Timestamp.format(seconds: 253_402_300_799, milliseconds: 999) == "9999-12-31T23:59:59.999Z")
        // Beyond year 9999 the year takes the digits it needs (the padded way).
        #expect(Timestamp.format(seconds: 253_402_300_800, milliseconds: 0) == "10000-01-01T00:00:00.000Z")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var g = SeededGenerator(seed: 21)
        for _ in 0..<2_000 {
            let seconds = Int.random(in: 0..<253_402_300_800, using: &g), ms = Int.random(in: 0...999, using: &g)
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(seconds) + Double(ms) / 1000 + 0.0001))
            #expect(Timestamp.format(seconds: seconds, milliseconds: ms) == expected)
        }
        #expect(Timestamp.now().utf8.count == 24)
    }

    @Test func idsCompareAndHashByTheirBytes() throws {
        let names = ["a.json", "b.json", "a.jsonx", "é.json", "docs/9-9.json", "docs/10-10.json", "Z", "zz/ü/x"]
        let ids = try names.map { try DocumentID($0) }
        for a in ids {
            for b in ids {
                #expect((a == b) == (Array(a.rawValue.utf8) == Array(b.rawValue.utf8)))
                #expect((a < b) == Array(a.rawValue.utf8).lexicographicallyPrecedes(Array(b.rawValue.utf8)))
                if a == b { #expect(a.hashValue == b.hashValue) }
            }
        }
        // Equal ids made from different string storage (a substring's copy) are equal and hash alike.
        let copy = try DocumentID(String(Substring("xdocs/9-9.json".dropFirst())))
        #expect(copy == ids[4] && copy.hashValue == ids[4].hashValue)
        var table: [DocumentID: Int] = [:]
        for (i, id) in ids.enumerated() { table[id] = i }
        #expect(table.count == names.count && table[copy] == 4)
    }

    /// Every length of hex text, across the words' boundaries, comes back as it went in.
    @Test func packedHexGivesBackItsDigitsForEveryLength() {
        var generator = SeededGenerator(seed: 21)
        for length in 1...64 {
            let text = String((0..<length).map { _ in "0123456789abcdef".randomElement(using: &generator)! })
            let packed = PackedHex(Substring(text).utf8)
            #expect(packed?.text == text, "\(length) digits")
            // Appended after what the array holds already.
            var out = Array("x:".utf8)
            packed?.appendText(to: &out)
            #expect(out == Array(("x:" + text).utf8))
        }
    }
}
