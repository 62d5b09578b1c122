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
        let components: [String]
        let negated: Bool
        let directoryOnly: Bool
    }

    private var patterns: [Pattern] = []

    /// Editor droppings and temporary files ignored out of the box (SPEC §1), plus ferry's own
    /// temporary files and `.ferryignore` itself (local configuration, like Syncthing's .stignore).
    public static let builtIn = [
        "*.swp", "*.swx", "*~", ".#*", "\\#*#", "4913", "*.tmp", ".~lock.*#",
        ".ferry-tmp-*", "/.ferryignore", "/.ferry/",
    ]

    /// The built-in rules followed by the lines of a `.ferryignore` text.
    public init(ferryignore: String = "") {
        for line in Self.builtIn { add(line) }
        for line in ferryignore.split(separator: "\n", omittingEmptySubsequences: false) { add(String(line)) }
    }

    /// Loads `.ferryignore` from a folder (missing file: built-ins only).
    public static func load(root: String) -> IgnoreRules {
        let text = (try? FileSystem.readFile(root + "/.ferryignore")).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return IgnoreRules(ferryignore: text)
    }

    private mutating func add(_ raw: String) {
        var line = raw
        if line.hasSuffix("\r") { line.removeLast() }
        while line.hasSuffix(" ") && !line.hasSuffix("\\ ") { line.removeLast() }
        if line.isEmpty || line.hasPrefix("#") { return }
        var negated = false
        if line.hasPrefix("!") { negated = true; line.removeFirst() }
        if line.hasPrefix("\\") { line.removeFirst() }
        var directoryOnly = false
        if line.hasSuffix("/") { directoryOnly = true; line.removeLast() }
        let anchored = line.contains("/")
        if line.hasPrefix("/") { line.removeFirst() }
        if line.isEmpty { return }
        var components = line.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if !anchored { components.insert("**", at: 0) }
        patterns.append(Pattern(components: components, negated: negated, directoryOnly: directoryOnly))
    }

    /// True when the `/`-separated relative path is ignored, or lies inside an ignored directory.
    public func isIgnored(_ relativePath: String, isDirectory: Bool) -> Bool {
        let parts = relativePath.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !parts.isEmpty else { return false }
        for end in 1..<parts.count where decide(Array(parts[0..<end]), isDirectory: true) { return true }
        return decide(parts, isDirectory: isDirectory)
    }

    /// The rule for exactly this path (its parents already checked).
    func decide(_ parts: [String], isDirectory: Bool) -> Bool {
        var ignored = false
        for p in patterns where (!p.directoryOnly || isDirectory) && Self.match(p.components[...], parts[...]) {
            ignored = !p.negated
        }
        return ignored
    }

    static func match(_ pattern: ArraySlice<String>, _ path: ArraySlice<String>) -> Bool {
        guard let first = pattern.first else { return path.isEmpty }
        if first == "**" {
            var rest = path
            while true {
                if match(pattern.dropFirst(), rest) { return true }
                if rest.isEmpty { return false }
                rest = rest.dropFirst()
            }
        }
        guard let name = path.first, fnmatch(first, name, 0) == 0 else { return false }
        return match(pattern.dropFirst(), path.dropFirst())
    }

    /// `sed -i` writes `sedXXXXXX` (six random characters) beside the file, then renames it.
    public static func isSedTemporary(_ name: String) -> Bool {
        name.utf8.count == 9 && name.hasPrefix("sed") && name.utf8.dropFirst(3).allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) }
    }
}
