import FerryCore

/// A `rev` from the peer, checked, whose body is still Couchbase Lite's: its blob digests
/// become ferry's once their SHA-256 is known (`resolve`).
struct CBLIncomingRev: Sendable {
    var doc: DocumentID
    var cblID: String
    var rev: RevisionID
    var history: [RevisionID]
    var sequence: Int
    var deleted: Bool
    var body: JSONValue
    var merged: RevisionID?

    /// The blobs whose SHA-256 is not known yet.
    func unknownBlobs(_ aliases: some BlobDigestAliases) throws(CBLInteropError) -> [CBLBlobDigest] {
        deleted ? [] : try CBLBodies.unknownBlobs(in: body, aliases: aliases)
    }

    /// The request for the session, every digest in ferry's form.
    func resolve(_ aliases: some BlobDigestAliases) throws(CBLInteropError) -> Request {
        let ferryBody: RevisionBody
        if deleted {
            ferryBody = .deleted
        } else if doc.kind == .json {
            ferryBody = .json(try CBLBodies.fromCBL(body, aliases: aliases))
        } else {
            ferryBody = .blob(try CBLBodies.fileReference(body, aliases: aliases))
        }
        return .rev(doc: doc, rev: rev, history: history, sequence: sequence, body: ferryBody, merged: merged)
    }
}

/// A request of the peer's as the channel first sees it.
enum CBLIncoming: Sendable {
    /// Ready for the session; `kept` lists, for `changes` and `proposeChanges`, which of the
    /// message's entries the request holds (the others named ids ferry refuses and are answered
    /// by the channel).
    case request(Request, kept: [Int]?, total: Int)
    /// A `rev`, whose blob digests still have to be translated.
    case rev(CBLIncomingRev)
    /// `getAttachment` for the blob Couchbase Lite calls `sha1`, or `proveAttachment` (with its
    /// nonce): the answer is then the proof, not the bytes.
    case attachment(sha1: CBLBlobDigest, docID: String?, compress: Bool, proofNonce: [UInt8]? = nil)
    /// Refused: the ERR to answer.
    case refused(BLIPErrorReply)
    /// A `rev` refused (the ERR to answer) whose document and revision could be read: the
    /// session is also handed a `norev` for it, so that a pull that asked for it stops waiting.
    case refusedRevision(doc: DocumentID, rev: RevisionID, sequence: Int, BLIPErrorReply)
}

/// Couchbase Lite's requests (CBMobile_2/_3) as ferry's, every property and body checked.
enum CBLRequestDecoding {
    static func bad(_ message: String) -> CBLIncoming { .refused(BLIPErrorReply(domain: "BLIP", code: 400, message: message)) }

    /// Decodes and checks one request. Unknown profiles get BLIP 404, anything malformed BLIP 400.
    static func decode(_ message: BLIPMessage, limits: CBLLimits) -> CBLIncoming {
        let p = message.properties
        switch message.profile {
        case "getCheckpoint":
            guard let client = p["client"], !client.isEmpty, client.utf8.count <= 1024 else { return bad("getCheckpoint needs a client of 1 to 1024 bytes") }
            return .request(.getCheckpoint(client: client), kept: nil, total: 0)
        case "setCheckpoint":
            guard let client = p["client"], !client.isEmpty, client.utf8.count <= 1024 else { return bad("setCheckpoint needs a client of 1 to 1024 bytes") }
            guard message.body.count <= 1 << 20, let body = try? JSONParser.parse(message.body), let members = body.objectValue else {
                return bad("setCheckpoint's body must be a JSON object")
            }
            // Couchbase Lite also writes `time` and `localCompleted`; `local` and `remote` are
            // what both sides resume from. A value that is not a count (Sync Gateway's string
            // sequences) reads as 0: resuming from the start is always safe.
            let local = max(0, members["local"]?.intValue ?? 0), remote = max(0, members["remote"]?.intValue ?? 0)
            let rev = p["rev"].flatMap { $0.isEmpty ? nil : $0 }
            return .request(.setCheckpoint(client: client, rev: rev, checkpoint: Checkpoint(local: local, remote: remote)), kept: nil, total: 0)
        case "subChanges":
            return decodeSubChanges(message)
        case "changes":
            return decodeChanges(message, limits: limits)
        case "proposeChanges":
            return decodeProposal(message, limits: limits)
        case "rev":
            return decodeRev(message, limits: limits)
        case "norev":
            guard let id = p["id"], let doc = try? CBLDocumentIDs.ferryID(id), let rev = p["rev"].flatMap({ try? RevisionID($0) }) else {
                return bad("norev needs a valid id and rev")
            }
            let status = p["error"].flatMap { Int($0) } ?? 0
            return .request(.norev(doc: doc, rev: rev, sequence: p["sequence"].flatMap { Int($0) } ?? 0, status: status,
                                   reason: String((p["reason"] ?? "").prefix(200))), kept: nil, total: 0)
        case "getAttachment":
            guard let text = p["digest"], let sha1 = try? CBLBlobDigest(text) else { return bad("getAttachment needs a sha1-<base64> digest") }
            return .attachment(sha1: sha1, docID: p["docID"], compress: isTrue(p["compress"]))
        case "proveAttachment":
            // Sync Gateway asks a pushing client to prove it holds a blob the server already has.
            guard let text = p["digest"], let sha1 = try? CBLBlobDigest(text) else { return bad("proveAttachment needs a sha1-<base64> digest") }
            guard (1...255).contains(message.body.count) else { return bad("proveAttachment needs a nonce of 1 to 255 bytes") }
            return .attachment(sha1: sha1, docID: p["docID"], compress: false, proofNonce: message.body)
        default:
            return .refused(BLIPErrorReply(domain: "BLIP", code: 404, message: "no handler for \(String((message.profile ?? "(no profile)").prefix(60)))"))
        }
    }

    static func isTrue(_ value: String?) -> Bool { value == "true" || value == "1" }

    private static func decodeSubChanges(_ message: BLIPMessage) -> CBLIncoming {
        let p = message.properties
        var since = 0
        if let text = p["since"], !text.isEmpty {
            // `since` is JSON: ferry's (and Couchbase Lite's) sequences are counts.
            guard let value = try? JSONParser.parse(Array(text.utf8)), let n = value.intValue, n >= 0 else {
                return bad("subChanges' since must be a sequence number")
            }
            since = n
        }
        if let filter = p["filter"], !filter.isEmpty { return .refused(BLIPErrorReply(domain: "BLIP", code: 501, message: "filter \(filter.prefix(60)) is not supported")) }
        if let channels = p["channels"], !channels.isEmpty { return .refused(BLIPErrorReply(domain: "BLIP", code: 501, message: "channels are not supported")) }
        var docIDs: [DocumentID]?
        if !message.body.isEmpty {
            guard message.body.count <= 16 << 20, let body = try? JSONParser.parse(message.body), let members = body.objectValue else {
                return bad("subChanges' body must be a JSON object")
            }
            if let list = members["docIDs"] {
                guard let ids = list.arrayValue, ids.count <= 100_000 else { return bad("docIDs must be a list") }
                var docs: [DocumentID] = []
                for id in ids {
                    guard let text = id.stringValue else { return bad("docIDs must be strings") }
                    // An id ferry would never write has no changes here: leave it out.
                    if let doc = try? CBLDocumentIDs.ferryID(text) { docs.append(doc) }
                }
                docIDs = docs
            }
        }
        return .request(.subChanges(since: since, continuous: isTrue(p["continuous"]), docIDs: docIDs), kept: nil, total: 0)
    }

    private static func rows(_ message: BLIPMessage, _ what: String, limits: CBLLimits) -> Result<[[JSONValue]], CBLIncomingError> {
        guard !message.body.isEmpty else { return .success([]) }
        guard let body = try? JSONParser.parse(message.body), let list = body.arrayValue else { return .failure(CBLIncomingError("\(what)' body must be a JSON array")) }
        guard list.count <= limits.maxChangesPerMessage else { return .failure(CBLIncomingError("\(what) with \(list.count) entries, over \(limits.maxChangesPerMessage)")) }
        var out: [[JSONValue]] = []
        out.reserveCapacity(list.count)
        for row in list {
            guard let fields = row.arrayValue else { return .failure(CBLIncomingError("each entry of \(what) must be an array")) }
            out.append(fields)
        }
        return .success(out)
    }

    private static func decodeChanges(_ message: BLIPMessage, limits: CBLLimits) -> CBLIncoming {
        let list: [[JSONValue]]
        switch rows(message, "changes", limits: limits) {
        case .success(let r): list = r
        case .failure(let e): return bad(e.message)
        }
        var entries: [ChangeEntry] = []
        var kept: [Int] = []
        for (i, row) in list.enumerated() {
            guard row.count >= 3, let seq = row[0].intValue, seq >= 0, let id = row[1].stringValue, let revText = row[2].stringValue,
                  let rev = try? RevisionID(revText) else { return bad("changes entry \(i) is not [sequence, docID, revID, …]") }
            let deleted = row.count > 3 && (row[3].intValue.map { $0 != 0 } ?? (row[3] == .bool(true)))
            let size = row.count > 4 ? max(0, row[4].intValue ?? 0) : 0
            // An id ferry refuses (traversal, `.ferry/`, too long) is answered "not wanted".
            guard let doc = try? CBLDocumentIDs.ferryID(id) else { continue }
            entries.append(ChangeEntry(sequence: seq, doc: doc, rev: rev, deleted: deleted, bodySize: size))
            kept.append(i)
        }
        return .request(.changes(entries), kept: kept, total: list.count)
    }

    private static func decodeProposal(_ message: BLIPMessage, limits: CBLLimits) -> CBLIncoming {
        let list: [[JSONValue]]
        switch rows(message, "proposeChanges", limits: limits) {
        case .success(let r): list = r
        case .failure(let e): return bad(e.message)
        }
        var entries: [ProposedChange] = []
        var kept: [Int] = []
        for (i, row) in list.enumerated() {
            guard row.count >= 2, let id = row[0].stringValue, let revText = row[1].stringValue, let rev = try? RevisionID(revText)
            else { return bad("proposeChanges entry \(i) is not [docID, revID, parentRevID, bodySize]") }
            var parent: RevisionID?
            if row.count > 2, let text = row[2].stringValue, !text.isEmpty {
                guard let p = try? RevisionID(text) else { return bad("proposeChanges entry \(i) has an invalid parent") }
                parent = p
            }
            let size = row.count > 3 ? max(0, row[3].intValue ?? 0) : 0
            guard let doc = try? CBLDocumentIDs.ferryID(id) else { continue }
            entries.append(ProposedChange(doc: doc, rev: rev, parent: parent, bodySize: size))
            kept.append(i)
        }
        return .request(.proposeChanges(entries), kept: kept, total: list.count)
    }

    private static func decodeRev(_ message: BLIPMessage, limits: CBLLimits) -> CBLIncoming {
        let p = message.properties
        guard let id = p["id"] else { return bad("rev without an id") }
        let doc: DocumentID
        do { doc = try CBLDocumentIDs.ferryID(id) } catch { return bad("rejected \(String(id.prefix(80))): \(error.message)") }
        guard let rev = p["rev"].flatMap({ try? RevisionID($0) }) else { return bad("rev \(String(id.prefix(80))) has no valid rev id") }
        let sequence = max(0, p["sequence"].flatMap { Int($0) } ?? 0)
        func refusedRev(_ message: String) -> CBLIncoming {
            .refusedRevision(doc: doc, rev: rev, sequence: sequence, BLIPErrorReply(domain: "BLIP", code: 400, message: message))
        }
        var history: [RevisionID] = []
        if let text = p["history"], !text.isEmpty {
            let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count <= limits.maxHistory else { return refusedRev("a history of \(parts.count) revisions, over \(limits.maxHistory)") }
            for part in parts {
                guard let r = try? RevisionID(String(part)) else { return refusedRev("rev \(String(id.prefix(80))) has an invalid history") }
                history.append(r)
            }
        }
        // History is parent first, one generation apart: anything else lies about the tree.
        for (i, ancestor) in history.enumerated() where ancestor.generation != rev.generation - 1 - i {
            return refusedRev("the history of \(String(id.prefix(80)))@\(rev) does not descend one generation at a time")
        }
        let deleted = isTrue(p["deleted"])
        guard message.body.count <= limits.maxBodyBytes else { return refusedRev("a body of \(message.body.count) bytes, over \(limits.maxBodyBytes)") }
        var body: JSONValue = .object([:])
        // A deletion's body (Couchbase Lite sends `{}`) carries nothing ferry keeps.
        if !deleted {
            guard let parsed = try? JSONParser.parse(message.body), parsed.objectValue != nil else {
                return refusedRev("the body of \(String(id.prefix(80)))@\(rev) is not a JSON object")
            }
            body = parsed
        }
        var merged: RevisionID?
        if let text = p[CBLRequestEncoding.mergedProperty] {
            guard let m = try? RevisionID(text), !history.isEmpty else { return refusedRev("an invalid merged revision") }
            merged = m
        }
        return .rev(CBLIncomingRev(doc: doc, cblID: id, rev: rev, history: history, sequence: sequence,
                                   deleted: deleted, body: body, merged: merged))
    }
}

/// A sentence saying why a message was refused.
struct CBLIncomingError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
