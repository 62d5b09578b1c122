import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// A peer that lies, spoken for frame by frame over a loopback transport.
@Suite struct HostilePeerTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The test's side of the conversation: decodes what the session sends, encodes answers.
    struct FakePeer {
        let transport: LoopbackTransport
        var machine = ConnectionStateMachine(role: .passive, localPeer: "liar", database: "inventory")
        var iterator: TransportInbox.AsyncIterator

        init(_ transport: LoopbackTransport) {
            self.transport = transport
            iterator = transport.inbound.makeAsyncIterator()
        }

        /// The next action the session's frames call for (hello is answered here).
        mutating func next() async throws -> ConnectionStateMachine.Action? {
            while let message = await iterator.next() {
                guard case .text(let bytes) = message else { continue }
                let action = machine.receiveText(bytes)
                if case .send(let frame) = action { try await transport.send(text: FrameCodec.encode(frame)); continue }
                return action
            }
            return nil
        }

        mutating func request(_ r: Request) async throws {
            try await transport.send(text: FrameCodec.encode(machine.send(r)))
        }

        func respond(_ n: Int, _ r: Response) async throws {
            try await transport.send(text: FrameCodec.encode(.response(to: n, r)))
        }
    }

    @Test func blobBytesThatDoNotMatchTheirDigestAreDiscardedAndThePeerIsDisconnected() async throws {
        let tmp = TemporaryDirectory()
        let folder = tmp.appending("inventory")
        let store = try FolderStore.create(at: folder, name: "inventory")
        let shared = SharedStore(store)
        let (ours, theirs) = LoopbackTransport.pair()
        let session = PeerSession(transport: ours, shared: shared, role: .active, remoteDatabase: "inventory", logger: logger)
        async let loop: Void = session.run()
        var peer = FakePeer(theirs)
        // Bounded: if the session never hangs up, the test does, after 10 s, and fails.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            await theirs.close(code: 4000, reason: "test timed out")
        }
        defer { watchdog.cancel() }
        let promised = BlobDigest.of(Array("the real bytes".utf8))
        async let pulling: Void = {
            try? await session.open()
            _ = try? await session.pullOnce()
        }()

        // The session asks for its checkpoint and subscribes; the liar announces a file, sends
        // its revision when asked for it, and answers getAttachment with other bytes.
        let doc = try DocumentID("photo.bin"), rev = try RevisionID("1-ab")
        var exchanges = 0
        while exchanges < 20, let action = try await peer.next() {
            exchanges += 1
            switch action {
            case .request(let n, _, .getCheckpoint):
                try await peer.respond(n, .error(status: 404, message: "none"))
            case .request(let n, _, .subChanges):
                try await peer.respond(n, .ok)
                try await peer.request(.changes([ChangeEntry(sequence: 1, doc: doc, rev: rev, deleted: false, bodySize: 14)]))
            case .response(_, "changes", .changes(let answers, _)):
                #expect(answers == [.wanted(knownAncestors: [])])
                try await peer.request(.rev(doc: doc, rev: rev, history: [], sequence: 1,
                                            body: .blob(BlobReference(digest: promised, length: 14, contentType: nil))))
            case .request(let n, _, .getAttachment):
                try await peer.respond(n, .attachment(length: 14))
                try await theirs.send(binary: BlobChunk(requestNumber: UInt32(n), isLast: true, bytes: Array("fake bytes!!!!".utf8)[...]).encoded())
            default:
                break
            }
        }
        await loop
        await pulling
        let reason = theirs.closeDescription ?? ""
        #expect(reason.hasPrefix("1002") && reason.contains("hash"), "\(reason)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/photo.bin"))
        let log = try String(contentsOfFile: folder + "/.ferry/revs.log", encoding: .utf8)
        #expect(log.isEmpty, "\(log)")
        // Nor a temp file of the document's copy, written beside it as the bytes arrived.
        let objects = try FerryProcess.shell("find . -type f \\( -path './.ferry/objects/*' -o -path './.ferry/tmp/*' -o -name '.ferry-tmp-*' \\) | wc -l", in: folder)
        #expect(objects.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(objects.stdout)")
    }
}
