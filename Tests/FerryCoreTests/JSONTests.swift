import Testing
@testable import FerryCore
import FerryTesting

@Suite struct CanonicalJSONTests {
    @Test func rfc8785SectionThreeExample() throws {
        // RFC 8785 §3.2.2 input and its canonical output (§3.2.3).
        let input = #"""
        {
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }
        """#
        let expected = #"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        #expect(try JSONParser.parse(input).canonicalString == expected)
    }

    @Test func rfc8785PropertySorting() throws {
        // RFC 8785 §3.2.3: keys sort by UTF-16 code units.
        let input = #"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#
        let keys = try JSONParser.parse(input).canonicalString
        let order = ["\\r", "1", "\u{80}", "ö", "€", "😀", "\u{FB33}"]
        var last = keys.startIndex
        for k in order {
            let r = try #require(keys.range(of: "\"\(k)\":", range: last..<keys.endIndex))
            last = r.upperBound
        }
    }

    @Test(arguments: [
        (UInt64(0x0000_0000_0000_0000), "0"), (0x8000_0000_0000_0000, "0"),
        (0x0000_0000_0000_0001, "5e-324"), (0x8000_0000_0000_0001, "-5e-324"),
        (0x7FEF_FFFF_FFFF_FFFF, "1.7976931348623157e+308"), (0xFFEF_FFFF_FFFF_FFFF, "-1.7976931348623157e+308"),
        (0x4340_0000_0000_0000, "9007199254740992"), (0xC340_0000_0000_0000, "-9007199254740992"),
        (0x4430_0000_0000_0000, "295147905179352830000"), (0x44B5_2D02_C7E1_4AF5, "9.999999999999997e+22"),
        (0x44B5_2D02_C7E1_4AF6, "1e+23"), (0x44B5_2D02_C7E1_4AF7, "1.0000000000000001e+23"),
        (0x444B_1AE4_D6E2_EF4E, "999999999999999700000"), (0x444B_1AE4_D6E2_EF4F, "999999999999999900000"),
        (0x444B_1AE4_D6E2_EF50, "1e+21"), (0x3EB0_C6F7_A0B5_ED8C, "9.999999999999997e-7"),
        (0x3EB0_C6F7_A0B5_ED8D, "0.000001"), (0x41B3_DE43_5555_5553, "333333333.3333332"),
        (0x41B3_DE43_5555_5554, "333333333.33333325"), (0x41B3_DE43_5555_5555, "333333333.3333333"),
        (0x41B3_DE43_5555_5556, "333333333.3333334"), (0x41B3_DE43_5555_5557, "333333333.33333343"),
        (0xBECB_F647_612F_3696, "-0.0000033333333333333333"), (0x4314_3FF3_C1CB_0959, "1424953923781206.2"),
    ])
    func rfc8785NumberTable(bits: UInt64, expected: String) throws {
        let d = Double(bitPattern: bits)
        #expect(try #require(JSONNumber(d)).description == expected)
        // The same text parsed back keeps the same canonical form.
        #expect(try JSONParser.parse(expected).canonicalString == expected)
    }

    @Test(arguments: [
        ("12345678901234567890123456789", "12345678901234567890123456789"),
        ("-9007199254740993", "-9007199254740993"),
        ("18446744073709551617", "18446744073709551617"),
        ("3.14159265358979323846264338327950288", "3.14159265358979323846264338327950288"),
        ("0.100000000000000000000000001", "0.100000000000000000000000001"),
        ("1e400", "1e+400"), ("-2.5e-400", "-2.5e-400"),
        ("123456789012345678901234567890.5", "1.234567890123456789012345678905e+29"),
        ("1.0", "1"), ("10e-1", "1"), ("-0", "0"), ("0.0", "0"), ("1E30", "1e+30"), ("4.50", "4.5"),
    ])
    func bigIntegersAndLongDecimalsKeepTheirExactValue(text: String, canonical: String) throws {
        let value = try JSONParser.parse("[\(text)]")
        #expect(value.canonicalString == "[\(canonical)]")
        #expect(try JSONParser.parse(value.canonicalBytes) == value)
        #expect(try JSONParser.parse(value.prettyBytes) == value)
    }

    @Test func prettyPrintingIsCanonicalContentWithTwoSpaceIndent() throws {
        let v = try JSONParser.parse(#"{"b":[1,{"c":null}],"a":{},"d":[]}"#)
        let expected = "{\n  \"a\": {},\n  \"b\": [\n    1,\n    {\n      \"c\": null\n    }\n  ],\n  \"d\": []\n}\n"
        #expect(String(decoding: v.prettyBytes, as: UTF8.self) == expected)
        #expect(try JSONParser.parse(v.prettyBytes) == v)
    }

    @Test func prettyTextFromCanonicalBytesIsThePrettyPrintedText() throws {
        // Strings holding the punctuation the transform reacts to, escapes, and empty containers.
        let tricky: JSONValue = ["a,b": "x[1]{2}:\"\\\n", "": [[], [:], ["k": []]], "u": "\u{1F600}\u{FFFD}", "n": [1, -2, nil, true]]
        var m = InventoryMutator(seed: 7)
        // Nested deep enough for the indentation to outgrow the room first given to the text.
        var deep: JSONValue = [1, "end", nil]
        for level in 0..<60 { deep = level.isMultiple(of: 2) ? [deep, .int(level)] : .object(["k\(level)": deep]) }
        var values: [JSONValue] = [tricky, [:], .object(["x": tricky]), .object(["deep": deep])]
        var doc = m.makeList(count: 20)
        for _ in 0..<100 {
            doc = m.edit(doc)
            values.append(doc)
        }
        for value in values {
            let canonical = value.canonicalBytes
            #expect(canonical.withUnsafeBufferPointer { JSONValue.prettyBytes(fromCanonical: $0) } == value.prettyBytes)
        }
    }

    @Test func keysSortByUTF16UnitsWhateverTheirUTF8() throws {
        // The byte comparison's one exception: beyond U+FFFF (a surrogate pair, 0xD8xx) sorts
        // before U+E000...U+FFFF in UTF-16, after it in UTF-8.
        let keys = ["a", "ab", "b", "\u{7F}", "\u{80}", "\u{7FF}", "\u{800}", "\u{D7FF}", "\u{E000}", "\u{FB33}", "\u{FFFF}",
                    "\u{10000}", "\u{1F600}", "a\u{1F600}", "a\u{FFFD}", "a\u{E000}b", "", "\u{10FFFF}"]
        let object = JSONValue.object(Dictionary(uniqueKeysWithValues: keys.map { ($0, JSONValue.null) }))
        let expected = keys.sorted { $0.utf16.lexicographicallyPrecedes($1.utf16) }
        guard case .object(let members) = try JSONParser.parse(object.canonicalBytes) else { Issue.record("not an object"); return }
        #expect(members.count == keys.count)
        let text = object.canonicalString
        var last = text.startIndex
        for key in expected {
            let r = try #require(text.range(of: "\"\(key)\":null", range: last..<text.endIndex))
            last = r.upperBound
        }
    }

    /// Members come in canonical order at every size: a few members are sorted on the stack,
    /// more than 32 through an array; both agree with sorting by UTF-16 units, in the
    /// canonical and the pretty-printed text.
    @Test func membersAreInCanonicalOrderAtEverySize() throws {
        let alphabet = ["a", "b", "\u{E000}", "\u{1F600}", "\u{80}", "z", "\u{FFFF}"]
        for n in 0...40 {
            let keys = (0..<n).map { i in alphabet[(i * 7 + n) % alphabet.count] + String(i * 31 % 97) }
            let object = JSONValue.object(Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, JSONValue.number(JSONNumber($0))) }))
            let sorted = keys.enumerated().sorted { $0.element.utf16.lexicographicallyPrecedes($1.element.utf16) }
            let expected = "{" + sorted.map { "\"\($0.element)\":\($0.offset)" }.joined(separator: ",") + "}"
            #expect(object.canonicalString == expected, "\(n) members")
            #expect(String(decoding: object.prettyBytes, as: UTF8.self).filter { $0 != " " && $0 != "\n" } == expected, "\(n) members")
        }
    }

    @Test func randomDocumentsRoundTrip() throws {
        var m = InventoryMutator(seed: 42)
        var doc = m.makeList(count: 30)
        for _ in 0..<200 {
            doc = m.edit(doc)
            #expect(try JSONParser.parse(doc.canonicalBytes) == doc)
            #expect(try JSONParser.parse(doc.prettyBytes) == doc)
            #expect(try JSONParser.parse(doc.prettyBytes).canonicalBytes == doc.canonicalBytes)
        }
    }
}

@Suite struct StrictParserTests {
    func error(_ text: String) -> JSONSyntaxError? {
        do { _ = try JSONParser.parse(text); return nil } catch { return error }
    }

    @Test func errorsCarryLineAndColumn() throws {
        let e = try #require(error("{\"type\": "))
        #expect(e.line == 1 && e.column == 10)
        let e2 = try #require(error("{\n  \"a\": 1,\n  \"b\": tru\n}"))
        #expect(e2.line == 3 && e2.column == 8, "\(e2)")
        let e3 = try #require(error("{\"é\": 1 \"x\"}"))
        #expect(e3.line == 1 && e3.column == 9, "\(e3)")
    }

    @Test(arguments: [
        "{\"a\": 1,}", "[1, 2,]", "// c\n{}", "{'a': 1}", "{\"a\": 01}", "{\"a\": 1.}", "{\"a\": .5}",
        "{\"a\": 1, \"a\": 2}", "[\"\\ud800\"]", "[\"\\udc00x\"]", "{\"a\": NaN}", "[1] [2]", "", "  ",
        "[\"tab\there\"]", "[\"\\x\"]", "{\"a\" 1}", "[-]", "[1e]", "[tru]", "[nul]",
    ])
    func rejectsInvalidJSON(text: String) {
        #expect(error(text) != nil, "accepted: \(text)")
    }

    @Test func rejectsInvalidUTF8AndDeepNesting() {
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse([0x5B, 0x22, 0xC3, 0x28, 0x22, 0x5D]) }
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(deep) }
        let ok = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(throws: Never.self) { try JSONParser.parse(ok) }
    }

    @Test func surrogatePairsAndEscapes() throws {
        let v = try JSONParser.parse(#"["\ud83d\ude00", "a\/b", "\u0000"]"#)
        #expect(v == ["😀", "a/b", "\u{0}"])
        #expect(v.canonicalString == "[\"😀\",\"a/b\",\"\\u0000\"]")
    }

    @Test func stringsCompareByBytesNotCanonicalEquivalence() throws {
        #expect(JSONValue.string("\u{E9}") != JSONValue.string("e\u{301}"))
    }

    /// A huge exponent on a long integer stays a short number: writing it out in full would
    /// be a gigabyte from 35 bytes (issue 17).
    @Test func aLongIntegerWithAHugeExponentStaysShort() throws {
        let bomb = try JSONParser.parse(Array(#"{"x":123456789012345678e100000000}"#.utf8))
        #expect(bomb.canonicalString == #"{"x":1.23456789012345678e+100000017}"#)
        #expect(try JSONParser.parse(bomb.canonicalBytes) == bomb)
        // Long integers with few zeros are still written out as the ids they are.
        #expect(try JSONParser.parse(Array("[123456789012345678901234567890, 1234567890123456789e21]".utf8)).canonicalString
                == "[123456789012345678901234567890,1234567890123456789000000000000000000000]")
    }

    /// The exponent bound holds for what the canonical text writes, so every number that
    /// parses has a canonical form that parses back (found by FuzzJSON: `5.9e+1000000000`).
    @Test func everyParsedNumbersCanonicalExponentParsesBack() throws {
        for text in ["59e999999999", "0.01e-999999999", "0.0000005e-999999999", "-12.5e999999999"] {
            #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(Array(text.utf8)) }
        }
        for text in ["5e999999999", "1.5e999999999", "0.5e999999999", "10e999999998", "-12.5e999999998", "5e-999999998",
                     "1e-999999999", "0.0e999999999", "-0.000e-999999999"] {
            let value = try JSONParser.parse(Array(text.utf8))
            #expect(try JSONParser.parse(value.canonicalBytes) == value, "\(text)")
        }
    }

    /// `prettySize` counts exactly what `prettyBytes` writes, and stops past its limit.
    @Test func prettySizeIsThePrettyPrintedLength() throws {
        let value = try JSONParser.parse(Array(#"{"a": [1, {"b": [], "c": {}}, [[2, 3]]], "d": "e", "f": {"g": null}}"#.utf8))
        #expect(value.prettySize(canonicalCount: value.canonicalBytes.count, limit: .max) == value.prettyBytes.count)
        var deep = JSONValue.array([1, 2])
        for _ in 0..<300 { deep = .array([deep, 3]) }
        #expect(deep.prettySize(canonicalCount: deep.canonicalBytes.count, limit: .max) == deep.prettyBytes.count)
        #expect(deep.prettySize(canonicalCount: 10, limit: 1000) > 1000)
    }

    @Test func aGenerationIsDigitsOnlyAndAFerryDirectoryIsNeverADocument() throws {
        #expect(throws: RevisionID.InvalidError.self) { try RevisionID("+1-ab") }
        #expect(throws: RevisionID.InvalidError.self) { try RevisionID(" 1-ab") }
        #expect(try RevisionID("12-ab").generation == 12)
        #expect(throws: DocumentID.InvalidError.self) { try DocumentID("inner/.ferry/revs.log") }
        #expect(throws: DocumentID.InvalidError.self) { try DocumentID("tab\there.json") }
    }
}
