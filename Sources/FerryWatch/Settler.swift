/// Decides when a changed path has settled enough to be read: one save is one revision.
///
/// A path whose writer has finished (`IN_CLOSE_WRITE`, a rename onto it, a removal) settles
/// after `window` of quiet; a path that was modified but not closed (a writer still at work,
/// or one that keeps the file open) settles only after `openWindow` of quiet. Every further
/// event on the path restarts its clock, so bursts coalesce.
public struct Settler: Sendable {
    /// What happened to a path.
    public enum Kind: Sendable {
        /// The writer closed it, or it was renamed into place, or removed: complete.
        case completed
        /// Written to (or created) and maybe still open.
        case modified
    }

    /// Quiet time after a completed write, in nanoseconds.
    public let window: UInt64
    /// Quiet time after a modification without close, in nanoseconds.
    public let openWindow: UInt64
    private var deadlines: [String: (deadline: UInt64, open: Bool)] = [:]

    /// A settler with the two windows in nanoseconds.
    public init(window: UInt64, openWindow: UInt64) {
        self.window = window
        self.openWindow = openWindow
    }

    /// Notes an event on `path` at time `now`.
    public mutating func note(_ path: String, _ kind: Kind, now: UInt64) {
        switch kind {
        case .completed:
            deadlines[path] = (now + window, false)
        case .modified:
            deadlines[path] = (now + openWindow, true)
        }
    }

    /// Paths whose deadline has passed, sorted; they are forgotten.
    public mutating func takeDue(now: UInt64) -> [String] {
        var due: [String] = []
        for (path, entry) in deadlines where entry.deadline <= now { due.append(path) }
        for path in due { deadlines[path] = nil }
        return due.sorted()
    }

    /// The earliest deadline, if anything is pending.
    public var nextDeadline: UInt64? { deadlines.values.map(\.deadline).min() }

    /// Number of paths waiting.
    public var pendingCount: Int { deadlines.count }
}
