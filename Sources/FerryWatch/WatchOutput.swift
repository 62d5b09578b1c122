/// What the watcher reports to the indexer.
public enum WatchOutput: Sendable, Equatable {
    /// These paths (relative, `/`-separated) settled and were there: read them (one that has
    /// gone again since is not a deletion yet).
    case settled([String])
    /// These paths went away and stayed away for the absence window: record their deletion
    /// (unless they are back).
    case gone([String])
    /// A directory (relative) was removed or moved away an absence window ago: every document
    /// under it is looked at again (what is not back is deleted).
    case directoryGone(String)
    /// A directory's permissions or owner changed (relative; "" is the folder): a document
    /// held back because its directory could not be written may be written now.
    case permissionsChanged(String)
    /// Events may have been lost (queue overflow, watch limit), or a change could not be
    /// recorded (a full disk) and is tried again: scan the whole folder.
    case rescan(reason: String)
    /// Documents were held back (their directory could not be written) a while ago: try
    /// them again, since making it writable by a remount sends no event.
    case retryHeldBack
}
