/// Tells a stale save from an edit of the newest content.
///
/// A tool that reads a document, changes it and writes it back (an editor, a script) may
/// have read it just before ferry wrote a peer's revision over it. What it writes then holds
/// the old values wherever the peer changed something: recorded as an edit of the peer's
/// revision, it would quietly undo the peer's change. `undoes` is the test the store applies
/// to a save that follows such a write closely: where the write changed a value and the save
/// holds the value from before the write, the save was made from the older content.
public enum StaleSave {
    /// True when `save`, somewhere `before` → `after` changed a value, holds the `before`
    /// value again. Objects are compared member by member; arrays of one length element by
    /// element; arrays whose length changed by the elements the change added or removed.
    public static func undoes(before: JSONValue, after: JSONValue, save: JSONValue) -> Bool {
        undoes(before, after, save)
    }

    /// `undoes` where nil is a member that does not exist.
    static func undoes(_ before: JSONValue?, _ after: JSONValue?, _ save: JSONValue?) -> Bool {
        if before == after { return false }
        if save == before { return true }
        switch (before, after, save) {
        case let (.object(b)?, .object(a)?, .object(s)?):
            for key in Set(b.keys).union(a.keys) where undoes(b[key], a[key], s[key]) { return true }
            return false
        case let (.array(b)?, .array(a)?, .array(s)?):
            if b.count == a.count && a.count == s.count {
                return b.indices.contains { undoes(b[$0], a[$0], s[$0]) }
            }
            // An element the change added that the save lacks, or one it removed that the
            // save still has.
            return a.contains { !b.contains($0) && !s.contains($0) } || b.contains { !a.contains($0) && s.contains($0) }
        default:
            return false
        }
    }
}
