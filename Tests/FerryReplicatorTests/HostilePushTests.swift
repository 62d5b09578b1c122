import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// A peer that pushes what no honest peer sends, to a listener's session, frame by frame: each
/// refusal is answered with an error, nothing refused is stored, and everything acknowledged
/// reads back from the log (issue 17).
@Suite struct HostilePushTests {
    /// A listener's session over a loopback transport, and the liar's side of it.
    final class Listener {
        let tmp = TemporaryDirectory()
        let folder: String
        let shared: SharedStore
        let theirs: LoopbackTransport
        let session: PeerSession
        let running: Task<Void, Never>
        var machine: ConnectionStateMachine
        var iterator: TransportInbox.AsyncIterator

        init(peerID: String = "liar", sharing other: Listener? = nil, readOnly: Bool = false) throws {
            folder = other?.folder ?? tmp.appending("inventory")
            shared = try other?.shared ?? SharedStore(FolderStore.create(at: folder, name: "inventory"))
            let (ours, theirs) = LoopbackTransport.pair()
            self.theirs = theirs
            let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            session = PeerSession(transport: ours, shared: shared, role: .passive, readOnly: readOnly, logger: logger)
            let session = self.session
            running = Task { await session.run() }
            machine = ConnectionStateMachine(role: .active, localPeer: peerID, database: "inventory")
            iterator = theirs.inbound.makeAsyncIterator()
        }

        deinit { running.cancel() }

        /// What the session answers next (requests it makes are answered with an error);
        /// nil once it closed. Bounded: gives up after 10 s.
        func next() async throws -> ConnectionStateMachine.Action? {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, let message = await iterator.next() {
                guard case .text(let bytes) = message else { continue }
                switch machine.receiveText(bytes) {
                case .none: continue
                case .request(let n, let noReply, _):
                    if !noReply { try await theirs.send(text: FrameCodec.encode(.response(to: n, .error(status: 404, message: "none")))) }
                case let action: return action
                }
            }
            return nil
        }

        /// Subscribes to the session's changes once; returns the revisions it announces
        /// (answering each `changes` with "not wanted") until it says it caught up.
        func pull() async throws -> [ChangeEntry] {
            try await theirs.send(text: FrameCodec.encode(machine.send(.subChanges(since: 0, continuous: false, docIDs: nil))))
            var announced: [ChangeEntry] = []
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, let message = await iterator.next() {
                guard case .text(let bytes) = message else { continue }
                switch machine.receiveText(bytes) {
                case .request(let n, _, .changes(let entries)):
                    if entries.isEmpty { return announced }
                    announced += entries
                    let answers = entries.map { _ in ChangeAnswer.notWanted }
                    try await theirs.send(text: FrameCodec.encode(.response(to: n, .changes(answers, maxHistory: nil))))
                case .request(let n, false, _):
                    try await theirs.send(text: FrameCodec.encode(.response(to: n, .ok)))
                default:
                    continue
                }
            }
            return announced
        }

        /// Sends hello; returns how the session answered it.
        func hello() async throws -> ConnectionStateMachine.Action? {
            try await theirs.send(text: FrameCodec.encode(machine.start()!))
            return try await next()
        }

        /// Sends a request; returns the session's answer to it.
        func push(_ request: Request) async throws -> Response? {
            try await theirs.send(text: FrameCodec.encode(machine.send(request)))
            guard case .response(_, _, let response)? = try await next() else { return nil }
            return response
        }

        /// Stops the session; returns the folder's store, reopened from disk.
        func reopen() async throws -> FolderStore {
            await theirs.close(code: 1000, reason: "done")
            await running.value
            return try FolderStore.open(at: folder, writable: false)
        }
    }

    static func refused(_ response: Response?) -> String? {
        if case .error(let status, let message)? = response, (400..<500).contains(status) { return message }
        return nil
    }

    @Test func aRevisionWithoutTheHistoryItsGenerationNeedsIsRefusedAndTheLogReadsBack() async throws {
        let listener = try Listener()
        guard case .opened? = try await listener.hello() else { Issue.record("hello failed"); return }
        let doc = try DocumentID("a.json")
        let body = RevisionBody.json(["a": 1])
        let noHistory = try await listener.push(.rev(doc: doc, rev: try RevisionID("2-ab"), history: [], sequence: 1, body: body))
        #expect(Self.refused(noHistory)?.contains("needs its parent") == true, "\(String(describing: noHistory))")
        let huge = (1 << 40) - 1
        let deep = try await listener.push(.rev(doc: doc, rev: try RevisionID("\(huge)-ab"), history: [try RevisionID("\(huge - 1)-cd")],
                                                sequence: 2, body: body))
        #expect(Self.refused(deep)?.contains("beyond") == true, "\(String(describing: deep))")
        let good = try await listener.push(.rev(doc: doc, rev: try RevisionID("1-ab"), history: [], sequence: 3, body: body))
        #expect(good == .ok)
        let store = try await listener.reopen()
        #expect(store.damagedLogLines.isEmpty)
        #expect(try store.readLogEntries().map(\.rev.description) == ["1-ab"])
    }

    @Test func localConfigurationAndNamesFerryNeverRecordsAreRefused() async throws {
        let listener = try Listener()
        guard case .opened? = try await listener.hello() else { Issue.record("hello failed"); return }
        let blob = RevisionBody.blob(BlobReference(digest: BlobDigest.of(Array("*\n".utf8)), length: 2, contentType: nil))
        for (n, name) in [".ferryignore", "sub/.ferry-tmp-x1", "notes.txt~", ".notes.json.swp", "sub/.x.json.swp"].enumerated() {
            let answer = try await listener.push(.rev(doc: try DocumentID(name), rev: try RevisionID("1-ab"), history: [], sequence: n + 1,
                                                      body: name.hasSuffix(".json") ? .json(["x": 1]) : blob))
            let why = n == 0 ? "never syncs .ferryignore: it is each folder's own configuration" : "never syncs this name"
            #expect(Self.refused(answer)?.contains(why) == true, "\(name): \(String(describing: answer)) \(listener.theirs.closeDescription ?? "")")
        }
        let store = try await listener.reopen()
        #expect(try store.readLogEntries().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: listener.folder + "/.ferryignore"))
        #expect(throws: DocumentID.InvalidError.self) { try DocumentID("bell\u{7}.json") }
    }

    @Test func aNumberBombStaysSmallAndADeepBodyThatWouldPrettyPrintHugeIsRefused() async throws {
        let listener = try Listener()
        guard case .opened? = try await listener.hello() else { Issue.record("hello failed"); return }
        let bomb = try JSONParser.parse(Array(#"{"x":123456789012345678e100000000}"#.utf8))
        let answer = try await listener.push(.rev(doc: try DocumentID("bomb.json"), rev: try RevisionID("1-ab"), history: [], sequence: 1,
                                                  body: .json(bomb)))
        #expect(answer == .ok)
        let file = try Data(contentsOf: URL(fileURLWithPath: listener.folder + "/bomb.json"))
        #expect(file.count < 100, "\(file.count) bytes")
        #expect(String(decoding: file, as: UTF8.self).contains("1.23456789012345678e+100000017"))
        // 400 levels deep, 200,000 numbers at the bottom: 0.4 MB canonical, 160 MB pretty-printed.
        var deep = JSONValue.array(Array(repeating: .number(JSONNumber(1)), count: 200_000))
        for _ in 0..<400 { deep = .array([deep]) }
        let refused = try await listener.push(.rev(doc: try DocumentID("deep.json"), rev: try RevisionID("1-cd"), history: [], sequence: 2,
                                                   body: .json(["d": deep])))
        #expect(Self.refused(refused)?.contains("MiB") == true, "\(String(describing: refused))")
        let store = try await listener.reopen()
        #expect(try store.readLogEntries().map(\.doc.rawValue) == ["bomb.json"])
        #expect(!FileManager.default.fileExists(atPath: listener.folder + "/deep.json"))
    }

    @Test func anIdThatIsNotTheHashOfItsBodyIsRefused() async throws {
        let listener = try Listener()
        guard case .opened? = try await listener.hello() else { Issue.record("hello failed"); return }
        let doc = try DocumentID("a.json")
        let x: JSONValue = ["v": "x"], y: JSONValue = ["v": "y"]
        let idOfX = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(x.canonicalBytes))
        let lie = try await listener.push(.rev(doc: doc, rev: idOfX, history: [], sequence: 1, body: .json(y)))
        #expect(Self.refused(lie)?.contains("does not match") == true, "\(String(describing: lie))")
        let deletion = try await listener.push(.rev(doc: doc, rev: idOfX, history: [], sequence: 2, body: .deleted))
        #expect(Self.refused(deletion)?.contains("not that of a deletion") == true, "\(String(describing: deletion))")
        let truth = try await listener.push(.rev(doc: doc, rev: idOfX, history: [], sequence: 3, body: .json(x)))
        #expect(truth == .ok)
        let store = try await listener.reopen()
        #expect(try store.readLogEntries().map(\.rev) == [idOfX])
        #expect(try store.jsonBody(of: #require(store.current(doc)), doc: doc) == x)
    }

    /// A liar that claims another peer's id cannot make the listener withhold documents from
    /// that peer: only what a connection delivered itself is not announced back to it.
    @Test func claimingAnotherPeersIdWithholdsNothingFromIt() async throws {
        let liar = try Listener(peerID: "honest-peer")
        guard case .opened? = try await liar.hello() else { Issue.record("hello failed"); return }
        let body: JSONValue = ["planted": true]
        let rev = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(body.canonicalBytes))
        #expect(try await liar.push(.rev(doc: try DocumentID("planted.json"), rev: rev, history: [], sequence: 1, body: .json(body))) == .ok)
        // The liar itself is not sent back what it delivered.
        #expect(try await liar.pull().isEmpty)
        let honest = try Listener(peerID: "honest-peer", sharing: liar)
        guard case .opened? = try await honest.hello() else { Issue.record("hello failed"); return }
        #expect(try await honest.pull().map(\.rev) == [rev])
    }

    /// A read-only listener stores no checkpoint of pushes it refused; a pull's is kept.
    @Test func aReadOnlyListenerKeepsNoCheckpointOfPushes() async throws {
        let listener = try Listener(readOnly: true)
        guard case .opened? = try await listener.hello() else { Issue.record("hello failed"); return }
        let push = try await listener.push(.setCheckpoint(client: "push:x", rev: nil, checkpoint: Checkpoint(local: 9, remote: 0)))
        #expect(push.map { if case .error(403, _) = $0 { true } else { false } } == true, "\(String(describing: push))")
        let pull = try await listener.push(.setCheckpoint(client: "pull:x", rev: nil, checkpoint: Checkpoint(local: 0, remote: 0)))
        #expect(pull.map { if case .checkpointSaved = $0 { true } else { false } } == true, "\(String(describing: pull))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: listener.folder + "/.ferry/checkpoints").count == 1)
    }

    @Test func aPeerCannotCallItselfLocalOrGiveAnEndlessId() async throws {
        for id in ["local", String(repeating: "x", count: 1 << 20), "new\nline"] {
            let listener = try Listener(peerID: id)
            let answer = try await listener.hello()
            guard case .close(let code, let reason, _)? = answer else { Issue.record("\(id.prefix(10)): \(String(describing: answer))"); continue }
            #expect(code == 1002 || reason.contains("peer id") || reason.contains("local"), "\(reason)")
        }
    }
}
