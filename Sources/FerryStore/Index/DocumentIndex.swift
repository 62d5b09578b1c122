import FerryCore
import OrderedCollections

/// Every document's revision tree, rebuilt from the log when a folder is opened, and the
/// change feed: every revision recorded, in log order.
public struct DocumentIndex: Sendable {
    /// One revision recorded in the log, as the change feed lists it: its sequence and its
    /// document's position in `trees`, whose tree finds the revision by its sequence
    /// (`RevisionTree.node(seq:)`). Neither the revision's id nor the document's is repeated
    /// here: 16 bytes per revision instead of 72.
    public struct FeedEntry: Sendable, Equatable {
        /// Its sequence.
        public let seq: Int
        /// Its document's position in `trees` (a document, once in the index, stays there).
        let position: Int32
    }

    /// Trees by document. An ordered dictionary: its keys and values are two arrays and its
    /// hash table holds small integers, where a `Dictionary` keeps up to twice as many 24-byte
    /// slots as entries (6 MB at 100,000 documents, 3 MB more while it grows).
    public private(set) var trees: OrderedDictionary<DocumentID, RevisionTree> = [:]
    /// The highest sequence in the log.
    public private(set) var lastSeq: Int = 0
    /// Number of log entries applied.
    public private(set) var revisionCount: Int = 0
    /// How many documents have a live current revision (`liveDocuments.count`, kept as
    /// entries are applied, so that a status answers without a walk).
    public private(set) var liveDocumentCount = 0
    /// Every revision recorded, in sequence order (what replication sends, from a sequence on);
    /// built when replication first asks (`buildFeed`), then kept up as entries are applied,
    /// so that opening a folder for `status` or `log` does not pay for it.
    public private(set) var feed: [FeedEntry] = []
    private var feedIsBuilt = false
    /// False once a damaged log put a sequence out of order, until the feed is built (sorted):
    /// until then the feed is searched whole.
    public private(set) var feedIsSorted = true
    /// True once a damaged log put a sequence out of order or repeated one: a document may then
    /// have two revisions of one sequence.
    public private(set) var sequencesMayRepeat = false

    /// An empty index.
    public init() {}

    /// Applies one log entry.
    public mutating func apply(_ e: LogEntry) {
        // The tree is mutated in place: copying it out and back would copy its arrays on every
        // revision (quadratic in a document's history).
        let position: Int
        if feedIsBuilt, let known = trees.index(forKey: e.doc) {
            // The feed needs the document's position: the lookup that finds it finds the tree.
            position = known
            liveDocumentCount += Self.apply(e, to: &trees.values[known])
        } else {
            // One lookup finds or appends the tree; a new document goes last.
            position = trees.count
            liveDocumentCount += trees.updateValue(forKey: e.doc, default: RevisionTree()) { Self.apply(e, to: &$0) }
        }
        if e.seq <= lastSeq {
            feedIsSorted = false
            sequencesMayRepeat = true
        }
        lastSeq = max(lastSeq, e.seq)
        revisionCount += 1
        if feedIsBuilt { feed.appendGrowingGently(FeedEntry(seq: e.seq, position: Int32(position))) }
    }

    /// Builds the change feed from the trees (every revision with a log line), once.
    public mutating func buildFeed() {
        guard !feedIsBuilt else { return }
        feed.reserveCapacity(revisionCount)
        for (position, tree) in trees.values.enumerated() {
            tree.forEachNode { node in
                guard node.seq != 0 else { return }
                feed.append(FeedEntry(seq: node.seq, position: Int32(position)))
            }
        }
        feed.sort { $0.seq < $1.seq }
        feedIsSorted = true
        feedIsBuilt = true
    }

    /// Applies `e` to its document's tree; returns how the count of live documents changed.
    private static func apply(_ e: LogEntry, to tree: inout RevisionTree) -> Int {
        let wasLive = tree.current.map { !$0.deleted } ?? false
        if let parent = e.parent, !e.ancestors.isEmpty || !tree.contains(parent) {
            tree.insertHistory([parent] + e.ancestors)
        }
        tree.insert(RevisionNode(rev: e.rev, parent: e.parent, deleted: e.deleted, object: e.object,
                                 size: e.size, seq: e.seq, origin: e.origin, author: e.author, pack: e.pack))
        // Logs written before merges named their second parent carry it in the merged
        // revision's conflict record (the loser it took in).
        if let merged = e.merged ?? (e.deleted ? nil : e.conflict?.loser), e.parent != nil {
            tree.setMergedParent(merged, of: e.rev)
        }
        let isLive = tree.current.map { !$0.deleted } ?? false
        return isLive == wasLive ? 0 : isLive ? 1 : -1
    }

    /// The tree of a document.
    public subscript(doc: DocumentID) -> RevisionTree? { trees[doc] }

    /// The conflict a log line's revision closed, the same in every folder that holds it: the
    /// one its tree shows (`RevisionTree.conflictClosed(by:)`), else the line's own record (a
    /// deletion closing a branch it had seen, which only the resolving folder knows as such).
    /// The line's record alone would differ: a resolution that came from a peer has none, and
    /// one that closes a merge a peer made names the leaf it found as the winner.
    public func conflict(closedBy e: LogEntry) -> ConflictRecord? {
        trees[e.doc]?.conflictClosed(by: e.rev) ?? e.conflict
    }

    /// The document a feed entry names.
    public func document(of entry: FeedEntry) -> DocumentID { trees.keys[Int(entry.position)] }

    /// The tree of the document a feed entry names.
    public func tree(of entry: FeedEntry) -> RevisionTree { trees.values[Int(entry.position)] }


    /// Documents whose current revision is live, sorted.
    public var liveDocuments: [DocumentID] {
        trees.filter { $0.value.current.map { !$0.deleted } ?? false }.keys.sorted()
    }

    /// The feed's entries with a sequence above `since`, in sequence order (`buildFeed` first).
    public func feed(after since: Int) -> ArraySlice<FeedEntry> {
        precondition(feedIsBuilt, "buildFeed() before reading the feed")
        // Sorted either way: a sender pages through the feed by sequence.
        guard feedIsSorted else { return ArraySlice(feed.filter { $0.seq > since }.sorted { $0.seq < $1.seq }) }
        var low = 0, high = feed.count
        while low < high {
            let mid = (low + high) / 2
            if feed[mid].seq <= since { low = mid + 1 } else { high = mid }
        }
        return feed[low...]
    }

    mutating func dropBody(doc: DocumentID, rev: RevisionID) {
        trees[doc]?.dropBody(rev)
    }
}
