/// What the watcher reports to the indexer.
public enum WatchOutput: Sendable, Equatable {
    /// These paths (relative, `/`-separated) settled: read them.
    case settled([String])
    /// A directory (relative) was removed or moved away: every document under it is gone.
    case directoryGone(String)
    /// Events may have been lost (queue overflow, watch limit): scan the whole folder.
    case rescan(reason: String)
}
