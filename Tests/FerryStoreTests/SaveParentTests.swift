import Foundation
import Testing
import FerryCore
@testable import FerryStore
import FerryTesting

/// A save is parented on what the file held, merges remember what they merged, and a
/// deletion does not lose to a merge that brings nothing it had not seen.
@Suite struct SaveParentTests {
    /// A fake clock the store reads for the stale-save window.
    final class Clock: @unchecked Sendable {
        var now: UInt64 = 1_000_000_000
    }

    func json(_ f: TestFolder, _ doc: String) throws -> JSONValue { try JSONParser.parse(try f.dir.read(doc)) }

    /// A folder whose store reads `clock`, holding list.json at a peer's first revision `base`.
    func listWithAClock() throws -> (TestFolder, Clock, DocumentID, Made) {
        let f = try TestFolder()
        let clock = Clock()
        f.store.clock = { clock.now }
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1, "b": 1])
        _ = try base.apply(to: f.store)
        return (f, clock, doc, base)
    }

    /// The file does not parse when a peer's revision arrives: the revision becomes current
    /// but the file stays; the fixed save is a child of what the file held, and merges.
    @Test func aFixedSaveAfterAnInvalidOneIsMergedWithWhatArrivedMeanwhile() throws {
        let f = try TestFolder()
        let doc = try f.doc("list.json")
        let base = Made.root(doc, ["a": 1, "b": 1])
        _ = try base.apply(to: f.store)
        try f.dir.write("list.json", #"{"a": "#)
        #expect(try f.store.ingest(doc) == .unreadable("line 1, column 7: unexpected end of input, expected a value"))
        _ = try base.child(["a": 1, "b": 2]).apply(to: f.store)
        #expect(try f.dir.read("list.json") == #"{"a": "#, "an unparseable file is never overwritten")
        #expect(f.store.fileRevision(doc) == base.rev)
        // Kept across a restart: the store is reopened before the fix.
        f.store = try FolderStore.open(at: f.root, writable: false)
        f.store = try FolderStore.open(at: f.root, writable: true)
        #expect(f.store.fileRevision(doc) == base.rev)
        try f.dir.write("list.json", #"{"a": 5, "b": 1}"#)
        guard case .recorded(let entry) = try f.store.ingest(doc) else { Issue.record("not recorded"); return }
        #expect(entry.parent == base.rev)
        #expect(try json(f, "list.json") == ["a": 5, "b": 2])
        #expect(f.store.fileRevision(doc) == f.store.current(doc)?.rev)
        #expect(!FileManager.default.fileExists(atPath: f.store.layout.stateDirectory + "/filebases.json"))
    }

    /// A tool that read the file before ferry wrote a peer's revision and wrote it back just
    /// after: the save goes back on the peer's change, so it is parented on the older
    /// revision and merged, not recorded as an edit that reverts the peer.
    @Test func aSaveMadeFromContentReadBeforeAPeersWriteKeepsThePeersChange() throws {
        let (f, clock, doc, base) = try listWithAClock()
        let theirs = base.child(["a": 1, "b": 2])
        _ = try theirs.apply(to: f.store)
        #expect(try json(f, "list.json") == ["a": 1, "b": 2])
        // Written from the copy read before: a changed, b back at 1.
        try f.dir.write("list.json", #"{"a": 7, "b": 1}"#)
        guard case .recorded(let stale) = try f.store.ingest(doc) else { Issue.record("not recorded"); return }
        #expect(stale.parent == base.rev)
        #expect(try json(f, "list.json") == ["a": 7, "b": 2])
        // Long after a write, the same content is a deliberate edit of what the file shows.
        let later = f.store.current(doc)!.rev
        clock.now += FolderStore.staleSaveWindow * 2
        _ = try Made.child(of: later, doc: doc, in: f.store, ["a": 7, "b": 3]).apply(to: f.store)
        clock.now += FolderStore.staleSaveWindow * 2
        try f.dir.write("list.json", #"{"a": 7, "b": 2}"#)
        guard case .recorded(let revert) = try f.store.ingest(doc) else { Issue.record("not recorded"); return }
        #expect(revert.parent == f.store.index[doc]!.nodes[revert.rev]!.parent)
        #expect(try json(f, "list.json") == ["a": 7, "b": 2])
    }

    /// A peer's deletion removed the file while an editor held it; the editor's save moments
    /// later writes it back with a value added: a child of the revision it was made from,
    /// beside the deletion (the edit beats it), not a document born after the deletion, every
    /// value of which would be new and clash with edits made since (simulation seed 435).
    @Test func aSaveOfAFileAPeersDeletionRemovedIsAChildOfWhatItWasMadeFrom() throws {
        let (f, clock, doc, base) = try listWithAClock()
        _ = try base.child(nil).apply(to: f.store)
        #expect(!FileManager.default.fileExists(atPath: f.store.layout.path(of: "list.json")))
        try f.dir.write("list.json", #"{"a": 1, "b": 1, "c": 3}"#)
        guard case .recorded(let save) = try f.store.ingest(doc) else { Issue.record("not recorded"); return }
        #expect(save.parent == base.rev)
        #expect(f.store.current(doc)?.rev == save.rev)
        #expect(try json(f, "list.json") == ["a": 1, "b": 1, "c": 3])
        // Long after the deletion, a file of that name is a new document after it.
        let other = try f.doc("other.json")
        let first = Made.root(other, ["a": 1])
        _ = try first.apply(to: f.store)
        let deletion = first.child(nil)
        _ = try deletion.apply(to: f.store)
        clock.now += FolderStore.staleSaveWindow * 2
        try f.dir.write("other.json", #"{"a": 1}"#)
        guard case .recorded(let again) = try f.store.ingest(other) else { Issue.record("not recorded"); return }
        #expect(again.parent == deletion.rev)
    }

    /// A merge names the branch it took in; a later merge with a descendant of that branch
    /// starts from it, so a value changed only on that descendant survives (the three-peer
    /// scenario of issue 16: A's a=K after B merged A's a=1 with C's c=1).
    @Test func aMergeRemembersTheBranchItMerged() throws {
        let b = try TestFolder()
        let doc = try b.doc("doc.json")
        let o = Made.root(doc, ["x": 0])
        let a1 = o.child(["x": 0, "a": 1]), c1 = o.child(["x": 0, "c": 1])
        for r in [o, a1, c1] { _ = try r.apply(to: b.store) }
        let merge = try #require(b.store.index[doc]!.leafNodes.first { !$0.deleted })
        #expect(b.store.index[doc]!.mergedParent(of: merge.rev) != nil)
        // A, before pulling, sets a=K on top of a=1.
        let a2 = a1.child(["x": 0, "a": "K"])
        _ = try a2.apply(to: b.store)
        #expect(try json(b, "doc.json") == ["x": 0, "a": "K", "c": 1])
        #expect(!b.store.index[doc]!.hasConflict)
        // The log says what was merged, readable with jq.
        let merged = try b.store.readLogEntries().filter { $0.merged != nil }
        #expect(merged.count == 2 && merged.allSatisfy { $0.conflict != nil && $0.parent != nil })
    }

    /// A deletion made after seeing every edit is not undone by a merge of those same edits
    /// made elsewhere (two peers merged them in different orders, and a third merged those).
    @Test func aDeletionStandsAgainstAMergeOfWhatItHadSeen() throws {
        let f = try TestFolder()
        let doc = try f.doc("doc.json")
        let o = Made.root(doc, ["x": 0])
        let a = o.child(["x": 0, "a": 1]), c = o.child(["x": 0, "c": 1])
        for r in [o, a, c] { _ = try r.apply(to: f.store) }
        let m = try #require(f.store.current(doc))
        // Someone deletes the merge...
        try FileManager.default.removeItem(atPath: f.dir.appending("doc.json"))
        _ = try f.store.ingest(doc)
        #expect(f.store.current(doc)?.deleted == true)
        // ...while a peer's merge of the very same branches, made the other way round (on a
        // peer that saw them the other way), arrives.
        let other = RevisionID.compute(parent: c.rev, deleted: false, body: m.object, merged: a.rev)
        _ = try f.store.applyRemote(IncomingRevision(doc: doc, rev: other, history: [c.rev, o.rev], deleted: false, object: m.object,
                                                     size: m.size, origin: "peer", merged: a.rev))
        #expect(f.store.current(doc)?.deleted == true, "a merge that brings nothing new brought the document back")
        #expect(!FileManager.default.fileExists(atPath: f.dir.appending("doc.json")))
        // A real edit the deletion had not seen still beats it.
        _ = try a.child(["x": 0, "a": 2]).apply(to: f.store)
        #expect(f.store.current(doc)?.deleted == false)
    }

    /// The deletion that closes a merged branch is never the same revision as a deletion a
    /// user made of that branch's revision.
    @Test func closingAMergedBranchIsNotDeletingTheDocument() throws {
        let loser = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(Array("{}".utf8)))
        let merge = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(Array("{\"a\":1}".utf8)))
        #expect(RevisionID.closing(loser, mergedInto: merge) != RevisionID.compute(parent: loser, deleted: true, body: nil))
        #expect(RevisionID.closing(loser, mergedInto: merge).generation == loser.generation + 1)
    }

    /// With an agent watching, a file missing for a moment (a save by rename) is not a
    /// deletion; without one, it is.
    @Test func aMissingFileWaitsForTheWatcherOnlyWhenOneWatches() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        try f.dir.write("a.json", #"{"v": 1}"#)
        _ = try f.store.ingest(doc)
        try FileManager.default.removeItem(atPath: f.dir.appending("a.json"))
        #expect(try f.store.ingest(doc, whenMissing: .wait) == .missing)
        f.store.deletionsAwaitWatcher = true
        // A peer's revision arriving meanwhile is stored but not written over the gap.
        let next = Made.child(of: f.store.current(doc)!.rev, doc: doc, in: f.store, ["v": 2])
        _ = try next.apply(to: f.store)
        #expect(!FileManager.default.fileExists(atPath: f.dir.appending("a.json")))
        // The editor's new file appears: one edit, merged with the peer's.
        try f.dir.write("a.json", #"{"v": 1, "mine": true}"#)
        guard case .recorded = try f.store.ingest(doc, whenMissing: .wait) else { Issue.record("not recorded"); return }
        #expect(try json(f, "a.json") == ["v": 2, "mine": true])
        #expect(try f.store.readLogEntries().allSatisfy { !$0.deleted || $0.conflict != nil })
    }
}
