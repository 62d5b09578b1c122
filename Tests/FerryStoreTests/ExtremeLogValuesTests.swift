import Testing
import FerryCore
@testable import FerryStore
import FerryTesting
import Foundation
import Glibc

/// Values at the edges of what a log line may hold, written by hand into a real folder's log:
/// opening it never traps, and a revision whose line could not be read back is not recorded.
@Suite struct ExtremeLogValuesTests {
    private func append(_ lines: [String], to root: String) throws {
        let fd = try FileSystem.open(root + "/.ferry/revs.log", O_WRONLY | O_APPEND)
        defer { close(fd) }
        try FileSystem.writeAll(fd, Array(lines.map { $0 + "\n" }.joined().utf8), path: "revs.log")
    }

    /// The highest sequence a log may hold, on a document of two revisions (whose tree sorts
    /// its log lines by sequence): it opens and is found; a save after it is refused, and the
    /// log is left as it was. A line naming the highest integer is a damaged line, and a save
    /// after it is refused too (nothing overflows).
    @Test func theHighestSequencesOpenAndASaveBeyondIsRefused() throws {
        for (seq, damaged) in [(LogEntry.seqLimit - 1, false), (Int.max, true)] {
            let dir = TemporaryDirectory()
            do {
                let store = try FolderStore.create(at: dir.path, name: "t")
                _ = try store.recordLocalJSON(try DocumentID("a.json"), ["v": 1])
            }
            let store = try FolderStore.open(at: dir.path, writable: false)
            let first = try #require(store.index[try DocumentID("a.json")]?.current?.rev)
            let second = RevisionID.compute(parent: first, deleted: true, body: nil)
            try append([#"{"seq":\#(seq),"doc":"a.json","rev":"\#(second)","parent":"\#(first)","deleted":true,"kind":"json","size":0,"origin":"x","time":""}"#], to: dir.path)
            let reopened = try FolderStore.open(at: dir.path, writable: true)
            let tree = try #require(reopened.index[try DocumentID("a.json")])
            if damaged {
                #expect(tree.nodeCount == 1 && reopened.damagedLogLines.count == 1, "\(seq)")
            } else {
                #expect(tree.nodeCount == 2 && tree.current?.rev == second)
                #expect(tree.node(seq: seq)?.rev == second && tree.node(seq: 1)?.rev == first)
                #expect(reopened.changes(since: 0).map(\.rev) == [first, second])
            }
            let before = try Array(String(contentsOfFile: dir.path + "/.ferry/revs.log", encoding: .utf8).utf8)
            do {
                _ = try reopened.recordLocalJSON(try DocumentID("b.json"), ["v": 2])
                Issue.record("a save beyond the last sequence was recorded (\(seq))")
            } catch let error as StoreError {
                #expect(error.code == .invalidInput && error.message.contains("the most a log may hold"), "\(error)")
            }
            #expect(try Array(String(contentsOfFile: dir.path + "/.ferry/revs.log", encoding: .utf8).utf8) == before)
        }
    }

    /// A document whose log names the last generation an id may hold: an edit on top of it
    /// is refused with one sentence, and nothing is written.
    @Test func anEditBeyondTheLastGenerationIsRefused() throws {
        let dir = TemporaryDirectory()
        _ = try FolderStore.create(at: dir.path, name: "t")
        let last = RevisionID.generationLimit - 1
        try append([#"{"seq":1,"doc":"x.json","rev":"\#(last)-aa","parent":"\#(last - 1)-bb","deleted":true,"kind":"json","size":0,"origin":"x","time":""}"#], to: dir.path)
        let store = try FolderStore.open(at: dir.path, writable: true)
        let before = try Array(String(contentsOfFile: dir.path + "/.ferry/revs.log", encoding: .utf8).utf8)
        #expect(store.index[try DocumentID("x.json")]?.current?.rev.generation == last)
        do {
            _ = try store.recordLocalJSON(try DocumentID("x.json"), ["v": 1])
            Issue.record("an edit beyond the last generation was recorded")
        } catch let error as StoreError {
            #expect(error.code == .invalidInput && error.message.contains("most a document may have"), "\(error)")
        }
        let after = try Array(String(contentsOfFile: dir.path + "/.ferry/revs.log", encoding: .utf8).utf8)
        #expect(after == before)
        #expect(store.index[try DocumentID("x.json")]?.nodeCount == 2)
    }
}
