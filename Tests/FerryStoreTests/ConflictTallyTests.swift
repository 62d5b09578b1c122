import FerryCore
@testable import FerryStore
import Testing

/// What `ferry sync` reports as conflicts resolved: a peer's merge that arrives closes a
/// conflict of this folder's only when one of its branches was here when the session began
/// (`beginSession`, after the sync recorded the folder's own edits).
@Suite struct ConflictTallyTests {
    /// The base, two edits of it, and the peer's merge of them (`theirs` winning).
    struct Story {
        let base: Made, mine: Made, theirs: Made, merge: IncomingRevision

        init(_ doc: DocumentID, in store: FolderStore) throws {
            base = Made.root(doc, ["a": 1, "b": 1])
            mine = base.child(["a": 2, "b": 1])
            theirs = base.child(["a": 1, "b": 2])
            let merged: JSONValue = ["a": 2, "b": 2]
            let object = try store.objects.writeBody(merged.canonicalBytes)
            merge = IncomingRevision(doc: doc, rev: RevisionID.compute(parent: theirs.rev, deleted: false, body: object, merged: mine.rev),
                                     history: [theirs.rev] + theirs.history, deleted: false, object: object,
                                     size: merged.canonicalBytes.count, origin: "peer", merged: mine.rev)
        }
    }

    /// An edit recorded after the folder was opened (as `ferry sync` records what changed
    /// since the last scan) is the folder's own once the session begins: the peer's merge of
    /// it closes a conflict here.
    @Test func aMergeOfAnEditRecordedBeforeTheSessionIsAConflictResolvedHere() throws {
        let f = try TestFolder()
        let story = try Story(try f.doc("list.json"), in: f.store)
        _ = try story.base.apply(to: f.store)
        _ = try story.mine.apply(to: f.store)
        f.store.beginSession()
        _ = try story.theirs.apply(to: f.store, resolve: false)
        _ = try f.store.applyRemote(story.merge)
        #expect(f.store.conflictsClosed.count == 1)
        #expect(f.store.conflictsClosed.closed.first?.mergedBy == "peer")
    }

    /// Both branches and their merge arriving in one session: a conflict made and closed
    /// elsewhere, only history here.
    @Test func aMergeOfBranchesThatBothArrivedIsNoConflictHere() throws {
        let f = try TestFolder()
        let story = try Story(try f.doc("list.json"), in: f.store)
        _ = try story.base.apply(to: f.store)
        f.store.beginSession()
        for branch in [story.mine, story.theirs] { _ = try branch.apply(to: f.store, resolve: false) }
        _ = try f.store.applyRemote(story.merge)
        #expect(f.store.conflictsClosed.count == 0)
        #expect(f.store.current(story.base.doc)?.rev == story.merge.rev)
    }
}
