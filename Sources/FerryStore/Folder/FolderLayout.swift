/// Where everything lives in a ferry folder.
public struct FolderLayout: Sendable {
    /// The synced folder.
    public let root: String

    /// A layout for `root` (no trailing slash).
    public init(root: String) {
        var r = root
        while r.count > 1 && r.hasSuffix("/") { r.removeLast() }
        self.root = r
    }

    /// `.ferry/`.
    public var stateDirectory: String { root + "/.ferry" }
    /// `.ferry/folder.json`.
    public var folderFile: String { stateDirectory + "/folder.json" }
    /// `.ferry/revs.log`.
    public var logFile: String { stateDirectory + "/revs.log" }
    /// `.ferry/objects`.
    public var objectsDirectory: String { stateDirectory + "/objects" }
    /// `.ferry/tmp`: temporary object files (same filesystem as objects, never synced).
    public var tempDirectory: String { stateDirectory + "/tmp" }
    /// `.ferry/lock`.
    public var lockFile: String { stateDirectory + "/lock" }
    /// `.ferry/statcache`: file fingerprints as last recorded (a hint for scans).
    public var statCacheFile: String { stateDirectory + "/statcache" }
    /// `.ferryignore`.
    public var ignoreFile: String { root + "/.ferryignore" }

    /// The absolute path of a document's file.
    public func path(of doc: String) -> String { root + "/" + doc }
}
