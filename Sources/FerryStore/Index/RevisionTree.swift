import FerryCore

/// One revision known to a folder; history-only nodes (ancestors learnt from a peer without
/// their bodies) have `seq == 0` and no object.
public struct RevisionNode: Sendable, Equatable {
    /// The revision.
    public let rev: RevisionID
    /// Its parent, when known.
    public let parent: RevisionID?
    /// True for a deletion.
    public var deleted: Bool
    /// The body's object (nil for deletions, history-only and compacted revisions).
    public var object: BlobDigest?
    /// Body size in bytes.
    public var size: Int
    /// Local sequence of its log line; 0 for history-only nodes.
    public var seq: Int
    /// Where it came from: "local" or a peer id.
    public var origin: String

    /// True when the body is stored here.
    public var hasBody: Bool { object != nil }
}

/// A document's revision tree, as in CouchDB and Couchbase Lite: leaves are open branches,
/// and the current revision is the leaf the winner rule picks.
public struct RevisionTree: Sendable {
    /// Every known revision.
    public private(set) var nodes: [RevisionID: RevisionNode] = [:]
    /// Revisions that are some node's parent.
    private var parents: Set<RevisionID> = []
    /// Revisions with no children.
    public private(set) var leaves: Set<RevisionID> = []
    /// The winning leaf.
    public private(set) var currentRev: RevisionID?

    /// An empty tree.
    public init() {}

    /// The winning leaf's node.
    public var current: RevisionNode? { currentRev.flatMap { nodes[$0] } }

    /// Leaves that are not deletions, best first.
    public var liveLeaves: [RevisionNode] {
        WinnerRule.ranked(leaves.compactMap { nodes[$0] }.filter { !$0.deleted }) { ($0.rev, $0.deleted) }
    }

    /// True when this revision is known.
    public func contains(_ rev: RevisionID) -> Bool { nodes[rev] != nil }

    /// Adds a revision; a node already present is only upgraded (a history-only node gets its body).
    public mutating func insert(_ node: RevisionNode) {
        if let existing = nodes[node.rev] {
            if existing.seq == 0 && node.seq != 0 { nodes[node.rev] = node }
            return
        }
        nodes[node.rev] = node
        var currentLost = false
        if let p = node.parent {
            parents.insert(p)
            if leaves.remove(p) != nil, p == currentRev { currentLost = true }
        }
        guard !parents.contains(node.rev) else {
            if currentLost { recomputeCurrent() }
            return
        }
        leaves.insert(node.rev)
        // Only a lost current leaf needs a full pass; otherwise the newcomer either wins or not.
        if currentLost || currentRev == nil {
            recomputeCurrent()
        } else if let cur = current, WinnerRule.beats((node.rev, node.deleted), (cur.rev, cur.deleted)) {
            currentRev = node.rev
        }
    }

    /// Inserts history-only ancestors: `chain[0]`'s parent is `chain[1]`, and so on.
    public mutating func insertHistory(_ chain: [RevisionID]) {
        for (i, rev) in chain.enumerated().reversed() where nodes[rev] == nil {
            let parent = i + 1 < chain.count ? chain[i + 1] : nil
            insert(RevisionNode(rev: rev, parent: parent, deleted: false, object: nil, size: 0, seq: 0, origin: ""))
        }
    }

    /// Drops a node's body reference (compaction).
    mutating func dropBody(_ rev: RevisionID) {
        nodes[rev]?.object = nil
    }

    private mutating func recomputeCurrent() {
        var best: RevisionNode?
        for rev in leaves {
            guard let n = nodes[rev] else { continue }
            if let b = best, !WinnerRule.beats((n.rev, n.deleted), (b.rev, b.deleted)) { continue }
            best = n
        }
        currentRev = best?.rev
    }

    /// The revision and its ancestors, newest first, as far as they are known.
    public func history(of rev: RevisionID, limit: Int = .max) -> [RevisionID] {
        var out: [RevisionID] = []
        var cursor: RevisionID? = rev
        while let r = cursor, out.count < limit {
            out.append(r)
            cursor = nodes[r]?.parent
        }
        return out
    }

    /// The nearest common ancestor of two revisions, when their histories meet.
    public func commonAncestor(_ a: RevisionID, _ b: RevisionID) -> RevisionID? {
        let ancestorsOfA = Set(history(of: a))
        for r in history(of: b) where ancestorsOfA.contains(r) { return r }
        return nil
    }

    /// Distance from each revision to its nearest leaf (0 for leaves).
    func depthFromLeaves() -> [RevisionID: Int] {
        var depth: [RevisionID: Int] = [:]
        for leaf in leaves {
            var d = 0
            var cursor: RevisionID? = leaf
            while let r = cursor {
                if let known = depth[r], known <= d { break }
                depth[r] = d
                d += 1
                cursor = nodes[r]?.parent
            }
        }
        return depth
    }
}
