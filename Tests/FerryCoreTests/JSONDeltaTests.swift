import FerryCore
import Testing

/// Deltas between JSON values: `apply(make(a, b), a) == b` for every pair, small for small
/// edits, and a hostile delta is refused rather than applied.
@Suite struct JSONDeltaTests {
    func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    @Test func aDeltaRebuildsTheTargetForEveryKindOfChange() throws {
        let base = try parse(#"{"name": "list", "n": 1, "gone": true, "items": [{"a": 1}, {"a": 2}, {"a": 3}], "nested": {"x": [1, 2], "y": "z"}, "swap": [1]}"#)
        let targets = [
            #"{"name": "list", "n": 2, "gone": true, "items": [{"a": 1}, {"a": 2}, {"a": 3}], "nested": {"x": [1, 2], "y": "z"}, "swap": [1]}"#,
            #"{"name": "list", "n": 1, "items": [{"a": 1}, {"a": 2}, {"a": 3}], "nested": {"x": [1, 2], "y": "z"}, "swap": [1]}"#,
            #"{"name": "list", "n": 1, "gone": true, "items": [{"a": 1}, {"a": 20}, {"a": 3}], "nested": {"x": [1, 2], "y": "z"}, "swap": [1]}"#,
            #"{"name": "list", "n": 1, "gone": true, "items": [{"a": 1}], "nested": {"x": [1, 2], "y": "z"}, "swap": [1]}"#,
            #"{"name": "list", "n": 1, "gone": true, "items": [{"a": 1}, {"a": 2}, {"a": 3}, {"b": []}, []], "nested": {"x": [1, 2], "y": "z"}, "swap": [1]}"#,
            #"{"name": "list", "n": 1, "gone": true, "items": [], "nested": {"x": [], "y": null, "new": {"deep": [[]]}}, "swap": {"was": "array"}}"#,
            #"{"name": ["now", "an", "array"], "n": {"now": "object"}, "gone": [], "items": "text", "nested": 5, "swap": []}"#,
            #"{}"#,
        ]
        for text in targets {
            let target = try parse(text)
            let delta = JSONDelta.make(from: base, to: target)
            #expect(try JSONDelta.apply(delta, to: base) == target, "\(text) via \(delta.canonicalString)")
            // A delta is JSON: it survives the wire's round trip.
            #expect(try JSONDelta.apply(try parse(delta.canonicalString), to: base) == target)
        }
        #expect(JSONDelta.make(from: base, to: base) == .object([:]))
    }

    @Test func aOneFieldEditOfOneItemInALongListIsASmallDelta() throws {
        let items = (0..<5000).map { i in JSONValue.object(["name": .string("item \(i)"), "count": .int(i), "image": .string(String(repeating: "p", count: 150))]) }
        let base = JSONValue.object(["title": "inventory", "items": .array(items)])
        var edited = items
        edited[2345] = .object(["name": "item 2345", "count": .int(-1), "image": .string(String(repeating: "p", count: 150))])
        let target = JSONValue.object(["title": "inventory", "items": .array(edited)])
        let delta = JSONDelta.make(from: base, to: target)
        #expect(base.canonicalBytes.count > 900_000)
        #expect(delta.canonicalString == #"{"items":[5000,{"2345":{"count":-1}}]}"#)
        #expect(try JSONDelta.apply(delta, to: base) == target)

        // An insertion at the front shifts every element: the whole array is then shorter.
        let shifted = JSONValue.object(["title": "inventory", "items": .array([.int(0)] + items)])
        let whole = JSONDelta.make(from: base, to: shifted)
        #expect(whole.canonicalBytes.count < shifted.canonicalBytes.count + 20)
        #expect(try JSONDelta.apply(whole, to: base) == shifted)
    }

    @Test func aHostileOrMismatchedDeltaIsRefused() throws {
        let base = try parse(#"{"items": [1, 2, 3], "o": {"k": 1}, "s": "text"}"#)
        let refused = [
            #"{"items": [1000000000, {}]}"#,           // a length whose elements are not given
            #"{"items": [5, {"3": 4}]}"#,               // element 4 left undefined
            #"{"items": [3, {"7": 1}]}"#,               // index past the length
            #"{"items": [3, {"-1": 1}]}"#,              // negative index
            #"{"items": [3, {"01": 1}]}"#,              // not a canonical index
            #"{"items": [3, {"x": 1}]}"#,               // not an index
            #"{"items": [1, 2, 3]}"#,                   // neither [v] nor [n, {…}]
            #"{"s": {"k": 1}}"#,                        // an object delta for a string
            #"{"o": [2, {}]}"#,                         // an array delta for an object
            #"{"new": {"k": 1}}"#,                      // a delta where nothing is to apply it to
            #"{"items": [4, {"3": {"k": 1}}]}"#,        // the same for a new element
        ]
        for text in refused {
            #expect(throws: JSONDelta.ApplyError.self, "\(text)") { try JSONDelta.apply(try parse(text), to: base) }
        }
        #expect(throws: JSONDelta.ApplyError.self) { try JSONDelta.apply(try parse(#"{"k": 1}"#), to: .array([])) }
    }
}
