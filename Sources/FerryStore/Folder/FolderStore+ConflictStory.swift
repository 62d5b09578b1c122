import FerryCore

/// What one side of a closed conflict set that the result does not hold: the story
/// `ferry conflicts` tells, the same on every peer (it is computed from the bodies, which
/// every peer has, not from what happened where).
public struct LostValue: Sendable, Equatable {
    /// Where, in `JSONDiff.render` notation.
    public var path: String
    /// What that side had there (nil: it had removed it).
    public var had: JSONValue?
    /// What the result holds there (nil: nothing).
    public var kept: JSONValue?
}

extension FolderStore {
    /// The values the winner and the loser of a closed conflict each set (changed from their
    /// merge base) that `result`, the revision that closed it on the winning side, does not
    /// hold. Nil when a body it needs is not here (compacted, the merge base's included) or
    /// the document is not JSON.
    public func lostValues(_ doc: DocumentID, winner: RevisionID, loser: RevisionID, result: RevisionID)
        -> (winner: [LostValue], loser: [LostValue])? {
        guard doc.kind == .json, let tree = index[doc],
              let w = tree.nodes[winner], let l = tree.nodes[loser], let r = tree.nodes[result],
              let winnerBody = try? jsonBody(of: w, doc: doc), let loserBody = try? jsonBody(of: l, doc: doc),
              let resultBody = try? jsonBody(of: r, doc: doc) else { return nil }
        // The newest common ancestor with a body; none (unrelated first revisions, or only a
        // deletion in common): the empty object. Ancestors whose bodies were all compacted:
        // unknown, not guessed (against the empty object every value a side holds would look
        // like its change).
        let bases = tree.mergeBases(winner, loser).compactMap { tree.nodes[$0] }
        let base = bases.filter(\.hasBody).max { $0.rev < $1.rev }
        guard base != nil || !bases.contains(where: { !$0.deleted }) else { return nil }
        let baseBody = base.flatMap { try? jsonBody(of: $0, doc: doc) } ?? .object([:])
        func lost(_ side: JSONValue, against other: JSONValue) -> [LostValue] {
            MergeLoss.lost(base: baseBody, side: side, other: other, result: resultBody).map {
                LostValue(path: JSONDiff.render($0.path), had: $0.had, kept: $0.kept)
            }
        }
        return (lost(winnerBody, against: loserBody), lost(loserBody, against: winnerBody))
    }
}
