import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// A file document's blob is written beside the document as its bytes arrive, and that very
/// file is put in place: nothing is copied after the last byte. Where the folder ignores the
/// document, nothing is written beside it.
@Suite struct BlobCopyTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Polls `condition` every 10 ms for up to 5 s without blocking a thread of the pool.
    func soon(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    /// Ferry's temp files under `directory` (not recursive), with their inode and size.
    func temps(in directory: String) -> [(path: String, inode: UInt64, size: Int)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(FolderScanner.temporaryPrefix) }.compactMap { name in
            let path = directory + "/" + name
            guard let st = try? FileSystem.lstat(path) else { return nil }
            return (path, UInt64(st.st_ino), Int(st.st_size))
        }
    }

    @Test func aFetchedFileIsWrittenBesideItsDocumentAsItArrivesUnlessIgnored() async throws {
        let tmp = TemporaryDirectory()
        let folder = tmp.appending("inventory")
        let store = try FolderStore.create(at: folder, name: "inventory")
        try Data("build/\n".utf8).write(to: URL(fileURLWithPath: folder + "/.ferryignore"))
        let shared = SharedStore(store)
        let (ours, theirs) = LoopbackTransport.pair()
        let session = PeerSession(transport: ours, shared: shared, role: .active, remoteDatabase: "inventory", logger: logger)
        async let loop: Void = session.run()
        var peer = HostilePeerTests.FakePeer(theirs)
        // Bounded: if the session stalls, the test hangs up after 20 s, and fails.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            await theirs.close(code: 4000, reason: "test timed out")
        }
        defer { watchdog.cancel() }
        let photo = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }, built = Array(repeating: UInt8(1), count: 50_000)
        let docs = [(try DocumentID("pictures/photo.bin"), photo), (try DocumentID("build/out.bin"), built)]
        let revs = docs.map { RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of($0.1)) }
        async let pulling: Void = {
            try? await session.open()
            _ = try? await session.pullOnce()
            await session.close()
        }()

        var copyInode: UInt64?
        var ignoredDirectoryMade = false
        var exchanges = 0
        while exchanges < 60, let action = try await peer.next() {
            exchanges += 1
            switch action {
            case .request(let n, _, .getCheckpoint):
                try await peer.respond(n, .error(status: 404, message: "none"))
            case .request(let n, _, .setCheckpoint):
                try await peer.respond(n, .checkpointSaved(rev: "1"))
            case .request(let n, _, .subChanges):
                try await peer.respond(n, .ok)
                try await peer.request(.changes(docs.enumerated().map { i, d in
                    ChangeEntry(sequence: i + 1, doc: d.0, rev: revs[i], deleted: false, bodySize: d.1.count)
                }))
            case .response(_, "changes", .changes(let answers, _)) where !answers.isEmpty:
                #expect(answers.count == 2)
                for (i, d) in docs.enumerated() {
                    try await peer.request(.rev(doc: d.0, rev: revs[i], history: [], sequence: i + 1,
                                                body: .blob(BlobReference(digest: BlobDigest.of(d.1), length: d.1.count, contentType: nil))))
                }
                try await peer.request(.changes([]))  // caught up
            case .request(let n, _, .getAttachment(let digest, _, _)):
                let isPhoto = digest == BlobDigest.of(photo)
                let bytes = isPhoto ? photo : built
                try await peer.respond(n, .attachment(length: bytes.count))
                let half = bytes.count / 2
                try await theirs.send(binary: BlobChunk(requestNumber: UInt32(n), isLast: false, bytes: bytes[..<half]).encoded())
                if isPhoto {
                    // The first half is in a temp file beside the document before the rest is sent.
                    #expect(await soon { temps(in: folder + "/pictures").contains { $0.size == half } }, "\(temps(in: folder + "/pictures"))")
                    copyInode = temps(in: folder + "/pictures").first?.inode
                } else {
                    try? await Task.sleep(for: .milliseconds(100))
                    ignoredDirectoryMade = FileManager.default.fileExists(atPath: folder + "/build")
                }
                try await theirs.send(binary: BlobChunk(requestNumber: UInt32(n), isLast: true, bytes: bytes[half...]).encoded())
            default:
                break
            }
        }
        await pulling
        await loop
        // The document is the file written as the bytes arrived; the ignored one was never written.
        let placed = try #require(try FileSystem.lstat(folder + "/pictures/photo.bin"))
        #expect(copyInode != nil && UInt64(placed.st_ino) == copyInode)
        #expect(FileManager.default.contents(atPath: folder + "/pictures/photo.bin") == Data(photo))
        #expect(!ignoredDirectoryMade)
        #expect(!FileManager.default.fileExists(atPath: folder + "/build"))
        #expect(temps(in: folder + "/pictures").isEmpty)
    }
}
