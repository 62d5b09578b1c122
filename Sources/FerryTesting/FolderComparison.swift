import FerryCore
import Foundation

/// Compares what two ferry folders show their users: the same files, JSON documents equal as
/// JSON values (`jq -S` equality), every other file byte-equal. `.ferry/` is not compared.
public enum FolderComparison {
    /// The user-visible files of `folder` (relative paths), sorted.
    public static func files(_ folder: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        var out: [String] = []
        while let path = walker.nextObject() as? String {
            if path == ".ferry" { walker.skipDescendants(); continue }
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

    /// Temp files of an interrupted write (`.ferry-tmp-*`) visible in the folder.
    public static func partialFiles(_ folder: String) -> [String] {
        files(folder).filter { $0.split(separator: "/").last?.hasPrefix(".ferry-tmp-") == true }
    }
}
