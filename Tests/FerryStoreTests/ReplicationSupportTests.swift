import Foundation
import Testing
import FerryCore
@testable import FerryStore
import FerryTesting

@Suite struct ReplicationSupportTests {
    @Test func changesListEveryRevisionAfterASequenceInOrder() throws {
        let f = try TestFolder()
        let a = try f.doc("a.json"), b = try f.doc("b.json"), c = try f.doc("c.json")
        try f.store.recordLocalJSON(a, ["v": 1])    // seq 1
        try f.store.recordLocalJSON(b, ["v": 1])    // seq 2
        try f.store.recordLocalJSON(a, ["v": 2])    // seq 3
        try f.store.recordLocalJSON(c, ["v": 1])    // seq 4
        try f.store.recordDeletion(b)               // seq 5
        // Every revision travels, intermediate ones too, in sequence order.
        #expect(f.store.changes(since: 0).map(\.seq) == [1, 2, 3, 4, 5])
        #expect(f.store.changes(since: 3).map(\.doc) == [c, b])
        #expect(f.store.changes(since: 0).last?.deleted == true)
        #expect(f.store.changes(since: 0, limit: 1).map(\.doc) == [a])
        #expect(f.store.changes(since: 0, docIDs: [a]).map(\.seq) == [1, 3])
        #expect(f.store.changes(since: 5).isEmpty)
    }

    /// A folder where a.json has revisions at sequences 1, 3 and 5, and b.json at 2 and 4.
    func twoDocumentsEditedByTurns() throws -> (TestFolder, DocumentID, DocumentID) {
        let f = try TestFolder()
        let a = try f.doc("a.json"), b = try f.doc("b.json")
        for (doc, v) in [(a, 1), (b, 1), (a, 2), (b, 2), (a, 3)] { try f.store.recordLocalJSON(doc, ["v": .int(v)]) }
        return (f, a, b)
    }

    /// A sender reads the feed a page at a time: the pages list what `changes` lists, up to
    /// the pass's last sequence, and never cut a sequence in two (a damaged log can repeat one).
    @Test func changesPagesListTheFeedInOrderWithoutCuttingASequence() throws {
        let (f, _, b) = try twoDocumentsEditedByTurns()
        func pages(limit: Int, through: Int = .max, docIDs: Set<DocumentID>? = nil) -> [[Int]] {
            var out: [[Int]] = []
            var since: Int? = 0
            for _ in 0..<20 {
                guard let from = since else { break }
                let (page, next) = f.store.changesPage(since: from, through: through, limit: limit, docIDs: docIDs)
                out.append(page.map(\.seq))
                since = next
            }
            return out
        }
        #expect(pages(limit: 2) == [[1, 2], [3, 4], [5]])
        #expect(pages(limit: 5) == [[1, 2, 3, 4, 5]])
        #expect(pages(limit: 2, through: 4) == [[1, 2], [3, 4]])
        #expect(pages(limit: 1, docIDs: [b]) == [[2], [4]])

        // A hand-edited log repeats sequence 3 for another document, out of order.
        let repeated = #"{"seq":3,"doc":"c.json","rev":"1-ab","parent":null,"deleted":true,"kind":"json","size":0,"origin":"x","time":""}"#
        let fd = try FileSystem.open(f.root + "/.ferry/revs.log", O_WRONLY | O_APPEND)
        try FileSystem.writeAll(fd, Array((repeated + "\n").utf8), path: "revs.log")
        close(fd)
        try f.reopen()
        #expect(f.store.changes(since: 0).map(\.seq) == [1, 2, 3, 3, 4, 5])
        #expect(pages(limit: 3) == [[1, 2, 3, 3], [4, 5]])
        #expect(pages(limit: 1) == [[1], [2], [3, 3], [4], [5]])
    }

    /// Couchbase Lite's feed (`currentOnly`) lists each document's current revision: never a
    /// revision in between, and after a conflict the merge, not the deletion closing the
    /// losing branch (LiteCore took that deletion, pulled after the merge, for the server's
    /// revision and purged the merge). A page lists them as of the pass's end: a revision
    /// whose child came later was current then.
    @Test func theCurrentOnlyFeedListsEachDocumentsCurrentRevision() throws {
        let (f, _, b) = try twoDocumentsEditedByTurns()
        #expect(f.store.changes(since: 0, currentOnly: true).map(\.seq) == [4, 5])
        #expect(f.store.changeCount(since: 0, currentOnly: true) == 2)
        #expect(f.store.changes(since: 0, docIDs: [b], currentOnly: true).map(\.seq) == [4])
        #expect(f.store.changesPage(since: 0, through: 5, limit: 10, currentOnly: true).revisions.map(\.seq) == [4, 5])
        // As of sequence 4, a's third revision (5) was not there: its second (3) had no child.
        #expect(f.store.changesPage(since: 0, through: 4, limit: 10, currentOnly: true).revisions.map(\.seq) == [3, 4])
        #expect(f.store.changesPage(since: 0, through: 3, limit: 10, currentOnly: true).revisions.map(\.seq) == [2, 3])

        // Two peers' edits of c's first revision: a conflict, closed at once by a merge and
        // a deletion of the losing branch.
        let c = try f.doc("c.json")
        let root = Made.root(c, ["v": 1])
        _ = try root.apply(to: f.store)    // seq 6
        _ = try root.child(["v": 1, "x": 1]).apply(to: f.store)    // seq 7
        let closing = try root.child(["v": 1, "y": 1]).apply(to: f.store)    // seq 8, 9, 10
        #expect(closing.count == 3 && closing[1].merged != nil && closing[2].deleted, "\(closing)")
        #expect(f.store.changes(since: 5, currentOnly: true).map(\.rev) == [closing[1].rev])
        #expect(f.store.changes(since: 0, currentOnly: true).map(\.seq) == [4, 5, closing[1].seq])
        // As of the two edits, before the merge: the one that won then, alone.
        let asOfConflict = f.store.changesPage(since: 5, through: closing[0].seq, limit: 10, currentOnly: true).revisions
        let firstEdit = try #require(f.store.index[c]?.nodes(seq: 7).first?.rev)
        #expect(asOfConflict.count == 1 && asOfConflict.first?.rev == max(closing[0].rev, firstEdit), "\(asOfConflict)")
    }

    /// The feed names a revision by its sequence and document: each is found in its tree, for
    /// documents with one revision, a few, or a long history (looked up through a map), edited
    /// by turns; and a damaged log that gives one document two lines of one sequence still
    /// lists both revisions.
    @Test func theFeedFindsEachRevisionByItsSequence() throws {
        let f = try TestFolder()
        let a = try f.doc("a.json"), b = try f.doc("b.json"), c = try f.doc("c.json")
        try f.store.recordLocalJSON(c, ["v": 0])
        for i in 1...40 {
            try f.store.recordLocalJSON(a, ["v": .int(i)])
            if i % 2 == 0 { try f.store.recordLocalJSON(b, ["v": .int(i)]) }
        }
        let logged = try f.store.readLogEntries().map { [$0.seq: $0.rev] }
        let listed = f.store.changes(since: 0).map { [$0.seq: $0.rev] }
        #expect(listed == logged)
        #expect(listed.count == 61)
        #expect(f.store.changes(since: 55).map { [$0.seq: $0.rev] } == Array(logged.suffix(6)))
        #expect(f.store.changes(since: 0, docIDs: [b]).count == 20)

        // Two lines of sequence 2 for a.json: its first revision and a second branch.
        let first = try #require(f.store.index[a]?.nodes.keys.first { $0.generation == 1 })
        let branch = RevisionID.compute(parent: first, deleted: true, body: nil)
        let repeated = #"{"seq":2,"doc":"a.json","rev":"\#(branch)","parent":"\#(first)","deleted":true,"kind":"json","size":0,"origin":"x","time":""}"#
        let fd = try FileSystem.open(f.root + "/.ferry/revs.log", O_WRONLY | O_APPEND)
        try FileSystem.writeAll(fd, Array((repeated + "\n").utf8), path: "revs.log")
        close(fd)
        try f.reopen()
        let second = f.store.changes(since: 1, limit: 2)
        #expect(second.map(\.seq) == [2, 2])
        #expect(Set(second.map(\.rev)) == [first, branch])
    }

    @Test func knownAncestorsAndHistoryToSend() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        let r1 = try #require(try f.store.recordLocalJSON(doc, ["v": 1])).rev
        let r2 = try #require(try f.store.recordLocalJSON(doc, ["v": 2])).rev
        let r3 = try #require(try f.store.recordLocalJSON(doc, ["v": 3])).rev
        // Already here: not wanted.
        #expect(f.store.knownAncestors(of: r2, doc: doc) == nil)
        // A newer revision from a peer: our leaf is a possible ancestor.
        let r4 = RevisionID.compute(parent: r3, deleted: false, body: BlobDigest.of([4]))
        #expect(f.store.knownAncestors(of: r4, doc: doc) == [r3])
        // A document we have never seen: wanted, nothing known.
        #expect(f.store.knownAncestors(of: r4, doc: try f.doc("new.json")) == [])
        // History stops at (and includes) the first revision the peer knows.
        #expect(f.store.historyToSend(r3, doc: doc, knownByPeer: [r1]) == [r2, r1])
        #expect(f.store.historyToSend(r3, doc: doc, knownByPeer: [r2]) == [r2])
        #expect(f.store.historyToSend(r3, doc: doc, knownByPeer: []) == [r2, r1])
    }

    @Test func checkpointsRefuseAStaleRevision() throws {
        let f = try TestFolder()
        let checkpoints = CheckpointStore(layout: f.store.layout)
        #expect(checkpoints.get("peer/one") == nil)
        let first = try checkpoints.set("peer/one", expectedRev: nil, local: 3, remote: 7)
        #expect(first == CheckpointStore.Entry(rev: 1, local: 3, remote: 7))
        #expect(checkpoints.get("peer/one") == first)
        #expect(throws: StoreError.self) { try checkpoints.set("peer/one", expectedRev: nil, local: 4, remote: 8) }
        let second = try checkpoints.set("peer/one", expectedRev: 1, local: 4, remote: 8)
        #expect(second.rev == 2 && checkpoints.get("peer/one")?.remote == 8)
        // Any client id is a safe file name.
        try checkpoints.set("../../etc/evil", expectedRev: nil, local: 0, remote: 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: checkpoints.directory).allSatisfy { !$0.contains("/") && $0.hasSuffix(".json") })
    }
}
