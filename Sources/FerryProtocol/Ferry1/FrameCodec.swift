import FerryCore

/// Text frames ↔ `Frame`. Decoding validates everything a hostile peer could get wrong:
/// size (before parsing), JSON syntax, field types, document ids (no `..`, no absolute paths,
/// nothing under `.ferry/`), revision ids, digests, sequences, list lengths.
///
/// Responses carry no type of their own: like BLIP, a response is matched to its request by
/// number, so the decoder asks `requestType` what the answered request was.
public enum FrameCodec {
    // MARK: Encoding

    /// The compact JSON text of a frame.
    public static func encode(_ frame: Frame) -> [UInt8] {
        // The two frames a bulk transfer sends once per revision are written straight into
        // bytes, in the order the general way's key sort gives (a test holds them to it).
        switch frame {
        case let .request(number, noReply, .rev(doc, rev, history, sequence, .canonicalJSON(body), merged, author)):
            return revFrame(number: number, noReply: noReply, doc: doc, rev: rev, history: history, sequence: sequence,
                            body: body, merged: merged, author: author)
        case let .response(to, .ok):
            var out = Array(#"{"re":"#.utf8)
            out += String(to).utf8
            out += #","type":"response"}"#.utf8
            return out
        default:
            return encodeAsTree(frame)
        }
    }

    /// A `rev` request with a stored canonical body, written member by member: `author`,
    /// `doc`, `history`, `merged`, `n`, `noreply`, `rev`, `sequence`, `type` (sorted), then
    /// the body as stored, last.
    static func revFrame(number: Int, noReply: Bool, doc: DocumentID, rev: RevisionID, history: [RevisionID], sequence: Int,
                         body: CanonicalBody, merged: RevisionID?, author: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.bytes.count + 160 + 40 * history.count + doc.rawValue.utf8.count)
        func key(_ name: StaticString) {
            out.append(out.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
            out.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { out += $0 }
            out += #"":"#.utf8
        }
        func revText(_ id: RevisionID) {
            out.append(UInt8(ascii: "\""))
            id.appendText(to: &out)
            out.append(UInt8(ascii: "\""))
        }
        if let author { key("author"); JSONValue.appendString(author, to: &out) }
        key("doc"); JSONValue.appendString(doc.rawValue, to: &out)
        key("history"); out.append(UInt8(ascii: "["))
        for (i, id) in history.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            revText(id)
        }
        out.append(UInt8(ascii: "]"))
        if let merged { key("merged"); revText(merged) }
        key("n"); out += String(number).utf8
        if noReply { key("noreply"); out += "true".utf8 }
        key("rev"); revText(rev)
        key("sequence"); out += String(sequence).utf8
        key("type"); out += #""rev""#.utf8
        key("body"); out += body.bytes
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The general way: the frame as a JSON tree, written canonically (keys sorted), a stored
    /// body spliced in last.
    static func encodeAsTree(_ frame: Frame) -> [UInt8] {
        var out = json(frame).canonicalBytes
        if case .request(_, _, .rev(_, _, _, _, .canonicalJSON(let body), _, _)) = frame {
            // Spliced in as stored, in place of the object's closing brace.
            out.removeLast()
            out += Array(#","body":"#.utf8)
            out += body.bytes
            out.append(UInt8(ascii: "}"))
        }
        return out
    }

    static func json(_ frame: Frame) -> JSONValue {
        switch frame {
        case let .request(number, noReply, request):
            var o = fields(request)
            o["type"] = .string(request.typeName)
            o["n"] = .int(number)
            if noReply { o["noreply"] = true }
            return .object(o)
        case let .response(to, response):
            var o = fields(response)
            o["re"] = .int(to)
            if case .error = response { o["type"] = "error" } else { o["type"] = "response" }
            return .object(o)
        }
    }

    static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
    static func revs(_ values: [RevisionID]) -> JSONValue { .array(values.map { .string($0.description) }) }

    static func fields(_ request: Request) -> [String: JSONValue] {
        switch request {
        case let .hello(versions, peer, database, features):
            return ["versions": .array(versions.map { .int($0) }), "peer": .string(peer), "db": .string(database), "features": strings(features)]
        case let .getCheckpoint(client):
            return ["client": .string(client)]
        case let .setCheckpoint(client, rev, checkpoint):
            var o: [String: JSONValue] = ["client": .string(client), "checkpoint": ["local": .int(checkpoint.local), "remote": .int(checkpoint.remote)]]
            if let rev { o["rev"] = .string(rev) }
            return o
        case let .subChanges(since, continuous, docIDs):
            var o: [String: JSONValue] = ["since": .int(since), "continuous": .bool(continuous)]
            if let docIDs { o["docIDs"] = strings(docIDs.map(\.rawValue)) }
            return o
        case let .changes(entries):
            return ["changes": .array(entries.map { e in
                [.int(e.sequence), .string(e.doc.rawValue), .string(e.rev.description), .bool(e.deleted), .int(e.bodySize)]
            })]
        case let .proposeChanges(entries):
            return ["changes": .array(entries.map { e in
                [.string(e.doc.rawValue), .string(e.rev.description), .string(e.parent?.description ?? ""), .int(e.bodySize)]
            })]
        case let .rev(doc, rev, history, sequence, body, merged, author):
            var o: [String: JSONValue] = ["doc": .string(doc.rawValue), "rev": .string(rev.description), "history": revs(history), "sequence": .int(sequence)]
            if let merged { o["merged"] = .string(merged.description) }
            if let author { o["author"] = .string(author) }
            switch body {
            case .deleted: o["deleted"] = true
            case .json(let value): o["body"] = value
            case .canonicalJSON: break  // spliced in by `encode`
            case .blob(let ref): o["blob"] = ref.json
            case let .delta(base, delta):
                o["deltaSrc"] = .string(base.description)
                o["delta"] = delta
            }
            return o
        case let .norev(doc, rev, sequence, status, reason):
            return ["doc": .string(doc.rawValue), "rev": .string(rev.description), "sequence": .int(sequence), "status": .int(status), "reason": .string(reason)]
        case let .getAttachment(digest, offset, length):
            var o: [String: JSONValue] = ["digest": .string(digest.description)]
            if offset != 0 { o["offset"] = .int(offset) }
            if let length { o["length"] = .int(length) }
            return o
        }
    }

    static func fields(_ response: Response) -> [String: JSONValue] {
        switch response {
        case .ok: return [:]
        case let .subscribed(count): return ["count": .int(count)]
        case let .hello(version, peer, features): return ["version": .int(version), "peer": .string(peer), "features": strings(features)]
        case let .checkpoint(rev, c): return ["rev": .string(rev), "checkpoint": ["local": .int(c.local), "remote": .int(c.remote)]]
        case let .checkpointSaved(rev): return ["rev": .string(rev)]
        case let .changes(answers, maxHistory):
            var o: [String: JSONValue] = ["answer": .array(answers.map { a in
                switch a {
                case .notWanted: return .int(0)
                case .wanted(let known): return revs(known)
                }
            })]
            if let maxHistory { o["maxHistory"] = .int(maxHistory) }
            return o
        case let .proposeChanges(answers, _): return ["answer": .array(answers.map { .int($0.rawValue) })]
        case let .attachment(length): return ["length": .int(length)]
        case let .error(status, message): return ["status": .int(status), "message": .string(message)]
        }
    }

    // MARK: Decoding

    /// Decodes one text frame; `requestType` names the type of an outstanding request of
    /// ours by its number (nil: no such request).
    public static func decode(_ bytes: [UInt8], limits: ProtocolLimits = ProtocolLimits(),
                              requestType: (Int) -> String?) throws(ProtocolError) -> Frame {
        guard bytes.count <= limits.maxTextFrameBytes else {
            throw ProtocolError(.tooLarge, "text frame of \(bytes.count) bytes exceeds \(limits.maxTextFrameBytes)")
        }
        // A `rev`'s body is taken as the bytes it is where they are canonical, as a ferry peer
        // sends them (`CanonicalJSONCheck`); the store writes those bytes without a tree.
        let parsed: (members: [String: JSONValue]?, kept: (range: Range<Int>, facts: CanonicalJSONFacts)?)
        do {
            parsed = try bytes.withUnsafeBufferPointer { buffer throws(JSONSyntaxError) in
                try JSONParser.parseObject(buffer: buffer, keepingCanonical: "body")
            }
        } catch {
            throw ProtocolError(.malformed, "frame is not JSON (\(error))")
        }
        guard let members = parsed.members else { throw ProtocolError(.malformed, "frame is not a JSON object") }
        var r = Reader(members)
        r.canonicalBody = parsed.kept.map { CanonicalBody(Array(bytes[$0.range]), checked: $0.facts) }
        let type = try r.string("type")
        switch type {
        case "response", "error":
            let to = try r.int("re")
            guard let asked = requestType(to) else { throw ProtocolError(.outOfOrder, "response to unknown request \(to)") }
            if type == "error" { return .response(to: to, .error(status: try r.int("status"), message: try r.string("message"))) }
            return .response(to: to, try decodeResponse(answering: asked, &r, limits))
        default:
            let number = try r.int("n")
            let noReply = try r.optionalBool("noreply") ?? false
            return .request(number: number, noReply: noReply, try decodeRequest(type, &r, limits))
        }
    }

    static func decodeRequest(_ type: String, _ r: inout Reader, _ limits: ProtocolLimits) throws(ProtocolError) -> Request {
        switch type {
        case "hello":
            let versions = try r.array("versions").map { (v) throws(ProtocolError) in try Reader.int(v, "versions") }
            return .hello(versions: versions, peer: try r.string("peer"), database: try r.string("db"),
                          features: try r.optionalArray("features")?.map { (v) throws(ProtocolError) in try Reader.string(v, "features") } ?? [])
        case "getCheckpoint":
            return .getCheckpoint(client: try r.string("client"))
        case "setCheckpoint":
            return .setCheckpoint(client: try r.string("client"), rev: try r.optionalString("rev"), checkpoint: try r.checkpoint("checkpoint"))
        case "subChanges":
            let ids = try r.optionalArray("docIDs")?.map { (v) throws(ProtocolError) in try Reader.doc(v) }
            return .subChanges(since: try r.sequence("since"), continuous: try r.optionalBool("continuous") ?? false, docIDs: ids)
        case "changes":
            return .changes(try r.changeList(type, limits).map { (item) throws(ProtocolError) in
                guard case .array(let a) = item, a.count >= 3 else { throw ProtocolError(.malformed, "changes entry is not [seq, doc, rev, deleted, size]") }
                let deleted = a.count > 3 ? (a[3].boolValue ?? (a[3].intValue.map { $0 != 0 } ?? false)) : false
                return ChangeEntry(sequence: try Reader.sequence(a[0], "changes"), doc: try Reader.doc(a[1]), rev: try Reader.rev(a[2]),
                                   deleted: deleted, bodySize: a.count > 4 ? max(0, a[4].intValue ?? 0) : 0)
            })
        case "proposeChanges":
            return .proposeChanges(try r.changeList(type, limits).map { (item) throws(ProtocolError) in
                guard case .array(let a) = item, a.count >= 2 else { throw ProtocolError(.malformed, "proposeChanges entry is not [doc, rev, parent, size]") }
                var parent: RevisionID?
                if a.count > 2, let p = a[2].stringValue, !p.isEmpty { parent = try Reader.rev(a[2]) }
                return ProposedChange(doc: try Reader.doc(a[0]), rev: try Reader.rev(a[1]), parent: parent, bodySize: a.count > 3 ? max(0, a[3].intValue ?? 0) : 0)
            })
        case "rev":
            let doc = try Reader.doc(try r.value("doc"))
            let rev = try Reader.rev(try r.value("rev"))
            let historyValues = try r.array("history")
            guard historyValues.count <= limits.maxHistory else {
                throw ProtocolError(.tooLarge, "history of \(historyValues.count) revisions exceeds \(limits.maxHistory)")
            }
            let history = try historyValues.map { (v) throws(ProtocolError) in try Reader.rev(v) }
            var expected = rev.generation - 1
            for h in history {
                guard h.generation == expected else { throw ProtocolError(.invalidField, "history of \(doc)@\(rev) does not descend one generation at a time") }
                expected -= 1
            }
            let body: RevisionBody
            if try r.optionalBool("deleted") == true {
                body = .deleted
            } else if let canonical = r.canonicalBody {
                guard doc.kind == .json else { throw ProtocolError(.invalidField, "body of \(doc) must be a JSON object and the document a .json one") }
                body = .canonicalJSON(canonical)
            } else if let b = r.fields["body"] {
                guard case .object = b, doc.kind == .json else { throw ProtocolError(.invalidField, "body of \(doc) must be a JSON object and the document a .json one") }
                body = .json(b)
            } else if let delta = r.fields["delta"] {
                guard case .object = delta, doc.kind == .json else { throw ProtocolError(.invalidField, "delta of \(doc) must be a JSON object and the document a .json one") }
                let base = try Reader.rev(try r.value("deltaSrc"))
                guard base.generation < rev.generation else { throw ProtocolError(.invalidField, "delta source \(base) of \(doc)@\(rev) is not older than it") }
                body = .delta(base: base, delta: delta)
            } else if let blob = r.fields["blob"] {
                guard doc.kind == .file else { throw ProtocolError(.invalidField, "\(doc) is a JSON document; it cannot carry a blob body") }
                let refs: [BlobReference]
                do { refs = try JSONValue.array([blob]).blobReferences() } catch { throw ProtocolError(.invalidField, "\(error)") }
                guard refs.count == 1, refs[0].length >= 0 else { throw ProtocolError(.invalidField, "blob of \(doc) needs a digest and a length") }
                body = .blob(refs[0])
            } else {
                throw ProtocolError(.malformed, "rev of \(doc) has neither deleted, body, delta nor blob")
            }
            var merged: RevisionID?
            if r.fields["merged"] != nil {
                let m = try Reader.rev(try r.value("merged"))
                guard m.generation < rev.generation, !history.isEmpty else {
                    throw ProtocolError(.invalidField, "merged revision \(m) of \(doc)@\(rev) is not older than it, or it has no parent")
                }
                merged = m
            }
            let author = try r.optionalString("author")
            if let author, let why = LogEntry.authorProblem(author) { throw ProtocolError(.invalidField, "author of \(doc)@\(rev): \(why)") }
            return .rev(doc: doc, rev: rev, history: history, sequence: try r.sequence("sequence"), body: body, merged: merged, author: author)
        case "norev":
            return .norev(doc: try Reader.doc(try r.value("doc")), rev: try Reader.rev(try r.value("rev")), sequence: try r.sequence("sequence"),
                          status: try r.int("status"), reason: try r.optionalString("reason") ?? "")
        case "getAttachment":
            let text = try r.string("digest")
            let digest: BlobDigest
            do { digest = try BlobDigest(text) } catch { throw ProtocolError(.invalidField, "\(error)") }
            let offset = try r.optionalInt("offset") ?? 0
            let length = try r.optionalInt("length")
            guard offset >= 0, (length ?? 0) >= 0 else { throw ProtocolError(.invalidField, "getAttachment offset and length must not be negative") }
            return .getAttachment(digest: digest, offset: offset, length: length)
        default:
            throw ProtocolError(.unknownType, "unknown message type \(String(reflecting: type))")
        }
    }

    static func decodeResponse(answering type: String, _ r: inout Reader, _ limits: ProtocolLimits) throws(ProtocolError) -> Response {
        switch type {
        case "hello":
            return .hello(version: try r.int("version"), peer: try r.string("peer"),
                          features: try r.optionalArray("features")?.map { (v) throws(ProtocolError) in try Reader.string(v, "features") } ?? [])
        case "getCheckpoint":
            return .checkpoint(rev: try r.string("rev"), checkpoint: try r.checkpoint("checkpoint"))
        case "setCheckpoint":
            return .checkpointSaved(rev: try r.string("rev"))
        case "changes":
            let answers = try r.array("answer")
            guard answers.count <= limits.maxChangesPerMessage else { throw ProtocolError(.tooLarge, "changes answer too long") }
            return .changes(try answers.map { (a) throws(ProtocolError) in
                switch a {
                case .null: return .notWanted
                case .number where a.intValue == 0: return .notWanted
                case .array(let known): return .wanted(knownAncestors: try known.map { (v) throws(ProtocolError) in try Reader.rev(v) })
                default: throw ProtocolError(.malformed, "changes answer entries are 0 or arrays of revision ids")
                }
            }, maxHistory: try r.optionalInt("maxHistory"))
        case "proposeChanges":
            return .proposeChanges(try r.array("answer").map { (a) throws(ProtocolError) in
                guard let n = a.intValue, let answer = ProposeAnswer(rawValue: n) else { throw ProtocolError(.malformed, "proposeChanges answers are 0, 304, 403, 409 or 503") }
                return answer
            })
        case "subChanges":
            // `count` is optional: older peers answer `{}` (then the total grows as changes come).
            guard let count = try r.optionalInt("count") else { return .ok }
            guard count >= 0 else { throw ProtocolError(.invalidField, "subChanges count is negative") }
            return .subscribed(count: count)
        case "getAttachment":
            let length = try r.int("length")
            guard length >= 0 else { throw ProtocolError(.invalidField, "negative attachment length") }
            return .attachment(length: length)
        default:
            return .ok
        }
    }
}

/// Typed access to a frame's fields, with one-sentence errors naming the field.
struct Reader {
    let fields: [String: JSONValue]
    /// The frame's `body` where it was canonical, taken as its bytes (not in `fields`).
    var canonicalBody: CanonicalBody?
    init(_ fields: [String: JSONValue]) { self.fields = fields }

    func value(_ key: String) throws(ProtocolError) -> JSONValue {
        guard let v = fields[key] else { throw ProtocolError(.malformed, "missing field \"\(key)\"") }
        return v
    }
    func string(_ key: String) throws(ProtocolError) -> String { try Self.string(try value(key), key) }
    func int(_ key: String) throws(ProtocolError) -> Int { try Self.int(try value(key), key) }
    func array(_ key: String) throws(ProtocolError) -> [JSONValue] {
        guard case .array(let a) = try value(key) else { throw ProtocolError(.malformed, "field \"\(key)\" must be an array") }
        return a
    }
    func optionalString(_ key: String) throws(ProtocolError) -> String? { try fields[key].map { (v) throws(ProtocolError) in try Self.string(v, key) } }
    func optionalInt(_ key: String) throws(ProtocolError) -> Int? { try fields[key].map { (v) throws(ProtocolError) in try Self.int(v, key) } }
    func optionalArray(_ key: String) throws(ProtocolError) -> [JSONValue]? { fields[key] == nil ? nil : try array(key) }
    func optionalBool(_ key: String) throws(ProtocolError) -> Bool? {
        guard let v = fields[key] else { return nil }
        guard let b = v.boolValue else { throw ProtocolError(.malformed, "field \"\(key)\" must be true or false") }
        return b
    }
    func sequence(_ key: String) throws(ProtocolError) -> Int { try Self.sequence(try value(key), key) }
    /// The `changes` array of a `changes` or `proposeChanges` message, bounded by the limits.
    func changeList(_ type: String, _ limits: ProtocolLimits) throws(ProtocolError) -> [JSONValue] {
        let list = try array("changes")
        guard list.count <= limits.maxChangesPerMessage else {
            throw ProtocolError(.tooLarge, "\(type) message with \(list.count) entries exceeds \(limits.maxChangesPerMessage)")
        }
        return list
    }
    func checkpoint(_ key: String) throws(ProtocolError) -> Checkpoint {
        let v = try value(key)
        guard let l = v["local"], let rm = v["remote"] else { throw ProtocolError(.malformed, "checkpoint needs local and remote") }
        return Checkpoint(local: try Self.sequence(l, "local"), remote: try Self.sequence(rm, "remote"))
    }

    static func string(_ v: JSONValue, _ key: String) throws(ProtocolError) -> String {
        guard let s = v.stringValue else { throw ProtocolError(.malformed, "field \"\(key)\" must be a string") }
        return s
    }
    static func int(_ v: JSONValue, _ key: String) throws(ProtocolError) -> Int {
        guard let n = v.intValue else { throw ProtocolError(.malformed, "field \"\(key)\" must be an integer") }
        return n
    }
    static func sequence(_ v: JSONValue, _ key: String) throws(ProtocolError) -> Int {
        let n = try int(v, key)
        guard n >= 0 else { throw ProtocolError(.invalidField, "sequence \"\(key)\" is negative") }
        return n
    }
    static func doc(_ v: JSONValue) throws(ProtocolError) -> DocumentID {
        let text = try string(v, "doc")
        do { return try DocumentID(text) } catch { throw ProtocolError(.invalidField, "\(error)") }
    }
    static func rev(_ v: JSONValue) throws(ProtocolError) -> RevisionID {
        let text = try string(v, "rev")
        do { return try RevisionID(text) } catch { throw ProtocolError(.invalidField, "\(error)") }
    }
}
