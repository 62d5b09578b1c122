import Foundation
import Synchronization
import Testing
import FerryCore
@testable import FerryStore
import FerryTesting

/// The receiving side's pipeline: bodies' files written on the file worker as revisions
/// arrive, then adopted (or removed) by the store's batch.
@Suite struct ReceivePipelineTests {
    /// A sender reads ahead the packed lines of a batch as few ranges: neighbours (within
    /// `prefetchGap`) join, in any order, and distant lines stay apart.
    @Test func packedLinesAreReadAheadAsMergedRanges() {
        let gap = SharedStore.prefetchGap
        let merged = SharedStore.mergedRanges([(3000, 4000), (0, 1000), (1000, 2000), (5000 + gap, 6000 + gap), (3500, 3600)])
        #expect(merged.map { [$0.start, $0.end] } == [[0, 4000], [5000 + gap, 6000 + gap]])
        #expect(SharedStore.mergedRanges([]).isEmpty)
    }

    @Test func theFileWorkerRunsJobsInOrderAndWaitsThroughATicket() {
        let worker = FileWorker()
        defer { worker.stop() }
        let done = Mutex<[UInt64]>([])
        var tickets: [UInt64] = []
        for _ in 0..<50 {
            worker.submit { ticket in
                tickets.append(ticket)
                return {
                    usleep(200)
                    done.withLock { $0.append(ticket) }
                }
            }
        }
        #expect(tickets == Array(tickets[0]...tickets[0] + 49))
        // Every job up to the 20th has run when the wait returns (some by this thread).
        worker.wait(through: tickets[19])
        let finished = Set(done.withLock { $0 })
        #expect(tickets[0...19].allSatisfy(finished.contains))
        worker.wait(through: tickets[49])
        #expect(done.withLock { $0.count } == 50)
        // A job run beside the caller's own work: both have run when it returns.
        let beside = Mutex(0)
        worker.run({ beside.withLock { $0 += 1 } }, beside: { beside.withLock { $0 += 10 } })
        #expect(beside.withLock { $0 } == 11)
    }

    @Test func aSubmitterRunsJobsItselfBeyondTheQueueLimit() {
        let worker = FileWorker()
        defer { worker.stop() }
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let done = Mutex(0)
        // The worker is stuck in the first job; the next ones pile up behind it.
        worker.submit { _ in { started.signal(); release.wait() } }
        started.wait()
        for _ in 0..<10 {
            worker.submit(queueLimit: 2) { _ in { done.withLock { $0 += 1 } } }
        }
        // At most two wait: the submitter ran the other eight itself.
        #expect(done.withLock { $0 } == 8)
        release.signal()
        worker.wait(through: .max)
        #expect(done.withLock { $0 } == 10)
    }

    @Test func receivedBodiesAreWrittenAheadAndPutInPlaceByTheBatch() async throws {
        let f = try TestFolder()
        let root = f.root, tempDirectory = f.store.layout.tempDirectory
        let shared = SharedStore(f.store)
        let docs = try (0..<5).map { try DocumentID("items/\($0).json") }
        var revisions: [RemoteRevision] = []
        for (i, doc) in docs.enumerated() {
            let value: JSONValue = .object(["n": .int(i), "name": .string("item \(i)")])
            revisions.append(remote(doc, value, shared))
        }
        let results = await shared.applyRemote(revisions)
        #expect(results.allSatisfy { (try? $0.get().count) == 1 })
        for (i, doc) in docs.enumerated() {
            let text = try String(contentsOfFile: root + "/" + doc.rawValue, encoding: .utf8)
            #expect(try JSONParser.parse(Array(text.utf8)) == .object(["n": .int(i), "name": .string("item \(i)")]))
            #expect(text.contains("\n  \"name\""))  // pretty-printed, as a person would write it
        }
        let objects = try FileSystem.listDirectory(tempDirectory)
        #expect(objects.isEmpty)
        #expect(try temporaryFiles(under: root).isEmpty)
        let stored = try await shared.perform { store in try store.verify() }
        #expect(stored.isClean)
    }

    @Test func aRefusedOrAlreadyKnownRevisionLeavesNoFileBehind() async throws {
        let f = try TestFolder()
        let root = f.root, tempDirectory = f.store.layout.tempDirectory
        let shared = SharedStore(f.store)
        let doc = try DocumentID("a.json")
        let good = remote(doc, .object(["v": .int(1)]), shared)
        #expect((try? await shared.applyRemote([good])[0].get().count) == 1)
        // The same revision again (its files written anew): nothing recorded, nothing left.
        let again = remote(doc, .object(["v": .int(1)]), shared)
        #expect((try? await shared.applyRemote([again])[0].get()) == [])
        // A history that does not descend one generation at a time: refused.
        var bad = remote(doc, .object(["v": .int(2)]), shared)
        bad.incoming.rev = try RevisionID("5-" + String(repeating: "ab", count: 16))
        bad.incoming.history = [good.incoming.rev]
        let refused = await shared.applyRemote([bad])[0]
        #expect(throws: StoreError.self) { try refused.get() }
        // Its document's parent is a file: kept in the log, held back from the disk (the file
        // untouched), nothing left behind.
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: root + "/blocked"))
        let blocked = remote(try DocumentID("blocked/b.json"), .object(["v": .int(3)]), shared)
        let outcome = await shared.applyRemote([blocked])[0]
        #expect((try? outcome.get().count) == 1)
        #expect(await shared.perform { $0.heldBack[blocked.incoming.doc] } == "blocked is a file here, not a directory")
        #expect(FileManager.default.contents(atPath: root + "/blocked") == Data("not a directory".utf8))
        // A directory where its file goes: kept in the log, held back (so the live status says
        // why), the directory and what it holds untouched.
        try FileManager.default.createDirectory(atPath: root + "/thing/inside", withIntermediateDirectories: true)
        let thing = remote(try DocumentID("thing"), .object(["v": .int(6)]), shared)
        #expect((try? await shared.applyRemote([thing])[0].get().count) == 1)
        #expect(await shared.perform { $0.heldBack[thing.incoming.doc] } == "a directory named thing is here")
        #expect(try FileSystem.listDirectory(root + "/thing") == ["inside"])
        // Its deletion from the peer: nothing held back any more, the directory untouched.
        var gone = remote(try DocumentID("thing"), .object(["v": .int(6)]), shared)
        gone.incoming = IncomingRevision(doc: thing.incoming.doc, rev: RevisionID.compute(parent: thing.incoming.rev, deleted: true, body: nil),
                                         history: [thing.incoming.rev], deleted: true, object: nil, size: 0, origin: "peer")
        gone.jsonBody.map { shared.discard($0) }
        gone.jsonBody = nil
        #expect((try? await shared.applyRemote([gone])[0].get().count) == 1)
        #expect(await shared.perform { $0.heldBack[thing.incoming.doc] } == nil)
        #expect(try FileSystem.listDirectory(root + "/thing") == ["inside"])
        // Under a symbolic link to a directory outside the folder, with a combining mark right
        // after the slash ("/" and U+0301 are one Swift Character, so splitting the id into
        // Characters would find no directory above the name): held back, nothing written there.
        let outside = try TestFolder()
        #expect(symlink(outside.root, root + "/linked") == 0)
        let linked = remote(try DocumentID("linked/\u{301}x.json"), .object(["v": .int(5)]), shared)
        #expect((try? await shared.applyRemote([linked])[0].get().count) == 1)
        #expect(await shared.perform { $0.heldBack[linked.incoming.doc] } == "linked is a symbolic link, which ferry does not follow")
        #expect(try FileSystem.listDirectory(outside.root).filter { $0 != ".ferry" }.isEmpty)
        #expect(FolderStore.nameRefusal(try DocumentID(".git/\u{301}x")) != nil)
        // A body prepared for a connection that closed before storing it.
        let dropped = remote(try DocumentID("c.json"), .object(["v": .int(4)]), shared)
        shared.discard(dropped.jsonBody!)
        #expect(try FileSystem.listDirectory(tempDirectory).isEmpty)
        #expect(try temporaryFiles(under: root).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: root + "/c.json"))
    }

    /// A group of a peer's revisions looks up each directory above its documents once; the
    /// next group looks again: a directory swapped for a link between two groups holds the
    /// second group's document back, and nothing is written where the link leads.
    @Test func eachGroupLooksAgainAtTheDirectoriesAboveItsDocuments() async throws {
        let f = try TestFolder()
        let root = f.root
        let shared = SharedStore(f.store)
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: false)
        let first = (0..<3).map { remote(try! DocumentID("sub/\($0).json"), .object(["v": .int($0)]), shared) }
        #expect(await shared.applyRemote(first).allSatisfy { (try? $0.get().count) == 1 })
        #expect(try FileSystem.listDirectory(root + "/sub").sorted() == ["0.json", "1.json", "2.json"])
        // Its body written beside the document while "sub" was a directory; then the user swaps
        // it for a link to a folder outside, before the group that stores it.
        let late = remote(try DocumentID("sub/late.json"), .object(["v": .int(9)]), shared)
        let outside = try TestFolder()
        #expect(rename(root + "/sub", root + "/sub-moved") == 0)
        #expect(symlink(outside.root, root + "/sub") == 0)
        #expect((try? await shared.applyRemote([late])[0].get().count) == 1)
        #expect(await shared.perform { $0.heldBack[late.incoming.doc] } == "sub is a symbolic link, which ferry does not follow")
        #expect(try FileSystem.listDirectory(outside.root).filter { $0 != ".ferry" }.isEmpty)
    }

    /// Only a peer's group remembers the directories it found: a scan (whose batch may last
    /// minutes) looks every time, and a group looks again before it takes a missing file for
    /// a deletion. Here "sub" is swapped for a link to a folder outside in the middle of each.
    @Test func onlyAPeersGroupRemembersDirectoriesAndNeverForADeletion() throws {
        let f = try TestFolder()
        let root = f.root, store = f.store
        let outside = try TestFolder()
        try Data("{\"outside\": true}\n".utf8).write(to: URL(fileURLWithPath: outside.root + "/c.json"))
        func swapForALink() throws {
            #expect(rename(root + "/sub", root + "/sub-moved-\(UInt64.random(in: 0...UInt64.max))") == 0)
            #expect(symlink(outside.root, root + "/sub") == 0)
        }
        func makeSub(_ names: [String]) throws {
            try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: false)
            for name in names { try Data("{\"n\": \"\(name)\"}\n".utf8).write(to: URL(fileURLWithPath: root + "/sub/" + name)) }
        }
        // A scan's batch: the file beyond the link is not read.
        try makeSub(["a.json"])
        let scanned = try store.batch { () throws -> (IngestOutcome, IngestOutcome) in
            let first = try store.ingest(try DocumentID("sub/a.json"))
            try swapForALink()
            return (first, try store.ingest(try DocumentID("sub/c.json")))
        }
        #expect(scanned.1 == .notRegular("sub is a symbolic link, which ferry does not follow"), "\(scanned)")
        let a = try DocumentID("sub/a.json"), c = try DocumentID("sub/c.json")
        #expect(store.current(a) != nil && store.current(c) == nil)
        // A peer's group (as `SharedStore.applyRemote` runs it): a live document whose file
        // the link hides is held back, not deleted.
        unlink(root + "/sub")
        try makeSub(["a.json", "b.json"])
        for name in ["a.json", "b.json"] { try store.ingest(try DocumentID("sub/" + name)) }
        let b = try DocumentID("sub/b.json")
        let live = try #require(store.current(b))
        let grouped = try store.batch { () throws -> IngestOutcome in
            store.directoriesFoundInBatch = []
            #expect(try store.ingest(try DocumentID("sub/a.json")) == .unchanged)
            try swapForALink()
            return try store.ingest(b)
        }
        #expect(grouped == .notRegular("sub is a symbolic link, which ferry does not follow"))
        #expect(store.current(b)?.rev == live.rev && store.current(b)?.deleted == false)
    }

    /// `placementProblem` with a set of directories already found does not look at those
    /// again (a group's documents share them) and adds the ones it finds; without one it
    /// looks every time.
    @Test func knownDirectoriesAreNotLookedUpAgain() throws {
        let f = try TestFolder()
        let layout = f.store.layout
        try FileManager.default.createDirectory(atPath: f.root + "/a/b", withIntermediateDirectories: true)
        var known: Set<String>? = []
        #expect(layout.placementProblem(of: "a/b/c.json", knownDirectories: &known) == nil)
        #expect(known == ["a", "a/b"])
        try FileManager.default.removeItem(atPath: f.root + "/a/b")
        #expect(symlink("/", f.root + "/a/b") == 0)
        #expect(layout.placementProblem(of: "a/b/d.json", knownDirectories: &known) == nil)
        #expect(layout.placementProblem(of: "a/b/d.json") == "a/b is a symbolic link, which ferry does not follow")
        var none: Set<String>?
        #expect(layout.placementProblem(of: "a/b/d.json", knownDirectories: &none) == "a/b is a symbolic link, which ferry does not follow")
        #expect(none == nil)
    }

    @Test func aFileTheUserCreatesWhileARevisionArrivesIsMergedWithIt() async throws {
        let f = try TestFolder()
        let root = f.root
        let shared = SharedStore(f.store)
        let doc = try DocumentID("new.json")
        let theirs = remote(doc, .object(["remote": .int(1)]), shared)
        // The user saves a file of that name after the body was written, before the batch
        // (no watcher runs, as in a one-shot sync): it is recorded first, then merged.
        try Data("{\"mine\": true}\n".utf8).write(to: URL(fileURLWithPath: root + "/new.json"))
        let entries = try await shared.applyRemote([theirs])[0].get()
        #expect(entries.count == 1)  // their revision; the conflict waits for the end of the pass
        await shared.resolvePendingConflicts()
        #expect(await shared.perform { store in store.index[doc]!.hasConflict } == false)
        let onDisk = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: root + "/new.json"))))
        #expect(onDisk == .object(["mine": .bool(true), "remote": .int(1)]))
        #expect(try temporaryFiles(under: root).isEmpty)
        let stored = try await shared.perform { store in try store.verify() }
        #expect(stored.isClean)
    }

    @Test func renameIfAbsentNeverReplacesAFile() throws {
        let dir = TemporaryDirectory()
        let a = dir.path + "/a", b = dir.path + "/b", target = dir.path + "/doc.json"
        try Data("one".utf8).write(to: URL(fileURLWithPath: a))
        try Data("two".utf8).write(to: URL(fileURLWithPath: b))
        #expect(try FileSystem.renameIfAbsent(a, target))
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "one")
        #expect(try !FileSystem.renameIfAbsent(b, target))  // taken: both left as they were
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "one")
        #expect(try String(contentsOfFile: b, encoding: .utf8) == "two")
        #expect(throws: StoreError.self) { try FileSystem.renameIfAbsent(dir.path + "/missing", dir.path + "/x") }
    }

    @Test func aConflictingRevisionsPreparedFileGivesWayToTheMergedBody() async throws {
        let f = try TestFolder()
        let root = f.root, tempDirectory = f.store.layout.tempDirectory
        let doc = try DocumentID("list.json")
        try Data("{\"local\": 1}\n".utf8).write(to: URL(fileURLWithPath: root + "/list.json"))
        _ = try f.store.ingest(doc)
        let shared = SharedStore(f.store)
        // A first revision of the same document from a peer: two roots, merged.
        let theirs = remote(doc, .object(["remote": .int(2)]), shared)
        let entries = try await shared.applyRemote([theirs])[0].get()
        #expect(entries.count == 1)  // their revision; the conflict waits for the end of the pass
        #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/list.json")) == Data("{\"local\": 1}\n".utf8))
        await shared.resolvePendingConflicts()
        let onDisk = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: root + "/list.json"))))
        let current = try await shared.perform { store in try store.jsonBody(of: store.current(doc)!, doc: doc) }
        #expect(onDisk == current)
        #expect(onDisk == .object(["local": .int(1), "remote": .int(2)]))
        #expect(try FileSystem.listDirectory(tempDirectory).isEmpty)
        #expect(try temporaryFiles(under: root).isEmpty)
    }

    /// A large body received from a peer is written from its canonical bytes and remembered by
    /// its file's text (`KnownFileText`) with the blobs it references: read again, the file is
    /// the current revision; once a blob it names is gone, the file is parsed and refused, as
    /// any file naming a missing blob is.
    @Test func aLargeReceivedFileIsRememberedWithTheBlobsItNames() async throws {
        let f = try TestFolder()
        let root = f.root
        let doc = try DocumentID("list.json")
        let image = try f.store.objects.write(Array("a picture".utf8))
        let items: [JSONValue] = (0..<3_000).map { i in
            ["key": .string("item \(i)"), "value": .int(i), "image": i == 7 ? BlobReference(digest: image, length: 9, contentType: nil).json : .null]
        }
        let value = JSONValue.object(["list": .array(items)])
        let objectsDirectory = f.store.layout.objectsDirectory
        let shared = SharedStore(f.store)
        _ = try await shared.applyRemote([remote(doc, value, shared)])[0].get()
        let onDisk = try Data(contentsOf: URL(fileURLWithPath: root + "/list.json"))
        #expect(Array(onDisk) == value.prettyBytes && onDisk.count >= KnownFileText.minimumSize)
        let known = try await shared.perform { store in (store.knownTexts[doc], try store.ingest(doc)) }
        #expect(known.0?.blobs == [image] && known.0?.object == BlobDigest.of(value.canonicalBytes))
        #expect(known.1 == .unchanged)
        unlink(ObjectStore.path(for: image, in: objectsDirectory))
        let after = try await shared.perform { store in try store.ingest(doc) }
        guard case .unreadable(let why) = after else { Issue.record("a file naming a missing blob was read by its text: \(after)"); return }
        #expect(why.contains("references blob \(image)"), "\(why)")
    }

    /// A blob fetched from a peer is verified as it arrives, then waits as a temp file for the
    /// batch that stores the revisions naming it (a blob document's and a JSON document's), which
    /// installs it with everything else it makes durable; bytes that do not hash to the
    /// announced digest are refused and leave nothing behind.
    @Test func aFetchedBlobIsInstalledByTheBatchThatStoresItsRevisions() async throws {
        let f = try TestFolder()
        let (root, layout) = (f.root, f.store.layout)
        let bytes = (0..<600_000).map { UInt8($0 % 251) }
        let digest = BlobDigest.of(bytes)
        let shared = SharedStore(f.store)
        let objects = ObjectStore(layout: layout)
        let writer = try objects.beginWrite(expected: digest)
        // Pieces large enough to be hashed while they are written, and a small one last.
        for start in stride(from: 0, to: bytes.count, by: 262_144) {
            try writer.append(Array(bytes[start..<min(start + 262_144, bytes.count)]))
        }
        try shared.keepFetched(writer)
        #expect(shared.hasBlob(digest) && !objects.contains(digest))

        let photo = try DocumentID("photo.bin"), list = try DocumentID("list.json")
        let blobRevision = IncomingRevision(doc: photo, rev: RevisionID.compute(parent: nil, deleted: false, body: digest), history: [],
                                            deleted: false, object: digest, size: bytes.count, origin: "peer")
        let value = JSONValue.object(["image": BlobReference(digest: digest, length: bytes.count, contentType: nil).json])
        let results = await shared.applyRemote([RemoteRevision(incoming: blobRevision, jsonBody: nil), remote(list, value, shared)])
        for result in results { _ = try result.get() }
        #expect(try objects.read(digest) == bytes)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: root + "/photo.bin"))) == bytes)
        #expect(FileManager.default.fileExists(atPath: root + "/list.json"))
        #expect(try FileSystem.listDirectory(layout.tempDirectory).isEmpty)

        // Wrong bytes for a digest, in a small piece and in a large one (hashed while it is
        // written): refused, nothing kept, no temp file left.
        let other = BlobDigest.of([1, 2, 3])
        let bad = try objects.beginWrite(expected: other)
        try bad.append([9, 9, 9])
        #expect(throws: StoreError.self) { try shared.keepFetched(bad) }
        let badLarge = try objects.beginWrite(expected: other)
        try badLarge.append([1, 2, 3] + bytes)
        #expect(throws: StoreError.self) { try shared.keepFetched(badLarge) }
        #expect(!shared.hasBlob(other))
        #expect(try FileSystem.listDirectory(layout.tempDirectory).isEmpty)
    }

    /// A large piece is hashed while it is written: the digest is the piece's whichever thread
    /// hashed it, the write saw every byte, and a write that fails is thrown, not lost on the
    /// other thread (a small piece: the same, one after the other).
    @Test func aPieceHashedWhileItIsWrittenKeepsItsDigestAndItsWritesFailure() throws {
        for count in [BlobHasher.sideBySideBytes - 1, BlobHasher.sideBySideBytes, 3 * BlobHasher.sideBySideBytes + 5] {
            let piece = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            var hasher = BlobHasher()
            var written: [UInt8] = []
            try piece.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
                try hasher.update(bytes) { () throws(StoreError) in written = Array(bytes) }
            }
            #expect(hasher.finalize() == BlobDigest.of(piece) && written == piece, "\(count) bytes")
            var failing = BlobHasher()
            #expect(throws: StoreError.self, "\(count) bytes") {
                try piece.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
                    try failing.update(bytes) { () throws(StoreError) in throw StoreError(.diskFull, "no space left") }
                }
            }
        }
    }

    /// A fetched blob that is a file document's content is also written, as it arrives, into a
    /// temp file beside the document (holes and a trailing run of zeros as in the object), and
    /// the batch renames that file into place: the document is the very file written during the
    /// fetch, not a copy made afterwards. A copy whose bytes do not verify, or that the store
    /// does not take, leaves nothing behind.
    @Test func aFetchedFilesCopyIsWrittenAsItArrivesAndRenamedIntoPlace() async throws {
        let f = try TestFolder()
        let (root, layout) = (f.root, f.store.layout)
        var bytes = (0..<300_000).map { UInt8($0 % 251) }
        bytes.replaceSubrange(40_960..<81_920, with: repeatElement(0, count: 40_960))
        bytes += repeatElement(0, count: 20_000)
        let digest = BlobDigest.of(bytes)
        let shared = SharedStore(f.store)
        let objects = ObjectStore(layout: layout)
        let writer = try objects.beginWrite(expected: digest)
        writer.copyBeside(root + "/pictures/photo.bin")  // its directory is made
        // A piece large enough to be hashed while it is written (to both files), then a small one.
        for start in stride(from: 0, to: bytes.count, by: 262_144) {
            try writer.append(Array(bytes[start..<min(start + 262_144, bytes.count)]))
        }
        try shared.keepFetched(writer)
        let temp = try #require(writer.documentTemp)
        #expect(FileSystem.dirname(of: temp) == root + "/pictures")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: temp))) == bytes)
        let inode = try #require(try FileSystem.lstat(temp)).st_ino
        #expect(fileMode(temp) != 0o600, "no file was there: the usual mode")

        let photo = try DocumentID("pictures/photo.bin")
        let rev = RevisionID.compute(parent: nil, deleted: false, body: digest)
        let incoming = IncomingRevision(doc: photo, rev: rev, history: [], deleted: false, object: digest, size: bytes.count, origin: "peer")
        _ = try await shared.applyRemote([RemoteRevision(incoming: incoming, jsonBody: nil, fileTemp: temp)])[0].get()
        let placed = try #require(try FileSystem.lstat(root + "/pictures/photo.bin"))
        #expect(placed.st_ino == inode && placed.st_size == bytes.count)
        // Sparse as the object: the 40 KiB run of zeros and the trailing ones are holes.
        #expect(Int(placed.st_blocks) * 512 <= bytes.count - 40_960, "\(placed.st_blocks) blocks")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: root + "/pictures/photo.bin"))) == bytes)
        #expect(try objects.read(digest) == bytes)
        #expect(try temporaryFiles(under: root).isEmpty)

        // The same revision again, with a copy of its own: already stored, the copy is removed.
        let again = try objects.beginWrite(expected: digest)
        again.copyBeside(root + "/pictures/photo.bin")
        try again.append(bytes)
        try shared.keepFetched(again)
        let second = try #require(again.documentTemp)
        #expect(fileMode(second) == 0o600, "private while it waits to replace a file")
        _ = try await shared.applyRemote([RemoteRevision(incoming: incoming, jsonBody: nil, fileTemp: second)])[0].get()
        #expect(try temporaryFiles(under: root).isEmpty)
        #expect(try FileSystem.lstat(root + "/pictures/photo.bin")?.st_ino == inode)

        // Bytes that do not hash to the digest: neither the object's temp nor the copy is kept.
        let other = BlobDigest.of([1, 2, 3])
        let bad = try objects.beginWrite(expected: other)
        bad.copyBeside(root + "/pictures/other.bin")
        try bad.append([9, 9, 9])
        #expect(try temporaryFiles(under: root).count == 1)
        #expect(throws: StoreError.self) { try shared.keepFetched(bad) }
        #expect(bad.documentTemp == nil)
        #expect(try temporaryFiles(under: root).isEmpty)
        #expect(try FileSystem.listDirectory(layout.tempDirectory).isEmpty)
    }

    /// The temp file of a received JSON body that will replace a file is private until it
    /// is given that file's permissions (at the rename): a file the user made private is
    /// never readable by others with its new content.
    @Test func aBodysTempFileIsPrivateUntilItReplacesAFile() async throws {
        let f = try TestFolder()
        try f.dir.write("secret.json", #"{"v": 1}"#)
        #expect(chmod(f.dir.appending("secret.json"), 0o600) == 0)
        let doc = try f.doc("secret.json")
        _ = try f.store.ingest(doc)
        let parent = try #require(f.store.current(doc)).rev
        let (path, worker) = (f.dir.appending("secret.json"), f.store.fileWorker)
        let shared = SharedStore(f.store)
        let value: JSONValue = ["v": 2, "pad": .string(String(repeating: "x", count: 4_000))]
        let body = shared.prepare(value, canonical: value.canonicalBytes, references: [], for: doc)
        worker.wait(through: body.ticket)
        let temp = try #require(body.documentTemp)
        #expect(fileMode(temp) == 0o600)
        let incoming = IncomingRevision(doc: doc, rev: RevisionID.compute(parent: parent, deleted: false, body: body.digest),
                                        history: [parent], deleted: false, object: nil, size: value.canonicalBytes.count, origin: "peer")
        _ = try await shared.applyRemote([RemoteRevision(incoming: incoming, jsonBody: body)])[0].get()
        #expect(try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path)))) == value)
        #expect(fileMode(path) == 0o600)
    }

    /// The look before writing found a directory where the file goes, and the directory has
    /// gone by the time the revision is placed: the file is written then, not left for the
    /// document's next change; a file that took the name meanwhile is the user's.
    @Test func aRevisionWhoseObstacleWentMeanwhileIsWritten() async throws {
        let f = try TestFolder()
        let root = f.root
        let shared = SharedStore(f.store)
        try FileManager.default.createDirectory(atPath: root + "/thing.json/inside", withIntermediateDirectories: true)
        let thing = remote(try DocumentID("thing.json"), .object(["v": .int(6)]), shared)
        #expect((try? await shared.applyRemote([thing])[0].get().count) == 1)
        #expect(await shared.perform { $0.heldBack[thing.incoming.doc] } == "a directory named thing.json is here")
        try FileManager.default.removeItem(atPath: root + "/thing.json")
        try await shared.perform { try $0.holdBackOrWrite(thing.incoming.doc) }
        #expect(await shared.perform { $0.heldBack[thing.incoming.doc] } == nil)
        #expect(try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: root + "/thing.json")))) == ["v": 6])

        let other = remote(try DocumentID("other.json"), .object(["v": .int(7)]), shared)
        try FileManager.default.createDirectory(atPath: root + "/other.json", withIntermediateDirectories: true)
        #expect((try? await shared.applyRemote([other])[0].get().count) == 1)
        try FileManager.default.removeItem(atPath: root + "/other.json")
        try Data("mine".utf8).write(to: URL(fileURLWithPath: root + "/other.json"))
        try await shared.perform { try $0.holdBackOrWrite(other.incoming.doc) }
        #expect(FileManager.default.contents(atPath: root + "/other.json") == Data("mine".utf8))
        #expect(try temporaryFiles(under: root).isEmpty)
    }

    /// Two revisions of a document new here, stored in one group: the file shows the second.
    /// The look before the second's write found no file and wrote the first back (it was
    /// current, its file never written); the second's write then took that file for a user's
    /// and left it, so the file showed the first while the log said the second.
    @Test(arguments: [0, 4]) func aNewDocumentsRevisionsInOneGroupLeaveItsFileAtTheLast(historyOnly: Int) async throws {
        let f = try TestFolder()
        let doc = try f.doc("d.json")
        let (path, root) = (f.dir.appending("d.json"), f.root)
        let shared = SharedStore(f.store)
        var (parent, history): (RevisionID?, [RevisionID]) = (nil, [])
        var remotes: [RemoteRevision] = []
        for v in 0...5 {
            let value: JSONValue = ["v": .number(JSONNumber(v))]
            let body = shared.prepare(value, canonical: value.canonicalBytes, references: [], for: doc)
            let rev = RevisionID.compute(parent: parent, deleted: false, body: body.digest)
            let incoming = IncomingRevision(doc: doc, rev: rev, history: history, deleted: false, object: nil,
                                            size: value.canonicalBytes.count, origin: "peer")
            // The first `historyOnly` arrive as history only (as from a compacted folder).
            if v >= historyOnly { remotes.append(RemoteRevision(incoming: incoming, jsonBody: body)) } else { shared.discard(body) }
            (parent, history) = (rev, [rev] + history)
        }
        for result in await shared.applyRemote(remotes) { _ = try result.get() }
        #expect(try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path)))) == ["v": 5])
        #expect(try temporaryFiles(under: root).isEmpty)
    }

    /// A peer's first revision of `doc` with body `value`, its files being written.
    private func remote(_ doc: DocumentID, _ value: JSONValue, _ shared: SharedStore) -> RemoteRevision {
        let bytes = value.canonicalBytes
        let body = shared.prepare(value, canonical: bytes, references: try? value.blobReferences(), for: doc)
        let rev = RevisionID.compute(parent: nil, deleted: false, body: body.digest)
        let incoming = IncomingRevision(doc: doc, rev: rev, history: [], deleted: false, object: nil, size: bytes.count, origin: "peer")
        return RemoteRevision(incoming: incoming, jsonBody: body)
    }

    /// Files named like ferry's temp files anywhere in the folder (outside `.ferry/`).
    private func temporaryFiles(under root: String) throws -> [String] {
        let all = FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []
        return all.filter { !$0.hasPrefix(".ferry/") && ($0 as NSString).lastPathComponent.hasPrefix(FolderScanner.temporaryPrefix) }
    }
}
