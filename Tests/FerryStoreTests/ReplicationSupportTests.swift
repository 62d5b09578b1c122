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
