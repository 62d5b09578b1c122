import Foundation
import Testing
import FerryCore
@testable import FerryStore
import FerryTesting
import Glibc

/// Small JSON bodies live in packs (`.ferry/packs/*.jsonl`): a line each, named by their
/// revisions' log lines, read back and checked with shell tools.
@Suite struct BodyPackTests {
    /// A small body is a line of a pack, a large one a file of its own; each log line names its
    /// body's pack and offset, and `tail -c`, `head -c` and `sha256sum` find the digest there,
    /// as docs/format.md shows; `jq` reads the pack as JSON Lines.
    @Test func smallBodiesAreLinesOfAPackThatShellToolsRead() throws {
        let f = try TestFolder()
        let small = try f.doc("small.json"), large = try f.doc("large.json")
        try f.store.recordLocalJSON(small, ["n": 1, "text": "line\nbreak"])
        try f.store.recordLocalJSON(small, ["n": 2])
        try f.store.recordLocalJSON(large, ["text": .string(String(repeating: "x", count: 5000))])
        let entries = try f.store.readLogEntries()
        #expect(entries.map { $0.pack != nil } == [true, true, false])
        #expect(f.store.objects.contains(try #require(entries[2].object)))
        let pack = BodyPacks.path(of: 1, in: f.store.layout.packsDirectory)
        #expect(pack.hasSuffix("/.ferry/packs/00000001.jsonl"))
        for e in entries.prefix(2) {
            let location = try #require(e.pack)
            let sum = try FerryProcess.shell("tail -c +\(location.offset + 1) \(pack) | head -c \(e.size) | sha256sum | cut -d' ' -f1")
            #expect(sum.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == e.object?.hex)
        }
        let lines = try FerryProcess.shell("jq -c . \(pack)").stdout.split(separator: "\n")
        #expect(lines == [#"{"n":1,"text":"line\nbreak"}"#, #"{"n":2}"#])
        // The log line says where, in keys a reader sees.
        let line = try FerryProcess.shell("head -1 \(f.root)/.ferry/revs.log | jq -c '[.pack, .offset, .size]'").stdout
        #expect(line.trimmingCharacters(in: .whitespacesAndNewlines) == "[1,0,28]")
        // Read back through the store, and by a reader that opened the folder afterwards.
        let reader = try FolderStore.open(at: f.root, writable: false)
        #expect(try reader.jsonBody(of: try #require(reader.current(small)), doc: small) == ["n": 2])
        #expect(try reader.verify().isClean)
    }

    /// A writer killed while appending leaves a torn last line that nothing names: the next
    /// writer cuts it off before appending, and every named body still reads back.
    @Test func aTornLastLineIsCutOffByTheNextWriter() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        try f.store.recordLocalJSON(doc, ["n": 1])
        let pack = BodyPacks.path(of: 1, in: f.store.layout.packsDirectory)
        let fd = try FileSystem.open(pack, O_WRONLY | O_APPEND)
        try FileSystem.writeAll(fd, Array(#"{"torn":"#.utf8), path: pack)
        close(fd)
        f.store = try FolderStore.open(at: f.root, writable: false)  // the first writer is gone
        let writer = try FolderStore.open(at: f.root, writable: true)
        try writer.recordLocalJSON(doc, ["n": 2])
        #expect(try String(contentsOfFile: pack, encoding: .utf8) == "{\"n\":1}\n{\"n\":2}\n")
        #expect(try writer.verify().isClean)
        #expect(try writer.jsonBody(of: try #require(writer.current(doc)), doc: doc) == ["n": 2])
    }

    /// A pack line that does not hash to its revision's digest is damage: `verify` names it,
    /// and reading it (or taking it to send) fails rather than returning another body.
    @Test func aDamagedLineIsFoundByVerifyAndNeverReadAsABody() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        try f.store.recordLocalJSON(doc, ["n": 1])
        let pack = BodyPacks.path(of: 1, in: f.store.layout.packsDirectory)
        _ = try FerryProcess.shell("sed -i 's/1/7/' \(pack)")
        let reader = try FolderStore.open(at: f.root, writable: false)
        let report = try reader.verify()
        #expect(!report.isClean)
        #expect(report.corruptObjects.count == 1 && report.corruptObjects[0].path.contains("00000001.jsonl"))
        #expect(throws: StoreError.self) { try reader.jsonBody(of: try #require(reader.current(doc)), doc: doc) }
        // Nor sent to a peer: the line is hashed once, as it is read.
        #expect(reader.verifiedBody(of: try #require(reader.current(doc)), doc: doc) == nil)
        unlink(pack)
        #expect(try FolderStore.open(at: f.root, writable: false).verify().missingObjects.count == 1)
    }

    /// A document saved many times keeps its bodies in about their own size on disk, not a
    /// block each; `compact` rewrites the pack with the bodies it keeps, and the folder stays
    /// valid.
    @Test func manySmallSavesTakeAboutTheirSizeAndCompactRewritesThePack() throws {
        let f = try TestFolder()
        let doc = try f.doc("counter.json")
        var content = 0
        try f.store.batch(flushEvery: 500) {
            for i in 0..<2_000 {
                let value = JSONValue.object(["count": .int(i)])
                content += value.canonicalBytes.count
                try f.store.recordLocalJSON(doc, value)
            }
        }
        let packs = f.store.layout.packsDirectory
        let onDisk = Int(try FerryProcess.shell("du -sk --apparent-size \(packs) | cut -f1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(onDisk * 1024 <= 2 * content + 8192, "\(onDisk) KiB for \(content) bytes")
        #expect(try f.store.objects.allObjects().objects.isEmpty)
        // Read once before: the store keeps the pack it read from open, and must not read
        // the rewritten pack's offsets from the removed one.
        #expect(try f.store.jsonBody(of: try #require(f.store.current(doc)), doc: doc) == ["count": 1_999])
        let report = try f.store.compact(keepDepth: 20)
        #expect(report.revisionsCompacted == 1_979 && report.objectsRemoved == 1_979)
        #expect(try f.store.objects.packs.numbers() == [2])
        let lines = try String(contentsOfFile: BodyPacks.path(of: 2, in: packs), encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 21)
        #expect(try f.store.jsonBody(of: try #require(f.store.current(doc)), doc: doc) == ["count": 1_999])
        let nodes = try #require(f.store.index[doc]?.nodes)
        let oldestKept = try #require(nodes.keys.compactMap { nodes[$0] }.filter { $0.object != nil }.min { $0.seq < $1.seq })
        #expect(try f.store.jsonBody(of: oldestKept, doc: doc) == ["count": 1_979])
        let reopened = try FolderStore.open(at: f.root, writable: false)
        #expect(try reopened.verify().isClean)
        #expect(try reopened.jsonBody(of: try #require(reopened.current(doc)), doc: doc) == ["count": 1_999])
    }

    /// A folder of format 1 (no packs) is read as it is, and a writer upgrades it to format 2
    /// before it packs anything, so that a ferry that reads only format 1 refuses it instead of
    /// missing bodies; a format this build does not know is refused with a clear message.
    @Test func aWriterUpgradesAFolderOfFormatOne() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        let loose = try f.store.objects.write(JSONValue.object(["n": 1]).canonicalBytes)
        try f.store.recordLocal(doc, object: loose, size: 7)
        let file = f.store.layout.folderFile
        func format() throws -> Int? { try JSONParser.parse(try FileSystem.readFile(file))["format"]?.intValue }
        var info = f.store.info
        info.format = 1
        try FileSystem.writeAtomically(info.json.prettyBytes, to: file, tempPrefix: "folder.json.tmp-")
        f.store = try FolderStore.open(at: f.root, writable: false)
        #expect(f.store.info.format == 1)
        #expect(try format() == 1)
        #expect(try f.store.jsonBody(of: try #require(f.store.current(doc)), doc: doc) == ["n": 1])
        let writer = try FolderStore.open(at: f.root, writable: true)
        #expect(writer.info.format == 2)
        #expect(try format() == 2)
        try writer.recordLocalJSON(doc, ["n": 2])
        #expect(try writer.readLogEntries().map { $0.pack != nil } == [false, true])
        info.format = 3
        try FileSystem.writeAtomically(info.json.prettyBytes, to: file, tempPrefix: "folder.json.tmp-")
        #expect { try FolderStore.readInfo(root: f.root) } throws: { "\($0)".contains("format 3; this ferry reads formats 1 to 2") }
    }

    /// A writer that could not look for its last pack (here: `packs` is not a directory for a
    /// moment) fails that save and looks again at the next: it never starts pack 1 over the
    /// lines the log names.
    @Test func aFailedLookForTheLastPackIsTriedAgain() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json"), other = try f.doc("b.json")
        try f.store.recordLocalJSON(doc, ["n": 1])
        f.store = try FolderStore.open(at: f.root, writable: false)
        let writer = try FolderStore.open(at: f.root, writable: true)
        let packs = writer.layout.packsDirectory
        #expect(rename(packs, packs + ".away") == 0)
        #expect(FileManager.default.createFile(atPath: packs, contents: Data()))
        #expect(throws: StoreError.self) { try writer.recordLocalJSON(other, ["n": 2]) }
        unlink(packs)
        #expect(rename(packs + ".away", packs) == 0)
        try writer.recordLocalJSON(other, ["n": 3])
        #expect(try String(contentsOfFile: BodyPacks.path(of: 1, in: packs), encoding: .utf8) == "{\"n\":1}\n{\"n\":3}\n")
        #expect(try writer.verify().isClean)
    }

    /// A pack left empty (a writer that created it, then failed to write for a full disk or
    /// was killed) is taken as the pack to start: refusing it refused every small body from
    /// then on. A pack that holds lines is never started over.
    @Test func anEmptyPackLeftBehindIsStartedNotRefused() throws {
        let f = try TestFolder()
        let packs = f.store.layout.packsDirectory
        try FileManager.default.createDirectory(atPath: packs, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: BodyPacks.path(of: 1, in: packs), contents: Data()))
        let doc = try f.doc("a.json")
        try f.store.recordLocalJSON(doc, ["n": 1])
        #expect(try String(contentsOfFile: BodyPacks.path(of: 1, in: packs), encoding: .utf8) == "{\"n\":1}\n")
        #expect(try f.store.verify().isClean)

        let taken = BodyPacks.path(of: 2, in: packs)
        #expect(FileManager.default.createFile(atPath: taken, contents: Data("{\"kept\":1}\n".utf8)))
        #expect(throws: StoreError.self) { _ = try BodyPacks.openNewPack(taken) }
        #expect(try String(contentsOfFile: taken, encoding: .utf8) == "{\"kept\":1}\n")
    }

    /// A file document whose bytes are those of a JSON body packed in the same batch is still
    /// a blob of its own under `objects/` (a packed line is not a blob's file).
    @Test func aFileWithTheBytesOfAPackedBodyIsStillAnObject() throws {
        let dir = TemporaryDirectory()
        try Data("{}".utf8).write(to: URL(fileURLWithPath: dir.appending("a.json")))
        try Data("{}".utf8).write(to: URL(fileURLWithPath: dir.appending("b.txt")))
        let store = try FolderStore.create(at: dir.path, name: "same")
        _ = try store.batch { try store.scanAndRecord() }
        let blob = try #require(store.current(try DocumentID("b.txt"))?.object)
        #expect(FileSystem.exists(store.objects.path(for: blob)))
        #expect(store.current(try DocumentID("a.json"))?.pack != nil)
        #expect(try store.verify().isClean)
    }
}
