#if canImport(Glibc)
import Glibc
#endif

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
    /// `.ferry/packs`: small JSON bodies, a line each (`BodyPacks`).
    public var packsDirectory: String { stateDirectory + "/packs" }
    /// `.ferry/tmp`: temporary object files (same filesystem as objects, never synced).
    public var tempDirectory: String { stateDirectory + "/tmp" }
    /// `.ferry/lock`.
    public var lockFile: String { stateDirectory + "/lock" }
    /// `.ferry/statcache`: file fingerprints as last recorded (a hint for scans).
    public var statCacheFile: String { stateDirectory + "/statcache" }
    /// `.ferry/blob-aliases`: the SHA-1 name Couchbase Lite gives each blob it shared with this
    /// folder, one JSON line per blob (`BlobAliasFile`).
    public var blobAliasesFile: String { stateDirectory + "/blob-aliases" }
    /// `.ferryignore`.
    public var ignoreFile: String { root + "/.ferryignore" }

    /// The absolute path of a document's file.
    public func path(of doc: String) -> String { root + "/" + doc }

    /// Why a document's file cannot be read or written at its path, or nil: one of the
    /// directories above it (inside the folder) is a symbolic link, which ferry never follows
    /// (it could lead outside the folder), or is not a directory (a file of that name is
    /// here). Directories that do not exist yet are no problem: ferry makes them. Checked
    /// with `lstat` right before each read or write of a document's file (a group of a peer's
    /// revisions looks once per directory between flushes: docs/security.md).
    public func placementProblem(of doc: String) -> String? {
        var none: Set<String>?
        return placementProblem(of: doc, knownDirectories: &none)
    }

    /// `placementProblem(of:)` that does not look again at the directories in `known`, found
    /// to be directories by an earlier look, and adds those it finds (nil: remembers none).
    func placementProblem(of doc: String, knownDirectories known: inout Set<String>?) -> String? {
        let bytes = doc.utf8
        var next = bytes.startIndex
        // Each directory's path is a prefix of the id: no splitting (every revision a peer
        // sends passes here).
        while let slash = bytes[next...].firstIndex(of: UInt8(ascii: "/")) {
            next = bytes.index(after: slash)
            let relative = doc[..<slash]
            if known?.contains(String(relative)) == true { continue }
            var st = stat()
            guard lstat(root + "/" + relative, &st) == 0 else { return nil }
            switch st.st_mode & S_IFMT {
            case S_IFDIR: known?.insert(String(relative))
            case S_IFLNK: return "\(relative) is a symbolic link, which ferry does not follow"
            default: return "\(relative) is a file here, not a directory"
            }
        }
        return nil
    }
}
