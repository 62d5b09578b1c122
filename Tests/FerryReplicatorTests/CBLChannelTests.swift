import Foundation
import Logging
import Testing
import FerryCore
@testable import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// The test's side of a BLIP connection: a multiplexer over one end of a loopback transport,
/// spoken message by message (as a Couchbase Lite peer would).
final class BLIPPeer: @unchecked Sendable {
    let transport: LoopbackTransport
    let mux = BLIPMultiplexer()
    var iterator: TransportInbox.AsyncIterator

    init(_ transport: LoopbackTransport) {
        self.transport = transport
        iterator = transport.inbound.makeAsyncIterator()
    }

    /// Queues a message and writes its frames; returns its number.
    @discardableResult
    func send(_ message: BLIPMessage) throws -> UInt64 {
        let number = try mux.send(message)
        flush()
        return number
    }

    func flush() {
        while let frame = try? mux.nextFrame() { _ = transport.enqueue(.binary(frame)) }
    }

    /// The next whole message from the channel (ACKs answered on the way); nil at the end.
    func receive() async throws -> BLIPMessage? {
        while let message = await iterator.next() {
            guard case .binary(let bytes) = message else { continue }
            let done = try mux.receive(bytes)
            flush()
            if let done { return done }
        }
        return nil
    }
}

/// `CBLChannel`: Couchbase Lite's messages in and out of the seam, a replayed Couchbase Lite
/// client, and two ferry folders syncing through it.
@Suite struct CBLChannelTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    static let blob = (0..<1024).map { UInt8($0 % 256) }

    func req(_ profile: String, _ properties: BLIPProperties = [:], _ body: String = "", flags: BLIPFrameFlags = []) -> BLIPMessage {
        .request(profile: profile, properties: properties, body: Array(body.utf8), flags: flags)
    }

    /// The Couchbase Lite 2.8 client of `oneshot-2.8`, its requests rebuilt by hand, into a
    /// passive channel: the requests the session gets, the blob fetched to learn its SHA-256,
    /// and the answers on the wire.
    @Test func aReplayedCouchbaseLiteClientComesOutAsFerryRequests() async throws {
        let (ours, theirs) = LoopbackTransport.pair()
        let aliases = InMemoryBlobDigestAliases()
        let channel = CBLChannel(transport: ours, role: .passive, localPeer: "desk", database: "b", aliases: aliases)
        let peer = BLIPPeer(theirs)
        #expect(await channel.open())
        let client = "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc="
        try peer.send(req("getCheckpoint", ["client": client]))
        try peer.send(req("subChanges", ["batch": "200"]))
        try peer.send(req("proposeChanges", [:], #"[["a1","1-52c4e4f222e3484064ad05da9d859ae2d29b88fd","",90],["img","2-1b36fea8c61e0e8f3ba3dcacf47436d45f99fb71","",182]]"#, flags: [.urgent, .compressed]))
        try peer.send(req("rev", ["id": "a1", "rev": "1-52c4e4f222e3484064ad05da9d859ae2d29b88fd", "sequence": "1", "noconflicts": "1"],
                          #"{"type":"note","title":"hello from A","n":1,"tags":["x","y"],"nested":{"k":true}}"#, flags: [.compressed]))
        try peer.send(req("rev", ["id": "img", "rev": "2-1b36fea8c61e0e8f3ba3dcacf47436d45f99fb71", "sequence": "3", "noconflicts": "1",
                                  "history": "1-176828b5baafa8c011b4d2a2858851cd0d29bf66"],
                          #"{"type":"photo","caption":"a doc with a blob","photo":{"content_type":"image/png","digest":"sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=","length":1024,"@type":"blob"}}"#, flags: [.compressed]))
        try peer.send(req("setCheckpoint", ["client": client, "rev": ""], #"{"time":1795471254,"localCompleted":[0,1,2,1],"remote":1}"#))
        try peer.send(req("setCheckpoint", ["client": client, "rev": "1-cc"], #"{"time":1795471254,"local":3,"remote":1}"#))

        // The peer's side: answer the channel's getAttachment (it must learn the blob's
        // SHA-256 before the session may see `img`), and collect the channel's replies.
        let peerSide = Task { () -> [BLIPMessage] in
            var replies: [BLIPMessage] = []
            while let message = try await peer.receive() {
                if message.type == .request {
                    #expect(message.profile == "getAttachment" && message.properties["digest"] == "sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=" && message.properties["docID"] == "img")
                    try peer.send(.response(to: message, body: Self.blob))
                } else {
                    replies.append(message)
                }
                if replies.count == 7 { break }
            }
            return replies
        }
        var requests: [Request] = []
        for _ in 0..<7 {
            guard case .request(let incoming) = await channel.next() else { Issue.record("no request"); break }
            requests.append(incoming.request)
            let answer: Response = switch incoming.request {
            case .getCheckpoint: .error(status: 404, message: "no checkpoint")
            case .proposeChanges: .proposeChanges([.send, .send])
            case .setCheckpoint(_, let rev, _): .checkpointSaved(rev: rev == nil ? "1-cc" : "2-cc")
            default: .ok
            }
            _ = channel.respond(to: incoming.handle, with: answer)
        }
        let reading = Task { await channel.next() }
        let replies = try await peerSide.value
        await channel.close(code: 1000, reason: "done")
        _ = await reading.value

        let sha256 = BlobDigest.of(Self.blob)
        #expect(requests == [
            .getCheckpoint(client: client),
            .subChanges(since: 0, continuous: false, docIDs: nil),
            .proposeChanges([ProposedChange(doc: try DocumentID("a1.json"), rev: try RevisionID("1-52c4e4f222e3484064ad05da9d859ae2d29b88fd"), parent: nil, bodySize: 90),
                             ProposedChange(doc: try DocumentID("img.json"), rev: try RevisionID("2-1b36fea8c61e0e8f3ba3dcacf47436d45f99fb71"), parent: nil, bodySize: 182)]),
            .rev(doc: try DocumentID("a1.json"), rev: try RevisionID("1-52c4e4f222e3484064ad05da9d859ae2d29b88fd"), history: [], sequence: 1,
                 body: .json(try JSONParser.parse(#"{"type":"note","title":"hello from A","n":1,"tags":["x","y"],"nested":{"k":true}}"#))),
            .rev(doc: try DocumentID("img.json"), rev: try RevisionID("2-1b36fea8c61e0e8f3ba3dcacf47436d45f99fb71"),
                 history: [try RevisionID("1-176828b5baafa8c011b4d2a2858851cd0d29bf66")], sequence: 3,
                 body: .json(try JSONParser.parse(#"{"type":"photo","caption":"a doc with a blob","photo":{"content_type":"image/png","digest":"\#(sha256)","length":1024,"@type":"blob"}}"#))),
            .setCheckpoint(client: client, rev: nil, checkpoint: Checkpoint(local: 0, remote: 1)),
            .setCheckpoint(client: client, rev: "1-cc", checkpoint: Checkpoint(local: 3, remote: 1)),
        ])
        #expect(aliases.sha256(for: CBLBlobDigest.of(Self.blob)) == sha256)
        #expect(channel.remotePeer == CBLPeerID.from(checkpointClient: client) && channel.agreedFeatures.isEmpty)
        let byNumber = Dictionary(replies.map { ($0.number, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byNumber[1]?.errorReply == BLIPErrorReply(domain: "HTTP", code: 404, message: "no checkpoint"))
        #expect(byNumber[2]?.type == .response && byNumber[2]?.body == [])
        #expect(byNumber[3]?.flags.contains(.urgent) == true && byNumber[3]?.body == Array("[]".utf8))
        #expect(byNumber[4]?.type == .response && byNumber[5]?.type == .response)
        #expect(byNumber[6]?.properties["rev"] == "1-cc" && byNumber[7]?.properties["rev"] == "2-cc")
    }

    /// Who is announced every revision (`announcesIntermediateRevisions`): the listener the
    /// active side dialed (a ferry listener cannot be told from a Couchbase Lite one) and a
    /// client whose first request is a checkpoint request naming a ferry folder; not a
    /// Couchbase Lite client, nor one whose first request is anything else.
    @Test func everyRevisionGoesToFerryPeersOnly() async throws {
        let dialed = CBLChannel(transport: LoopbackTransport.pair().0, role: .active, localPeer: "laptop", database: "db",
                                aliases: InMemoryBlobDigestAliases(), remotePeer: "cbl-1234")
        #expect(dialed.announcesIntermediateRevisions)
        let firsts: [(BLIPMessage, Bool)] = [
            (req("getCheckpoint", ["client": "pull:laptop-7f3a"]), true),
            (req("getCheckpoint", ["client": "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc="]), false),
            (req("getCheckpoint", ["client": "push:not a folder id"]), false),
            (req("subChanges"), false),
        ]
        for (first, everyRevision) in firsts {
            let (ours, theirs) = LoopbackTransport.pair()
            let channel = CBLChannel(transport: ours, role: .passive, localPeer: "desk", database: "db", aliases: InMemoryBlobDigestAliases())
            #expect(!channel.announcesIntermediateRevisions)
            let peer = BLIPPeer(theirs)
            try peer.send(first)
            guard case .request? = await channel.next() else { Issue.record("\(first.profile ?? "?") not read"); continue }
            #expect(channel.announcesIntermediateRevisions == everyRevision, "\(first.properties)")
            // Only the first request counts.
            try peer.send(req("getCheckpoint", ["client": everyRevision ? "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc=" : "pull:laptop-7f3a"]))
            guard case .request? = await channel.next() else { Issue.record("the second request not read"); continue }
            #expect(channel.announcesIntermediateRevisions == everyRevision, "\(first.properties), then another")
        }
    }

    /// A channel says its `subChanges` answer carries a count (so the passive side counts the
    /// first pass) exactly when its encoding of the answer holds one: ferry/1's does,
    /// Couchbase Lite's is empty.
    @Test func onlyAnAnswerWithRoomForTheCountHasItCounted() throws {
        let ferry = Ferry1Channel(transport: LoopbackTransport.pair().0, role: .passive, localPeer: "here", database: "inventory")
        let ferryFrame = String(decoding: FrameCodec.encode(.response(to: 3, .subscribed(count: 4_321))), as: UTF8.self)
        #expect(ferry.answersSubscriptionWithCount == ferryFrame.contains("4321"))
        #expect(ferry.answersSubscriptionWithCount)
        let cbl = CBLChannel(transport: LoopbackTransport.pair().0, role: .passive, localPeer: "desk", database: "db", aliases: InMemoryBlobDigestAliases())
        guard case let .success((properties, body)) = CBLResponses.encode(.subscribed(count: 4_321), kept: nil, total: 0) else {
            Issue.record("no answer"); return
        }
        #expect(cbl.answersSubscriptionWithCount == !(properties.isEmpty && body.isEmpty))
        #expect(!cbl.answersSubscriptionWithCount)
    }

    /// The session's closes that ask a peer to come back (1001, 1011) reach Couchbase Lite as
    /// 4001, after which its replicator retries (it stops for good after 1001 or 1011); the
    /// others keep their code.
    @Test func aCloseThatAsksThePeerToComeBackIs4001() async throws {
        for (asked, sent) in [(UInt16(1001), UInt16(4001)), (1011, 4001), (1000, 1000), (1002, 1002)] {
            let (ours, theirs) = LoopbackTransport.pair()
            let channel = CBLChannel(transport: ours, role: .passive, localPeer: "desk", database: "db", aliases: InMemoryBlobDigestAliases())
            await channel.close(code: asked, reason: "why")
            #expect(theirs.closeDescription == "\(sent): why", "\(asked)")
        }
    }

    /// A `rev` waiting for the blob the channel fetches to learn its SHA-256 holds back the
    /// requests behind it, except the peer's own blob requests: the peer may be holding this
    /// side's fetch behind a `rev` of its own that waits for them (found by the sync test,
    /// when both sides pushed files at once).
    @Test func aBlobRequestNeverWaitsBehindARevWaitingForABlob() async throws {
        let (ours, theirs) = LoopbackTransport.pair()
        let ours1 = (0..<100).map { UInt8($0) }
        let aliases = InMemoryBlobDigestAliases()
        aliases.record(sha1: CBLBlobDigest.of(ours1), sha256: BlobDigest.of(ours1))
        let channel = CBLChannel(transport: ours, role: .active, localPeer: "laptop", database: "db", aliases: aliases, remotePeer: "desk")
        let peer = BLIPPeer(theirs)
        try peer.send(req("rev", ["id": "file::scan.bin", "rev": "1-ab", "sequence": "1"],
                          #"{"file":{"@type":"blob","digest":"\#(CBLBlobDigest.of(Self.blob))","length":1024}}"#))
        try peer.send(req("getAttachment", ["digest": CBLBlobDigest.of(ours1).description]))
        let reading = Task { await channel.next() }
        guard let fetch = try await peer.receive() else { Issue.record("no fetch"); return }
        #expect(fetch.profile == "getAttachment")
        guard case .request(let first)? = await reading.value else { Issue.record("nothing came out"); return }
        #expect(first.request == .getAttachment(digest: BlobDigest.of(ours1)))
        try peer.send(.response(to: fetch, body: Self.blob))
        guard case .request(let second)? = await channel.next() else { Issue.record("the rev did not come out"); return }
        #expect(second.request == .rev(doc: try DocumentID("scan.bin"), rev: try RevisionID("1-ab"), history: [], sequence: 1,
                                       body: .blob(BlobReference(digest: BlobDigest.of(Self.blob), length: 1024, contentType: nil))))
        await channel.close(code: 1000, reason: "done")
    }

    /// What a session's requests become on the wire, and the peer's answers back.
    /// A blob of whole windows: the session asks one more, empty window to learn it ended,
    /// which is answered from what arrived (Couchbase Lite is not asked for the blob again).
    @Test(.timeLimit(.minutes(1))) func aBlobOfWholeWindowsIsFetchedOnce() async throws {
        let (ours, theirs) = LoopbackTransport.pair()
        let sha256 = BlobDigest.of(Self.blob), sha1 = CBLBlobDigest.of(Self.blob)
        let aliases = InMemoryBlobDigestAliases()
        aliases.record(sha1: sha1, sha256: sha256)
        let channel = CBLChannel(transport: ours, role: .active, localPeer: "laptop", database: "db", aliases: aliases, remotePeer: "cbl-peer")
        let peer = BLIPPeer(theirs)
        let reading = Task { await channel.next() }
        let window = Self.blob.count / 2
        let first = channel.send(.getAttachment(digest: sha256, offset: 0, length: window))
        guard let ask = try await peer.receive() else { Issue.record("no getAttachment"); return }
        try peer.send(.response(to: ask, body: Self.blob))
        var bytes: [UInt8] = []
        for offset in [0, window, 2 * window] {
            let request = offset == 0 ? first : channel.send(.getAttachment(digest: sha256, offset: offset, length: window))
            var answer = request.answer.makeAsyncIterator()
            #expect(await answer.next() == .attachment(length: offset < Self.blob.count ? window : 0), "at \(offset)")
            for await part in request.blob! { bytes += part.bytes }
        }
        #expect(bytes == Self.blob)
        // The next message Couchbase Lite gets is the next request, not the blob asked again.
        _ = channel.send(.getCheckpoint(client: "pull:laptop"))
        let next = try await peer.receive()
        #expect(next?.profile == "getCheckpoint")
        reading.cancel()
    }

    @Test func theSessionsRequestsGoOutAsCouchbaseLitesAndAnswersComeBack() async throws {
        let (ours, theirs) = LoopbackTransport.pair()
        let sha256 = BlobDigest.of(Self.blob), sha1 = CBLBlobDigest.of(Self.blob)
        let aliases = InMemoryBlobDigestAliases()
        aliases.record(sha1: sha1, sha256: sha256)
        let channel = CBLChannel(transport: ours, role: .active, localPeer: "laptop", database: "db", aliases: aliases, remotePeer: "cbl-peer")
        #expect(channel.remotePeer == "cbl-peer")
        let peer = BLIPPeer(theirs)
        let reading = Task { await channel.next() }
        let checkpoint = channel.send(.getCheckpoint(client: "pull:laptop"))
        guard let get = try await peer.receive() else { Issue.record("nothing sent"); return }
        #expect(get.profile == "getCheckpoint" && get.properties["client"] == "pull:laptop")
        try peer.send(.response(to: get, properties: ["rev": "3-cc"], body: Array(#"{"time":5,"local":7,"remote":2,"localCompleted":[0,8]}"#.utf8)))
        var answers = checkpoint.answer.makeAsyncIterator()
        #expect(await answers.next() == .checkpoint(rev: "3-cc", checkpoint: Checkpoint(local: 7, remote: 2)))

        // A blob asked a window at a time: fetched whole once, handed out by window.
        let first = channel.send(.getAttachment(digest: sha256, offset: 0, length: 1000))
        guard let ask = try await peer.receive() else { Issue.record("no getAttachment"); return }
        #expect(ask.profile == "getAttachment" && ask.properties["digest"] == sha1.description)
        try peer.send(.response(to: ask, body: Self.blob))
        var a1 = first.answer.makeAsyncIterator()
        #expect(await a1.next() == .attachment(length: 1000))
        var bytes: [UInt8] = []
        for await part in first.blob! { bytes += part.bytes }
        let second = channel.send(.getAttachment(digest: sha256, offset: 1000, length: 1000))
        var a2 = second.answer.makeAsyncIterator()
        #expect(await a2.next() == .attachment(length: 24))
        for await part in second.blob! { bytes += part.bytes }
        #expect(bytes == Self.blob)

        // A blob with no known SHA-1 is not asked for; ERRs come back as errors.
        let unknown = channel.send(.getAttachment(digest: BlobDigest.of([1, 2, 3])))
        var a3 = unknown.answer.makeAsyncIterator()
        guard case .error(404, _)? = await a3.next() else { Issue.record("unknown blob asked"); return }
        let rev = channel.send(.rev(doc: try DocumentID("a.json"), rev: try RevisionID("1-ab"), history: [], sequence: 1, body: .json(.object(["k": 1]))))
        guard let sentRev = try await peer.receive() else { return }
        #expect(sentRev.profile == "rev" && sentRev.properties["id"] == "a" && sentRev.body == Array(#"{"k":1}"#.utf8))
        try peer.send(.error(to: sentRev, BLIPErrorReply(domain: "HTTP", code: 409, message: "conflict")))
        var a4 = rev.answer.makeAsyncIterator()
        #expect(await a4.next() == .error(status: 409, message: "conflict"))
        // An unknown profile from the peer gets BLIP 404; the session never sees it.
        let n = try peer.send(req("whatever"))
        guard let err = try await peer.receive() else { return }
        #expect(err.number == n && err.errorReply?.domain == "BLIP" && err.errorReply?.code == 404)
        await channel.close(code: 1000, reason: "done")
        #expect(await reading.value == nil)
    }

    /// A `rev` too big for BLIP's properties is answered here (413) and followed by a `norev`,
    /// and the connection goes on: the next message takes the next number, with no gap for
    /// the peer to take for a lost one.
    @Test func aRevisionThatCannotBeEncodedIsANorevNotABrokenConnection() async throws {
        let (ours, theirs) = LoopbackTransport.pair()
        var limits = CBLLimits()
        limits.blip.maxPropertiesBytes = 4 << 10
        let channel = CBLChannel(transport: ours, role: .passive, localPeer: "desk", database: "db", aliases: InMemoryBlobDigestAliases(), limits: limits)
        let peer = BLIPPeer(theirs)
        let doc = try DocumentID("long.json")
        let history = try (1..<200).reversed().map { try RevisionID("\($0)-" + String(repeating: "ab", count: 20)) }
        let rev = try RevisionID("200-" + String(repeating: "cd", count: 20))
        let big = channel.send(.rev(doc: doc, rev: rev, history: history, sequence: 7, body: .json(.object(["k": 1]))))
        var answer = big.answer.makeAsyncIterator()
        guard case .error(413, let message)? = await answer.next() else { Issue.record("no 413"); return }
        #expect(message.contains("properties of"))
        guard let norev = try await peer.receive() else { Issue.record("no norev"); return }
        #expect(norev.profile == "norev" && norev.properties["id"] == "long" && norev.properties["rev"] == rev.description)
        #expect(norev.properties["sequence"] == "7")
        #expect(norev.number == 1, "the rev not sent took a number")
        _ = channel.send(.rev(doc: doc, rev: rev, history: Array(history.prefix(3)), sequence: 7, body: .json(.object(["k": 1]))))
        guard let small = try await peer.receive() else { Issue.record("the next rev not sent"); return }
        #expect(small.profile == "rev" && small.number == norev.number + 1)
        await channel.close(code: 1000, reason: "done")
    }

    /// Sync Gateway's `proveAttachment`: the session serves the blob as for `getAttachment`, and
    /// the reply carries the proof (SHA-1 of the nonce's length byte, the nonce and the blob;
    /// the expected value computed with Python's hashlib), never the bytes.
    @Test func aProofOfABlobIsItsNonceDigestNotItsBytes() async throws {
        let (ours, theirs) = LoopbackTransport.pair()
        let aliases = InMemoryBlobDigestAliases()
        aliases.record(sha1: CBLBlobDigest.of(Self.blob), sha256: BlobDigest.of(Self.blob))
        let channel = CBLChannel(transport: ours, role: .passive, localPeer: "laptop", database: "db", aliases: aliases)
        let peer = BLIPPeer(theirs)
        try peer.send(req("proveAttachment", ["digest": CBLBlobDigest.of(Self.blob).description], "0123456789abcdef"))
        guard case .request(let asked)? = await channel.next() else { Issue.record("nothing came out"); return }
        #expect(asked.request == .getAttachment(digest: BlobDigest.of(Self.blob)))
        // Reading drives the connection (ACKs, refusals): a task keeps reading, as the session does.
        let reading = Task { while await channel.next() != nil {} }
        _ = channel.respond(to: asked.handle, with: .attachment(length: Self.blob.count))
        _ = channel.sendBlobPart(to: asked.handle, Self.blob[...], isLast: true)
        guard let proof = try await peer.receive() else { Issue.record("no reply"); return }
        #expect(proof.type == .response && String(decoding: proof.body, as: UTF8.self) == "sha1-wf8iQ9GamUn4yVvdYovh5AgnHcc=")
        // No nonce, or one over 255 bytes: BLIP 400, and the session sees nothing.
        for nonce in ["", String(repeating: "n", count: 256)] {
            try peer.send(req("proveAttachment", ["digest": CBLBlobDigest.of(Self.blob).description], nonce))
            guard let err = try await peer.receive() else { Issue.record("no reply"); return }
            #expect(err.errorReply?.domain == "BLIP" && err.errorReply?.code == 400)
        }
        await channel.close(code: 1000, reason: "done")
        await reading.value
    }
}
