import Testing
import FerryCore
@testable import FerryProtocol

/// Each message both ways, against the shapes Couchbase Lite 2.8 and 3.0 put on the wire
/// (vectors written from the decoded captures, not copied from them).
@Suite struct CBLMessageTests {
    let aliases = InMemoryBlobDigestAliases()
    let limits = CBLLimits()

    func request(_ profile: String, _ properties: BLIPProperties = [:], _ body: String = "", flags: BLIPFrameFlags = []) -> BLIPMessage {
        var m = BLIPMessage.request(profile: profile, properties: properties, body: Array(body.utf8), flags: flags)
        m.number = 1
        return m
    }

    func decoded(_ message: BLIPMessage) -> Request? {
        if case .request(let r, _, _) = CBLRequestDecoding.decode(message, limits: limits) { return r }
        return nil
    }

    /// The ERR the channel answers `message` with, if it refuses it (a refused `rev` whose id
    /// and revision could be read also goes to the session as a `norev`).
    func refusal(_ message: BLIPMessage, limits: CBLLimits? = nil) -> BLIPErrorReply? {
        switch CBLRequestDecoding.decode(message, limits: limits ?? self.limits) {
        case .refused(let e), .refusedRevision(_, _, _, let e): return e
        default: return nil
        }
    }

    @Test func checkpointsBothWays() throws {
        #expect(decoded(request("getCheckpoint", ["client": "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc="])) == .getCheckpoint(client: "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc="))
        // 2.8's first save: no rev yet, `localCompleted` instead of `local`.
        #expect(decoded(request("setCheckpoint", ["client": "cp-x", "rev": ""], #"{"time":1795471254,"localCompleted":[0,1,2,1],"remote":1}"#))
                == .setCheckpoint(client: "cp-x", rev: nil, checkpoint: Checkpoint(local: 0, remote: 1)))
        #expect(decoded(request("setCheckpoint", ["client": "cp-x", "rev": "1-cc"], #"{"time":1795471254,"local":3,"remote":1}"#))
                == .setCheckpoint(client: "cp-x", rev: "1-cc", checkpoint: Checkpoint(local: 3, remote: 1)))
        #expect(refusal(request("setCheckpoint", ["client": "cp-x"], "[1]"))?.code == 400)
        #expect(refusal(request("getCheckpoint"))?.code == 400)

        let get = try CBLRequestEncoding.encode(.getCheckpoint(client: "pull:laptop"), aliases: aliases)
        #expect(get.properties.entries == [BLIPProperty("Profile", "getCheckpoint"), BLIPProperty("client", "pull:laptop")])
        let set = try CBLRequestEncoding.encode(.setCheckpoint(client: "c", rev: nil, checkpoint: Checkpoint(local: 3, remote: 1)), aliases: aliases)
        #expect(set.properties["rev"] == "" && String(decoding: set.body, as: UTF8.self) == #"{"local":3,"remote":1}"#)

        // Replies: the stored checkpoint, none (ERR HTTP 404), saved.
        var reply = BLIPMessage(type: .response, number: 1, properties: ["rev": "2-cc"], body: Array(#"{"time":1,"local":5,"remote":4}"#.utf8))
        #expect(CBLResponses.decode(reply, kind: .getCheckpoint) == .checkpoint(rev: "2-cc", checkpoint: Checkpoint(local: 5, remote: 4)))
        reply = BLIPMessage(type: .error, number: 1, properties: ["Error-Domain": "HTTP", "Error-Code": "404"])
        guard case .error(404, _) = CBLResponses.decode(reply, kind: .getCheckpoint) else { Issue.record("no 404"); return }
        #expect(CBLResponses.decode(BLIPMessage(type: .response, number: 1, properties: ["rev": "1-cc"]), kind: .setCheckpoint) == .checkpointSaved(rev: "1-cc"))
        guard case .failure(let none) = CBLResponses.encode(.error(status: 404, message: "no checkpoint"), kept: nil, total: 0) else { Issue.record("no ERR"); return }
        #expect(none.domain == "HTTP" && none.code == 404)
        guard case .success(let (props, body)) = CBLResponses.encode(.checkpointSaved(rev: "7"), kept: nil, total: 0) else { return }
        #expect(props.entries == [BLIPProperty("rev", "7")] && body.isEmpty)
    }

    @Test func subChangesBothWays() throws {
        #expect(decoded(request("subChanges", ["batch": "200"])) == .subChanges(since: 0, continuous: false, docIDs: nil))
        #expect(decoded(request("subChanges", ["continuous": "true", "batch": "200"])) == .subChanges(since: 0, continuous: true, docIDs: nil))
        // 3.0 adds versioning and revocations.
        #expect(decoded(request("subChanges", ["since": "12", "batch": "200", "versioning": "rev-trees", "revocations": "true"]))
                == .subChanges(since: 12, continuous: false, docIDs: nil))
        #expect(decoded(request("subChanges", [:], #"{"docIDs":["a1","file::scan.bin","../x"]}"#))
                == .subChanges(since: 0, continuous: false, docIDs: [try DocumentID("a1.json"), try DocumentID("scan.bin"), try DocumentID("%2E%2E/x.json")]))
        #expect(refusal(request("subChanges", ["since": "\"5::12\""]))?.code == 400)
        #expect(refusal(request("subChanges", ["filter": "sync_gateway/bychannel"]))?.code == 501)
        let sub = try CBLRequestEncoding.encode(.subChanges(since: 4, continuous: true, docIDs: [try DocumentID("notes.json")]), aliases: aliases)
        #expect(sub.properties.entries == [BLIPProperty("Profile", "subChanges"), BLIPProperty("since", "4"), BLIPProperty("continuous", "true"), BLIPProperty("batch", "200")])
        #expect(String(decoding: sub.body, as: UTF8.self) == #"{"docIDs":["notes"]}"#)
    }

    @Test func changesAndTheirAnswers() throws {
        let rev = try RevisionID("1-99831a102d63d52b29240d40daad4772aea93cc8")
        let message = request("changes", [:], #"[[1,"b1","1-99831a102d63d52b29240d40daad4772aea93cc8",0,70],[6,"b1","2-89d7fa36a1e96e6fdc283b5e3f00582a20ea8a5a",1,2],[7,"a/../../x","1-ab"],[8,"",  "1-ab"]]"#, flags: [.urgent, .compressed])
        guard case let .request(.changes(entries), kept, total) = CBLRequestDecoding.decode(message, limits: limits) else { Issue.record("not decoded"); return }
        #expect(entries.count == 3 && kept == [0, 1, 2] && total == 4)
        #expect(entries[0] == ChangeEntry(sequence: 1, doc: try DocumentID("b1.json"), rev: rev, deleted: false, bodySize: 70))
        #expect(entries[1].deleted && entries[1].sequence == 6)
        #expect(entries[2].doc.rawValue == "a/%2E%2E/%2E%2E/x.json" && entries[2].bodySize == 0)
        #expect(decoded(request("changes")) == .changes([]))  // empty: caught up
        #expect(refusal(request("changes", [:], #"[[1,"b1"]]"#))?.code == 400)
        #expect(refusal(request("changes", [:], #"{"a":1}"#))?.code == 400)

        // The answer, in the message's positions (the empty id's entry: not wanted).
        guard case let .success((props, body)) = CBLResponses.encode(.changes([.wanted(knownAncestors: []), .notWanted, .wanted(knownAncestors: [rev])], maxHistory: nil), kept: kept, total: total)
        else { Issue.record("no answer"); return }
        #expect(props["maxHistory"] == "1000" && props["blobs"] == "true" && props["deltas"] == nil)
        #expect(String(decoding: body, as: UTF8.self) == #"[[],0,["1-99831a102d63d52b29240d40daad4772aea93cc8"],0]"#)

        // The peer's answer to ferry's changes (as 2.8 answers: `[[]]`, `[]`, known revs).
        let answer = BLIPMessage(type: .response, number: 1, properties: ["maxHistory": "20", "blobs": "true", "deltas": "true"],
                                 body: Array(#"[[],0,["1-99831a102d63d52b29240d40daad4772aea93cc8"]]"#.utf8))
        #expect(CBLResponses.decode(answer, kind: .changes(count: 4)) == .changes([.wanted(knownAncestors: []), .notWanted, .wanted(knownAncestors: [rev])], maxHistory: 20))
        #expect(CBLResponses.decode(BLIPMessage(type: .response, number: 1, body: Array("[]".utf8)), kind: .changes(count: 2)) == .changes([], maxHistory: nil))

        let sent = try CBLRequestEncoding.encode(.changes([ChangeEntry(sequence: 6, doc: try DocumentID("b1.json"), rev: rev, deleted: true, bodySize: 2),
                                                          ChangeEntry(sequence: 7, doc: try DocumentID("img/a.jpg"), rev: rev, deleted: false, bodySize: 9)]), aliases: aliases)
        #expect(sent.flags == [.urgent, .compressed] && sent.properties.entries == [BLIPProperty("Profile", "changes")])
        #expect(String(decoding: sent.body, as: UTF8.self) == #"[[6,"b1","1-99831a102d63d52b29240d40daad4772aea93cc8",1,2],[7,"file::img/a.jpg","1-99831a102d63d52b29240d40daad4772aea93cc8",0,9]]"#)
        #expect(try CBLRequestEncoding.encode(.changes([]), aliases: aliases, noReply: true).flags.contains(.noReply))
    }

    @Test func proposalsAndTheirAnswers() throws {
        let message = request("proposeChanges", ["conflictIncludesRev": "true"],
                              #"[["a1","1-52c4e4f222e3484064ad05da9d859ae2d29b88fd","",90],["c1","2-e042526abf5dbe25d652e01e8d1b20e73e054bbe","1-23f32bd784f2694ecda625e2814408789e93114b",102]]"#)
        guard case let .request(.proposeChanges(entries), kept, total) = CBLRequestDecoding.decode(message, limits: limits) else { Issue.record("not decoded"); return }
        #expect(kept == [0, 1] && total == 2)
        #expect(entries[0] == ProposedChange(doc: try DocumentID("a1.json"), rev: try RevisionID("1-52c4e4f222e3484064ad05da9d859ae2d29b88fd"), parent: nil, bodySize: 90))
        #expect(entries[1].parent == (try RevisionID("1-23f32bd784f2694ecda625e2814408789e93114b")))
        func body(_ answers: [ProposeAnswer]) -> String? {
            guard case let .success((p, b)) = CBLResponses.encode(.proposeChanges(answers), kept: kept, total: total) else { return nil }
            // As long histories as a message holds, as for `changes` (LiteCore's default is 20).
            #expect(p["maxHistory"] == "1000")
            return String(decoding: b, as: UTF8.self)
        }
        #expect(body([.send, .send]) == "[]")
        #expect(body([.send, .conflict]) == "[0,409]")
        #expect(body([.alreadyHave, .send]) == "[304]")
        // A conflict's answer names the peer's revision when asked (`conflictIncludesRev`): as
        // LiteCore 3 writes it, {"status": 409, "rev": …}, or [409, …].
        let reply = BLIPMessage(type: .response, number: 1, body: Array(#"[0,[409,"2-ab"],304,{"status":409,"rev":"3-cd"},{"status":304}]"#.utf8))
        #expect(CBLResponses.decode(reply, kind: .proposeChanges(count: 6))
                == .proposeChanges([.send, .conflict, .alreadyHave, .conflict, .alreadyHave, .send], peerRevisions: [1: try RevisionID("2-ab"), 3: try RevisionID("3-cd")]))
    }

    @Test func revisionsBothWays() throws {
        let sha1 = CBLBlobDigest.of(CBLBodyTests.blob), sha256 = BlobDigest.of(CBLBodyTests.blob)
        aliases.record(sha1: sha1, sha256: sha256)
        let message = request("rev", ["id": "img", "rev": "2-1b36fea8c61e0e8f3ba3dcacf47436d45f99fb71", "sequence": "3", "noconflicts": "1",
                                      "history": "1-176828b5baafa8c011b4d2a2858851cd0d29bf66"],
                              #"{"type":"photo","photo":{"content_type":"image/png","digest":"\#(sha1)","length":1024,"@type":"blob"}}"#, flags: [.compressed])
        guard case .rev(let rev) = CBLRequestDecoding.decode(message, limits: limits) else { Issue.record("not decoded"); return }
        let resolved = try rev.resolve(aliases)
        let expected = try JSONParser.parse(#"{"type":"photo","photo":{"content_type":"image/png","digest":"\#(sha256)","length":1024,"@type":"blob"}}"#)
        #expect(resolved == .rev(doc: try DocumentID("img.json"), rev: try RevisionID("2-1b36fea8c61e0e8f3ba3dcacf47436d45f99fb71"),
                                history: [try RevisionID("1-176828b5baafa8c011b4d2a2858851cd0d29bf66")], sequence: 3, body: .json(expected)))
        // Back out: the same properties and the same body (Couchbase Lite's digest again).
        let out = try CBLRequestEncoding.encode(resolved, aliases: aliases)
        #expect(out.properties.entries == [BLIPProperty("Profile", "rev"), BLIPProperty("id", "img"), BLIPProperty("rev", "2-1b36fea8c61e0e8f3ba3dcacf47436d45f99fb71"),
                                           BLIPProperty("sequence", "3"), BLIPProperty("history", "1-176828b5baafa8c011b4d2a2858851cd0d29bf66")])
        #expect(try JSONParser.parse(out.body) == JSONParser.parse(message.body))

        // A deletion (2.8's continuous capture): `deleted: 1`, body `{}`.
        let deletion = request("rev", ["id": "b1", "rev": "2-89d7fa36a1e96e6fdc283b5e3f00582a20ea8a5a", "sequence": "6", "deleted": "1",
                                       "history": "1-99831a102d63d52b29240d40daad4772aea93cc8"], "{}")
        guard case .rev(let deleted) = CBLRequestDecoding.decode(deletion, limits: limits) else { Issue.record("not decoded"); return }
        guard case .rev(_, _, _, 6, .deleted, nil, _) = try deleted.resolve(aliases) else { Issue.record("not a deletion"); return }
        let outDeletion = try CBLRequestEncoding.encode(try deleted.resolve(aliases), aliases: aliases)
        #expect(outDeletion.properties["deleted"] == "1" && outDeletion.body == Array("{}".utf8))

        // A file document: `file::` id, `{"file": blob}` body.
        let file = try CBLRequestEncoding.encode(.rev(doc: try DocumentID("scan.bin"), rev: try RevisionID("1-0123456789abcdef0123456789abcdef"), history: [],
                                                      sequence: 9, body: .blob(BlobReference(digest: sha256, length: 1024, contentType: nil))), aliases: aliases)
        #expect(file.properties["id"] == "file::scan.bin")
        #expect(String(decoding: file.body, as: UTF8.self) == #"{"file":{"@type":"blob","digest":"\#(sha1)","length":1024}}"#)
        guard case .rev(let fileRev) = CBLRequestDecoding.decode(file, limits: limits),
              case .rev(_, _, _, 9, .blob(let ref), _, _) = try fileRev.resolve(aliases) else { Issue.record("file not decoded"); return }
        #expect(ref.digest == sha256 && ref.length == 1024)

        // A history of the longest ids ferry reads, longer than a message's properties hold:
        // cut to 1,000 ids, parent first, keeping the last (the revision the peer has, which
        // links the branch); the message encodes, and ferry refuses the gap it leaves.
        let digest = String(repeating: "ab", count: 32)
        let longest = try (0...5_000).map { try RevisionID("\(RevisionID.generationLimit - 1 - $0)-\(digest)") }
        let deep = try CBLRequestEncoding.encode(.rev(doc: try DocumentID("deep.json"), rev: longest[0], history: Array(longest.dropFirst()),
                                                      sequence: 10, body: .json(["n": 1])), aliases: aliases)
        let ids = deep.properties["history"]?.split(separator: ",").map(String.init) ?? []
        #expect(ids.count == 1_000)
        #expect(ids.first == longest[1].description && ids[998] == longest[999].description && ids.last == longest[5_000].description)
        #expect(throws: Never.self) { try deep.properties.encoded(limits: limits.blip) }
        guard let why = refusal(deep) else { Issue.record("a history with a gap decoded"); return }
        #expect(why.code == 400 && why.message.contains("generation"), "\(why)")
        let whole = try CBLRequestEncoding.encode(.rev(doc: try DocumentID("deep.json"), rev: longest[0], history: Array(longest[1...1_000]),
                                                       sequence: 10, body: .json(["n": 1])), aliases: aliases)
        guard case .rev(let wholeRev) = CBLRequestDecoding.decode(whole, limits: limits) else { Issue.record("1,000 ids not decoded"); return }
        #expect(wholeRev.history == Array(longest[1...1_000]))
    }

    @Test func hostileRevisionsAreRefused() {
        let good = "1-52c4e4f222e3484064ad05da9d859ae2d29b88fd"
        let cases: [(BLIPProperties, String)] = [
            (["rev": good], "{}"),                                                       // no id
            (["id": "", "rev": good], "{}"),                                             // empty id
            (["id": String(repeating: "x", count: 300), "rev": good], "{}"),             // a segment no file system takes
            (["id": "a1", "rev": "one"], "{}"),                                          // not a rev id
            (["id": "a1", "rev": "3-aa", "history": "1-bb"], "{}"),                      // history skips a generation
            (["id": "a1", "rev": "2-aa", "history": "1-bb,1-cc"], "{}"),                 // history does not descend
            (["id": "a1", "rev": good], "[1,2]"),                                        // not an object
            (["id": "a1", "rev": good], "{\"a\":"),                                      // not JSON
        ]
        for (properties, body) in cases {
            #expect(refusal(request("rev", properties, body))?.code == 400, "\(properties)")
        }
        var small = CBLLimits()
        small.maxBodyBytes = 10
        guard let e = refusal(request("rev", ["id": "a1", "rev": good], #"{"text":"longer than ten bytes"}"#), limits: small) else {
            Issue.record("oversized body taken"); return
        }
        #expect(e.code == 400 && e.message.contains("over 10"))
    }

    @Test func unknownProfilesAndProofsGetERRs() {
        #expect(refusal(request("fooBar")) == BLIPErrorReply(domain: "BLIP", code: 404, message: "no handler for fooBar"))
        #expect(refusal(BLIPMessage(type: .request, number: 1))?.code == 404)
        #expect(refusal(request("proveAttachment", ["digest": "sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c="]))?.code == 400)
        guard case let .attachment(_, _, _, nonce) = CBLRequestDecoding.decode(
            request("proveAttachment", ["digest": "sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c="], "nonce"), limits: limits) else {
            Issue.record("proveAttachment not decoded"); return
        }
        #expect(nonce == Array("nonce".utf8))
        #expect(refusal(request("getAttachment", ["digest": "sha256-00"]))?.code == 400)
        guard case let .attachment(sha1, docID, compress, nil) = CBLRequestDecoding.decode(request("getAttachment", ["digest": "sha1-FILoXnR+tonJTnf/ToSQdISemec=", "compress": "true"]), limits: limits) else {
            Issue.record("getAttachment not decoded"); return
        }
        #expect(sha1.description == "sha1-FILoXnR+tonJTnf/ToSQdISemec=" && docID == nil && compress)
        #expect(decoded(request("norev", ["id": "a1", "rev": "1-ab", "sequence": "4", "error": "404", "reason": "missing"]))
                == .norev(doc: try! DocumentID("a1.json"), rev: try! RevisionID("1-ab"), sequence: 4, status: 404, reason: "missing"))
        // Other domains' codes mean nothing to ferry: 500, with the domain named.
        guard case .error(500, let message) = CBLResponses.response(for: BLIPErrorReply(domain: "LiteCore", code: 8, message: "conflict")) else { Issue.record("not 500"); return }
        #expect(message.contains("LiteCore"))
    }

    @Test func peerIDs() {
        #expect(CBLPeerID.from(checkpointClient: "pull:laptop-1") == "laptop-1")
        #expect(CBLPeerID.from(checkpointClient: "push:laptop-1:0123456789abcdef") == "laptop-1")
        let cbl = CBLPeerID.from(checkpointClient: "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc=")
        #expect(cbl.hasPrefix("cbl-") && cbl.count == 36 && CBLPeerID.isValid(cbl))
        #expect(cbl == CBLPeerID.from(checkpointClient: "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc="))
        #expect(CBLPeerID.from(checkpointClient: "pull:local").hasPrefix("cbl-"))
    }
}
