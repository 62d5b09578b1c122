import FerryCore

/// A document whose current revision changed after some sequence: what a `changes`
/// message announces.
public struct ChangedDocument: Sendable, Equatable {
    /// The local sequence of the current revision.
    public var seq: Int
    /// The document.
    public var doc: DocumentID
    /// Its current revision.
    public var rev: RevisionID
    /// True when that revision is a deletion.
    public var deleted: Bool
    /// Body size.
    public var size: Int
    /// Where the revision came from: "local" or the peer id it was received from.
    public var origin: String
    /// Its body's object (nil for a deletion).
    public var object: BlobDigest?
}

extension FolderStore {
    /// Documents whose current revision has a sequence above `since`, in sequence order, at
    /// most `limit`, optionally only `docIDs`. Only the winning leaf of each document is
    /// announced: the other peer resolves conflicts itself, deterministically, so losing
    /// branches and the revisions that close them need not travel.
    public func changes(since: Int, limit: Int = .max, docIDs: Set<DocumentID>? = nil) -> [ChangedDocument] {
        var out: [ChangedDocument] = []
        for (doc, tree) in index.trees {
            if let docIDs, !docIDs.contains(doc) { continue }
            guard let cur = tree.current, cur.seq > since else { continue }
            out.append(ChangedDocument(seq: cur.seq, doc: doc, rev: cur.rev, deleted: cur.deleted, size: cur.size, origin: cur.origin,
                                       object: cur.object))
        }
        out.sort { $0.seq < $1.seq }
        return out.count > limit ? Array(out.prefix(limit)) : out
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
