import Foundation
import Logging
import Synchronization
import Testing
import FerryCore
import FerryNet
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// One-shot pull and push between two real folders over a real WebSocket on 127.0.0.1.
@Suite(.serialized) struct OneShotReplicationTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// Appended to the path each listener of this test serves its database at. A listener on
    /// port 0 may get the port of one another test stopped, whose peers (agents in other
    /// processes) still dial `/inventory` there; at a path of its own, such a stray gets 404
    /// instead of a session that holds this test's folder (its writer lock: the test's next
    /// pull was refused so) and pushes its own documents into it. The database's name in the
    /// handshake stays the folder's.
    let unique = String(UUID().uuidString.prefix(8)).lowercased()

    /// The path segment this test serves `database` at.
    func own(_ database: String) -> String { "\(database)-\(unique)" }

    /// Serves `folder` with a passive session per connection (each opens the folder itself).
    /// The session of the connection before, or of a listener stopped a moment ago, may still
    /// hold the folder's writer lock after its peer left: the next one tries again (bounded),
    /// and closes its connection if it cannot open the folder, so that the pulling or pushing side fails
    /// instead of waiting for ever for an answer (a loaded machine's full test run hung so).
    func serve(_ folder: String, database: String, readOnly: Bool = false, firstMessageWithin: Duration? = nil) async throws -> Listener {
        let logger = self.logger
        return try await Listener.start(ListenerConfiguration(database: own(database))) { connection in
            Task {
                var store = try? FolderStore.open(at: folder, writable: true)
                for _ in 0..<200 where store == nil {
                    try? await Task.sleep(for: .milliseconds(50))
                    store = try? FolderStore.open(at: folder, writable: true)
                }
                guard let store else {
                    await connection.close(code: 1011, reason: "cannot open the folder")
                    return
                }
                await PeerSession(transport: connection, shared: SharedStore(store), role: .passive, readOnly: readOnly, logger: logger)
                    .run(firstMessageWithin: firstMessageWithin)
            }
        }
    }

    /// `ferry scan` in a folder this suite's listener serves: the listener's session for the
    /// last pull lets go of the folder (its writer's lock) a moment after the pulling side's
    /// session has ended, and a scan meanwhile exits 4 (another writer); it is tried again,
    /// suspending between tries so that the session can end.
    func scan(_ folder: String) async throws -> Int32 {
        var status: Int32 = -1
        _ = try await awaitUntil(10) {
            status = try FerryProcess.ferry(["scan"], in: folder).status
            return status != 4
        }
        return status
    }

    func push(from folder: String, to listener: Listener, database: String) async throws -> ReplicationStats {
        try await session(folder, listener, database) { try await $0.pushOnce() }
    }

    func pull(into folder: String, from listener: Listener, database: String) async throws -> ReplicationStats {
        try await session(folder, listener, database) { try await $0.pullOnce() }
    }

    func session(_ folder: String, _ listener: Listener, _ database: String,
                 _ work: (PeerSession) async throws -> ReplicationStats) async throws -> ReplicationStats {
        let connection = try await Dialer.connect(to: PeerURL("ws://127.0.0.1:\(listener.port)/\(own(database))")!)
        // The listener's session of an earlier replication of this folder may still be closing
        // it (it holds the folder's lock until then), as `serve` waits for the lock too.
        var opened = Result { try FolderStore.open(at: folder, writable: true) }
        for _ in 0..<200 {
            guard case .failure(let error) = opened, (error as? StoreError)?.code == .locked else { break }
            try await Task.sleep(for: .milliseconds(50))
            opened = Result { try FolderStore.open(at: folder, writable: true) }
        }
        let store = try opened.get()
        let session = PeerSession(transport: connection, shared: SharedStore(store), role: .active, remoteDatabase: database, logger: logger)
        async let loop: Void = session.run()
        let stats: ReplicationStats
        do {
            try await session.open()
            stats = try await work(session)
        } catch {
            await session.close()
            await loop
            throw error
        }
        await session.close()
        await loop
        return stats
    }

    @Test func aOneShotPullCopiesTheSampleAndItsBlobsIntoAnEmptyFolder() async throws {
        let tmp = TemporaryDirectory()
        let source = tmp.appending("inventory"), target = tmp.appending("copy")
        #expect(try FerryProcess.ferry(["init", "--sample", source]).status == 0)
        #expect(try FerryProcess.ferry(["init", target]).status == 0)
        try tmp.write("inventory/notes/today.json", #"{"text": "buy apples"}"#)
        _ = try FerryProcess.shell("head -c 300000 /dev/urandom > \(source)/photo.bin")
        #expect(try FerryProcess.ferry(["scan"], in: source).status == 0)
        let listener = try await serve(source, database: "inventory")

        let stats = try await pull(into: target, from: listener, database: "inventory")
        #expect(stats.revisionsReceived == 3, "\(stats)")
        #expect(stats.blobsReceived >= 50, "\(stats)")
        for doc in ["samplelist.json", "notes/today.json"] {
            let a = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(source)/\(doc)"))))
            let b = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(target)/\(doc)"))))
            #expect(a == b, "\(doc)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(source)/photo.bin")) == Data(contentsOf: URL(fileURLWithPath: "\(target)/photo.bin")))
        let verifySource = try FerryProcess.ferry(["verify"], in: source), verifyTarget = try FerryProcess.ferry(["verify"], in: target)
        #expect(verifySource.status == 0 && verifyTarget.status == 0, "\(verifyTarget.stdout)")
        // Same revision ids on both sides, the pulled ones marked with the source's peer id.
        let revs = try FerryProcess.shell("diff <(jq -r '.rev' \(source)/.ferry/revs.log | sort) <(jq -r '.rev' \(target)/.ferry/revs.log | sort) && jq -r '.origin' \(target)/.ferry/revs.log | sort -u")
        #expect(revs.status == 0 && !revs.stdout.contains("local"), "\(revs.stdout)\(revs.stderr)")

        // A second pull resumes from the checkpoint and moves nothing.
        let again = try await pull(into: target, from: listener, database: "inventory")
        #expect(again.revisionsReceived == 0 && again.blobsReceived == 0, "\(again)")
        // A new edit is the only thing the next pull moves.
        _ = try FerryProcess.shell("sed -i 's/buy apples/buy pears/' \(source)/notes/today.json")
        #expect(try await scan(source) == 0)
        let third = try await pull(into: target, from: listener, database: "inventory")
        #expect(third.revisionsReceived == 1 && third.blobsReceived == 0, "\(third)")
        #expect(try String(contentsOfFile: "\(target)/notes/today.json", encoding: .utf8).contains("buy pears"))
        await listener.stop()
    }

    /// Revisions `compact` took the bodies of are not announced: a pull from a compacted
    /// folder moves its leaves (with the whole history's ids) and fails nothing.
    @Test func aPullFromACompactedFolderFailsNothing() async throws {
        let tmp = TemporaryDirectory()
        let source = tmp.appending("inventory"), target = tmp.appending("copy")
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try tmp.write("inventory/d.json", #"{"v": 0}"#)
        #expect(try FerryProcess.ferry(["init", source]).status == 0)
        for v in 1...5 {
            try tmp.write("inventory/d.json", "{\"v\": \(v)}")
            #expect(try await scan(source) == 0)
        }
        #expect(try FerryProcess.ferry(["compact", "--keep-depth", "1"], in: source).stdout.contains("Compacted 4 revisions"))
        #expect(try FerryProcess.ferry(["init", target]).status == 0)
        let listener = try await serve(source, database: "inventory")
        let stats = try await pull(into: target, from: listener, database: "inventory")
        await listener.stop()
        #expect(stats.revisionsReceived == 2 && stats.revisionsFailed == 0, "\(stats)")
        #expect(try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: target + "/d.json")))) == ["v": 5])
        #expect(try FerryProcess.ferry(["verify"], in: target).status == 0)
    }

    @Test func aOneShotPushSendsWhatThePeerLacksAndAReadOnlyPeerRefuses() async throws {
        let tmp = TemporaryDirectory()
        let source = tmp.appending("laptop"), target = tmp.appending("inventory")
        #expect(try FerryProcess.ferry(["init", "--sample", source]).status == 0)
        #expect(try FerryProcess.ferry(["init", target]).status == 0)
        let readOnly = try await serve(target, database: "inventory", readOnly: true)
        do {
            _ = try await push(from: source, to: readOnly, database: "inventory")
            Issue.record("a read-only listener accepted a push")
        } catch let error as ReplicationError {
            #expect(error.message.contains("403") && error.message.contains("read-only"), "\(error)")
        }
        await readOnly.stop()
        #expect(!FileManager.default.fileExists(atPath: target + "/samplelist.json"))
        #expect(try FerryProcess.ferry(["log"], in: target).stdout.isEmpty)

        let listener = try await serve(target, database: "inventory")
        let stats = try await push(from: source, to: listener, database: "inventory")
        #expect(stats.revisionsSent == 1, "\(stats)")
        let a = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(source)/samplelist.json"))))
        let b = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(target)/samplelist.json"))))
        #expect(a == b)
        #expect(try FerryProcess.ferry(["verify"], in: target).status == 0)
        // Resumes from the checkpoint: nothing to send the second time.
        #expect(try await push(from: source, to: listener, database: "inventory").revisionsSent == 0)
        await listener.stop()
    }

    @Test func concurrentEditsConvergeAfterAPullEachWay() async throws {
        let tmp = TemporaryDirectory()
        let a = tmp.appending("inventory"), b = tmp.appending("other")
        #expect(try FerryProcess.ferry(["init", "--sample", a]).status == 0)
        #expect(try FerryProcess.ferry(["init", b]).status == 0)
        let listenA = try await serve(a, database: "inventory")
        _ = try await pull(into: b, from: listenA, database: "inventory")
        // Offline edits: A changes Apples, B changes Bananas, both change Cherries differently.
        func edit(_ folder: String, _ script: String) async throws {
            let r = try FerryProcess.shell("python3 -c \"import json; p='samplelist.json'; d=json.load(open(p)); items={i['key']: i for i in d['list']}; \(script); open(p,'w').write(json.dumps(d, indent=2))\"", in: folder)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try await scan(folder) == 0)
        }
        try await edit(a, "items['Apples']['value']=111; items['Cherries']['value']=1")
        try await edit(b, "items['Bananas']['value']=222; items['Cherries']['value']=2")
        let listenB = try await serve(b, database: "other")
        _ = try await pull(into: a, from: listenB, database: "other")
        _ = try await pull(into: b, from: listenA, database: "inventory")
        let fileA = try Data(contentsOf: URL(fileURLWithPath: a + "/samplelist.json"))
        let fileB = try Data(contentsOf: URL(fileURLWithPath: b + "/samplelist.json"))
        #expect(fileA == fileB)
        let merged = try JSONParser.parse(Array(fileA))
        let values = Dictionary(uniqueKeysWithValues: (merged["list"]?.arrayValue ?? []).compactMap { i in i["key"]?.stringValue.map { ($0, i["value"]?.intValue ?? -1) } })
        #expect(values["Apples"] == 111 && values["Bananas"] == 222, "\(values)")
        #expect(values["Cherries"] == 1 || values["Cherries"] == 2)
        // The same revision tree on both sides (a revision known only as history appears as a
        // line's "parent" or in its "ancestors"), and a merge recorded as such.
        let conflictsA = try FerryProcess.ferry(["conflicts", "--json"], in: a).stdout
        #expect(conflictsA.contains("\"resolution\": \"merged\""), "\(conflictsA)")
        let tree = "jq -r 'select(.doc==\"samplelist.json\") | .rev, (.parent // empty), (.ancestors // [] | .[])' .ferry/revs.log | sort -u"
        let currentA = try FerryProcess.shell(tree, in: a).stdout
        let currentB = try FerryProcess.shell(tree, in: b).stdout
        #expect(currentA == currentB, "A:\n\(currentA)\nB:\n\(currentB)")
        #expect(try FerryProcess.ferry(["verify"], in: a).status == 0)
        #expect(try FerryProcess.ferry(["verify"], in: b).status == 0)
        // Pulling again moves nothing: no ping-pong.
        #expect(try await pull(into: a, from: listenB, database: "other").revisionsReceived == 0)
        #expect(try await pull(into: b, from: listenA, database: "inventory").revisionsReceived == 0)
        await listenA.stop()
        await listenB.stop()
    }

    @Test func aPullFromAnUnknownDatabaseFailsClearly() async throws {
        let tmp = TemporaryDirectory()
        let source = tmp.appending("inventory"), target = tmp.appending("copy")
        #expect(try FerryProcess.ferry(["init", source]).status == 0)
        #expect(try FerryProcess.ferry(["init", target]).status == 0)
        let listener = try await serve(source, database: "inventory")
        do {
            _ = try await pull(into: target, from: listener, database: "nothing")
            Issue.record("pulled from a database that does not exist")
        } catch let error as DialError {
            #expect(error.kind == .refused(status: 404))
        }
        await listener.stop()
    }

    /// A listener for "inventory" that takes each WebSocket (and answers its pings) but never
    /// serves it, the connections it took, and a new empty folder at `target` to replicate into.
    func mute(into target: String) async throws -> (Listener, TakenConnections, SharedStore) {
        #expect(try FerryProcess.ferry(["init", target]).status == 0)
        let taken = TakenConnections()
        let listener = try await Listener.start(ListenerConfiguration(database: own("inventory"))) { connection in
            taken.list.withLock { $0.append(connection) }
        }
        return (listener, taken, SharedStore(try FolderStore.open(at: target, writable: true)))
    }

    /// The connections a mute listener took.
    final class TakenConnections: Sendable {
        let list = Mutex<[PeerConnection]>([])
        var all: [PeerConnection] { list.withLock { $0 } }
    }

    /// A listener that takes the WebSocket (and answers its pings) but never the handshake
    /// holds a pull only as long as the handshake's limit: the connection is then closed and
    /// the pull fails, saying why. Stopping the pull meanwhile ends it at once, as a
    /// cancellation (not a timeout).
    @Test(.timeLimit(.minutes(1))) func aPeerThatNeverAnswersTheHandshakeIsLeftAtTheLimit() async throws {
        let tmp = TemporaryDirectory()
        let (listener, taken, shared) = try await mute(into: tmp.appending("copy"))
        let logger = self.logger
        func session() async throws -> PeerSession {
            let connection = try await Dialer.connect(to: PeerURL("ws://127.0.0.1:\(listener.port)/\(own("inventory"))")!)
            return PeerSession(transport: connection, shared: shared, role: .active, remoteDatabase: "inventory", logger: logger)
        }

        let waiting = try await session()
        async let loop: Void = waiting.run()
        let start = ContinuousClock.now
        do {
            try await waiting.open(within: .milliseconds(300))
            Issue.record("a handshake nobody answered opened")
        } catch let error as ReplicationError {
            #expect(error.message == "the peer did not answer the handshake within 300 ms", "\(error)")
        }
        await loop
        #expect(ContinuousClock.now - start < .seconds(10))

        let stopped = try await session()
        async let stoppedLoop: Void = stopped.run()
        let opening = Task { try await stopped.open(within: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        opening.cancel()
        await #expect(throws: CancellationError.self) { try await opening.value }
        await stoppedLoop
        #expect(ContinuousClock.now - cancelled < .seconds(10))
        #expect(taken.all.count == 2)
        await listener.stop()
    }

    /// A client that completes the WebSocket upgrade and never speaks (no `hello` over
    /// `ferry/1`, no request over Couchbase Lite's protocol) holds a listener's session only
    /// until the limit: the listener closes it with 1001 (4001 over Couchbase Lite's protocol),
    /// saying why. A client that speaks
    /// first and then stays quiet for longer than the limit is still served.
    @Test(.timeLimit(.minutes(1))) func aClientThatNeverSpeaksIsClosedByTheListenerAtTheLimit() async throws {
        let tmp = TemporaryDirectory()
        let source = tmp.appending("inventory"), target = tmp.appending("copy")
        #expect(try FerryProcess.ferry(["init", "--sample", source]).status == 0)
        #expect(try FerryProcess.ferry(["init", target]).status == 0)
        let listener = try await serve(source, database: "inventory", firstMessageWithin: .milliseconds(300))
        for peerProtocol in [PeerProtocol.ferry, .cbl] {
            let silent = try await Dialer.connect(to: PeerURL("ws://127.0.0.1:\(listener.port)/\(own("inventory"))")!, protocol: peerProtocol)
            let start = ContinuousClock.now
            // Bounded: without the limit, the listener would never close it.
            let closed = await withTaskGroup(of: CloseReason?.self) { group in
                group.addTask { await silent.waitUntilClosed() }
                group.addTask { try? await Task.sleep(for: .seconds(10)); return nil }
                let first = await group.next() ?? nil
                await silent.close(code: 1000, reason: "test over")
                group.cancelAll()
                return first
            }
            // 4001 over Couchbase Lite's protocol: the code after which its replicator retries.
            #expect(closed?.code == (peerProtocol == .cbl ? 4001 : 1001) && closed?.reason == "nothing received within 300 ms", "\(peerProtocol): \(String(describing: closed))")
            #expect(ContinuousClock.now - start < .seconds(10), "\(peerProtocol)")
        }
        let stats = try await session(target, listener, "inventory") { session in
            try await Task.sleep(for: .milliseconds(900))
            return try await session.pullOnce()
        }
        #expect(stats.revisionsReceived == 1, "\(stats)")
        #expect(FileManager.default.fileExists(atPath: target + "/samplelist.json"))
        await listener.stop()
    }

    /// Couchbase Lite's protocol has no handshake: a replicator that reaches a listener which
    /// takes the WebSocket but never answers gives up on the connection at its silence limit,
    /// saying why, instead of waiting for the first answer for ever.
    @Test(.timeLimit(.minutes(1))) func aCouchbaseLitePeerThatNeverAnswersIsLeftAtTheLimit() async throws {
        let tmp = TemporaryDirectory()
        let (listener, taken, shared) = try await mute(into: tmp.appending("copy"))
        var configuration = ReplicatorConfiguration(url: "ws://127.0.0.1:\(listener.port)/\(own("inventory"))", remoteDatabase: "inventory")
        configuration.direction = .pull
        configuration.maxAttempts = 1
        configuration.silenceLimit = .milliseconds(300)
        let url = PeerURL(configuration.url)!
        let replicator = Replicator(configuration: configuration, shared: shared, connect: {
            try await Dialer.connect(to: url, protocol: .cbl)
        }, logger: logger)
        let start = ContinuousClock.now
        let outcome = Task { try await replicator.run() }
        // Bounded: without the limit, the replicator would wait for an answer for ever.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            outcome.cancel()
        }
        defer { watchdog.cancel() }
        await #expect(throws: (any Error).self) { _ = try await outcome.value }
        #expect(ContinuousClock.now - start < .seconds(10))
        let lastError = replicator.status.lastError ?? ""
        #expect(lastError.contains("the peer sent nothing within 300 ms"), "\(lastError)")
        #expect(taken.all.map(\.wireFormat) == [.cbMobile(version: 3)])
        await listener.stop()
    }
}
