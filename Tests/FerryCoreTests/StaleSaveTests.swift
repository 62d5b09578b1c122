import Testing
import FerryCore

@Suite struct StaleSaveTests {
    let before: JSONValue = ["a": 1, "b": 1, "list": ["x", "y"], "rows": [["id": "r0", "v": 1]]]
    let after: JSONValue = ["a": 1, "b": 2, "list": ["x", "y"], "rows": [["id": "r0", "v": 1]]]  // a peer changed b

    @Test func aSaveFromTheOldContentUndoesThePeersChange() {
        // The user changed a, from a copy read before the peer's b arrived: b is back at 1.
        #expect(StaleSave.undoes(before: before, after: after, save: ["a": 7, "b": 1, "list": ["x", "y"], "rows": [["id": "r0", "v": 1]]]))
        // An element the peer added, missing from the save.
        let grown: JSONValue = ["a": 1, "b": 1, "list": ["x", "y", "z"], "rows": [["id": "r0", "v": 1]]]
        #expect(StaleSave.undoes(before: before, after: grown, save: ["a": 7, "b": 1, "list": ["x", "y"], "rows": [["id": "r0", "v": 1]]]))
        // A value inside an element changed in place.
        let row: JSONValue = ["a": 1, "b": 1, "list": ["x", "y"], "rows": [["id": "r0", "v": 5]]]
        #expect(StaleSave.undoes(before: before, after: row, save: ["a": 7, "b": 1, "list": ["x", "y"], "rows": [["id": "r0", "v": 1]]]))
    }

    @Test func aSaveOfTheNewContentDoesNot() {
        #expect(!StaleSave.undoes(before: before, after: after, save: ["a": 7, "b": 2, "list": ["x", "y"], "rows": [["id": "r0", "v": 1]]]))
        // Changing the peer's value again is an edit of it, not a step back.
        #expect(!StaleSave.undoes(before: before, after: after, save: ["a": 1, "b": 3, "list": ["x", "y"], "rows": [["id": "r0", "v": 1]]]))
        #expect(!StaleSave.undoes(before: before, after: before, save: ["a": 9]))
    }
}
