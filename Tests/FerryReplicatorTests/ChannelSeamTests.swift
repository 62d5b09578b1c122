import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// The seam between the replication logic and a wire format (`ReplicationChannel`): a session
/// syncs over a channel with no wire format at all, and `ferry/1`'s channel turns frames into
/// requests and answers, keeping the protocol's checks on its side.
@Suite struct ChannelSeamTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func twoFoldersSyncBothWaysOverAChannelWithNoWireFormat() async throws {
        let tmp = TemporaryDirectory()
        let laptop = tmp.appending("laptop"), desk = tmp.appending("desk")
        #expect(try FerryProcess.ferry(["init", "--sample", laptop]).status == 0)
        #expect(try FerryProcess.ferry(["init", desk]).status == 0)
        try tmp.write("desk/notes/today.json", #"{"text": "buy apples"}"#)
        _ = try FerryProcess.shell("head -c 9000000 /dev/urandom > \(desk)/scan.bin")  // more than one blob window
        #expect(try FerryProcess.ferry(["scan"], in: desk).status == 0)
        let a = SharedStore(try FolderStore.open(at: laptop, writable: true))
        let b = SharedStore(try FolderStore.open(at: desk, writable: true))

        let (active, passive) = DirectChannel.pair(first: a.info.id, second: b.info.id)
        let client = PeerSession(channel: active, shared: a, logger: logger)
        let server = PeerSession(channel: passive, shared: b, logger: logger)
        async let serving: Void = server.run()
        async let reading: Void = client.run()
        let watchdog = Task {
            try await Task.sleep(for: .seconds(30))
            await active.close(code: 4000, reason: "test timed out")
        }
        var outcome: Result<Void, Error> = .success(())
        do {
            try await client.open()
            try await client.replicate(.both, continuous: false)
        } catch {
            outcome = .failure(error)
        }
        watchdog.cancel()
        let stats = await client.stats
        await client.close()
        _ = await (serving, reading)
        try outcome.get()

        #expect(stats.revisionsSent >= 1 && stats.revisionsReceived == 2 && stats.blobsReceived == 1, "\(stats)")
        #expect(stats.bytesSent == 0 && stats.bytesReceived == 0, "nothing was encoded: \(stats)")
        for file in ["samplelist.json", "notes/today.json", "scan.bin"] {
            let here = try Data(contentsOf: URL(fileURLWithPath: "\(laptop)/\(file)"))
            let there = try Data(contentsOf: URL(fileURLWithPath: "\(desk)/\(file)"))
            // A JSON document arrives as its value (written out in the folder's own layout).
            if file.hasSuffix(".json") {
                #expect(try JSONParser.parse(Array(here)) == JSONParser.parse(Array(there)), "\(file)")
            } else {
                #expect(here == there, "\(file)")
            }
        }
        for folder in [laptop, desk] {
            let verify = try FerryProcess.ferry(["verify"], in: folder)
            #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        }
        // The revisions pulled over the channel name the peer it showed as theirs.
        let origins = try FerryProcess.shell("jq -r 'select(.doc == \"scan.bin\") | .origin' \(laptop)/.ferry/revs.log")
        #expect(origins.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == b.info.id, "\(origins.stdout)")
    }

    @Test func aBodyPassedThroughAsBytesIsParsedCheckedAndStoredCanonical() async throws {
        let tmp = TemporaryDirectory()
        let folder = tmp.appending("desk")
        #expect(try FerryProcess.ferry(["init", folder]).status == 0)
        let shared = SharedStore(try FolderStore.open(at: folder, writable: true))
        let (peer, ours) = DirectChannel.pair(first: "hostile", second: shared.info.id)
        let session = PeerSession(channel: ours, shared: shared, logger: logger)
        async let serving: Void = session.run()

        func push(_ doc: String, _ text: String, revisionOf canonical: String) async throws -> Response? {
            let rev = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(Array(canonical.utf8)))
            let sent = peer.send(.rev(doc: try DocumentID(doc), rev: rev, history: [], sequence: 1, body: .canonicalJSON(CanonicalBody(Array(text.utf8)))))
            var answers = sent.answer.makeAsyncIterator()
            return await answers.next()
        }
        // Not an object, not JSON: refused with 400, nothing stored.
        let array = try await push("list.json", "[1,2]", revisionOf: "[1,2]")
        let garbage = try await push("junk.json", "{\"a\":", revisionOf: "{\"a\":")
        // Bytes in no canonical order, under the id of their canonical form: taken, stored canonical.
        let unordered = try await push("note.json", #"{"text": "buy apples", "count": 2}"#, revisionOf: #"{"count":2,"text":"buy apples"}"#)
        // The id of the bytes as sent is not the revision they make: refused.
        let lie = try await push("other.json", #"{"b": 1, "a": 2}"#, revisionOf: #"{"b": 1, "a": 2}"#)
        // Canonical bytes: checked, and stored as they are, without a tree made of them.
        let canonical = #"{"count":3,"deep":{"list":[1,-2.5,"\u001f",{}]},"text":"pears"}"#
        let checked = try await push("pears.json", canonical, revisionOf: canonical)
        // Canonical bytes under another body's id: refused as the parsed ones are.
        let checkedLie = try await push("plums.json", #"{"a":1}"#, revisionOf: #"{"a":2}"#)
        await peer.close(code: 1000, reason: "done")
        await serving

        guard case .error(400, _)? = array, case .error(400, _)? = garbage, case .error(let status, _)? = lie else {
            Issue.record("refusals: \(String(describing: array)), \(String(describing: garbage)), \(String(describing: lie))"); return
        }
        #expect(status == 400)
        #expect(unordered == .ok)
        #expect(checked == .ok)
        guard case .error(400, _)? = checkedLie else { Issue.record("a lie in canonical bytes: \(String(describing: checkedLie))"); return }
        let pears = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(folder)/pears.json"))))
        #expect(pears.canonicalString == canonical)
        let stored = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(folder)/note.json"))))
        #expect(stored == (try JSONParser.parse(Array(#"{"count":2,"text":"buy apples"}"#.utf8))))
        for refused in ["list.json", "junk.json", "other.json", "plums.json"] {
            #expect(!FileManager.default.fileExists(atPath: "\(folder)/\(refused)"), "\(refused)")
        }
        let verify = try FerryProcess.ferry(["verify"], in: folder)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
    }

    @Test func ferry1sChannelHandsOnRequestsRoutesAnswersAndEndsAtAViolation() async throws {
        let (ours, theirs) = LoopbackTransport.pair()
        let channel = Ferry1Channel(transport: ours, role: .passive, localPeer: "here", database: "inventory")
        func peer(_ frame: Frame) { _ = theirs.enqueue(.text(FrameCodec.encode(frame))) }

        // The handshake is the channel's: the session never sees hello.
        peer(.request(number: 1, noReply: false, .hello(versions: [1], peer: "there", database: "inventory", features: [])))
        peer(.request(number: 2, noReply: false, .getCheckpoint(client: "pull:there")))
        guard case .request(let first) = await channel.next() else { Issue.record("no request"); return }
        #expect(first.handle == RequestHandle(number: 2, noReply: false) && first.request == .getCheckpoint(client: "pull:there"))
        #expect(channel.remotePeer == "there")
        var fromChannel = theirs.inbound.makeAsyncIterator()
        guard case .text(let hello)? = await fromChannel.next() else { Issue.record("no hello answer"); return }
        #expect(try FrameCodec.decode(hello) { _ in "hello" } == .response(to: 1, .hello(version: 1, peer: "here", features: [])))

        // This side's request gets its answer once the reader reaches it.
        let outgoing = channel.send(.getCheckpoint(client: "push:here"))
        guard case .text(let sent)? = await fromChannel.next(),
              case let .request(number, _, request) = try FrameCodec.decode(sent, requestType: { _ in nil }) else {
            Issue.record("no request on the wire"); return
        }
        #expect(request == .getCheckpoint(client: "push:here"))
        peer(.response(to: number, .error(status: 404, message: "no checkpoint")))
        // A response to nothing this side asked breaks the protocol: the channel closes.
        peer(.response(to: 99, .ok))
        let reading = Task { await channel.next() }
        var answers = outgoing.answer.makeAsyncIterator()
        #expect(await answers.next() == .error(status: 404, message: "no checkpoint"))
        guard case let .closed(code, reason)? = await reading.value else { Issue.record("no close"); return }
        #expect(code == 1002 && reason.contains("unknown request 99"), "\(reason)")
        #expect(channel.refusal == reason)
        #expect(await channel.next() == nil)
        // Nothing more can be sent, and whoever would wait for an answer is told at once.
        let late = channel.send(.getCheckpoint(client: "late"))
        var lateAnswers = late.answer.makeAsyncIterator()
        #expect(await lateAnswers.next() == nil)
        await #expect(throws: ChannelEnded.self) { try await late.written.sent() }
    }
}
