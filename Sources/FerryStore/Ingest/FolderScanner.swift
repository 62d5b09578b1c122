#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What identifies a file's state without reading it, as git's index does: a change of any
/// field means the content may have changed.
public struct FileFingerprint: Sendable, Equatable, Hashable {
    /// Inode number.
    public var inode: UInt64
    /// Size in bytes.
    public var size: Int
    /// Modification time in nanoseconds.
    public var mtime: Int
    /// Status-change time in nanoseconds.
    public var ctime: Int

    /// The fingerprint of a `stat`.
    public init(_ st: stat) {
        inode = UInt64(st.st_ino)
        size = Int(st.st_size)
        mtime = Int(st.st_mtim.tv_sec) * 1_000_000_000 + Int(st.st_mtim.tv_nsec)
        ctime = Int(st.st_ctim.tv_sec) * 1_000_000_000 + Int(st.st_ctim.tv_nsec)
    }

    /// The fingerprint of the file at `path`, or nil when there is none.
    public static func of(_ path: String) -> FileFingerprint? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return FileFingerprint(st)
    }
}

/// Walks a folder and lists its candidate documents, skipping `.ferry/` and ignored paths,
/// and reporting what cannot be synced (symlinks, devices, sockets, names that are not valid ids).
public struct FolderScanner {
    /// A regular file that is a document.
    public struct Found: Sendable {
        /// Its id.
        public var doc: DocumentID
        /// Its state.
        public var fingerprint: FileFingerprint
    }

    /// A path that is not synced, and why.
    public struct Skipped: Sendable, Equatable {
        /// Path relative to the folder.
        public var path: String
        /// Why, e.g. "symbolic link".
        public var reason: String
    }

    /// The folder.
    public let root: String
    /// What to ignore.
    public let rules: IgnoreRules

    /// A scanner.
    public init(root: String, rules: IgnoreRules) {
        self.root = root
        self.rules = rules
    }

    /// Prefix of the temp files ferry writes beside a document before renaming them over it.
    public static let temporaryPrefix = ".ferry-tmp-"

    /// A fresh temp file name in the directory of `path` (which the scan skips).
    static func temporaryPath(beside path: String) -> String {
        FileSystem.dirname(of: path) + "/" + temporaryPrefix + FileSystem.randomSuffix()
    }
    /// Why a temp file of ferry's is skipped: a writer was killed between write and rename.
    public static let interruptedWrite = "temp file of an interrupted write (removed by the folder's writer)"

    /// Every document file below `relativeDirectory` ("" for the whole folder), sorted by id
    /// unless `sorted` is false (a caller that only compares does not pay for the sort).
    public func scan(relativeDirectory: String = "", sorted: Bool = true) throws(StoreError) -> (found: [Found], skipped: [Skipped]) {
        var found: [Found] = []
        var skipped: [Skipped] = []
        let parts = FileSystem.components(of: relativeDirectory)
        var rootStat = stat()
        var above: Set<DirectoryIdentity> = []
        if lstat(root, &rootStat) == 0 { above.insert(DirectoryIdentity(rootStat)) }
        try walk(relativeDirectory, parts, above, &found, &skipped)
        if sorted { found.sort { $0.doc < $1.doc } }
        return (found, skipped)
    }

    /// A directory's device and inode: the same pair met again below itself is a loop (the
    /// folder, or a directory above, bind-mounted inside itself).
    struct DirectoryIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
        init(_ st: stat) {
            device = UInt64(st.st_dev)
            inode = UInt64(st.st_ino)
        }
    }

    private func walk(_ relative: String, _ parts: [String], _ above: Set<DirectoryIdentity>,
                      _ found: inout [Found], _ skipped: inout [Skipped]) throws(StoreError) {
        let dirPath = relative.isEmpty ? root : root + "/" + relative
        var above = above
        if !relative.isEmpty {
            var st = stat()
            guard lstat(dirPath, &st) == 0 else { return }
            guard above.insert(DirectoryIdentity(st)).inserted else {
                skipped.append(Skipped(path: relative, reason: "a directory above it, mounted inside itself (not synced)"))
                return
            }
        }
        let entries: [(name: String, type: FileSystem.EntryType)]
        do { entries = try FileSystem.listDirectoryEntries(dirPath) } catch where error.errno == ENOENT || error.errno == ENOTDIR {
            return
        }
        for (name, type) in entries {
            let rel = relative.isEmpty ? name : relative + "/" + name
            if relative.isEmpty && name == ".ferry" { continue }
            if name == ".ferry" {
                skipped.append(Skipped(path: rel, reason: "the state of a ferry folder inside this one (not synced)"))
                continue
            }
            if type == .directory {
                if rules.isIgnoredEntry(parent: parts, name: name, isDirectory: true) { continue }
                try walk(rel, parts + [name], above, &found, &skipped)
                continue
            }
            if IgnoreRules.isSedTemporary(name) { continue }
            if name.hasPrefix(Self.temporaryPrefix) {
                skipped.append(Skipped(path: rel, reason: Self.interruptedWrite))
                continue
            }
            guard let st = try FileSystem.lstat(root + "/" + rel) else { continue }
            let fileType = st.st_mode & S_IFMT
            if rules.isIgnoredEntry(parent: parts, name: name, isDirectory: fileType == S_IFDIR) { continue }
            switch fileType {
            case S_IFDIR:
                try walk(rel, parts + [name], above, &found, &skipped)
            case S_IFREG:
                do {
                    found.append(Found(doc: try DocumentID(rel), fingerprint: FileFingerprint(st)))
                } catch {
                    skipped.append(Skipped(path: rel, reason: error.reason))
                }
            case S_IFLNK: skipped.append(Skipped(path: rel, reason: "symbolic link (not synced)"))
            default: skipped.append(Skipped(path: rel, reason: "not a regular file (not synced)"))
            }
        }
    }
}
