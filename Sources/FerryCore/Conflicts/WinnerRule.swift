/// SPEC §2's winner rule between two leaves of a revision tree: a live revision beats a
/// deletion; then the higher generation; then the greater rev id.
public enum WinnerRule {
    /// True when leaf `a` wins over leaf `b`.
    public static func beats(_ a: (rev: RevisionID, deleted: Bool), _ b: (rev: RevisionID, deleted: Bool)) -> Bool {
        if a.deleted != b.deleted { return !a.deleted }
        return b.rev < a.rev
    }

    /// The leaves ordered best first.
    public static func ranked<T>(_ leaves: [T], by key: (T) -> (rev: RevisionID, deleted: Bool)) -> [T] {
        leaves.sorted { beats(key($0), key($1)) }
    }
}
