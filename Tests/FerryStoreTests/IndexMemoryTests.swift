import Testing
import FerryCore
@testable import FerryStore
import FerryTesting

/// What the index holds per document and per revision (docs/performance.md): a large folder's
/// memory is mostly these, so a field added or moved shows here first.
@Suite struct IndexMemoryTests {
    @Test func theIndexKeepsItsPerDocumentAndPerRevisionSizes() {
        // A tree is one word in the index: its node or its branches are in a box.
        #expect(MemoryLayout<RevisionTree>.size == 8)
        // A document with one revision: its node without a parent.
        #expect(RevisionTree.soleNodeBytes <= 112)
        // A node of a longer history: the small fields fill the ids' alignment gaps.
        #expect(MemoryLayout<RevisionNode>.size <= 160)
        // The change feed names a revision by sequence and document only.
        #expect(MemoryLayout<DocumentIndex.FeedEntry>.stride == 24)
    }

    /// A node keeps its origin and author as numbers; they read back as the same strings,
    /// byte for byte (NFC and NFD forms of a name are two names).
    @Test func namesReadBackByteForByte() throws {
        let rev = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(Array("{}".utf8)))
        let nfc = "Zo\u{00EB}@laptop", nfd = "Zoe\u{0308}@laptop"
        let a = RevisionNode(rev: rev, parent: nil, deleted: false, object: nil, size: 0, seq: 1, origin: "peer-1", author: nfc)
        let b = RevisionNode(rev: rev, parent: nil, deleted: false, object: nil, size: 0, seq: 2, origin: "local", author: nfd)
        #expect(a.origin == "peer-1" && b.origin == "local")
        #expect(Array(a.author!.utf8) == Array(nfc.utf8))
        #expect(Array(b.author!.utf8) == Array(nfd.utf8))
        let c = RevisionNode(rev: rev, parent: nil, deleted: true, object: nil, size: 0, seq: 3, origin: "local")
        #expect(c.author == nil)
    }

    /// A tree of one revision and the same tree once it grows answer alike.
    @Test func aTreeOfOneRevisionAnswersAsItsNodeWould() throws {
        let body = BlobDigest.of(Array("{\"v\":1}".utf8))
        let r1 = RevisionID.compute(parent: nil, deleted: false, body: body)
        var tree = RevisionTree()
        tree.insert(RevisionNode(rev: r1, parent: nil, deleted: false, object: body, size: 7, seq: 4, origin: "local", author: "a@b"))
        #expect(tree.nodeCount == 1)
        #expect(tree.current?.rev == r1 && tree.current?.object == body && tree.current?.size == 7 && tree.current?.author == "a@b")
        #expect(tree.node(seq: 4)?.rev == r1 && tree.node(seq: 5) == nil)
        let r2 = RevisionID.compute(parent: r1, deleted: true, body: nil)
        tree.insert(RevisionNode(rev: r2, parent: r1, deleted: true, object: nil, size: 0, seq: 9, origin: "peer"))
        #expect(tree.nodeCount == 2)
        #expect(tree.current?.rev == r2 && tree.nodes[r1]?.author == "a@b" && tree.nodes[r1]?.seq == 4)
        #expect(tree.node(seq: 4)?.rev == r1 && tree.node(seq: 9)?.rev == r2)
    }
}
