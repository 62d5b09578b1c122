import FerryCore

extension FolderStore {
    /// The parent a first proposal of `rev` names: its own (nil for a first revision). A peer
    /// that has the document at another revision says which (`proposalParent`).
    public func proposedParent(of rev: RevisionID, doc: DocumentID) -> RevisionID? {
        index[doc]?.nodes[rev]?.parent
    }

    /// The parent to propose `rev` of `doc` on again once the peer answered that its current
    /// revision is `theirs`: `theirs` when `rev`'s history (its parents, not a merge's second
    /// parent) reaches it, else nil. A peer that
    /// refuses conflicts takes only a revision whose history reaches its current one (LiteCore
    /// with `noIncomingConflicts` refuses to store any other, even a proposal it took), so a
    /// merge recorded here on this folder's own branch cannot go to it.
    public func proposalParent(for rev: RevisionID, doc: DocumentID, peerCurrent theirs: RevisionID) -> RevisionID? {
        guard let tree = index[doc], tree.contains(rev), tree.history(of: rev).contains(theirs) else { return nil }
        return theirs
    }
}
