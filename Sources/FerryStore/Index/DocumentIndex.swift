import FerryCore

/// Every document's revision tree, rebuilt from the log when a folder is opened.
public struct DocumentIndex: Sendable {
    /// Trees by document.
    public private(set) var trees: [DocumentID: RevisionTree] = [:]
    /// The highest sequence in the log.
    public private(set) var lastSeq: Int = 0
    /// Number of log entries applied.
    public private(set) var revisionCount: Int = 0

    /// An empty index.
    public init() {}

    /// Applies one log entry.
    public mutating func apply(_ e: LogEntry) {
        // Mutated in place through the subscript: copying the tree out and back would copy
        // its dictionaries on every revision (quadratic in a document's history).
        Self.apply(e, to: &trees[e.doc, default: RevisionTree()])
        lastSeq = max(lastSeq, e.seq)
        revisionCount += 1
    }

    private static func apply(_ e: LogEntry, to tree: inout RevisionTree) {
        if let parent = e.parent, !e.ancestors.isEmpty || !tree.contains(parent) {
            tree.insertHistory([parent] + e.ancestors)
        }
        tree.insert(RevisionNode(rev: e.rev, parent: e.parent, deleted: e.deleted, object: e.object,
                                 size: e.size, seq: e.seq, origin: e.origin))
    }

    /// The tree of a document.
    public subscript(doc: DocumentID) -> RevisionTree? { trees[doc] }

    /// Documents whose current revision is live, sorted.
    public var liveDocuments: [DocumentID] {
        trees.filter { $0.value.current.map { !$0.deleted } ?? false }.keys.sorted()
    }

    mutating func dropBody(doc: DocumentID, rev: RevisionID) {
        trees[doc]?.dropBody(rev)
    }
}
