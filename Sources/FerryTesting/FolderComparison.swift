import FerryCore
import FerryStore
import Foundation

/// Compares what two ferry folders show their users: the same files, JSON documents equal as
/// JSON values (`jq -S` equality), every other file byte-equal. `.ferry/` is not compared.
public enum FolderComparison {
    /// The user-visible files of `folder` (relative paths) that ferry syncs, sorted: editor
    /// droppings and what `.ferryignore` lists are not compared.
    public static func files(_ folder: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        let rules = IgnoreRules.load(root: folder)
        var out: [String] = []
        while let path = walker.nextObject() as? String {
            if path == ".ferry" { walker.skipDescendants(); continue }
            if rules.isIgnored(path, isDirectory: false) || path == ".ferryignore" { continue }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                out.append(path)
            }
        }
        return out.sorted()
    }

    /// Differences between the two folders, one sentence each; empty when they show the same.
    public static func differences(_ a: String, _ b: String, limit: Int = 10) -> [String] {
        let filesA = files(a), filesB = files(b)
        var out: [String] = []
        let onlyA = Set(filesA).subtracting(filesB), onlyB = Set(filesB).subtracting(filesA)
        out += onlyA.sorted().prefix(limit).map { "only in \(a): \($0)" }
        out += onlyB.sorted().prefix(limit).map { "only in \(b): \($0)" }
        for path in filesA where !onlyA.contains(path) {
            guard out.count < limit else { break }
            let x = FileManager.default.contents(atPath: a + "/" + path) ?? Data()
            let y = FileManager.default.contents(atPath: b + "/" + path) ?? Data()
            if x == y { continue }
            if path.hasSuffix(".json"), let vx = try? JSONParser.parse(Array(x)), let vy = try? JSONParser.parse(Array(y)), vx == vy { continue }
            out.append("\(path) differs")
        }
        return out
    }

    /// The revision ids in a folder's log (`jq -r .rev .ferry/revs.log | sort -u`).
    public static func revisions(_ folder: String) -> Set<String> {
        guard let data = FileManager.default.contents(atPath: folder + "/.ferry/revs.log") else { return [] }
        var revs = Set<String>()
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            if let rev = (try? JSONParser.parse(Array(line.utf8)))?["rev"]?.stringValue { revs.insert(rev) }
        }
        return revs
    }

    /// How the histories of the folders differ (empty when every log holds the same revisions).
    public static func historyDifferences(_ folders: [String]) -> [String] {
        guard let first = folders.first else { return [] }
        let reference = revisions(first)
        return folders.dropFirst().compactMap { folder in
            let other = revisions(folder)
            guard other != reference else { return nil }
            return "\(folder) has \(other.subtracting(reference).count) revisions \(first) lacks, and lacks \(reference.subtracting(other).count) of its"
        }
    }

    /// Temp files of an interrupted write (`.ferry-tmp-*`) visible in the folder.
    public static func partialFiles(_ folder: String) -> [String] {
        files(folder).filter { $0.split(separator: "/").last?.hasPrefix(".ferry-tmp-") == true }
    }
}
