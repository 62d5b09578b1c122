import Testing
import FerryCore
import FerryTesting
@testable import FerryProtocol

@Suite struct FrameCodecTests {
    let doc = try! DocumentID("samplelist.json")
    let r1 = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of([1]))
    var r2: RevisionID { RevisionID.compute(parent: r1, deleted: false, body: BlobDigest.of([2])) }

    func roundTrip(_ request: Request, noReply: Bool = false) throws {
        let frame = Frame.request(number: 7, noReply: noReply, request)
        #expect(try FrameCodec.decode(FrameCodec.encode(frame)) { _ in nil } == frame)
    }

    /// The frames sent once per revision (a `rev` with a stored body, an `ok` answer) are
    /// written straight into bytes: the same bytes as the general way, for ids, authors and
    /// histories of every shape.
    @Test func revAndOkFramesAreWrittenAsTheGeneralWayWritesThem() throws {
        var g = SeededGenerator(seed: 11)
        let names = ["a.json", "dir/sub/x.json", "quote\"d.json", "back\\slash.json", "caf\u{e9}.json", "\u{1F600}/e.json"]
        let authors: [String?] = [nil, "ann@host", "q\"uo\\te@x", "\u{e9}l\u{e8}ve@\u{1F600}"]
        // A root of another implementation's id length, and a leaf of another branch to merge.
        let foreignRoot = try RevisionID("1-" + String(repeating: "ab", count: 20))
        let otherLeaf = RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of([0xEE]))
        for round in 0..<300 {
            var chain: [RevisionID] = round % 5 == 0 ? [foreignRoot] : []
            for _ in 0..<Int.random(in: 0...4, using: &g) {
                chain.append(RevisionID.compute(parent: chain.last, deleted: false, body: BlobDigest.of([UInt8.random(in: 0...255, using: &g)])))
            }
            let rev = RevisionID.compute(parent: chain.last, deleted: false, body: BlobDigest.of([UInt8(round & 0xFF)]))
            let history = Array(chain.reversed())
            let merged = !history.isEmpty && Bool.random(using: &g) ? otherLeaf : nil
            let body = JSONValue.object(["k": .int(round), "s": "x\"y"]).canonicalBytes
            let frame = Frame.request(number: Int.random(in: 1...Int.max, using: &g), noReply: Bool.random(using: &g),
                                      .rev(doc: try DocumentID(names.randomElement(using: &g)!), rev: rev, history: history,
                                           sequence: Int.random(in: 0...1 << 40, using: &g), body: .canonicalJSON(CanonicalBody(body)),
                                           merged: merged, author: authors.randomElement(using: &g)!))
            #expect(FrameCodec.encode(frame) == FrameCodec.encodeAsTree(frame))
            #expect(try FrameCodec.decode(FrameCodec.encode(frame)) { _ in nil } == frame)
            let ok = Frame.response(to: Int.random(in: 1...Int.max, using: &g), .ok)
            #expect(FrameCodec.encode(ok) == FrameCodec.encodeAsTree(ok))
        }
    }

    @Test func everyRequestRoundTrips() throws {
        let blob = BlobReference(digest: BlobDigest.of([9]), length: 1, contentType: "image/jpeg")
        try roundTrip(.hello(versions: [1], peer: "p", database: "inventory", features: ["delta"]))
        try roundTrip(.getCheckpoint(client: "cp-1"))
        try roundTrip(.setCheckpoint(client: "cp-1", rev: "3", checkpoint: Checkpoint(local: 5, remote: 9)))
        try roundTrip(.subChanges(since: 12, continuous: true, docIDs: [doc]))
        try roundTrip(.changes([ChangeEntry(sequence: 3, doc: doc, rev: r2, deleted: false, bodySize: 10)]))
        try roundTrip(.changes([]))
        try roundTrip(.proposeChanges([ProposedChange(doc: doc, rev: r2, parent: r1, bodySize: 4), ProposedChange(doc: doc, rev: r1, parent: nil, bodySize: 4)]))
        try roundTrip(.rev(doc: doc, rev: r2, history: [r1], sequence: 3, body: .json(["a": 1])))
        try roundTrip(.rev(doc: try DocumentID("images/a.jpg"), rev: r1, history: [], sequence: 4, body: .blob(blob)))
        try roundTrip(.rev(doc: doc, rev: r2, history: [r1], sequence: 5, body: .deleted))
        try roundTrip(.rev(doc: doc, rev: r2, history: [r1], sequence: 6, body: .delta(base: r1, delta: ["a": 2, "gone": .array([])])))
        // A merge names the branch it took in.
        let loser = try RevisionID("1-bb")
        try roundTrip(.rev(doc: doc, rev: r2, history: [r1], sequence: 9, body: .json(["a": 1]), merged: loser))
        let text = String(decoding: FrameCodec.encode(.request(number: 3, noReply: false,
                          .rev(doc: doc, rev: r2, history: [r1], sequence: 9, body: .deleted, merged: loser))), as: UTF8.self)
        #expect(text.contains("\"merged\":\"1-bb\""), "\(text)")
        // Stored canonical bytes go out as they are and come back as those bytes, checked, with
        // what the store needs of them.
        let image = BlobReference(digest: blob.digest, length: 3, contentType: "image/png")
        let stored = JSONValue.object(["a": 1, "list": [true, "x", ["image": image.json]]])
        let raw = Frame.request(number: 8, noReply: false, .rev(doc: doc, rev: r2, history: [r1], sequence: 7,
                                                                body: .canonicalJSON(CanonicalBody(stored.canonicalBytes))))
        let decoded = try FrameCodec.decode(FrameCodec.encode(raw)) { _ in nil }
        #expect(decoded == .request(number: 8, noReply: false, .rev(doc: doc, rev: r2, history: [r1], sequence: 7, body: .json(stored))))
        guard case .request(_, _, .rev(_, _, _, _, .canonicalJSON(let body), _, _)) = decoded else {
            Issue.record("a canonical body was parsed: \(decoded)")
            return
        }
        #expect(body.bytes == stored.canonicalBytes)
        #expect(body.checked?.prettySize == stored.prettyBytes.count)
        #expect(body.checked?.blobReferences == [image])
        // A body that is not canonical (a peer's own serializer) is parsed into a value.
        let small = Frame.request(number: 8, noReply: false, .rev(doc: doc, rev: r2, history: [r1], sequence: 7, body: .json(["a": 2, "b": 1])))
        let smallText = String(decoding: FrameCodec.encode(small), as: UTF8.self)
        #expect(smallText.contains(#""body":{"a":2,"b":1}"#))
        let spaced = smallText.replacingOccurrences(of: #""body":{"a":2,"b":1}"#, with: #""body":{"b": 1, "a": 2}"#)
        guard case .request(_, _, .rev(_, _, _, _, .json(let parsed), _, _)) = try FrameCodec.decode(Array(spaced.utf8), requestType: { _ in nil }) else {
            Issue.record("a body that is not canonical was not parsed")
            return
        }
        #expect(parsed == ["a": 2, "b": 1])
        // One body only, kept or parsed.
        let twice = smallText.replacingOccurrences(of: #""body":{"a":2,"b":1}"#, with: #""body":{"a":2,"b":1},"body":{"a":2,"b":1}"#)
        #expect(throws: ProtocolError.self) { try FrameCodec.decode(Array(twice.utf8)) { _ in nil } }
        try roundTrip(.norev(doc: doc, rev: r2, sequence: 3, status: 404, reason: "gone"), noReply: true)
        try roundTrip(.getAttachment(digest: blob.digest))
        try roundTrip(.getAttachment(digest: blob.digest, offset: 8 << 20, length: 8 << 20))
    }

    @Test func responsesAreDecodedByTheRequestTheyAnswer() throws {
        func rt(_ response: Response, answering type: String) throws {
            let frame = Frame.response(to: 3, response)
            #expect(try FrameCodec.decode(FrameCodec.encode(frame)) { $0 == 3 ? type : nil } == frame)
        }
        try rt(.hello(version: 1, peer: "q", features: []), answering: "hello")
        try rt(.checkpoint(rev: "2", checkpoint: Checkpoint(local: 1, remote: 2)), answering: "getCheckpoint")
        try rt(.checkpointSaved(rev: "3"), answering: "setCheckpoint")
        try rt(.changes([.notWanted, .wanted(knownAncestors: [r1]), .wanted(knownAncestors: [])], maxHistory: 20), answering: "changes")
        try rt(.proposeChanges([.send, .alreadyHave, .conflict]), answering: "proposeChanges")
        try rt(.attachment(length: 99), answering: "getAttachment")
        try rt(.ok, answering: "rev")
        try rt(.error(status: 403, message: "read-only"), answering: "rev")
        try rt(.subscribed(count: 1_234), answering: "subChanges")
        try rt(.subscribed(count: 0), answering: "subChanges")
    }

    /// The count on subChanges' answer is optional both ways: an older peer's `{}` reads as
    /// `.ok` (no count: the progress total grows as changes come), and an older reader
    /// ignores the member it does not know (`default: .ok`).
    @Test func subChangesCountIsOptional() throws {
        #expect(try FrameCodec.decode(Array(#"{"type":"response","re":3}"#.utf8)) { _ in "subChanges" } == .response(to: 3, .ok))
        #expect(try FrameCodec.decode(Array(#"{"type":"response","re":3,"count":7}"#.utf8)) { _ in "subChanges" }
                == .response(to: 3, .subscribed(count: 7)))
        #expect(try FrameCodec.decode(Array(#"{"type":"response","re":3,"count":7}"#.utf8)) { _ in "rev" } == .response(to: 3, .ok))
        rejects(#"{"type":"response","re":3,"count":-1}"#, .invalidField, answering: "subChanges")
        rejects(#"{"type":"response","re":3,"count":"many"}"#, .malformed, answering: "subChanges")
    }

    func rejects(_ text: String, _ code: ProtocolError.Code, limits: ProtocolLimits = ProtocolLimits(), answering: String? = nil) {
        do {
            _ = try FrameCodec.decode(Array(text.utf8), limits: limits) { _ in answering }
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.code == code, "\(text): \(error)")
        }
    }

    @Test func hostileFramesAreRefusedWithAReason() {
        rejects(#"{"type":"rev","n":1,"doc":"../../etc/x","rev":"1-ab","history":[],"sequence":1,"body":{}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"/etc/passwd","rev":"1-ab","history":[],"sequence":1,"body":{}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":".ferry/revs.log","rev":"1-ab","history":[],"sequence":1,"body":{}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"3-ab","history":["1-cd"],"sequence":1,"body":{}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"1-ab","history":[],"sequence":1,"body":[1]}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"1-ab","history":[],"sequence":1,"blob":{"@type":"blob","digest":"sha256-00","length":1}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.jpg","rev":"1-ab","history":[],"sequence":1,"blob":{"@type":"blob","digest":"sha256-00","length":1}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.jpg","rev":"2-ab","history":["1-cd"],"sequence":1,"deltaSrc":"1-cd","delta":{}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"2-ab","history":["1-cd"],"sequence":1,"deltaSrc":"1-cd","delta":[1]}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"2-ab","history":["1-cd"],"sequence":1,"deltaSrc":"2-cd","delta":{}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"2-ab","history":["1-cd"],"sequence":1,"deltaSrc":"../x","delta":{}}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"2-ab","history":["1-cd"],"sequence":1,"delta":{}}"#, .malformed)
        // A merge of a revision that is not older than it, or a merge with no parent.
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"2-ab","history":["1-cd"],"sequence":1,"body":{},"merged":"2-ee"}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"1-ab","history":[],"sequence":1,"body":{},"merged":"1-ee"}"#, .invalidField)
        rejects(#"{"type":"rev","n":1,"doc":"a.json","rev":"2-ab","history":["1-cd"],"sequence":1,"body":{},"merged":"x"}"#, .invalidField)
        rejects(#"{"type":"changes","n":1,"changes":[[1,"a.json","nope",false,1]]}"#, .invalidField)
        rejects(#"{"type":"changes","n":1,"changes":[[-1,"a.json","1-ab",false,1]]}"#, .invalidField)
        rejects(#"{"type":"getAttachment","n":1,"digest":"md5-abc"}"#, .invalidField)
        rejects(#"{"type":"launchMissiles","n":1}"#, .unknownType)
        rejects(#"{"type":"changes"}"#, .malformed)
        rejects(#"[1,2]"#, .malformed)
        rejects(#"{"type": "#, .malformed)
        rejects(#"{"type":"response","re":5}"#, .outOfOrder)
        var small = ProtocolLimits()
        small.maxTextFrameBytes = 10
        rejects(#"{"type":"getCheckpoint","n":1,"client":"x"}"#, .tooLarge, limits: small)
        var few = ProtocolLimits()
        few.maxChangesPerMessage = 1
        rejects(#"{"type":"changes","n":1,"changes":[[1,"a.json","1-ab"],[2,"b.json","1-ab"]]}"#, .tooLarge, limits: few)
    }

    @Test func blobChunksRoundTripAndAreBounded() throws {
        let chunk = BlobChunk(requestNumber: 0x0102_0304, isLast: true, bytes: [9, 8, 7])
        #expect(try BlobChunk.decode(chunk.encoded()) == chunk)
        #expect(throws: ProtocolError.self) { try BlobChunk.decode([0, 0, 0]) }
        #expect(throws: ProtocolError.self) { try BlobChunk.decode([0, 0, 0, 1, 4]) }
        var limits = ProtocolLimits()
        limits.maxBinaryFrameBytes = 8
        #expect(throws: ProtocolError.self) { try BlobChunk.decode([UInt8](repeating: 0, count: 9), limits: limits) }
    }
}

@Suite struct ConnectionStateMachineTests {
    func pair(database: String = "inventory", features: [String] = ["delta"]) -> (ConnectionStateMachine, ConnectionStateMachine) {
        (ConnectionStateMachine(role: .active, localPeer: "A", database: database, features: features),
         ConnectionStateMachine(role: .passive, localPeer: "B", database: "inventory", features: ["delta"]))
    }

    @Test func helloOpensBothSidesWithTheCommonVersionAndFeatures() throws {
        var (a, b) = pair()
        let started = a.start()
        let hello = try #require(started)
        guard case .send(let reply) = b.receiveText(FrameCodec.encode(hello)) else { Issue.record("no hello reply"); return }
        #expect(b.isOpen && b.remotePeer == "A" && b.agreedFeatures == ["delta"])
        #expect(a.receiveText(FrameCodec.encode(reply)) == .opened(version: 1, peer: "B", features: ["delta"]))
        #expect(a.isOpen)
        // Requests and responses flow, matched by number.
        let get = a.send(.getCheckpoint(client: "c"))
        guard case .request(let n, false, .getCheckpoint(client: "c")) = b.receiveText(FrameCodec.encode(get)) else { Issue.record("not delivered"); return }
        let answer = Frame.response(to: n, .checkpoint(rev: "1", checkpoint: Checkpoint(local: 0, remote: 0)))
        #expect(a.receiveText(FrameCodec.encode(answer)) == .response(to: n, answering: "getCheckpoint", .checkpoint(rev: "1", checkpoint: Checkpoint(local: 0, remote: 0))))
        // A second response to the same request is a violation.
        guard case .close = a.receiveText(FrameCodec.encode(answer)) else { Issue.record("duplicate response accepted"); return }
    }

    @Test func anUnknownDatabaseIsA404ThenClose() throws {
        var (a, b) = pair(database: "other")
        let started = a.start()
        let hello = try #require(started)
        guard case .close(_, _, let after?) = b.receiveText(FrameCodec.encode(hello)) else { Issue.record("not closed"); return }
        #expect(after == .response(to: 1, .error(status: 404, message: "no database \"other\" here")))
        guard case .close(_, let reason, nil) = a.receiveText(FrameCodec.encode(after)) else { Issue.record("active side did not close"); return }
        #expect(reason.contains("404"))
    }

    @Test func anythingBeforeHelloIsRefused() {
        var (_, b) = pair()
        var other = ConnectionStateMachine(role: .active, localPeer: "A", database: "inventory")
        let early = other.send(.changes([]))
        guard case .close(1002, let reason, nil) = b.receiveText(FrameCodec.encode(early)) else { Issue.record("accepted"); return }
        #expect(reason.contains("before hello"))
        // Once closed, nothing more is delivered.
        #expect(b.receiveText(FrameCodec.encode(early)) == .none)
    }

    @Test func noCommonVersionIsRefused() {
        var (_, b) = pair()
        let hello = Frame.request(number: 1, noReply: false, .hello(versions: [7, 8], peer: "Z", database: "inventory", features: []))
        guard case .close(1002, let reason, _?) = b.receiveText(FrameCodec.encode(hello)) else { Issue.record("accepted"); return }
        #expect(reason.contains("no common protocol version"))
    }

    @Test func blobBytesOnlyForAnAskedAttachmentAndRequestNumbersIncrease() throws {
        var (a, b) = pair()
        let started = a.start()
        let hello = try #require(started)
        guard case .send(let reply) = b.receiveText(FrameCodec.encode(hello)) else { return }
        _ = a.receiveText(FrameCodec.encode(reply))
        let ask = a.send(.getAttachment(digest: BlobDigest.of([1])))
        guard case .request(let n, _, _) = ask else { return }
        _ = a.receiveText(FrameCodec.encode(.response(to: n, .attachment(length: 4))))
        #expect(a.receiveBinary(BlobChunk(requestNumber: UInt32(n), isLast: false, bytes: [1, 2]).encoded()) == .chunk(BlobChunk(requestNumber: UInt32(n), isLast: false, bytes: [1, 2])))
        #expect(a.receiveBinary(BlobChunk(requestNumber: UInt32(n), isLast: true, bytes: [3, 4]).encoded()) == .chunk(BlobChunk(requestNumber: UInt32(n), isLast: true, bytes: [3, 4])))
        guard case .close = a.receiveBinary(BlobChunk(requestNumber: UInt32(n), isLast: true, bytes: [5]).encoded()) else {
            Issue.record("unasked bytes accepted"); return
        }
        // On the passive side, a repeated request number is refused.
        let again = Frame.request(number: 1, noReply: false, .changes([]))
        guard case .close(_, let reason, _) = b.receiveText(FrameCodec.encode(again)) else { Issue.record("accepted"); return }
        #expect(reason.contains("does not increase"))
    }
}
