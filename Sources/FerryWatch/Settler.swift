/// Decides when a changed path has settled enough to be read: one save is one revision, and
/// a save by rename is an edit, not a deletion and a creation.
///
/// A path whose writer has finished (`IN_CLOSE_WRITE`, a rename onto it) settles after
/// `window` of quiet; a path that was modified but not closed (a writer still at work, or one
/// that keeps the file open) settles only after `openWindow` of quiet. A path that went away
/// (removed, or renamed away: vim's and emacs's saves rename the file to a backup before
/// writing the new one) is reported gone only once it has stayed away for `absenceWindow`;
/// if it comes back before, it is one edit. Every further event on a path restarts its clock,
/// so bursts coalesce.
public struct Settler: Sendable {
    /// What happened to a path.
    public enum Kind: Sendable {
        /// The writer closed it, or it was renamed into place: complete.
        case completed
        /// Written to (or created) and maybe still open.
        case modified
        /// Removed or renamed away: gone, unless it comes back within the absence window.
        case removed
    }

    /// What is due for reading.
    public struct Due: Sendable, Equatable {
        /// Paths that settled and exist: read them.
        public var present: [String] = []
        /// Paths that have been away for the whole absence window: their deletion stands.
        public var gone: [String] = []
        /// Directories removed or renamed away an absence window ago: every document under
        /// them is looked at again (what came back is an edit, what did not is deleted).
        public var directoriesGone: [String] = []

        /// True when nothing is due.
        public var isEmpty: Bool { present.isEmpty && gone.isEmpty && directoriesGone.isEmpty }
    }

    /// Quiet time after a completed write, in nanoseconds.
    public let window: UInt64
    /// Quiet time after a modification without close, in nanoseconds.
    public let openWindow: UInt64
    /// How long a path must stay away before its deletion counts, in nanoseconds.
    public let absenceWindow: UInt64

    private struct Entry {
        var deadline: UInt64
        /// When the path was first seen away, while it stays away.
        var absentSince: UInt64?
    }
    private var files: [String: Entry] = [:]
    private var directories: [String: UInt64] = [:]

    /// A settler with its windows in nanoseconds.
    public init(window: UInt64, openWindow: UInt64, absenceWindow: UInt64 = 500_000_000) {
        self.window = window
        self.openWindow = openWindow
        self.absenceWindow = absenceWindow
    }

    /// Notes an event on `path` at time `now`.
    public mutating func note(_ path: String, _ kind: Kind, now: UInt64) {
        switch kind {
        case .completed:
            files[path] = Entry(deadline: now + window)
        case .modified:
            files[path] = Entry(deadline: now + openWindow)
        case .removed:
            let since = files[path]?.absentSince ?? now
            files[path] = Entry(deadline: since + absenceWindow, absentSince: since)
        }
    }

    /// Notes that the directory `path` was removed or renamed away at `now`.
    public mutating func noteDirectoryRemoved(_ path: String, now: UInt64) {
        directories[path] = now + absenceWindow
    }

    /// What is due at `now`, forgotten once returned. `exists` tells whether a path is there
    /// now: a due path that is not, and has not been away for the absence window yet, waits
    /// until it has.
    public mutating func takeDue(now: UInt64, exists: (String) -> Bool) -> Due {
        var due = Due()
        for (path, entry) in files where entry.deadline <= now {
            if exists(path) {
                due.present.append(path)
                files[path] = nil
            } else if let since = entry.absentSince, now - since >= absenceWindow {
                due.gone.append(path)
                files[path] = nil
            } else {
                let since = entry.absentSince ?? now
                files[path] = Entry(deadline: since + absenceWindow, absentSince: since)
            }
        }
        for (path, deadline) in directories where deadline <= now {
            due.directoriesGone.append(path)
            directories[path] = nil
        }
        due.present.sort()
        due.gone.sort()
        due.directoriesGone.sort()
        return due
    }

    /// The earliest deadline, if anything is pending.
    public var nextDeadline: UInt64? {
        [files.values.map(\.deadline).min(), directories.values.min()].compactMap { $0 }.min()
    }

    /// Number of paths waiting.
    public var pendingCount: Int { files.count + directories.count }
}
