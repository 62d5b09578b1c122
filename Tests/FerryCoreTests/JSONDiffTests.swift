import FerryCore
import Testing

/// The JSON diff `ferry diff` and `ferry log -p` print: one change per value, paths in jq's
/// notation, a fixed order, long values cut to one line.
@Suite struct JSONDiffTests {
    func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }
    func lines(_ a: String, _ b: String) throws -> [String] { JSONDiff.changes(from: try parse(a), to: try parse(b)).map(\.line) }

    @Test func aChangedValueDeepInAListIsOneLine() throws {
        let old = #"{"type": "list", "name": "Inventory", "list": [{"key": "Apples", "value": 20}, {"key": "Pears", "value": 3}]}"#
        let new = #"{"type": "list", "name": "Inventory", "list": [{"key": "Apples", "value": 25}, {"key": "Pears", "value": 3}]}"#
        #expect(try lines(old, new) == ["list[0].value: 20 → 25"])
        #expect(try lines(old, old).isEmpty)
    }

    @Test func addedAndRemovedMembersAndTrailingElements() throws {
        #expect(try lines(#"{"a": 1, "gone": true}"#, #"{"a": 1, "new": "x"}"#) == ["gone: - true", "new: + \"x\""])
        #expect(try lines(#"{"l": [1, 2]}"#, #"{"l": [1, 2, 3, {"k": null}]}"#) == ["l[2]: + 3", #"l[3]: + {"k":null}"#])
        #expect(try lines(#"{"l": [1, 2, 3]}"#, #"{"l": [1]}"#) == ["l[1]: - 2", "l[2]: - 3"])
        // A value that changes type is one change, not a walk into it.
        #expect(try lines(#"{"v": [1]}"#, #"{"v": {"a": 1}}"#) == [#"v: [1] → {"a":1}"#])
    }

    @Test func keysThatAreNotIdentifiersAreBracketedAndTheRootIsDollar() throws {
        #expect(try lines(#"{"a key": {"x-y": 1, "_ok9": 2}}"#, #"{"a key": {"x-y": 2, "_ok9": 3}}"#)
            == [#"["a key"]._ok9: 2 → 3"#, #"["a key"]["x-y"]: 1 → 2"#])
        #expect(try lines(#"{"9lives": 1, "": 2, "q\"uote": 3}"#, #"{"9lives": 0, "": 0, "q\"uote": 0}"#)
            == [#"[""]: 2 → 0"#, #"["9lives"]: 1 → 0"#, #"["q\"uote"]: 3 → 0"#])
        #expect(JSONDiff.render([]) == "$")
        #expect(JSONDiff.changes(from: .array([1]), to: .string("x")).map(\.line) == [#"$: [1] → "x""#])
        #expect(JSONDiff.render([.key("list"), .index(0), .key("value")]) == "list[0].value")
        #expect(JSONDiff.render([.index(3)]) == "[3]")
    }

    @Test func membersComeInCanonicalKeyOrder() throws {
        #expect(try lines(#"{"b": 1, "a": 1, "c": 1}"#, #"{"c": 2, "b": 2, "a": 2}"#) == ["a: 1 → 2", "b: 1 → 2", "c: 1 → 2"])
    }

    @Test func longValuesAreCutToOneLineWithAnEllipsis() throws {
        let long = String(repeating: "x", count: 200)
        let line = try lines(#"{"s": "short"}"#, "{\"s\": \"\(long)\"}")[0]
        #expect(line.hasPrefix("s: \"short\" → \"xxx"))
        #expect(line.hasSuffix("…"))
        #expect(line.count == "s: \"short\" → ".count + 80)
        #expect(JSONDiff.excerpt(.string("a\nb")) == #""a\nb""#)  // one line even with newlines inside
    }

    @Test func jsonEntriesCarryWholeValues() throws {
        let long = String(repeating: "y", count: 200)
        let changes = JSONDiff.changes(from: try parse(#"{"a": 1, "b": 2}"#), to: try parse("{\"a\": \"\(long)\"}"))
        #expect(changes.map(\.json) == [
            ["path": "a", "op": "changed", "old": 1, "new": .string(long)],
            ["path": "b", "op": "removed", "old": 2],
        ])
        #expect(changes.map(\.operation) == [.changed, .removed])
    }

    @Test func numbersCompareByValueNotByHowTheyWereWritten() throws {
        #expect(try lines(#"{"n": 1.50}"#, #"{"n": 1.5}"#).isEmpty)
        #expect(try lines(#"{"n": 1e2}"#, #"{"n": 101}"#) == ["n: 100 → 101"])
    }
}
