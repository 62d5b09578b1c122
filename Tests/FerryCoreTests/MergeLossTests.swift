import FerryCore
import Testing

/// What each side of a merge lost, as `ferry conflicts` tells it: list elements followed to
/// where the merge put them, so a removal or insertion before an edited item is no loss.
@Suite struct MergeLossTests {
    func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    /// `{"list": [...]}` of inventory items with these values.
    func inventory(_ items: [(String, Int)]) -> JSONValue {
        ["type": "list", "list": .array(items.map { ["key": .string($0.0), "value": .number(JSONNumber($0.1))] })]
    }

    /// What each side lost in the merge JSONMerge makes of them (`a` the winner).
    func losses(base: JSONValue, _ a: JSONValue, _ b: JSONValue) -> (a: [String], b: [String], result: JSONValue) {
        let result = JSONMerge.merge(base: base, winner: a, loser: b)
        func lines(_ side: JSONValue, _ other: JSONValue) -> [String] {
            MergeLoss.lost(base: base, side: side, other: other, result: result).map {
                "\(JSONDiff.render($0.path)): \($0.had.map(\.canonicalString) ?? "-") kept \($0.kept.map(\.canonicalString) ?? "-")"
            }
        }
        return (lines(a, b), lines(b, a), result)
    }

    let items = [("Apples", 20), ("Apricots", 60), ("Artichokes", 9), ("Asparagus", 25), ("Avocados", 41), ("Bananas", 3)]

    @Test func aRemovalBeforeAnEditedItemLosesNothing() {
        let base = inventory(items)
        let removedFirst = inventory(Array(items.dropFirst()))
        var edited = items
        edited[4].1 = 50
        let (a, b, result) = losses(base: base, removedFirst, inventory(edited))
        #expect(result == inventory(Array(edited.dropFirst())))
        #expect(a.isEmpty, "\(a)")
        #expect(b.isEmpty, "\(b)")
    }

    @Test func anInsertionBeforeAnEditedItemLosesNothing() {
        let base = inventory(items)
        let inserted = inventory([("Almonds", 7)] + items)
        var edited = items
        edited[2].1 = 10
        let (a, b, result) = losses(base: base, inventory(edited), inserted)
        #expect(result == inventory([("Almonds", 7)] + edited))
        #expect(a.isEmpty && b.isEmpty, "\(a) \(b)")
    }

    @Test func theSmallerOfTwoValuesForOneItemIsLostWhereverTheItemMoved() {
        let base = inventory(items)
        var a = Array(items.dropFirst())  // removes Apples, and sets Avocados to 30
        a[3].1 = 30
        var b = items
        b[4].1 = 25  // sets Avocados to 25
        let (lostA, lostB, result) = losses(base: base, inventory(a), inventory(b))
        #expect(result == inventory(a))  // the greater value stands
        #expect(lostA.isEmpty, "\(lostA)")
        #expect(lostB == ["list[4].value: 25 kept 30"], "\(lostB)")
    }

    @Test func aRemovalOfAnItemTheOtherSideChangedIsLost() {
        let base = inventory(items)
        let removed = inventory(items.filter { $0.0 != "Asparagus" })
        var changed = items
        changed[3].1 = 26
        let (lostRemover, lostChanger, result) = losses(base: base, removed, inventory(changed))
        #expect(result == inventory(changed))  // a change beats a removal
        #expect(lostChanger.isEmpty, "\(lostChanger)")
        #expect(lostRemover == [#"list[3]: - kept {"key":"Asparagus","value":26}"#], "\(lostRemover)")
    }

    @Test func aRemovalBesideTheOtherSidesInsertionIsNotLost() throws {
        let base = try parse(#"{"l": ["A", "X", "B"]}"#)
        let (lostRemover, lostInserter, result) = losses(base: base, try parse(#"{"l": ["A", "B"]}"#), try parse(#"{"l": ["A", "X", "Y", "B"]}"#))
        #expect(result == (try parse(#"{"l": ["A", "Y", "B"]}"#)))
        #expect(lostRemover.isEmpty && lostInserter.isEmpty, "\(lostRemover) \(lostInserter)")
    }

    @Test func membersAndScalarListsStillCompareByValue() throws {
        let base = try parse(#"{"name": "Inventory", "tags": ["a", "b"], "owner": "x"}"#)
        let a = try parse(#"{"name": "Stock", "tags": ["a", "b", "c"], "owner": "x"}"#)
        let b = try parse(#"{"name": "Pantry", "tags": ["b"]}"#)
        let (lostA, lostB, result) = losses(base: base, a, b)
        #expect(result == (try parse(#"{"name": "Stock", "tags": ["b", "c"]}"#)))
        #expect(lostA.isEmpty, "\(lostA)")
        #expect(lostB == [#"name: "Pantry" kept "Stock""#], "\(lostB)")
    }
}
