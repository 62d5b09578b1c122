import Testing
@testable import FerryCore
import FerryTesting

@Suite struct ThreeWayMergeTests {
    func merge(_ base: String, _ winner: String, _ loser: String) throws -> JSONValue {
        JSONMerge.merge(base: try JSONParser.parse(base), winner: try JSONParser.parse(winner), loser: try JSONParser.parse(loser))
    }

    @Test func differentMembersAreBothKeptRecursively() throws {
        let r = try merge(#"{"a":1,"n":{"x":1,"y":1}}"#, #"{"a":2,"n":{"x":2,"y":1}}"#, #"{"a":1,"b":3,"n":{"x":1,"y":3}}"#)
        #expect(r == (try JSONParser.parse(#"{"a":2,"b":3,"n":{"x":2,"y":3}}"#)))
    }

    @Test func sameValueChangedDifferentlyTakesTheGreaterValueWhicheverBranchWins() throws {
        // The same clash comes out the same in every merge, whichever branch tips it compares.
        #expect(try merge(#"{"a":1}"#, #"{"a":2}"#, #"{"a":3}"#) == ["a": 3])
        #expect(try merge(#"{"a":1}"#, #"{"a":3}"#, #"{"a":2}"#) == ["a": 3])
        // Removed by one side, changed by the other: the change stands, as a live revision
        // beats a deletion.
        #expect(try merge(#"{"a":1}"#, #"{}"#, #"{"a":3}"#) == ["a": 3])
        #expect(try merge(#"{"a":1}"#, #"{"a":3}"#, #"{}"#) == ["a": 3])
        // Removed by one side, untouched by the other: removed.
        #expect(try merge(#"{"a":1,"b":1}"#, #"{"b":1}"#, #"{"a":1,"b":2}"#) == ["b": 2])
    }

    @Test func arraysMergeLikeDiff3() throws {
        let base = #"{"items":[{"k":"a","v":1},{"k":"b","v":1},{"k":"c","v":1},{"k":"d","v":1}]}"#
        // Winner edits item a, loser edits item c: both edits kept.
        let r1 = try merge(base, #"{"items":[{"k":"a","v":9},{"k":"b","v":1},{"k":"c","v":1},{"k":"d","v":1}]}"#,
                           #"{"items":[{"k":"a","v":1},{"k":"b","v":1},{"k":"c","v":7},{"k":"d","v":1}]}"#)
        #expect(r1 == (try JSONParser.parse(#"{"items":[{"k":"a","v":9},{"k":"b","v":1},{"k":"c","v":7},{"k":"d","v":1}]}"#)))
        // Adjacent items edited on each side: both kept.
        let r2 = try merge(base, #"{"items":[{"k":"a","v":1},{"k":"b","v":5},{"k":"c","v":1},{"k":"d","v":1}]}"#,
                           #"{"items":[{"k":"a","v":1},{"k":"b","v":1},{"k":"c","v":6},{"k":"d","v":1}]}"#)
        #expect(r2 == (try JSONParser.parse(#"{"items":[{"k":"a","v":1},{"k":"b","v":5},{"k":"c","v":6},{"k":"d","v":1}]}"#)))
        // The same item changed in different fields on each side merges recursively.
        let r3 = try merge(base, #"{"items":[{"k":"a","v":1},{"k":"b","v":2},{"k":"c","v":1},{"k":"d","v":1}]}"#,
                           #"{"items":[{"k":"a","v":1},{"k":"b","v":1,"t":true},{"k":"c","v":1},{"k":"d","v":1}]}"#)
        #expect(r3 == (try JSONParser.parse(#"{"items":[{"k":"a","v":1},{"k":"b","v":2,"t":true},{"k":"c","v":1},{"k":"d","v":1}]}"#)))
        // Insertion on one side, removal elsewhere on the other: both happen.
        let r4 = try merge(base, #"{"items":[{"k":"a","v":1},{"k":"new","v":0},{"k":"b","v":1},{"k":"c","v":1},{"k":"d","v":1}]}"#,
                           #"{"items":[{"k":"a","v":1},{"k":"b","v":1},{"k":"c","v":1}]}"#)
        #expect(r4 == (try JSONParser.parse(#"{"items":[{"k":"a","v":1},{"k":"new","v":0},{"k":"b","v":1},{"k":"c","v":1}]}"#)))
        // Both append at the end: both insertions kept, the winner's first.
        let r5 = try merge(#"[1,2]"#, #"[1,2,3]"#, #"[1,2,4]"#)
        #expect(r5 == [1, 2, 3, 4])
        // One scalar element replaced by each side: two new values, both kept (winner's first).
        #expect(try merge(#"[1,2,3]"#, #"[1,5,3]"#, #"[1,6,3]"#) == [1, 5, 6, 3])
        // An insertion beside an element the other side removed: both happen (diff3 would
        // call this a conflict and keep only one hunk).
        #expect(try merge(#"["x","y"]"#, #"["y"]"#, #"["x","new","y"]"#) == ["new", "y"])
        // One side moved an element, the other removed it: it is gone, once.
        #expect(try merge(#"["a","b","c"]"#, #"["b","c","a"]"#, #"["b","c"]"#) == ["b", "c"])
        // Both moved it: it appears once.
        #expect(try merge(#"["a","b","c"]"#, #"["b","a","c"]"#, #"["b","c","a"]"#).arrayValue?.filter { $0 == "a" }.count == 1)
    }

    /// After criss-cross merges the bases themselves clashed; a side that holds either of
    /// their values has not changed it, so the other side's real edit is kept.
    @Test func aClashBetweenMergeBasesIsNotTakenForAChange() throws {
        let x = try JSONParser.parse(#"{"f":"x","g":1}"#), y = try JSONParser.parse(#"{"f":"y","g":1}"#)
        let base = MergeBase.combine(ancestor: .none, .exactly(x), .exactly(y))
        #expect(base.holds("x" as JSONValue?) == false)  // the whole object is compared at the top
        #expect(base.member("f").holds("x") && base.member("f").holds("y"))
        // The winner carries one base's value, the loser a new edit: the edit stands.
        let merged = JSONMerge.merge(base: base, winner: try JSONParser.parse(#"{"f":"y","g":1}"#),
                                     loser: try JSONParser.parse(#"{"f":"edit","g":1}"#))
        #expect(merged == ["f": "edit", "g": 1])
        // Lists of the bases are merged as lists.
        let lists = MergeBase.combine(ancestor: .exactly(["l": ["a"]]), .exactly(["l": ["a", "x"]]), .exactly(["l": ["a", "y"]]))
        #expect(lists.member("l") == .exactly(["a", "x", "y"]))
    }

    /// Two sides that each hold another of the bases' alternatives are the clash the
    /// alternatives record: settled by the values, whichever side is the winner (simulation
    /// seed 1450: two merges of the same branches kept different values, and a removal made
    /// after one of them lost to the other's value).
    @Test func sidesHoldingDifferentAlternativesMergeTheSameInEitherOrder() throws {
        let base = MergeBase.combine(ancestor: .none, .exactly(try JSONParser.parse(#"{"f":"e1","g":1}"#)),
                                     .exactly(try JSONParser.parse(#"{"f":"e4","g":1}"#)))
        let one = try JSONParser.parse(#"{"f":"e1","g":2}"#), other = try JSONParser.parse(#"{"f":"e4","g":1}"#)
        let merged = JSONMerge.merge(base: base, winner: one, loser: other)
        #expect(merged == JSONMerge.merge(base: base, winner: other, loser: one))
        #expect(merged == ["f": "e4", "g": 2])  // g: one side's edit; f: the greater value, as where the bases clashed
        // The same when the bases are themselves combined: a base that holds an alternative
        // everywhere does not make the other's alternative at one member a change.
        let merges = MergeBase.combine(ancestor: base, .exactly(one), .exactly(other))
        #expect(merges.member("f").holds("e1") && merges.member("f").holds("e4"))
        #expect(merges.member("g") == .exactly(2))
        // So a later removal of f on either side stands against the other's alternative.
        let removed = try JSONParser.parse(#"{"g":2}"#)
        #expect(JSONMerge.merge(base: merges, winner: removed, loser: ["f": "e4", "g": 2]) == ["g": 2])
        #expect(JSONMerge.merge(base: merges, winner: one, loser: removed) == ["g": 2])
        // Alternatives of a whole value are compared whole: a side that holds one exactly left
        // it as it was, and the other side's removal inside it stands (no history needed).
        let wholes = MergeBase.combine(ancestor: .exactly(["m": ["k": 0]]), .exactly(["m": ["k": 1]]), .exactly([:]))
        #expect(wholes.member("m") == .anyOf([["k": 1], nil]))
        #expect(JSONMerge.merge(base: wholes, winner: ["m": ["k": 1]], loser: ["m": [:]]) == ["m": [:]])
    }

    /// A decider (the store's history) settles a clash before the values do.
    @Test func aClashDeciderOverridesTheValueOrder() throws {
        let base = try JSONParser.parse(#"{"a":1,"n":{"x":1}}"#)
        var asked: [[String]] = []
        let merged = JSONMerge.merge(base: .exactly(base), winner: try JSONParser.parse(#"{"a":9,"n":{"x":9}}"#),
                                     loser: try JSONParser.parse(#"{"a":2,"n":{"x":2}}"#)) { path, _, _ in
            asked.append(path)
            return path == ["a"] ? false : nil
        }
        #expect(merged == (try JSONParser.parse(#"{"a":2,"n":{"x":9}}"#)))
        #expect(Set(asked) == [["a"], ["n", "x"]])
    }

    @Test func propertiesOverRandomEdits() throws {
        for seed in UInt64(1)...300 {
            var m = InventoryMutator(seed: seed)
            let base = m.makeList(count: Int.random(in: 0...12, using: &m.rng))
            let a = m.edit(base)
            let b = m.edit(base)
            let (winner, loser) = Bool.random(using: &m.rng) ? (a, b) : (b, a)
            let merged = JSONMerge.merge(base: base, winner: winner, loser: loser)
            #expect(JSONMerge.merge(base: base, winner: winner, loser: base) == winner)
            #expect(JSONMerge.merge(base: base, winner: base, loser: loser) == loser)
            #expect(JSONMerge.merge(base: base, winner: winner, loser: winner) == winner)
            // Deterministic: the same inputs give byte-identical output.
            #expect(JSONMerge.merge(base: base, winner: winner, loser: loser).canonicalBytes == merged.canonicalBytes)
            // Merging the result again with either side changes nothing (idempotent on its inputs).
            #expect(JSONMerge.merge(base: winner, winner: merged, loser: winner) == merged)
            // Which side is called the winner changes nothing but the order of insertions.
            let swapped = JSONMerge.merge(base: base, winner: loser, loser: winner)
            #expect(swapped.objectValue?.filter { $0.key != "items" }.mapValues(\.canonicalBytes)
                    == merged.objectValue?.filter { $0.key != "items" }.mapValues(\.canonicalBytes), "seed \(seed)")
            guard case .object = merged else { Issue.record("merge of objects gave a non-object"); continue }
        }
    }
}

@Suite struct ModelTests {
    @Test(arguments: ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", ".ferry/revs.log", ".ferry", "a\u{0}b", "e\u{301}.json", "a/.ferry/x", "tab\there"])
    func rejectsBadDocumentIDs(text: String) {
        #expect(throws: DocumentID.InvalidError.self) { try DocumentID(text) }
    }

    @Test func acceptsOrdinaryIDs() throws {
        for t in ["samplelist.json", "notes/today.json", "images/apples.jpg", ".ferryish", "a/.ferry.d/x", "\u{E9}t\u{E9}.json", "x..y"] {
            #expect(throws: Never.self) { try DocumentID(t) }
        }
        #expect(try DocumentID("a.json").kind == .json)
        #expect(try DocumentID("a.jpg").kind == .file)
    }

    @Test func revisionIDsArePureFunctions() throws {
        let body = BlobDigest.of(Array("{}".utf8))
        let r1 = RevisionID.compute(parent: nil, deleted: false, body: body)
        #expect(r1 == RevisionID.compute(parent: nil, deleted: false, body: body))
        #expect(r1.generation == 1 && r1.digest.count == 32)
        let r2 = RevisionID.compute(parent: r1, deleted: false, body: body)
        #expect(r2.generation == 2 && r2 != r1)
        #expect(RevisionID.compute(parent: r1, deleted: true, body: nil) != r2)
        #expect(try RevisionID(r2.description) == r2)
        #expect(throws: RevisionID.InvalidError.self) { try RevisionID("0-abc") }
        #expect(throws: RevisionID.InvalidError.self) { try RevisionID("1-XYZ") }
    }

    @Test func winnerRule() throws {
        let a = try RevisionID("3-aaaa"), b = try RevisionID("3-bbbb"), c = try RevisionID("4-0000")
        #expect(WinnerRule.beats((a, false), (c, true)))     // live beats deletion
        #expect(WinnerRule.beats((c, false), (b, false)))    // higher generation
        #expect(WinnerRule.beats((b, false), (a, false)))    // greater rev id
        #expect(!WinnerRule.beats((a, false), (b, false)))
    }

    @Test func logEntriesRoundTrip() throws {
        let e = LogEntry(seq: 7, doc: try DocumentID("n/a \"q\".json"), rev: try RevisionID("3-ab"), parent: try RevisionID("2-cd"),
                         deleted: false, kind: .json, object: BlobDigest.of([1, 2]), size: 2, origin: "peer-1",
                         time: "2026-11-22T00:00:00.000Z", ancestors: [try RevisionID("1-ef")],
                         conflict: ConflictRecord(winner: try RevisionID("1-aa"), loser: try RevisionID("1-bb"), resolution: .merged))
        #expect(try LogEntry(json: JSONParser.parse(e.encodedLine())) == e)
    }
}
