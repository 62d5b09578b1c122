import FerryCore

/// Decides a value clash in a merge from the document's history: each side's value was
/// written by some revisions (the first, walking back, whose parents do not hold it); a side
/// whose history holds every write of the other side's value had seen it and replaced it, so
/// its value stands. When neither or both did, the clash is a true tie and the values
/// decide (`JSONMerge.clash`). This is what a multi-value register does: a value someone
/// has overwritten never comes back through a merge that did not know it was overwritten.
/// A file document's bytes are one value (their digest) at the path `[]`.
final class ClashHistory {
    private let store: FolderStore
    private let doc: DocumentID
    private let tree: RevisionTree
    private let winner: RevisionID, loser: RevisionID
    private lazy var winnerAncestry = tree.ancestry(of: winner)
    private lazy var loserAncestry = tree.ancestry(of: loser)
    private var bodies: [RevisionID: JSONValue?] = [:]
    /// Most revisions walked back to find a value's writers, per side; beyond it the
    /// history cannot tell (a value that old is rarely in a clash).
    static let walkLimit = 1_000

    init(store: FolderStore, doc: DocumentID, tree: RevisionTree, winner: RevisionID, loser: RevisionID) {
        self.store = store
        self.doc = doc
        self.tree = tree
        self.winner = winner
        self.loser = loser
    }

    /// True for the winner's value, false for the loser's, nil for a tie.
    func decide(_ path: [String], _ a: JSONValue?, _ b: JSONValue?) -> Bool? {
        guard let writersOfA = writers(of: a, at: path, from: winner),
              let writersOfB = writers(of: b, at: path, from: loser) else { return nil }
        // Seen means every write of it: a value written again by a revision the other side
        // never saw (a removal repeated after seeing that side's value) was not replaced
        // there (simulation seed 17295).
        let loserSawA = writersOfA.allSatisfy { loserAncestry.contains($0) }
        let winnerSawB = writersOfB.allSatisfy { winnerAncestry.contains($0) }
        if loserSawA && !winnerSawB { return false }
        if winnerSawB && !loserSawA { return true }
        return nil
    }

    /// The revisions that wrote `value` at `path` in `rev`'s history: walking back while the
    /// value stays the same, those none of whose parents hold it. Nil when a body on the way is
    /// not here or the walk is too long.
    private func writers(of value: JSONValue?, at path: [String], from rev: RevisionID) -> Set<RevisionID>? {
        var found: Set<RevisionID> = []
        var seen: Set<RevisionID> = [rev]
        var stack = [rev]
        while let r = stack.popLast() {
            guard seen.count <= Self.walkLimit else { return nil }
            var holding: [RevisionID] = []
            for p in [tree.nodes[r]?.parent, tree.mergedParent(of: r)].compactMap({ $0 }) {
                guard let body = body(p) else { return nil }
                if Self.value(at: path, in: body) == value { holding.append(p) }
            }
            if holding.isEmpty { found.insert(r) }
            for p in holding where seen.insert(p).inserted { stack.append(p) }
        }
        return found
    }

    /// A file document's bytes as a value for `decide`, at the path `[]`: their digest.
    static func fileValue(_ object: BlobDigest) -> JSONValue { .string(object.hex) }

    /// A revision's body; `.some(nil)` for a deletion (it holds nothing), nil when not here.
    /// A file document's is `fileValue` of its bytes.
    private func body(_ rev: RevisionID) -> JSONValue?? {
        if let cached = bodies[rev] { return cached }
        guard let node = tree.nodes[rev] else { return nil }
        let value: JSONValue?
        if node.deleted {
            value = nil
        } else if doc.kind == .file {
            guard let object = node.object else { return nil }
            value = Self.fileValue(object)
        } else {
            guard node.hasBody, let parsed = try? store.jsonBody(of: node, doc: doc) else { return nil }
            value = parsed
        }
        bodies[rev] = value
        return .some(value)
    }

    private static func value(at path: [String], in body: JSONValue?) -> JSONValue? {
        var current = body
        for key in path { current = current?.objectValue?[key] }
        return current
    }
}
