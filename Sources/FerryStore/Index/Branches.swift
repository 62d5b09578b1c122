import FerryCore

/// A tree with more than one revision: its nodes packed in one array in the order they came
/// (`PackedRevision`), their parents' positions beside them, two arrays of their positions
/// sorted by revision id and by sequence to find them: ~130 bytes per revision beyond a document's first with its feed entry, where a
/// dictionary of `RevisionNode`s by id with a set of parents beside it took 535
/// (docs/performance.md).
struct Branches: Sendable {
    /// The nodes, in the order they were inserted (a node's position never changes).
    private var stored: [PackedRevision] = []
    /// Each node's parent by position (the same index as `stored`), or `noParent` or
    /// `absentParent`.
    private var parentLinks: [Int32] = []
    /// Sizes that `PackedRevision` does not hold (a body of a terabyte or more), by position.
    private var largeSizes: [Int32: Int] = [:]
    /// Positions in `stored`, sorted by revision id.
    private var byRev: [Int32] = []
    /// Positions of the nodes with a log line, sorted by sequence (a damaged log's repeated
    /// sequences side by side).
    private var bySeq: [Int32] = []
    /// Positions of the revisions with no children.
    private var leaves: Set<Int32> = []
    /// The winning leaf's position (-1 before the first insert).
    private var currentPosition: Int32 = -1
    /// The position of the node with the highest sequence (-1 while none has a log line).
    private var newestPosition: Int32 = -1
    /// The parent id of each node whose parent is not in the tree (the oldest revision of a
    /// history cut short), by the node's position.
    private var absentParents: [Int32: RevisionID] = [:]
    /// The positions of the nodes waiting for each absent parent: linked when it comes.
    private var waitingChildren: [RevisionID: [Int32]] = [:]
    /// Second parents of merges, by merge.
    var mergeParents: [RevisionID: RevisionID] = [:]

    /// The branches of a one-revision tree.
    init(_ only: RevisionNode) {
        insert(only)
    }

    /// The number of nodes.
    var count: Int { stored.count }

    /// Bytes of one node with its parent's position, for the test that keeps it small.
    static var nodeBytes: Int { MemoryLayout<PackedRevision>.stride + MemoryLayout<Int32>.stride }

    /// `parentLinks` of a node without a parent.
    private static let noParent: Int32 = -1
    /// `parentLinks` of a node whose parent is not in the tree (`absentParents`).
    private static let absentParent: Int32 = -2

    /// The winning leaf's node.
    var current: RevisionNode? { currentPosition < 0 ? nil : node(at: currentPosition) }

    /// The node of `rev`, when known.
    func node(_ rev: RevisionID) -> RevisionNode? { position(of: rev).map(node(at:)) }

    /// The parent of `rev` when `rev` is known, whether or not the parent is (a walk down a
    /// history, without making the node).
    func parent(of rev: RevisionID) -> RevisionID? {
        guard let p = position(of: rev) else { return nil }
        return parentID(at: p)
    }

    /// The node whose log line has sequence `seq` (the first of a damaged log's repeats).
    func node(seq: Int) -> RevisionNode? {
        if newestPosition >= 0, stored[Int(newestPosition)].seq == seq { return node(at: newestPosition) }
        let low = firstSeqSlot(notBelow: seq)
        guard low < bySeq.count, stored[Int(bySeq[low])].seq == seq else { return nil }
        return node(at: bySeq[low])
    }

    /// Every node whose log line has sequence `seq`: more than one only in a damaged log.
    func nodes(seq: Int) -> [RevisionNode] {
        var out: [RevisionNode] = []
        var slot = firstSeqSlot(notBelow: seq)
        while slot < bySeq.count, stored[Int(bySeq[slot])].seq == seq {
            out.append(node(at: bySeq[slot]))
            slot += 1
        }
        return out
    }

    /// Calls `body` with every node, in the order they were inserted.
    func forEachNode(_ body: (RevisionNode) -> Void) {
        for p in stored.indices { body(node(at: Int32(p))) }
    }

    /// True when `rev` is known and has no children.
    func isLeaf(_ rev: RevisionID) -> Bool { position(of: rev).map(leaves.contains) ?? false }

    /// The highest sequence of a node (0 while none has a log line).
    var newestSeq: Int { newestPosition < 0 ? 0 : stored[Int(newestPosition)].seq }

    /// The nodes of the leaves, in no particular order.
    var leafNodes: [RevisionNode] { leaves.map(node(at:)) }

    /// True when more than one leaf is live.
    var hasTwoLiveLeaves: Bool {
        var live = 0
        for p in leaves where !stored[Int(p)].deleted {
            live += 1
            if live > 1 { return true }
        }
        return false
    }

    /// What its arrays hold, in bytes (their capacity: what the heap gives them), beside the
    /// box, the leaves' set and the few ids of cut histories and merges.
    var bytesHeld: Int {
        stored.capacity * MemoryLayout<PackedRevision>.stride
            + (parentLinks.capacity + byRev.capacity + bySeq.capacity) * MemoryLayout<Int32>.stride
    }

    /// Adds a revision; a node already present is only upgraded (a history-only node gets its
    /// body and its log line).
    mutating func insert(_ node: RevisionNode) {
        if let existing = position(of: node.rev) {
            upgrade(existing, to: node)
            return
        }
        let p = Int32(stored.count)
        stored.appendGrowingGently(PackedRevision(node))
        parentLinks.appendGrowingGently(Self.noParent)
        if !PackedRevision.fits(size: node.size) { largeSizes[p] = node.size }
        byRev.insertGrowingGently(p, at: firstRevSlot(notBelow: node.rev))
        noteSequence(of: p)
        var currentLost = false
        if let parent = node.parent { currentLost = link(p, to: parent) }
        // Children that came before it: it is their parent, so it is not a leaf.
        if let children = waitingChildren.removeValue(forKey: node.rev) {
            for child in children {
                parentLinks[Int(child)] = p
                absentParents[child] = nil
            }
            if currentLost { recomputeCurrent() }
            return
        }
        leaves.insert(p)
        // Only a lost current leaf needs a full pass; otherwise the newcomer either wins or not.
        if currentLost || currentPosition < 0 {
            recomputeCurrent()
        } else if beats(p, currentPosition) {
            currentPosition = p
        }
    }

    /// Drops a node's body (compaction).
    mutating func dropBody(_ rev: RevisionID) {
        guard let p = position(of: rev) else { return }
        stored[Int(p)].object = nil
        stored[Int(p)].packWord = 0
    }

    // MARK: Finding and linking

    /// Links node `p` to its parent; true when that parent was the current leaf.
    private mutating func link(_ p: Int32, to parent: RevisionID) -> Bool {
        // Logs and peers are checked to descend one generation at a time, so a node never
        // names itself; if one did, its history would end there rather than loop.
        guard parent != stored[Int(p)].rev else { return false }
        guard let q = position(of: parent) else {
            // Not here (yet): remembered by id, and linked when it comes.
            parentLinks[Int(p)] = Self.absentParent
            absentParents[p] = parent
            waitingChildren[parent, default: []].append(p)
            return false
        }
        parentLinks[Int(p)] = q
        return leaves.remove(q) != nil && q == currentPosition
    }

    /// A node that was history only gets its log line, its body and its parent if it had none.
    private mutating func upgrade(_ p: Int32, to node: RevisionNode) {
        guard stored[Int(p)].seq == 0, node.seq != 0 else { return }
        stored[Int(p)] = PackedRevision(node)
        largeSizes[p] = PackedRevision.fits(size: node.size) ? nil : node.size
        noteSequence(of: p)
        var currentLost = false
        if parentLinks[Int(p)] == Self.noParent, let parent = node.parent { currentLost = link(p, to: parent) }
        if currentLost || leaves.contains(p) { recomputeCurrent() }
    }

    /// Files a node's log line under its sequence.
    private mutating func noteSequence(of p: Int32) {
        let seq = stored[Int(p)].seq
        guard seq != 0 else { return }
        // After its equals: the order in which a damaged log repeated a sequence.
        bySeq.insertGrowingGently(p, at: firstSlot(of: bySeq) { $0.seq <= seq })
        if newestPosition < 0 || stored[Int(newestPosition)].seq < seq { newestPosition = p }
    }

    private func position(of rev: RevisionID) -> Int32? {
        let slot = firstRevSlot(notBelow: rev)
        guard slot < byRev.count, stored[Int(byRev[slot])].rev == rev else { return nil }
        return byRev[slot]
    }

    /// The first slot of `byRev` whose revision is not below `rev`.
    private func firstRevSlot(notBelow rev: RevisionID) -> Int { firstSlot(of: byRev) { $0.rev < rev } }

    /// The first slot of `bySeq` whose sequence is not below `seq`.
    private func firstSeqSlot(notBelow seq: Int) -> Int { firstSlot(of: bySeq) { $0.seq < seq } }

    /// A binary search of positions sorted so that `isBelow` holds for a prefix of their nodes.
    private func firstSlot(of positions: [Int32], where isBelow: (PackedRevision) -> Bool) -> Int {
        var low = 0, high = positions.count
        while low < high {
            let mid = (low + high) / 2
            if isBelow(stored[Int(positions[mid])]) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private func parentID(at p: Int32) -> RevisionID? {
        let link = parentLinks[Int(p)]
        if link >= 0 { return stored[Int(link)].rev }
        return link == Self.absentParent ? absentParents[p] : nil
    }

    private func node(at p: Int32) -> RevisionNode {
        stored[Int(p)].node(parent: parentID(at: p), size: largeSizes.isEmpty ? nil : largeSizes[p])
    }

    private func beats(_ a: Int32, _ b: Int32) -> Bool {
        let x = stored[Int(a)], y = stored[Int(b)]
        return WinnerRule.beats((x.rev, x.deleted), (y.rev, y.deleted))
    }

    private mutating func recomputeCurrent() {
        var best: Int32 = -1
        for p in leaves where best < 0 || beats(p, best) { best = p }
        currentPosition = best
    }
}

extension Array {
    /// Appends, growing the storage by a sixteenth when it is full instead of doubling it: a
    /// long history's nodes would otherwise keep up to as many empty places as full ones.
    mutating func appendGrowingGently(_ element: Element) {
        growGentlyIfFull()
        append(element)
    }

    /// Inserts, growing the storage as `appendGrowingGently` does.
    mutating func insertGrowingGently(_ element: Element, at i: Int) {
        growGentlyIfFull()
        insert(element, at: i)
    }

    private mutating func growGentlyIfFull() {
        // Small arrays double as usual; past 64 elements a sixteenth still keeps appends
        // amortized constant (a copy of 16 elements per element added).
        if count == capacity, count >= 64 { reserveCapacity(count + count / 16) }
    }
}
