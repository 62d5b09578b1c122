#if canImport(Glibc)
import Glibc
#endif

/// Which paths are never synced: `.ferry/`, editor droppings, ferry's and sed's temporary
/// files, and the patterns of `.ferryignore` (gitignore syntax: `*`, `?`, `[…]`, `**`, a
/// leading `/` or inner `/` anchors to the folder, a trailing `/` matches directories only,
/// `!` re-includes; the last matching pattern decides).
public struct IgnoreRules: Sendable {
    /// One parsed pattern.
    struct Pattern: Sendable {
        /// Its components, each compiled (`nil` stands for `**`).
        let components: [NameMatcher?]
        let negated: Bool
        let directoryOnly: Bool
        /// For an unanchored pattern (`**/<glob>`), a matcher of the last path component alone.
        let basename: NameMatcher?
    }

    /// Matches one path component; the common glob shapes are compiled to byte comparisons
    /// (scans test every file of a folder against every pattern), the rest go to `fnmatch`.
    enum NameMatcher: Sendable {
        case exact([UInt8])
        case prefix([UInt8])
        case suffix([UInt8])
        case prefixSuffix([UInt8], [UInt8])
        case glob(String)

        init(_ glob: String) {
            let special: Set<UInt8> = [UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "\\")]
            let bytes = Array(glob.utf8)
            let stars = bytes.indices.filter { bytes[$0] == UInt8(ascii: "*") }
            let others = bytes.filter { special.contains($0) && $0 != UInt8(ascii: "*") }
            guard others.isEmpty, stars.count <= 1 else { self = .glob(glob); return }
            guard let star = stars.first else { self = .exact(bytes); return }
            let head = Array(bytes[..<star]), tail = Array(bytes[(star + 1)...])
            if tail.isEmpty { self = .prefix(head) } else if head.isEmpty { self = .suffix(tail) } else { self = .prefixSuffix(head, tail) }
        }

        /// True when the component `n` (its UTF-8 bytes) matches.
        func matches(_ n: UnsafeBufferPointer<UInt8>) -> Bool {
            func head(_ p: [UInt8]) -> Bool { n.count >= p.count && n.prefix(p.count).elementsEqual(p) }
            func tail(_ s: [UInt8]) -> Bool { n.count >= s.count && n.suffix(s.count).elementsEqual(s) }
            switch self {
            case .exact(let e): return n.elementsEqual(e)
            case .prefix(let p): return head(p)
            case .suffix(let s): return tail(s)
            case .prefixSuffix(let p, let s): return n.count >= p.count + s.count && head(p) && tail(s)
            case .glob(let g): return fnmatch(g, String(decoding: n, as: UTF8.self), 0) == 0
            }
        }
    }

    private var patterns: [Pattern] = []

    /// Editor droppings and temporary files ignored out of the box (SPEC §1), plus ferry's own
    /// temporary files and `.ferryignore` itself (local configuration, like Syncthing's .stignore).
    public static let builtIn = [
        "*.swp", "*.swx", "*~", ".#*", "\\#*#", "4913", "*.tmp", ".~lock.*#",
        ".ferry-tmp-*", "/.ferryignore", "/.ferry/",
        // Version control keeps its own history (one commit would be dozens of revisions);
        // downloads in progress sync once complete, under their final name; desktop droppings.
        ".git/", ".hg/", ".svn/", "*.part", "*.crdownload", ".DS_Store", "Thumbs.db",
    ]

    /// The built-in rules alone: what no folder ever records, so what no peer may send.
    public static let builtInOnly = IgnoreRules()

    /// The built-in rules followed by the lines of a `.ferryignore` text.
    public init(ferryignore: String = "") {
        for line in Self.builtIn { add(line.utf8) }
        // Lines end at the byte "\n": "\r\n" is one Swift Character, which a split at "\n"
        // would not split, and a file saved with CRLF endings would be one line of no use.
        for line in ferryignore.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            add(line)
        }
    }

    /// Loads `.ferryignore` from a folder (missing file: built-ins only).
    public static func load(root: String) -> IgnoreRules {
        let text = (try? FileSystem.readFile(root + "/.ferryignore")).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return IgnoreRules(ferryignore: text)
    }

    private mutating func add(_ raw: some Collection<UInt8>) {
        // Read as bytes throughout, like the paths matched: a mark combining with a line's
        // first or last character would otherwise hide a "#", "!", "\\", "\r" or space.
        var bytes = Array(raw)
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        while bytes.last == UInt8(ascii: " ") && !(bytes.count >= 2 && bytes[bytes.count - 2] == UInt8(ascii: "\\")) { bytes.removeLast() }
        if bytes.isEmpty || bytes.first == UInt8(ascii: "#") { return }
        var negated = false
        if bytes.first == UInt8(ascii: "!") { negated = true; bytes.removeFirst() }
        if bytes.first == UInt8(ascii: "\\") { bytes.removeFirst() }
        let slash = UInt8(ascii: "/")
        var directoryOnly = false
        if bytes.last == slash { directoryOnly = true; bytes.removeLast() }
        let anchored = bytes.contains(slash)
        if bytes.first == slash { bytes.removeFirst() }
        if bytes.isEmpty { return }
        var components: [NameMatcher?] = FileSystem.components(of: String(decoding: bytes, as: UTF8.self)).map { $0 == "**" ? nil : NameMatcher($0) }
        let basename = !anchored && components.count == 1 ? components[0] : nil
        if !anchored { components.insert(nil, at: 0) }
        patterns.append(Pattern(components: components, negated: negated, directoryOnly: directoryOnly, basename: basename))
    }

    /// True when the `/`-separated relative path is ignored, or lies inside an ignored directory.
    public func isIgnored(_ relativePath: String, isDirectory: Bool) -> Bool {
        // Read in place, components as byte ranges: a peer's revision is tested up to three
        // times (the built-in rules as it arrives and as it is stored, the folder's rules).
        relativePath.utf8.withContiguousStorageIfAvailable { isIgnored(Path($0), isDirectory: isDirectory) }
            ?? Array(relativePath.utf8).withUnsafeBufferPointer { isIgnored(Path($0), isDirectory: isDirectory) }
    }

    private func isIgnored(_ path: Path, isDirectory: Bool) -> Bool {
        guard !path.parts.isEmpty else { return false }
        for end in 1..<path.parts.count where decide(path, path.parts[0..<end], isDirectory: true) { return true }
        return decide(path, path.parts[...], isDirectory: isDirectory)
    }

    /// A relative path's bytes and the range of each of its non-empty components (valid only
    /// inside the closure that lent the bytes).
    private struct Path {
        let bytes: UnsafeBufferPointer<UInt8>
        let parts: [Range<Int>]

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            var parts: [Range<Int>] = [], start = 0
            for i in 0...bytes.count where i == bytes.count || bytes[i] == UInt8(ascii: "/") {
                if i > start { parts.append(start..<i) }
                start = i + 1
            }
            self.parts = parts
        }

        func name(_ part: Range<Int>) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: bytes[part]) }
    }

    /// The rule for exactly the path made of `parts` (its parents already checked).
    private func decide(_ path: Path, _ parts: ArraySlice<Range<Int>>, isDirectory: Bool) -> Bool {
        var ignored = false
        for p in patterns where (!p.directoryOnly || isDirectory) && ignored == p.negated {
            let hit = p.basename.map { $0.matches(path.name(parts[parts.endIndex - 1])) } ?? Self.match(p.components[...], path, parts)
            if hit { ignored = !p.negated }
        }
        return ignored
    }

    /// The rule for one entry met while walking down from the folder: its parents were
    /// already found not ignored, so only the entry itself is tested.
    public func isIgnoredEntry(parent: [String], name: String, isDirectory: Bool) -> Bool {
        Array((parent + [name]).joined(separator: "/").utf8).withUnsafeBufferPointer {
            let path = Path($0)
            return !path.parts.isEmpty && decide(path, path.parts[...], isDirectory: isDirectory)
        }
    }

    private static func match(_ pattern: ArraySlice<NameMatcher?>, _ path: Path, _ parts: ArraySlice<Range<Int>>) -> Bool {
        guard let first = pattern.first else { return parts.isEmpty }
        guard let first else {  // `**`: any number of components
            var rest = parts
            while true {
                if match(pattern.dropFirst(), path, rest) { return true }
                if rest.isEmpty { return false }
                rest = rest.dropFirst()
            }
        }
        guard let part = parts.first, first.matches(path.name(part)) else { return false }
        return match(pattern.dropFirst(), path, parts.dropFirst())
    }

    /// `sed -i` writes `sedXXXXXX` (six random characters) beside the file, then renames it.
    public static func isSedTemporary(_ name: String) -> Bool {
        name.utf8.count == 9 && name.hasPrefix("sed") && name.utf8.dropFirst(3).allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) }
    }
}

/// A folder's ignore rules as last read, with the fingerprint `.ferryignore` had then: read
/// again only when that changes (the store's writer and the sessions each keep one).
struct IgnoreFileCache: Sendable {
    private var loaded: (fingerprint: FileFingerprint?, rules: IgnoreRules)?

    /// The rules last read, without looking at the file (nil before the first look).
    var last: IgnoreRules? { loaded?.rules }

    /// The rules of the folder at `layout` now: `.ferryignore` is looked at, and read again if
    /// it changed since the last look.
    mutating func current(_ layout: FolderLayout) -> IgnoreRules {
        let fingerprint = FileFingerprint.of(layout.ignoreFile)
        if let loaded, loaded.fingerprint == fingerprint { return loaded.rules }
        let rules = IgnoreRules.load(root: layout.root)
        loaded = (fingerprint, rules)
        return rules
    }
}
