import Testing
import FerryCore
import FerryTesting

/// `CanonicalJSONCheck` passes exactly the serializer's output: every canonical text, with the
/// facts a parse would give, and nothing a peer could send that differs from its canonical form.
/// Random JSON values for the canonical text's tests.
enum RandomJSON {
    /// A random value: every kind of number, escapes, characters on both sides of the
    /// UTF-16/UTF-8 order split, deep nesting, blob references.
    static func value(_ g: inout SeededGenerator, depth: Int) -> JSONValue {
        let pick = depth > 4 ? Int.random(in: 0..<6, using: &g) : Int.random(in: 0..<9, using: &g)
        switch pick {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2:
            let texts = ["0", "-1", "7", "123456789012345678901", "1234567890123456789012", "1e21", "1e-7", "0.000001", "-2.5",
                         "3.14159", "1e300", "12.5e3", "-0", "100", "1.5e999999", "99999999999999999999e30", "0.1", "5e-324"]
            return (try? JSONParser.parse(texts.randomElement(using: &g)!)) ?? .null
        case 3, 4:
            let pieces = ["a", "Z", "\"", "\\", "\n", "\u{1}", "\u{1F}", "\u{7F}", "é", "\u{E000}", "\u{FFFF}", "𐀀", "😀", "/", " "]
            return .string((0..<Int.random(in: 0...4, using: &g)).map { _ in pieces.randomElement(using: &g)! }.joined())
        case 5:
            let digest = BlobDigest.of([UInt8(truncatingIfNeeded: g.next())])
            return BlobReference(digest: digest, length: Int.random(in: 0...99, using: &g), contentType: Bool.random(using: &g) ? "image/png" : nil).json
        case 6:
            return .array((0..<Int.random(in: 0...4, using: &g)).map { _ in value(&g, depth: depth + 1) })
        default:
            // Escapes that differ at the same place ("\n" and "\t": their bytes and their
            // characters order differently), and after a common prefix.
            let keys = ["a", "b", "@type", "digest", "\n", "é", "\u{E000}", "𐀀", "", "aa", "A", "\u{7F}", "\"q\"", "\t", "\u{1}", "a\n", "a\t"]
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...5, using: &g) { members[keys.randomElement(using: &g)!] = value(&g, depth: depth + 1) }
            return .object(members)
        }
    }
}

@Suite struct CanonicalJSONCheckTests {
    func check(_ text: String) -> CanonicalJSONFacts? {
        Array(text.utf8).withUnsafeBufferPointer(CanonicalJSONCheck.object)
    }

    @Test func everyCanonicalObjectPassesWithTheFactsAParseGives() throws {
        var g = SeededGenerator(seed: 21)
        var checked = 0
        for _ in 0..<3_000 {
            var members: [String: JSONValue] = [:]
            for key in ["a", "𐀀", "\u{E000}", "@type", "z"] where Bool.random(using: &g) { members[key] = RandomJSON.value(&g, depth: 0) }
            let value = JSONValue.object(members)
            guard let references = try? value.blobReferences() else { continue }
            let bytes = value.canonicalBytes
            let facts = bytes.withUnsafeBufferPointer(CanonicalJSONCheck.object)
            #expect(facts?.prettySize == value.prettyBytes.count, "\(value.canonicalString)")
            #expect(facts?.blobReferences == references, "\(value.canonicalString)")
            checked += 1
        }
        #expect(checked > 500)
    }

    @Test func whatDiffersFromTheCanonicalFormDoesNotPass() {
        let refused = [
            #"{ "a":1}"#, #"{"a" :1}"#, #"{"a":1 }"#, "{\"a\":1}\n", #"{"b":1,"a":2}"#, #"{"a":1,"a":1}"#,
            #"{"a":1.0}"#, #"{"a":1e2}"#, #"{"a":-0}"#, #"{"a":01}"#, #"{"a":1E+21}"#, #"{"a":0.10}"#, #"{"a":1e21}"#,
            #"{"a":10000000000000000000000}"#, #"{"a":.5}"#, #"{"a":1.}"#,
            #"{"a":"\u001F"}"#, #"{"a":"\/"}"#, #"{"a":"\u0041"}"#, #"{"a":"\u000a"}"#, "{\"a\":\"\u{1}\"}", #"{"a":"\x"}"#,
            #"{"a":tru}"#, #"{"a":nul}"#, "[1]", "\"a\"", "{", #"{"a":1"#, #"{"a":}"#, #"{"a",1}"#, #"{a:1}"#,
            "{\"\u{E000}\":1,\"𐀀\":2}", #"{"a":1,"\n":2}"#,
        ]
        for text in refused { #expect(check(text) == nil, "\(text)") }
        // Bytes that are no UTF-8 at all: overlong, a surrogate, beyond U+10FFFF, cut short.
        for bytes: [UInt8] in [[0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0x80], [0xFF]] {
            let text = Array(#"{"a":""#.utf8) + bytes + Array(#""}"#.utf8)
            #expect(text.withUnsafeBufferPointer(CanonicalJSONCheck.object) == nil, "\(bytes)")
        }
        // Keys the parser takes for one (canonically equivalent strings) are a duplicate.
        #expect(check("{\"K\":1,\"\u{212A}\":2}") == nil)
        #expect(check("{\"e\u{301}\":1,\"\u{E9}\":2}") == nil)
        // A reference that is malformed is left to the parse that says what is wrong with it.
        #expect(check(#"{"@type":"blob","digest":"nope"}"#) == nil)
    }

    @Test func whatTheSerializerWritesPassesEvenWhereBytesAndUTF16Disagree() throws {
        // 𐀀 (a surrogate pair in UTF-16) sorts before U+E000, though its UTF-8 bytes sort after.
        #expect(check("{\"𐀀\":2,\"\u{E000}\":1}") != nil)
        // Keys with escapes are compared as what they decode to: "\n" before "a".
        #expect(check(#"{"\n":2,"a":1}"#) != nil)
        #expect(check(#"{"a":"\u001f\b\t\n\f\r\"\\","b":-2.5,"c":1e+21,"d":1e-7,"e":0.000001,"f":123456789012345678901,"g":[{},[]]}"#) != nil)
        // The nesting the parser allows, and no deeper.
        let depth = JSONParser.maxDepth
        #expect(check(#"{"a":"# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}") != nil)
        #expect(check(#"{"a":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}") == nil)
    }

    @Test func aReferenceInsideAReferenceIsNotOneOfTheBodys() throws {
        let inner = BlobReference(digest: BlobDigest.of([1]), length: 1, contentType: nil)
        let outer = BlobReference(digest: BlobDigest.of([2]), length: 2, contentType: nil)
        guard case .object(var members) = outer.json else { return }
        members["thumbnail"] = inner.json
        let value = JSONValue.object(["items": [.object(members), inner.json]])
        let facts = try #require(value.canonicalBytes.withUnsafeBufferPointer(CanonicalJSONCheck.object))
        #expect(facts.blobReferences == (try value.blobReferences()))
        #expect(facts.blobReferences == [outer, inner])
        // A malformed one inside a reference is not looked at, as `blobReferences()` does not.
        members["thumbnail"] = ["@type": "blob", "digest": "nope"]
        let holding = JSONValue.object(["items": [.object(members)]])
        let found = try #require(holding.canonicalBytes.withUnsafeBufferPointer(CanonicalJSONCheck.object))
        #expect(found.blobReferences == [outer])
        #expect(found.blobReferences == (try holding.blobReferences()))
        // References nested as deep as the parser allows, each read once: only the outermost
        // counts, and a malformed one inside it does not matter.
        var nested = JSONValue.object(["@type": "blob", "digest": "nope", "x": .array(Array(repeating: 0, count: 1_000))])
        for level in 0..<(JSONParser.maxDepth - 3) {
            let digest = BlobDigest.of([UInt8(truncatingIfNeeded: level)])
            nested = ["@type": "blob", "digest": .string(digest.description), "length": .int(level), "x": nested]
        }
        let deep = try #require(nested.canonicalBytes.withUnsafeBufferPointer(CanonicalJSONCheck.object))
        #expect(deep.blobReferences == (try nested.blobReferences()))
        #expect(deep.blobReferences.count == 1)
        // The canonicalizer finds the same, from texts whose members are out of order.
        var g = SeededGenerator(seed: 3)
        for (value, expected) in [(value, facts), (holding, found), (nested, deep)] {
            let text = Array(JSONCanonicalizerTests.scrambled(value, &g).utf8)
            #expect(text.withUnsafeBufferPointer(JSONCanonicalizer.canonicalObject(of:))?.facts == expected)
        }
    }

    /// A frame's body member is kept as its bytes where canonical, and only at the top level.
    @Test func aFramesCanonicalMemberIsKeptAsItsBytes() throws {
        func parse(_ text: String) throws -> (members: [String: JSONValue]?, kept: Range<Int>?) {
            let result = try Array(text.utf8).withUnsafeBufferPointer { try JSONParser.parseObject(buffer: $0, keepingCanonical: "body") }
            return (result.members, result.kept?.range)
        }
        let kept = try parse(#"{"n":1, "body":{"a":[1]},"x":{"body":{"b":2}}}"#)
        #expect(kept.kept == 15..<24)
        #expect(kept.members == ["n": 1, "x": ["body": ["b": 2]]])
        let parsed = try parse(#"{"n":1,"body":{"a": [1]}}"#)
        #expect(parsed.kept == nil)
        #expect(parsed.members == ["n": 1, "body": ["a": [1]]])
        #expect(try parse("[1]").members == nil)
        #expect(throws: JSONSyntaxError.self) { try parse(#"{"body":{"a":1},"body":{"a":1}}"#) }
        #expect(throws: JSONSyntaxError.self) { try parse(#"{"body":{"a":1}"#) }
    }
}

/// `JSONCanonicalizer` writes what the parser's value serializes to, from any text the parser
/// reads, and nothing for a text the parser refuses.
@Suite struct JSONCanonicalizerTests {
    func canonicalize(_ text: String) -> String? {
        Array(text.utf8).withUnsafeBufferPointer(JSONCanonicalizer.canonicalBytes(of:)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `value` as a careless writer might put it: members in another order, whitespace
    /// around everything, characters escaped that need not be, numbers in other forms.
    static func scrambled(_ value: JSONValue, _ g: inout SeededGenerator) -> String {
        let space = [" ", "", "\n  ", "\t", "\r\n"]
        func ws() -> String { space.randomElement(using: &g)! }
        switch value {
        case .null, .bool: return value.canonicalString
        case .number:
            let text = value.canonicalString
            if !text.contains("."), !text.contains("e"), text != "0" {
                return [text, text + ".0", text + "e0", text + "E+0", text + ".000"].randomElement(using: &g)!
            }
            return [text, text.replacingOccurrences(of: "e", with: "E")].randomElement(using: &g)!
        case .string(let s):
            var out = "\""
            for u in s.unicodeScalars {
                switch u {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "/": out += Bool.random(using: &g) ? "\\/" : "/"
                case _ where u.value < 0x20 || Int.random(in: 0..<4, using: &g) == 0:
                    if u.value > 0xFFFF {
                        let v = u.value - 0x10000
                        out += String(format: "\\u%04X\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
                    } else {
                        out += String(format: Bool.random(using: &g) ? "\\u%04x" : "\\u%04X", u.value)
                    }
                default: out.unicodeScalars.append(u)
                }
            }
            return out + "\""
        case .array(let elements):
            return "[" + ws() + elements.map { scrambled($0, &g) }.joined(separator: ws() + "," + ws()) + ws() + "]"
        case .object(let members):
            let text = members.shuffled(using: &g).map { key, v in
                scrambled(.string(key), &g) + ws() + ":" + ws() + scrambled(v, &g)
            }
            return "{" + ws() + text.joined(separator: "," + ws()) + ws() + "}"
        }
    }

    @Test func anyTextGivesThePrintOfItsParse() throws {
        var g = SeededGenerator(seed: 7)
        var written = 0
        for _ in 0..<2_000 {
            let value = RandomJSON.value(&g, depth: 0)
            for text in [Self.scrambled(value, &g), value.canonicalString, String(decoding: value.prettyBytes, as: UTF8.self)] {
                let expected = try JSONParser.parse(text).canonicalString
                let got = canonicalize(text)
                #expect(got == expected, "\(text)")
                if got != nil { written += 1 }
            }
        }
        #expect(written == 6_000)
        // Objects too large for the insertion sort, members in random order.
        for _ in 0..<50 {
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 17...60, using: &g) { members["k\(Int.random(in: 0..<100, using: &g))" + ["", "\n", "é", "\u{E000}", "𐀀"].randomElement(using: &g)!] = .int(1) }
            let text = Self.scrambled(.object(members), &g)
            #expect(canonicalize(text) == JSONValue.object(members).canonicalString, "\(text)")
        }
        #expect(canonicalize("\u{FEFF} {\"b\":1,\"a\":[]} \n") == #"{"a":[],"b":1}"#)
    }

    /// The facts gathered while writing are those the check finds in the bytes written, with
    /// blob references at any depth, in objects whose members move.
    @Test func theFactsGatheredWhileWritingAreTheChecksFacts() throws {
        var g = SeededGenerator(seed: 11)
        var severalReferences = 0
        for _ in 0..<3_000 {
            let keys = ["z", "a", "m", "@type", "digest", "é"]
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 1...5, using: &g) { members[keys.randomElement(using: &g)!] = RandomJSON.value(&g, depth: 0) }
            let value = JSONValue.object(members)
            let text = Array(Self.scrambled(value, &g).utf8)
            let expected = value.canonicalBytes.withUnsafeBufferPointer(CanonicalJSONCheck.object)
            let got = text.withUnsafeBufferPointer(JSONCanonicalizer.canonicalObject(of:))
            #expect(got?.facts == expected, "\(String(decoding: text, as: UTF8.self))")
            if let got { #expect(got.bytes == value.canonicalBytes) }
            if (expected?.blobReferences.count ?? 0) > 1 { severalReferences += 1 }
        }
        #expect(severalReferences > 100)
        // No facts where the check gives none: not an object, a malformed reference.
        for text in [#"[{"a":1}]"#, #""x""#, #"{"r":{"@type":"blob","digest":"nope"}}"#] {
            #expect(Array(text.utf8).withUnsafeBufferPointer(JSONCanonicalizer.canonicalObject(of:)) == nil, "\(text)")
            #expect(canonicalize(text) != nil)
        }
    }

    @Test func whatTheParserRefusesIsNotWritten() {
        let refused = [
            #"{"a":1,"a":2}"#, #"{"a":1,"\u0061":2}"#, "{\"\u{E9}\":1,\"e\u{301}\":2}", "{\"K\":1,\"\u{212A}\":2}",
            #"{"b":1,"a":2,"b":3}"#, "{" + (0..<20).map { "\"k\($0)\":1," }.joined() + #""k7":2}"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00x"}"#, #"{"a":"\x"}"#, "{\"a\":\"\u{1}\"}",
            #"{"a":01}"#, #"{"a":1.}"#, #"{"a":.5}"#, #"{"a":1e}"#, #"{"a":59e999999999}"#, #"{"a":tru}"#,
            #"{"a":1,}"#, #"[1,]"#, #"{"a" 1}"#, #"{a:1}"#, "{\"a\":1} x", "", "   ", "[", #"{"a":"#,
            String(repeating: "[", count: JSONParser.maxDepth + 1) + String(repeating: "]", count: JSONParser.maxDepth + 1),
        ]
        for text in refused {
            #expect((try? JSONParser.parse(text)) == nil, "\(text)")
            #expect(canonicalize(text) == nil, "\(text)")
        }
        for bytes: [UInt8] in [[0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xFF]] {
            let text = Array(#"{"a":""#.utf8) + bytes + Array(#""}"#.utf8)
            #expect(text.withUnsafeBufferPointer(JSONCanonicalizer.canonicalBytes(of:)) == nil, "\(bytes)")
        }
        // Keys the parser takes as distinct are kept apart, in UTF-16 order.
        #expect(canonicalize("{\"\u{E000}\":1,\"𐀀\":2,\"e\u{301}\":3,\"f\":4}") == "{\"e\u{301}\":3,\"f\":4,\"𐀀\":2,\"\u{E000}\":1}")
    }
}
