import Testing
import FerryCore
@testable import FerryStore
import FerryTesting
import Glibc

/// `ferry status` beside no agent answers from the stat cache the last writer left when the
/// log is the one the cache names: it must say exactly what reading the log says.
@Suite struct StatusFromStatCacheTests {
    /// Writes `text` to `path` with a modification time a minute ago (older than the cache's
    /// racy window, so that the cache can prove the file unchanged).
    private func writeAged(_ text: String, to path: String) throws {
        let fd = try FileSystem.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644)
        try FileSystem.writeAll(fd, Array(text.utf8), path: path)
        var times = [timespec(tv_sec: time(nil) - 60, tv_nsec: 0), timespec(tv_sec: time(nil) - 60, tv_nsec: 0)]
        #expect(futimens(fd, &times) == 0)
        close(fd)
    }

    /// The status read from the cache (nil when it cannot be) and the one read from the log.
    private func bothStatuses(_ root: String) throws -> (cached: FolderStatus?, logged: FolderStatus) {
        let cached = try FolderStore.statusFromStatCache(root: root) { try FolderStore.walk(root: root) }
        #expect((cached != nil) == FolderStore.statCacheNamesTheLog(root: root))
        let store = try FolderStore.open(at: root, writable: false)
        let disk = try store.diskState(survey: try FolderStore.survey(root: root))
        return (cached, FolderStatus(documents: store.index.liveDocumentCount, revisions: store.index.revisionCount,
                                     lastSeq: store.index.lastSeq, disk: disk))
    }

    /// Everything a status prints, as text to compare.
    private func printed(_ s: FolderStatus) -> [String] {
        ["\(s.documents) \(s.revisions) \(s.lastSeq)"]
            + s.disk.pending.map { "pending \($0.change.rawValue) \($0.doc)" }
            + s.disk.unreadable.map { "unreadable \($0.doc): \($0.reason)" }
            + s.disk.heldBack.map { "held back \($0.doc): \($0.reason)" }
            + s.disk.skipped.map { "skipped \($0.path): \($0.reason)" }.sorted()
    }

    @Test func theCacheSaysWhatTheLogSays() throws {
        let dir = TemporaryDirectory()
        let root = dir.path
        try FileSystem.makeDirectories(root + "/sub")
        for i in 0..<12 { try writeAged("{\"n\": \(i)}\n", to: root + "/sub/a\(i).json") }
        try writeAged("plain bytes\n", to: root + "/notes.txt")
        do {
            let store = try FolderStore.create(at: root, name: "cached")
            _ = try store.batch { try store.scanAndRecord() }
        }

        // Nothing changed: the cache answers, and says what the log says.
        var (cached, logged) = try bothStatuses(root)
        #expect(cached != nil)
        #expect(cached.map(printed) == printed(logged))
        #expect(logged.documents == 13 && logged.disk.pending.isEmpty)

        // Edits nobody recorded: one file changed, one added, one removed, one that does not
        // parse, a directory where a document's file was, a file edited back to what it held.
        try writeAged("{\"n\": 100}\n", to: root + "/sub/a1.json")
        try writeAged("{\"new\": true}\n", to: root + "/sub/new.json")
        unlink(root + "/sub/a2.json")
        try writeAged("{\"n\": ", to: root + "/sub/a3.json")
        unlink(root + "/sub/a4.json")
        try FileSystem.makeDirectories(root + "/sub/a4.json")
        try writeAged("{\"n\":5}", to: root + "/sub/a5.json")  // other bytes, same body
        (cached, logged) = try bothStatuses(root)
        #expect(cached != nil)
        #expect(cached.map(printed) == printed(logged))
        #expect(Set(logged.disk.pending.map { "\($0.change.rawValue) \($0.doc)" }) == ["modified sub/a1.json", "added sub/new.json", "deleted sub/a2.json"])
        #expect(logged.disk.unreadable.map(\.doc.rawValue) == ["sub/a3.json"])
        #expect(logged.disk.heldBack.map(\.doc.rawValue) == ["sub/a4.json"])

        // A revision recorded by a writer that did not save the cache: the log is not the one
        // the cache names, so the log is read.
        do {
            let store = try FolderStore.open(at: root, writable: true)
            _ = try store.recordLocalJSON(try DocumentID("sub/a6.json"), ["n": 600])
        }
        (cached, logged) = try bothStatuses(root)
        #expect(cached == nil)

        // A writer that saves the cache names the new log; it is incomplete while a live
        // document has no entry marking its body current (here: a6's file holds an older one).
        do {
            let store = try FolderStore.open(at: root, writable: true)
            try store.saveStatCache()
            #expect(store.statCache.summary?.complete == false)
        }
        (cached, logged) = try bothStatuses(root)
        #expect(cached == nil)

        // Once every file is recorded and the cache saved, it answers again.
        do {
            let store = try FolderStore.open(at: root, writable: true)
            _ = try store.batch { try store.scanAndRecord() }
            #expect(store.statCache.summary?.complete == true)
        }
        (cached, logged) = try bothStatuses(root)
        #expect(cached != nil)
        #expect(cached.map(printed) == printed(logged))
        // 13, one added and one recorded here, two gone (a4's name is a directory now).
        #expect(logged.documents == 12 && logged.disk.pending.isEmpty)
    }
}
