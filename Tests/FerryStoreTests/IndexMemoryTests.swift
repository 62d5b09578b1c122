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
        #expect(RevisionTree.soleNodeBytes <= 104)
        // A node of a longer history: the small fields fill the ids' alignment gaps.
        #expect(MemoryLayout<RevisionNode>.size <= 160)
        // And as a tree of many keeps it: packed, linked to its parent by position.
        #expect(Branches.nodeBytes == 108)
        // The change feed names a revision by sequence and its document's position only.
        #expect(MemoryLayout<DocumentIndex.FeedEntry>.stride == 16)
    }

    /// A document saved 20,000 times: each revision beyond the first holds at most 150 bytes
    /// in the index (its packed node, its places in the two sorted arrays, its feed entry),
    /// counted by the capacity of what holds them, so an array that doubled shows here too.
    @Test func aRevisionBeyondTheFirstHoldsAtMost150Bytes() throws {
        let doc = try DocumentID("long.json")
        var index = DocumentIndex()
        index.buildFeed()
        var parent: RevisionID?
        func held() -> Int { index[doc]!.bytesHeld + index.feed.capacity * MemoryLayout<DocumentIndex.FeedEntry>.stride }
        var heldByOne = 0
        for seq in 1...20_000 {
            let body = BlobDigest.of(Array("{\"v\":\(seq)}".utf8))
            let rev = RevisionID.compute(parent: parent, deleted: false, body: body)
            index.apply(LogEntry(seq: seq, doc: doc, rev: rev, parent: parent, deleted: false, kind: .json, object: body,
                                 size: 8, origin: "local", time: "", author: "a@b"))
            parent = rev
            if seq == 1 { heldByOne = held() }
            // Nowhere along the way, not only at the end.
            if seq % 1_000 == 0 { #expect((held() - heldByOne) / (seq - 1) <= 150, "at \(seq) revisions") }
        }
        #expect(index[doc]?.nodeCount == 20_000 && index[doc]?.current?.rev == parent)
        #expect(index[doc]?.node(seq: 12_345)?.rev.generation == 12_345)
        #expect(index[doc]?.history(of: parent!).count == 20_000)
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

    /// A body of a terabyte or more (whose size a packed node does not hold) keeps its size,
    /// alone in its tree and in a history.
    @Test func aSizeBeyondWhatANodePacksIsKept() {
        let huge = PackedRevision.sizeLimit + 5
        let body = BlobDigest.of(Array("big".utf8))
        let r1 = RevisionID.compute(parent: nil, deleted: false, body: body)
        var tree = RevisionTree()
        tree.insert(RevisionNode(rev: r1, parent: nil, deleted: false, object: body, size: huge, seq: 1, origin: "local"))
        #expect(tree.nodeCount == 1 && tree.current?.size == huge && tree.current?.object == body)
        let r2 = RevisionID.compute(parent: r1, deleted: false, body: body)
        tree.insert(RevisionNode(rev: r2, parent: r1, deleted: false, object: body, size: 7, seq: 2, origin: "local"))
        #expect(tree.nodes[r1]?.size == huge && tree.current?.size == 7 && tree.node(seq: 1)?.size == huge)
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

/// A tree of many revisions links nodes by position: whatever order they come in (a child
/// before its parent, a history-only ancestor given its log line later), it answers the same.
@Suite struct BranchesOrderTests {
    private static func rev(_ parent: RevisionID?, _ tag: String, deleted: Bool = false) -> RevisionID {
        RevisionID.compute(parent: parent, deleted: deleted, body: deleted ? nil : BlobDigest.of(Array(tag.utf8)))
    }

    @Test func everyOrderOfArrivalGivesTheSameTree() {
        // a1 ← a2 ← a3, a2 ← b3 ← b4 (a deletion), and c2 whose parent c1 never comes.
        let a1 = Self.rev(nil, "a1"), a2 = Self.rev(a1, "a2"), a3 = Self.rev(a2, "a3")
        let b3 = Self.rev(a2, "b3"), b4 = Self.rev(b3, "", deleted: true)
        let c1 = Self.rev(nil, "c1"), c2 = Self.rev(c1, "c2")
        let nodes = [(a1, nil), (a2, a1), (a3, a2), (b3, a2), (b4, b3), (c2, c1)].enumerated().map { i, pair in
            RevisionNode(rev: pair.0, parent: pair.1, deleted: pair.0 == b4, object: nil, size: 0, seq: i + 1, origin: "o\(i)")
        }
        func describe(_ tree: RevisionTree) -> String {
            let leaves = tree.leafNodes.map(\.rev.description).sorted()
            let parents = nodes.map { tree.nodes[$0.rev]?.parent?.description ?? "-" }
            let bySeq = (1...nodes.count).map { tree.node(seq: $0)?.rev.description ?? "-" }
            return "\(leaves) \(tree.current?.rev.description ?? "-") \(parents) \(bySeq) \(tree.nodeCount) \(tree.history(of: a3))"
        }
        var inOrder = RevisionTree()
        for n in nodes { inOrder.insert(n) }
        let expected = describe(inOrder)
        #expect(Set(inOrder.leafNodes.map(\.rev)) == [a3, b4, c2])
        #expect(inOrder.history(of: c2) == [c2, c1])
        var orders = 0
        func permute(_ rest: [RevisionNode], _ done: [RevisionNode]) {
            guard !rest.isEmpty else {
                var tree = RevisionTree()
                for n in done { tree.insert(n) }
                #expect(describe(tree) == expected, "order \(done.map(\.origin))")
                // The same with a1 known first as history only (no log line), then recorded.
                var upgraded = RevisionTree()
                upgraded.insertHistory([a1])
                for n in done { upgraded.insert(n) }
                #expect(describe(upgraded) == expected, "history first, order \(done.map(\.origin))")
                // A branch known first as history only: its deletion then comes with its log
                // line (the winner changes), and a cut history's oldest node gets its parent.
                var branchFirst = RevisionTree()
                branchFirst.insertHistory([b4, b3])
                branchFirst.insertHistory([a3])
                for n in done { branchFirst.insert(n) }
                #expect(describe(branchFirst) == expected, "branch first, order \(done.map(\.origin))")
                orders += 1
                return
            }
            for i in rest.indices {
                var left = rest
                let next = left.remove(at: i)
                permute(left, done + [next])
            }
        }
        permute(nodes, [])
        #expect(orders == 720)
    }
}
