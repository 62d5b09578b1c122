import FerryCore

/// One revision known to a folder; history-only nodes (ancestors learnt from a peer without
/// their bodies) have `seq == 0` and no object.
public struct RevisionNode: Sendable, Equatable {
    // The order of the fields is their order in memory: the small ones fill the bytes that
    // the alignment of the 41- and 42-byte ids would leave empty (160 bytes instead of 192).

    /// The revision.
    public let rev: RevisionID
    /// True for a deletion.
    public var deleted: Bool
    /// `origin` and `author` as numbers in the process's `NameTable`: a folder has a few names
    /// and many revisions.
    var originName: NameTable.Name
    /// Its parent, when known.
    public let parent: RevisionID?
    var authorName: NameTable.Name
    /// The body's object (nil for deletions, history-only and compacted revisions).
    public var object: BlobDigest?
    /// Body size in bytes.
    public var size: Int
    /// Local sequence of its log line; 0 for history-only nodes.
    public var seq: Int
    /// `pack`'s word (0: the body, if any, is a file under `objects/`).
    var packWord: UInt64

    /// A node.
    public init(rev: RevisionID, parent: RevisionID?, deleted: Bool, object: BlobDigest?, size: Int, seq: Int,
                origin: String, author: String? = nil, pack: PackLocation? = nil) {
        self.rev = rev
        self.deleted = deleted
        self.originName = NameTable.name(origin)
        self.parent = parent
        self.authorName = author.map(NameTable.name) ?? .none
        self.object = object
        self.size = size
        self.seq = seq
        self.packWord = pack?.raw ?? 0
    }

    /// Where its body is, when it is in a pack (`BodyPacks`).
    public var pack: PackLocation? {
        get { PackLocation(raw: packWord) }
        set { packWord = newValue?.raw ?? 0 }
    }

    /// A node whose names are numbered already.
    init(rev: RevisionID, parent: RevisionID?, deleted: Bool, object: BlobDigest?, size: Int, seq: Int,
                     originName: NameTable.Name, authorName: NameTable.Name, packWord: UInt64) {
        self.rev = rev
        self.deleted = deleted
        self.originName = originName
        self.parent = parent
        self.authorName = authorName
        self.object = object
        self.size = size
        self.seq = seq
        self.packWord = packWord
    }

    /// Where it came from: "local" or a peer id.
    public var origin: String {
        get { NameTable.text(originName) ?? "" }
        set { originName = NameTable.name(newValue) }
    }

    /// Who made it (`LogEntry.author`).
    public var author: String? {
        get { NameTable.text(authorName) }
        set { authorName = newValue.map(NameTable.name) ?? .none }
    }

    /// True when the body is stored here.
    public var hasBody: Bool { object != nil }
}

/// A document's revision tree, as in CouchDB and Couchbase Lite: leaves are open branches,
/// and the current revision is the leaf the winner rule picks.
///
/// Most documents have a single revision here (a new document, one received from a peer), so
/// that case is one packed node (`PackedRevision`, a parentless one whose size fits), and
/// a longer history is `Branches`. Both shapes live in a box on the heap, so the tree is one
/// word in the index: a dictionary keeps up to twice as many slots as entries, and grows by
/// copying them all, so a node held inline cost its size in every empty slot and twice over
/// while the dictionary grew (see docs/performance.md). A box is mutated in place when the
/// tree is its only owner and copied otherwise (`indirect` copied on every insert).
public struct RevisionTree: Sendable {
    private enum Shape: Sendable {
        case empty
        case one(Boxed<PackedRevision>)
        case many(Boxed<Branches>)
    }

    private var shape: Shape = .empty

    /// An empty tree.
    public init() {}

    /// Bytes of a tree of one revision's node (what the index holds per document of a large
    /// folder, beside the box's header), for the test that keeps it small.
    static var soleNodeBytes: Int { MemoryLayout<PackedRevision>.size }

    /// A node without a parent whose size is packed: a tree of it is one box.
    private static func isSole(_ node: RevisionNode) -> Bool {
        node.parent == nil && PackedRevision.fits(size: node.size)
    }

    /// Bytes its box holds for its nodes and the arrays that find them (not the box's header,
    /// nor the sets and maps of leaves, merges and cut histories, which do not grow with a
    /// straight history), for the test of what a revision beyond the first costs.
    var bytesHeld: Int {
        switch shape {
        case .empty: return 0
        case .one: return Self.soleNodeBytes
        case .many(let b): return b.value.bytesHeld
        }
    }

    /// Second parents of merges, by merge (a merge has two parents, so only a tree of many
    /// revisions has any: they live in its box, and a tree is one word).
    private var mergeParents: [RevisionID: RevisionID] {
        if case .many(let b) = shape { return b.value.mergeParents }
        return [:]
    }

    /// The leaf a merge took in (its second parent), for a merge revision.
    public func mergedParent(of rev: RevisionID) -> RevisionID? {
        if case .many(let b) = shape { return b.value.mergeParents[rev] }
        return nil
    }

    /// True when `node` is the deletion that closes a branch a merge took in
    /// (`RevisionID.closing`), not a deletion someone made.
    public func closesMergedBranch(_ node: RevisionNode) -> Bool {
        guard node.deleted, let loser = node.parent else { return false }
        return isClosing(node.rev, of: loser)
    }

    /// True when `rev` is the id of a deletion closing `loser`'s branch after a merge this
    /// tree holds took it in (`RevisionID.closing`), or as the twin of another branch with the
    /// same body (`RevisionID.closingTwin`).
    public func isClosing(_ rev: RevisionID, of loser: RevisionID) -> Bool {
        rev == RevisionID.closingTwin(loser) || merge(closedBy: rev, of: loser) != nil
    }

    /// The merge that took `loser` in and whose closing deletion of `loser`'s branch is `rev`.
    private func merge(closedBy rev: RevisionID, of loser: RevisionID) -> RevisionID? {
        mergeParents.first { $0.value == loser && RevisionID.closing(loser, mergedInto: $0.key) == rev }?.key
    }

    /// The conflict `rev` took part in closing (`ConflictRecord`), worked out from the tree,
    /// which every synced peer holds whole, so the same in each: a merge (winner: its parent,
    /// loser: its second parent), or the deletion that closed the loser's branch after such a
    /// merge. Nil for any other revision. A log line carries its record only in the folder
    /// that resolved the conflict, not in those its revisions reached.
    public func conflictClosed(by rev: RevisionID) -> ConflictRecord? {
        guard let node = nodes[rev], let parent = node.parent else { return nil }
        let merge = node.deleted ? merge(closedBy: rev, of: parent) : rev
        guard let merge, let loser = mergedParent(of: merge), let winner = nodes[merge]?.parent else { return nil }
        // As the resolving peer decides it: the merge took in something of the loser's.
        let tookIn = nodes[merge]?.object != nodes[winner]?.object
        return ConflictRecord(winner: winner, loser: loser, resolution: tookIn ? .merged : .winner)
    }

    /// The newest merge in `rev`'s history (itself included) that took in `loser`.
    public func merge(of loser: RevisionID, below rev: RevisionID) -> RevisionID? {
        let ancestry = ancestry(of: rev)
        return mergeParents.filter { $0.value == loser && ancestry.contains($0.key) }.map(\.key).max()
    }

    /// Records that `rev` merged `loser` (its second parent).
    mutating func setMergedParent(_ loser: RevisionID, of rev: RevisionID) {
        switch shape {
        case .empty: return  // a merge is inserted before its second parent is noted
        case .one(let n):
            var b = Branches(n.value.node(parent: nil))
            b.mergeParents[rev] = loser
            shape = .many(Boxed(b))
        case .many(var box):
            shape = .empty  // drop the tree's reference so a sole owner mutates in place
            if !isKnownUniquelyReferenced(&box) { box = Boxed(box.value) }
            box.value.mergeParents[rev] = loser
            shape = .many(box)
        }
    }

    /// Every known revision.
    public var nodes: RevisionNodes { RevisionNodes(tree: self) }

    /// The nodes of the revisions with no children.
    public var leafNodes: [RevisionNode] {
        switch shape {
        case .empty: return []
        case .one(let n): return [n.value.node(parent: nil)]
        case .many(let b): return b.value.leafNodes
        }
    }

    /// True when `rev` is known and has no children.
    public func isLeaf(_ rev: RevisionID) -> Bool {
        switch shape {
        case .empty: return false
        case .one(let n): return n.value.rev == rev
        case .many(let b): return b.value.isLeaf(rev)
        }
    }

    /// The highest sequence of its revisions' log lines (0 when none has one).
    public var newestSeq: Int {
        switch shape {
        case .empty: return 0
        case .one(let n): return n.value.seq
        case .many(let b): return b.value.newestSeq
        }
    }

    /// The winning leaf's node.
    public var current: RevisionNode? {
        switch shape {
        case .empty: return nil
        case .one(let n): return n.value.node(parent: nil)
        case .many(let b): return b.value.current
        }
    }

    /// True when more than one leaf is live: a conflict to resolve.
    public var hasConflict: Bool {
        guard case .many(let box) = shape else { return false }
        return box.value.hasTwoLiveLeaves
    }

    /// Leaves that are not deletions, best first.
    public var liveLeaves: [RevisionNode] {
        if case .one(let n) = shape { return n.value.deleted ? [] : [n.value.node(parent: nil)] }
        return WinnerRule.ranked(leafNodes.filter { !$0.deleted }) { ($0.rev, $0.deleted) }
    }

    /// The node of a revision, when known.
    func node(_ rev: RevisionID) -> RevisionNode? {
        switch shape {
        case .empty: return nil
        case .one(let n): return n.value.rev == rev ? n.value.node(parent: nil) : nil
        case .many(let b): return b.value.node(rev)
        }
    }

    /// The parent of a known revision, when it has one.
    func parent(of rev: RevisionID) -> RevisionID? {
        switch shape {
        case .empty, .one: return nil
        case .many(let b): return b.value.parent(of: rev)
        }
    }

    /// True when this revision is known.
    public func contains(_ rev: RevisionID) -> Bool { node(rev) != nil }

    /// The node whose log line has sequence `seq` (the change feed names revisions so): the
    /// newest at once (what a continuous sync asks for), others by a binary search.
    public func node(seq: Int) -> RevisionNode? {
        switch shape {
        case .empty: return nil
        case .one(let n): return n.value.seq == seq ? n.value.node(parent: nil) : nil
        case .many(let b): return b.value.node(seq: seq)
        }
    }

    /// Every node whose log line has sequence `seq`: more than one only when a damaged log
    /// repeated a sequence.
    public func nodes(seq: Int) -> [RevisionNode] {
        switch shape {
        case .empty: return []
        case .one(let n): return n.value.seq == seq ? [n.value.node(parent: nil)] : []
        case .many(let b): return b.value.nodes(seq: seq)
        }
    }

    /// Calls `body` with every node, in no particular order.
    public func forEachNode(_ body: (RevisionNode) -> Void) {
        switch shape {
        case .empty: break
        case .one(let n): body(n.value.node(parent: nil))
        case .many(let b): b.value.forEachNode(body)
        }
    }

    /// The number of nodes.
    public var nodeCount: Int {
        switch shape {
        case .empty: return 0
        case .one: return 1
        case .many(let b): return b.value.count
        }
    }

    /// Adds a revision; a node already present is only upgraded (a history-only node gets its body).
    public mutating func insert(_ node: RevisionNode) {
        switch shape {
        case .empty:
            if Self.isSole(node) {
                shape = .one(Boxed(PackedRevision(node)))
            } else {
                shape = .many(Boxed(Branches(node)))
            }
        case .one(let box):
            let existing = box.value
            if existing.rev == node.rev {
                if existing.seq == 0 && node.seq != 0 { shape = .empty; insert(node) }
                return
            }
            var b = Branches(existing.node(parent: nil))
            b.insert(node)
            shape = .many(Boxed(b))
        case .many(var box):
            shape = .empty  // drop the tree's reference so a sole owner mutates in place
            if !isKnownUniquelyReferenced(&box) { box = Boxed(box.value) }
            box.value.insert(node)
            shape = .many(box)
        }
    }

    /// Inserts history-only ancestors: `chain[0]`'s parent is `chain[1]`, and so on.
    public mutating func insertHistory(_ chain: [RevisionID]) {
        for (i, rev) in chain.enumerated().reversed() where !contains(rev) {
            let parent = i + 1 < chain.count ? chain[i + 1] : nil
            insert(RevisionNode(rev: rev, parent: parent, deleted: false, object: nil, size: 0, seq: 0, origin: ""))
        }
    }

    /// Drops a node's body reference (compaction).
    mutating func dropBody(_ rev: RevisionID) {
        switch shape {
        case .empty: break
        case .one(let box):
            guard box.value.rev == rev else { return }
            var n = box.value
            n.object = nil
            n.packWord = 0
            shape = .one(Boxed(n))
        case .many(var box):
            shape = .empty
            if !isKnownUniquelyReferenced(&box) { box = Boxed(box.value) }
            box.value.dropBody(rev)
            shape = .many(box)
        }
    }

    /// The revision and its ancestors, newest first, as far as they are known.
    public func history(of rev: RevisionID, limit: Int = .max) -> [RevisionID] {
        var out: [RevisionID] = []
        var cursor: RevisionID? = rev
        while let r = cursor, out.count < limit {
            out.append(r)
            cursor = parent(of: r)
        }
        return out
    }

    /// The revision and every ancestor known here, through parents and merges' second parents.
    public func ancestry(of rev: RevisionID) -> Set<RevisionID> {
        var seen: Set<RevisionID> = [rev]
        var stack = [rev]
        while let r = stack.popLast() {
            for p in [parent(of: r), mergeParents[r]] {
                if let p, seen.insert(p).inserted { stack.append(p) }
            }
        }
        return seen
    }

    /// The merge bases of two revisions: their common ancestors (through parents and merges'
    /// second parents) that no other common ancestor descends from, best first by the winner
    /// rule's order (higher generation, then greater id), so that every peer lists the same.
    /// Usually one; two or more after criss-cross merges (peers that each merged the other's
    /// branch). Empty when their histories never meet.
    ///
    /// A merge remembers the leaf it took in, so a later merge with a descendant of that leaf
    /// starts from that leaf rather than from an older ancestor, where both sides would seem to
    /// have changed the same values.
    public func mergeBases(_ a: RevisionID, _ b: RevisionID) -> [RevisionID] {
        let ofA = ancestry(of: a)
        return maximal(ancestry(of: b).filter { ofA.contains($0) })
    }

    /// For a merge: the revisions that are not merges found by walking back from it through
    /// merges only (the edits it brings together). Nil when `rev` is not a merge.
    public func editsBehindMerges(of rev: RevisionID) -> Set<RevisionID>? {
        guard mergeParents[rev] != nil else { return nil }
        var edits: Set<RevisionID> = []
        var seen: Set<RevisionID> = [rev]
        var stack = [rev]
        while let r = stack.popLast() {
            guard mergeParents[r] != nil else {
                edits.insert(r)
                continue
            }
            for p in [parent(of: r), mergeParents[r]] {
                if let p, seen.insert(p).inserted { stack.append(p) }
            }
        }
        return edits
    }

    /// The members of `set` that no other member descends from, best first.
    public func maximal(_ set: Set<RevisionID>) -> [RevisionID] {
        // Every edge leads to a lower generation: walking from the best down meets each member
        // after every member that descends from it.
        var covered: Set<RevisionID> = []
        var result: [RevisionID] = []
        for r in set.sorted(by: >) where !covered.contains(r) {
            result.append(r)
            var stack = [r]
            while let x = stack.popLast() {
                for p in [parent(of: x), mergeParents[x]] {
                    if let p, covered.insert(p).inserted { stack.append(p) }
                }
            }
        }
        return result
    }

    /// Distance from each revision to its nearest leaf (0 for leaves).
    func depthFromLeaves() -> [RevisionID: Int] {
        var depth: [RevisionID: Int] = [:]
        for leaf in leafNodes {
            var d = 0
            var cursor: RevisionID? = leaf.rev
            while let r = cursor {
                if let known = depth[r], known <= d { break }
                depth[r] = d
                d += 1
                cursor = parent(of: r)
            }
        }
        return depth
    }

    /// Every node, in no particular order.
    fileprivate var allNodes: [RevisionNode] {
        switch shape {
        case .empty: return []
        case .one(let n): return [n.value.node(parent: nil)]
        case .many(let b):
            var all: [RevisionNode] = []
            all.reserveCapacity(b.value.count)
            b.value.forEachNode { all.append($0) }
            return all
        }
    }
}

/// Read-only view of a tree's nodes by revision.
public struct RevisionNodes: Sendable {
    fileprivate let tree: RevisionTree

    /// The node of `rev`, when known.
    public subscript(rev: RevisionID) -> RevisionNode? { tree.node(rev) }
    /// Every known revision.
    public var keys: [RevisionID] { tree.allNodes.map(\.rev) }
}

/// A tree's shape on the heap. Unchecked `Sendable`: a tree mutates its box only when it is the
/// box's sole owner (`isKnownUniquelyReferenced`) and copies it otherwise, so a box another
/// tree or thread can see is never written.
private final class Boxed<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
