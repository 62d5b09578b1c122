import Foundation
import Testing
import FerryCore
@testable import FerryStore
import FerryTesting

@Suite struct ObjectStoreTests {
    @Test func objectsAreContentAddressedImmutableFiles() throws {
        let f = try TestFolder()
        let bytes = Array("hello objects".utf8)
        let digest = try f.store.objects.write(bytes)
        let path = f.store.objects.path(for: digest)
        #expect(path.hasSuffix("/objects/\(digest.hex.prefix(2))/\(digest.hex.dropFirst(2))"))
        #expect(try FileSystem.readFile(path) == bytes)
        #expect(fileMode(path) == 0o444)
        let sum = try FerryProcess.shell("sha256sum \(path) | cut -d' ' -f1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(sum == digest.hex)
        // Writing it again leaves the object alone.
        #expect(try f.store.objects.write(bytes) == digest)
    }

    /// What may be sent to a peer is a revision's bytes proven by their digest: the last large
    /// body written is taken from memory (hashed as it was written), any other is read and
    /// hashed, and a damaged one is nothing.
    @Test func aVerifiedBodyComesFromMemoryOnlyForTheLastLargeBodyWritten() throws {
        let f = try TestFolder()
        let first = try f.doc("first.json"), second = try f.doc("second.json")
        func large(_ n: Int) -> JSONValue { ["n": .int(n), "text": .string(String(repeating: "x", count: 70_000))] }
        try f.store.recordLocalJSON(first, large(1))
        let node = try #require(f.store.current(first))
        let path = f.store.objects.path(for: try #require(node.object))
        chmod(path, 0o644)
        try Data("damaged".utf8).write(to: URL(fileURLWithPath: path))
        #expect(f.store.verifiedBody(of: node, doc: first) == large(1).canonicalBytes)
        try f.store.recordLocalJSON(second, large(2))
        #expect(f.store.verifiedBody(of: node, doc: first) == nil)
        #expect(f.store.verifiedBody(of: try #require(f.store.current(second)), doc: second) == large(2).canonicalBytes)
    }

    @Test func streamedImportHashesWhileCopyingAndRejectsAWrongDigest() throws {
        let f = try TestFolder()
        let big = f.dir.appending("big.bin")
        _ = try FerryProcess.shell("head -c 5000000 /dev/urandom > \(big)")
        let (digest, size) = try f.store.objects.importFile(at: big)
        #expect(size == 5_000_000)
        #expect(try f.store.objects.rehash(digest) == digest)
        let wrong = BlobDigest.of([1])
        let before = try f.store.objects.allObjects().objects.count
        #expect(throws: StoreError.self) { try f.store.objects.importFile(at: big, expected: wrong) }
        #expect(try f.store.objects.allObjects().objects.count == before)
        #expect(try FileSystem.listDirectory(f.store.layout.tempDirectory).isEmpty)
    }
}

@Suite struct RevisionLogTests {
    @Test func tornLastLineIsIgnoredThenRepairedByTheNextWriter() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        for i in 0..<5 { try f.store.recordLocalJSON(doc, ["n": .int(i)]) }
        let logPath = f.store.layout.logFile
        let goodLength = try FileSystem.readFile(logPath).count
        _ = try FerryProcess.shell("printf '{\"seq\":6,\"doc\":\"a.js' >> \(logPath)")
        let reader = try FolderStore.open(at: f.root, writable: false)
        #expect(reader.index.revisionCount == 5)
        #expect(reader.tornLogTailBytes > 0)
        f.store = reader  // drop the writer (releases the lock)
        let writer = try FolderStore.open(at: f.root, writable: true)
        #expect(try FileSystem.readFile(logPath).count == goodLength)
        try writer.recordLocalJSON(doc, ["n": 99])
        #expect(try writer.readLogEntries().map(\.seq) == [1, 2, 3, 4, 5, 6])
    }

    /// The log is read in chunks: whatever the chunk size, lines cut between chunks, a damaged
    /// line and a torn tail read as from the whole bytes at once.
    @Test(arguments: [1, 7, 64, 333, 1 << 20])
    func aLogReadInChunksReadsAsAWhole(chunkSize: Int) throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        for i in 0..<12 { try f.store.recordLocalJSON(doc, ["n": .int(i), "text": .string(String(repeating: "é", count: i * 10))]) }
        let logPath = f.store.layout.logFile
        _ = try FerryProcess.shell("sed -i '5s/.*/{not json/' \(logPath) && printf '\\n{\"seq\":13,\"doc\":\"a.js' >> \(logPath)")
        let whole = RevisionLog.decode(try FileSystem.readFile(logPath))
        var entries: [LogEntry] = []
        let chunked = try RevisionLog.scan(path: logPath, chunkSize: chunkSize) { entries.append($0) }
        #expect(entries == whole.entries && entries.count == 11)
        #expect(chunked.damagedLines.map(\.line) == whole.damagedLines.map(\.line) && whole.damagedLines.map(\.line) == [5])
        #expect(chunked.validLength == whole.validLength && chunked.tornTailBytes == whole.tornTailBytes && whole.tornTailBytes > 0)
    }

    @Test func aDamagedMiddleLineIsReportedAndSkipped() throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        for i in 0..<3 { try f.store.recordLocalJSON(doc, ["n": .int(i)]) }
        _ = try FerryProcess.shell("sed -i '2s/.*/{not json/' \(f.store.layout.logFile)")
        let reader = try FolderStore.open(at: f.root, writable: false)
        #expect(reader.damagedLogLines.map(\.line) == [2])
        #expect(reader.index.revisionCount == 2)
        #expect(try !reader.verify().isClean)
    }

    /// Found by the FuzzLogLines target: the fast line decoder took the last of two equal keys,
    /// and numbers with leading zeros, where the general parser refuses the line.
    @Test(arguments: [(#"s/"size":/"size":1,"size":/"#, "duplicate key"), (#"s/"size":/"size":0/"#, "leading zero")])
    func aLineTheJSONParserRefusesIsDamagedWhicheverDecoderReadsIt(edit: String, reason: String) throws {
        let f = try TestFolder()
        let doc = try f.doc("a.json")
        for i in 0..<3 { try f.store.recordLocalJSON(doc, ["n": .int(i)]) }
        _ = try FerryProcess.shell("sed -i '2\(edit)' " + f.store.layout.logFile)
        let reader = try FolderStore.open(at: f.root, writable: false)
        #expect(reader.damagedLogLines.map(\.line) == [2])
        #expect(reader.damagedLogLines.first?.reason.contains(reason) == true, "\(reader.damagedLogLines)")
    }

    @Test func aSecondWriterIsRefused() throws {
        let f = try TestFolder()
        do {
            _ = try FolderStore.open(at: f.root, writable: true)
            Issue.record("second writer was allowed")
        } catch {
            #expect(error.code == .locked)
        }
        // Readers are fine.
        #expect(throws: Never.self) { try FolderStore.open(at: f.root, writable: false) }
    }
}

@Suite struct StatCacheTests {
    @Test func aSavedCacheLoadsBackWhateverTheDocumentNames() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/statcache"
        var cache = StatCache()
        let names = ["plain.json", "sub dir/quote\"and\\backslash.json", "café/naïve.json", "line\u{2028}separator.json"]
        for (i, name) in names.enumerated() {
            // Inodes up to 2^64 - 1 (64-bit filesystems), times before 1970.
            let fingerprint = FileFingerprint(inode: i == 1 ? UInt64.max - 7 : UInt64(100 + i), size: 10 * i,
                                              mtime: i == 2 ? -1_000 : 1_000 + i, ctime: 2_000 + i)
            cache.set(try DocumentID(name), StatCache.Entry(fingerprint: fingerprint, object: BlobDigest.of(Array(name.utf8))))
        }
        try cache.save(path: path, summary: nil) { _ in nil }
        let loaded = StatCache.load(path: path)
        #expect(loaded.entries == cache.entries)
        #expect(loaded.summary == nil)
        // A damaged line is skipped, not fatal.
        let fd = open(path, O_WRONLY | O_APPEND)
        _ = "1 2 3 4 nothex \"x.json\"\n".withCString { write(fd, $0, strlen($0)) }
        // So is one whose numbers overflow (the loader used to wrap them into a wrong entry).
        _ = "99999999999999999999999 2 3 4 \(String(repeating: "ab", count: 32)) \"y.json\"\n".withCString { write(fd, $0, strlen($0)) }
        close(fd)
        #expect(StatCache.load(path: path).entries == cache.entries)
    }

    /// With a summary, the first line says what the index held and which log it had read, and
    /// each entry whether its body was the current one; complete only when every live
    /// document's entry was.
    @Test func aSummaryAndTheCurrentMarksLoadBack() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/statcache"
        var cache = StatCache()
        let a = try DocumentID("a.json"), b = try DocumentID("b.json")
        let bodyA = BlobDigest.of(Array("a".utf8)), bodyB = BlobDigest.of(Array("b".utf8))
        cache.set(a, StatCache.Entry(fingerprint: FileFingerprint(inode: 1, size: 1, mtime: 5, ctime: 6), object: bodyA))
        cache.set(b, StatCache.Entry(fingerprint: FileFingerprint(inode: 2, size: 1, mtime: 5, ctime: 6), object: bodyB))
        let log = FileFingerprint(inode: 77, size: 1234, mtime: -3, ctime: 9_000_000_000_000_000_000)
        let summary = StatCache.Summary(log: log, lastSeq: 40, revisions: 41, documents: 2, complete: false)
        // b's file holds an older body than its current one: not complete.
        try cache.save(path: path, summary: summary) { $0 == a ? bodyA : BlobDigest.of(Array("newer".utf8)) }
        var loaded = StatCache.load(path: path)
        #expect(loaded.summary == StatCache.Summary(log: log, lastSeq: 40, revisions: 41, documents: 2, complete: false))
        #expect(loaded[a]?.wasCurrent == true && loaded[b]?.wasCurrent == false)
        #expect(StatCache.readSummary(path: path) == loaded.summary)
        // Both current: complete.
        try cache.save(path: path, summary: summary) { $0 == a ? bodyA : bodyB }
        loaded = StatCache.load(path: path)
        #expect(loaded.summary?.complete == true && loaded[b]?.wasCurrent == true)
        // An entry racily clean when its cache was saved is read back but never written
        // again: saved under a later mtime it would pass for proof.
        let c = try DocumentID("c.json")
        let now = Int(time(nil)) * 1_000_000_000
        cache.set(c, StatCache.Entry(fingerprint: FileFingerprint(inode: 3, size: 1, mtime: now, ctime: now), object: bodyA))
        try cache.save(path: path, summary: nil) { _ in nil }
        var reread = StatCache.load(path: path)
        #expect(reread[c] != nil && reread[c].map { !$0.proves($0.fingerprint, now: now + 60_000_000_000) } == true)
        // c is live with that body: its entry would be current, but it is dropped, so the
        // summary of three live documents is not complete.
        try reread.save(path: path, summary: StatCache.Summary(log: log, lastSeq: 41, revisions: 42, documents: 3, complete: true)) { $0 == b ? bodyB : bodyA }
        #expect(StatCache.load(path: path)[c] == nil)
        #expect(StatCache.load(path: path).summary?.complete == false)
        // Three live documents, two entries: not complete.
        try cache.save(path: path, summary: StatCache.Summary(log: log, lastSeq: 40, revisions: 41, documents: 3, complete: true)) { $0 == a ? bodyA : bodyB }
        #expect(StatCache.readSummary(path: path)?.complete == false)
    }
}
