import FerryCore

/// The conflicts a folder closed since it was opened: each once, however many revisions
/// record it (a merge that arrives from the peer that made it, then the deletion closing the
/// losing branch here, which names the merge as its winner). A losing branch is closed once,
/// so it names its conflict. Past `maxKept` only the count grows, and the losers seen that
/// make each counted once.
public struct ConflictTally: Sendable {
    /// One closed conflict.
    public struct Closed: Sendable, Equatable {
        /// The document.
        public var doc: DocumentID
        /// The leaf that won.
        public var winner: RevisionID
        /// The leaf that lost (its values were merged in, or its branch closed).
        public var loser: RevisionID
        /// Merged, or the winner's body kept.
        public var resolution: ConflictRecord.Resolution
        /// The peer whose merge arrived; nil when it was made here.
        public var mergedBy: String?
    }

    /// The first `maxKept` closed, in order.
    public private(set) var closed: [Closed] = []
    /// How many were closed.
    public private(set) var count = 0
    private var seen: Set<Loser> = []

    /// A conflict's losing branch.
    private struct Loser: Hashable {
        let doc: DocumentID
        let rev: RevisionID
    }

    /// Most kept by name.
    public static let maxKept = 100

    /// Nothing closed yet.
    public init() {}

    /// Notes `conflict` unless it was noted already (the same loser closed).
    public mutating func note(_ conflict: Closed) {
        guard seen.insert(Loser(doc: conflict.doc, rev: conflict.loser)).inserted else {
            // Seen as a merge that arrived; the closing made here may know more (merged or not).
            if let i = closed.firstIndex(where: { $0.doc == conflict.doc && $0.loser == conflict.loser }), conflict.mergedBy == nil,
               closed[i].mergedBy != nil {
                closed[i].resolution = conflict.resolution
            }
            return
        }
        count += 1
        if closed.count < Self.maxKept { closed.append(conflict) }
    }
}
