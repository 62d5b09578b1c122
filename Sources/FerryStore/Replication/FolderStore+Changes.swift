import FerryCore

/// A revision recorded after some sequence: what a `changes` message announces.
public struct RecordedRevision: Sendable, Equatable {
    /// Its local sequence.
    public var seq: Int
    /// The document.
    public var doc: DocumentID
    /// The revision.
    public var rev: RevisionID
    /// True when it is a deletion.
    public var deleted: Bool
    /// Body size.
    public var size: Int
    /// Where the revision came from: "local" or the peer id it was received from.
    public var origin: String
    /// Its body's object (nil for a deletion).
    public var object: BlobDigest?
    /// Who made it (`LogEntry.author`).
    public var author: String?
    /// Where its body is, when it is packed.
    public var pack: PackLocation?
}

extension FolderStore {
    /// Revisions recorded after `since`, in sequence order, at most `limit`, optionally only
    /// those of `docIDs`. Every revision travels to a ferry peer, not only each document's current one:
    /// intermediate edits, losing branches, merges and the deletions that close branches, so
    /// that peers that have synced hold the same histories (`ferry log`, `show DOC@REV` and
    /// `conflicts` agree), and a merge base is found the same way everywhere. A log in
    /// sequence order lists every revision after its ancestors. With `currentOnly`, only each
    /// document's current revision is listed (what a Couchbase Lite client is sent, as Sync
    /// Gateway sends it): never a revision in between, nor the deletion that closed a merged
    /// branch. LiteCore takes the last revision it pulls of a document as the server's, so a
    /// merge followed by that deletion left its document deleted there.
    public func changes(since: Int, limit: Int = .max, docIDs: Set<DocumentID>? = nil, currentOnly: Bool = false) -> [RecordedRevision] {
        Array(recorded(since: since, docIDs: docIDs, currentAsOf: currentOnly ? index.lastSeq : nil).prefix(limit).map(Self.recordedRevision))
    }

    /// One page of `changes`: the revisions after `since` and up to `through`, `limit` of them
    /// (more only to end with a whole sequence); `next` is the `since` of the following page, nil
    /// when this one is the last. A sender pages through a large folder instead of holding
    /// every revision it will announce at once. `currentOnly` as for `changes`, as of `through`
    /// (`recorded`).
    public func changesPage(since: Int, through: Int, limit: Int, docIDs: Set<DocumentID>? = nil,
                            currentOnly: Bool = false) -> (revisions: [RecordedRevision], next: Int?) {
        var page: [RecordedRevision] = []
        for e in recorded(since: since, docIDs: docIDs, currentAsOf: currentOnly ? through : nil) {
            if e.seq > through { break }
            // A damaged log can repeat a sequence: a page never cuts one in two (the next page
            // starts after it), so it ends only where the sequence changes.
            if page.count >= limit, let last = page.last?.seq, e.seq != last { return (page, last) }
            page.append(Self.recordedRevision(e))
        }
        return (page, nil)
    }

    private static func recordedRevision(_ e: FeedRevision) -> RecordedRevision {
        let node = e.node
        return RecordedRevision(seq: e.seq, doc: e.doc, rev: node.rev, deleted: node.deleted, size: node.size,
                         origin: node.origin, object: node.object, author: node.author, pack: node.pack)
    }

    /// How many revisions `changes(since:docIDs:currentOnly:)` would list, counted without building them:
    /// the total a sender announces on `subChanges`, so the subscriber's progress bar knows it
    /// from the start.
    public func changeCount(since: Int, docIDs: Set<DocumentID>? = nil, currentOnly: Bool = false) -> Int {
        recorded(since: since, docIDs: docIDs, currentAsOf: currentOnly ? index.lastSeq : nil).reduce(0) { count, _ in count + 1 }
    }

    /// The feed's entries after `since` (of `docIDs` only, if given) with their nodes, lazily:
    /// what `changes` lists and `changeCount` counts. With `currentAsOf`, only the revisions
    /// that were their document's current one once the log reached that sequence
    /// (`wasCurrent`): in a document recorded since, the one that was current then (leaving it
    /// out would leave the document out of a one-shot pass, which ends there).
    private func recorded(since: Int, docIDs: Set<DocumentID>?, currentAsOf: Int?) -> some Sequence<FeedRevision> {
        index.buildFeed()
        let index = self.index
        let lookup = SequenceLookup(index: index)
        // As of a sequence, nothing after it is listed: a page stops there instead of looking
        // at every entry recorded since its pass began.
        let entries = currentAsOf.map { last in index.feed(after: since).prefix { $0.seq <= last } } ?? index.feed(after: since)
        return entries.lazy.compactMap { e in
            let doc = index.document(of: e)
            if let docIDs, !docIDs.contains(doc) { return nil }
            guard let node = lookup.node(e) else { return nil }
            // A revision `compact` took the body of has nothing to send: a peer learns its id
            // from its descendants' histories (announced, it would be a 410 and a failure).
            if node.object == nil && !node.deleted { return nil }
            if let currentAsOf {
                guard Self.wasCurrent(node, in: index.tree(of: e), asOf: currentAsOf) else { return nil }
            }
            return FeedRevision(seq: e.seq, doc: doc, node: node)
        }
    }

    /// Whether `node` was its document's current revision (the winning leaf, `WinnerRule`) once
    /// the log reached `seq`: the current one now, unless the document was recorded since;
    /// then the best of the revisions that had no children at that sequence.
    static func wasCurrent(_ node: RevisionNode, in tree: RevisionTree, asOf seq: Int) -> Bool {
        if tree.newestSeq <= seq { return tree.current?.rev == node.rev }
        guard node.seq <= seq else { return false }
        // Rare (a document edited while a pass runs): its revisions recorded by then, and
        // which of them had a child by then, found exactly (a live ancestor taken for a leaf
        // would beat a deletion).
        var recorded: [RevisionNode] = []
        var parents = Set<RevisionID>()
        tree.forEachNode { n in
            guard n.seq != 0, n.seq <= seq else { return }
            recorded.append(n)
            if let parent = n.parent { parents.insert(parent) }
        }
        let leaves = recorded.filter { !parents.contains($0.rev) }
        return WinnerRule.ranked(leaves) { ($0.rev, $0.deleted) }.first?.rev == node.rev
    }

    /// A feed entry with its document and its node.
    private struct FeedRevision {
        let seq: Int
        let doc: DocumentID
        let node: RevisionNode
    }

    /// What to answer a peer announcing `rev` of `doc`: nil when it is already here (not
    /// wanted); otherwise this folder's leaves of that document that could be its ancestors
    /// (lower generation), best first, at most `limit`, so the sender can cut its history.
    public func knownAncestors(of rev: RevisionID, doc: DocumentID, limit: Int = 20) -> [RevisionID]? {
        guard let tree = index[doc] else { return [] }
        if let node = tree.nodes[rev], node.seq != 0 { return nil }
        let leaves = tree.leafNodes.filter { $0.rev.generation < rev.generation }
        return Array(WinnerRule.ranked(leaves) { ($0.rev, $0.deleted) }.prefix(limit).map(\.rev))
    }

    /// The history to send with `rev` (parent first), stopping at the first revision the
    /// receiver said it knows (included, so it can link the branch), at most `limit` long.
    public func historyToSend(_ rev: RevisionID, doc: DocumentID, knownByPeer: [RevisionID], limit: Int = 10_000) -> [RevisionID] {
        guard let tree = index[doc] else { return [] }
        let known = Set(knownByPeer)
        var out: [RevisionID] = []
        for r in tree.history(of: rev).dropFirst() {
            guard out.count < limit else { break }
            out.append(r)
            if known.contains(r) { break }
        }
        return out
    }
}

/// Finds the feed's revisions in their trees, by sequence, during one walk of the feed.
final class SequenceLookup {
    private let index: DocumentIndex
    /// A damaged log can give one document two lines of one sequence (the feed then lists the
    /// pair twice): the first asking gets one revision, the second the other.
    private let repeatsPossible: Bool
    private var asked: [Pair: Int] = [:]

    private struct Pair: Hashable {
        let position: Int32
        let seq: Int
    }

    /// A lookup for one walk of `index`'s feed.
    init(index: DocumentIndex) {
        self.index = index
        self.repeatsPossible = index.sequencesMayRepeat
    }

    /// The node of the revision the feed entry `e` names.
    func node(_ e: DocumentIndex.FeedEntry) -> RevisionNode? {
        let tree = index.tree(of: e)
        guard repeatsPossible else { return tree.node(seq: e.seq) }
        let candidates = tree.nodes(seq: e.seq)
        guard candidates.count > 1 else { return candidates.first }
        let pair = Pair(position: e.position, seq: e.seq)
        let turn = asked[pair, default: 0]
        asked[pair] = turn + 1
        return candidates.sorted { $0.rev < $1.rev }[turn % candidates.count]
    }
}
