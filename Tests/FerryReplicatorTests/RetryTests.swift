import Foundation
import Logging
import Synchronization
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// Issue 18: a peer that says hello and then answers every revision with 503 (a full disk) must
/// not keep a one-shot replication retrying for ever: a session that moved nothing counts as a
/// failed attempt, so `maxAttempts` and the backoff hold.
@Suite struct RetryTests {
    /// Plays a passive peer on `transport`: hello, no checkpoint, every change wanted, each
    /// revision answered by `answer` (given its document).
    static func playPassivePeer(_ transport: LoopbackTransport, name: String, answer: (DocumentID) -> Response) async {
        var machine = ConnectionStateMachine(role: .passive, localPeer: name, database: "inventory")
        var iterator = transport.inbound.makeAsyncIterator()
        while let message = await iterator.next() {
            guard case .text(let bytes) = message else { continue }
            let reply: Frame?
            switch machine.receiveText(bytes) {
            case .send(let frame): reply = frame
            case .request(let n, let noReply, let request):
                guard !noReply else { continue }
                switch request {
                case .getCheckpoint: reply = .response(to: n, .error(status: 404, message: "no checkpoint"))
                case .setCheckpoint: reply = .response(to: n, .checkpointSaved(rev: "1"))
                case .changes(let entries): reply = .response(to: n, .changes(entries.map { _ in .wanted(knownAncestors: []) }, maxHistory: nil))
                case .rev(let doc, _, _, _, _, _, _): reply = .response(to: n, answer(doc))
                default: reply = .response(to: n, .ok)
                }
            default: reply = nil
            }
            if let reply { _ = transport.enqueue(.text(FrameCodec.encode(reply))) }
        }
    }

    /// A full disk: every revision refused with 503.
    static func refuseEveryRevision(_ transport: LoopbackTransport) async {
        await playPassivePeer(transport, name: "full-disk") { _ in .error(status: 503, message: "no space left on device") }
    }

    /// Runs a replicator of `shared` with `configuration` whose every connection reaches a
    /// fake peer `peer` plays (each in a task of its own), cancelled after 20 s at most.
    static func replicate(_ shared: SharedStore, _ configuration: ReplicatorConfiguration,
                          peer: @escaping @Sendable (LoopbackTransport) async -> Void) async -> Result<ReplicationStats, Error> {
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let replicator = Replicator(configuration: configuration, shared: shared, connect: {
            let (ours, theirs) = LoopbackTransport.pair()
            Task { await peer(theirs) }
            return ours
        }, logger: logger)
        let outcome = Task { try await replicator.run() }
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            outcome.cancel()
        }
        defer { watchdog.cancel() }
        return await outcome.result
    }

    /// A one-shot replication in `direction` that gives up after three attempts, 10-40 ms apart.
    static func threeQuickAttempts(_ direction: ReplicationDirection) -> ReplicatorConfiguration {
        var configuration = ReplicatorConfiguration(url: "loopback", remoteDatabase: "inventory")
        configuration.direction = direction
        configuration.maxAttempts = 3
        configuration.firstAttemptWait = .milliseconds(10)
        configuration.maxAttemptWait = .milliseconds(40)
        return configuration
    }

    /// The documents a fake peer took.
    final class Taken: Sendable {
        let names = Mutex<[String]>([])
    }

    /// Takes every revision but those of `refused`, which it answers 403 (as Sync Gateway's
    /// sync function refuses a document); `taken` lists the rest.
    static func refuseOneDocument(_ transport: LoopbackTransport, refused: String, taken: Taken) async {
        await playPassivePeer(transport, name: "gateway") { doc in
            guard doc.rawValue != refused else { return .error(status: 403, message: "forbidden by the sync function") }
            taken.names.withLock { $0.append(doc.rawValue) }
            return .ok
        }
    }

    /// One document refused (403) is that document's failure: the others are pushed, and the
    /// one-shot push ends as done, counting one failed revision.
    @Test func aRevisionRefusedFor403FailsThatDocumentOnlyAndThePushGoesOn() async throws {
        let tmp = TemporaryDirectory()
        let store = try FolderStore.create(at: tmp.appending("a"), name: "inventory")
        for name in ["a.json", "forbidden.json", "z.json"] {
            try Data("{\"name\": \"\(name)\"}\n".utf8).write(to: URL(fileURLWithPath: tmp.appending("a") + "/" + name))
        }
        _ = try store.scanAndRecord()
        let shared = SharedStore(store)
        let taken = Taken()
        var configuration = ReplicatorConfiguration(url: "loopback", remoteDatabase: "inventory")
        configuration.direction = .push
        configuration.maxAttempts = 1
        let stats = try await Self.replicate(shared, configuration) { await Self.refuseOneDocument($0, refused: "forbidden.json", taken: taken) }.get()
        #expect(Set(taken.names.withLock { $0 }) == ["a.json", "z.json"])
        #expect(stats.revisionsSent == 2 && stats.revisionsFailed == 1 && stats.pushRefused == nil, "\(stats)")
    }

    @Test func aPeerThatRefusesEveryRevisionWith503StopsAOneShotPushAfterMaxAttempts() async throws {
        let tmp = TemporaryDirectory()
        let store = try FolderStore.create(at: tmp.appending("a"), name: "inventory")
        try Data("{\"x\": 1}\n".utf8).write(to: URL(fileURLWithPath: tmp.appending("a") + "/doc.json"))
        _ = try store.scanAndRecord()
        let shared = SharedStore(store)
        let sessions = Mutex(0)
        let outcome = await Self.replicate(shared, Self.threeQuickAttempts(.push)) { peer in
            sessions.withLock { $0 += 1 }
            await Self.refuseEveryRevision(peer)
        }
        #expect((try? outcome.get()) == nil, "the push did not fail")
        #expect(sessions.withLock { $0 } == 3, "\(sessions.withLock { $0 }) sessions for --max-attempts 3")
    }

    /// Serves a pull of two documents: the first is sent, the second the peer says it cannot
    /// send now (`norev` 503), and then it says "caught up" all the same.
    static func sendOneAndFailTheOther(_ transport: LoopbackTransport) async {
        var peer = HostilePeerTests.FakePeer(transport)
        let docs = [(try! DocumentID("kept.json"), JSONValue.object(["n": 1])), (try! DocumentID("unreadable.json"), JSONValue.object(["n": 2]))]
        let revs = docs.map { RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of($0.1.canonicalBytes)) }
        while let action = try? await peer.next() {
            switch action {
            case .request(let n, _, .getCheckpoint): try? await peer.respond(n, .error(status: 404, message: "none"))
            case .request(let n, _, .setCheckpoint): try? await peer.respond(n, .checkpointSaved(rev: "1"))
            case .request(let n, _, .subChanges):
                try? await peer.respond(n, .ok)
                try? await peer.request(.changes(docs.enumerated().map { i, d in
                    ChangeEntry(sequence: i + 1, doc: d.0, rev: revs[i], deleted: false, bodySize: 7)
                }))
            case .response(_, "changes", .changes(let answers, _)) where !answers.isEmpty:
                for (i, answer) in answers.enumerated() where answer != .notWanted {
                    if i == 0 {
                        try? await peer.request(.rev(doc: docs[0].0, rev: revs[0], history: [], sequence: 1, body: .json(docs[0].1)))
                    } else {
                        try? await peer.request(.norev(doc: docs[1].0, rev: revs[1], sequence: 2, status: 503, reason: "could not read it"))
                    }
                }
                try? await peer.request(.changes([]))
            case .request(let n, false, .changes(let entries)): try? await peer.respond(n, .changes(entries.map { _ in .notWanted }, maxHistory: nil))
            case .request(let n, false, _): try? await peer.respond(n, .ok)
            default: continue
            }
        }
    }

    /// A revision the peer cannot send now keeps a one-shot pull failing, and each attempt
    /// counts even though the first stored the other document and each one was told "caught
    /// up": the pull stops after `maxAttempts`, its checkpoint below that revision. It used
    /// to start over at once every half second, for ever.
    @Test func aRevisionThatCannotBeStoredCountsEachAttemptOfAOneShotPull() async throws {
        let tmp = TemporaryDirectory()
        let store = try FolderStore.create(at: tmp.appending("a"), name: "inventory")
        let shared = SharedStore(store)
        let sessions = Mutex(0)
        let outcome = await Self.replicate(shared, Self.threeQuickAttempts(.both)) { peer in
            sessions.withLock { $0 += 1 }
            await Self.sendOneAndFailTheOther(peer)
        }
        guard case .failure(let error) = outcome else { Issue.record("the pull did not fail"); return }
        #expect("\(error)".contains("1 revision from the peer could not be stored (unreadable.json: the peer could not send it (503)"), "\(error)")
        #expect(sessions.withLock { $0 } == 3, "\(sessions.withLock { $0 }) sessions for maxAttempts 3")
        #expect(FileManager.default.fileExists(atPath: tmp.appending("a") + "/kept.json"))
        #expect(!FileManager.default.fileExists(atPath: tmp.appending("a") + "/unreadable.json"))
    }
}
