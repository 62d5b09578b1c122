import FerryCore

/// ferry's requests as Couchbase Lite's BLIP messages (CBMobile_2/_3), for the peer.
enum CBLRequestEncoding {
    /// The property that carries a ferry merge's second parent (Couchbase Lite ignores
    /// properties it does not know, and has no merges of its own).
    static let mergedProperty = "ferryMerged"
    /// The most revision ids one `rev`'s `history` carries: 1,000 of the longest ids ferry
    /// reads (a 13-digit generation, 64 hex digits) fit in BLIP's 100 KiB of properties, which
    /// both LiteCore and ferry refuse to exceed.
    static let historyIDsPerMessage = 1_000

    /// What `subChanges` asks per `changes` message, as Couchbase Lite does.
    static let batch = 200

    /// A `rev`'s history as its property: whole when it fits, else its first 999 ids and its
    /// last, as LiteCore cuts its own. The last is the revision the peer said it has (or the
    /// document's first): a history cut before it would reach nothing the peer knows, and
    /// the peer would keep the revision as a branch beside its own, a false conflict.
    /// LiteCore takes the gap (it allows one deeper than its pruning depth); ferry refuses it.
    static func historyProperty(_ history: [RevisionID]) -> String {
        let sent = history.count <= historyIDsPerMessage ? history[...] : history.prefix(historyIDsPerMessage - 1) + history.suffix(1)
        return sent.map(\.description).joined(separator: ",")
    }

    /// The BLIP request for `request`. `getAttachment` is the channel's (it needs the
    /// SHA-1 alias and the blob cache) and `hello` has no BLIP form: both throw.
    static func encode(_ request: Request, aliases: some BlobDigestAliases, noReply: Bool = false) throws(CBLInteropError) -> BLIPMessage {
        var flags: BLIPFrameFlags = noReply ? [.noReply] : []
        switch request {
        case .getCheckpoint(let client):
            return .request(profile: "getCheckpoint", properties: ["client": client], flags: flags)
        case let .setCheckpoint(client, rev, checkpoint):
            let body: JSONValue = .object(["local": .int(checkpoint.local), "remote": .int(checkpoint.remote)])
            return .request(profile: "setCheckpoint", properties: ["client": client, "rev": rev ?? ""], body: body.canonicalBytes, flags: flags)
        case let .subChanges(since, continuous, docIDs):
            var properties: BLIPProperties = [:]
            if since > 0 { properties["since"] = String(since) }
            if continuous { properties["continuous"] = "true" }
            properties["batch"] = String(batch)
            var body: [UInt8] = []
            if let docIDs {
                var ids: [JSONValue] = []
                for doc in docIDs { ids.append(.string(try CBLDocumentIDs.cblID(doc))) }
                body = JSONValue.object(["docIDs": .array(ids)]).canonicalBytes
            }
            return .request(profile: "subChanges", properties: properties, body: body, flags: flags)
        case .changes(let entries):
            var rows: [JSONValue] = []
            rows.reserveCapacity(entries.count)
            for e in entries {
                rows.append(.array([.int(e.sequence), .string(try CBLDocumentIDs.cblID(e.doc)), .string(e.rev.description),
                                    .int(e.deleted ? 1 : 0), .int(e.bodySize)]))
            }
            flags.formUnion([.urgent, .compressed])
            return .request(profile: "changes", body: JSONValue.array(rows).canonicalBytes, flags: flags)
        case .proposeChanges(let entries):
            var rows: [JSONValue] = []
            for e in entries {
                rows.append(.array([.string(try CBLDocumentIDs.cblID(e.doc)), .string(e.rev.description),
                                    .string(e.parent?.description ?? ""), .int(e.bodySize)]))
            }
            flags.formUnion([.urgent, .compressed])
            // A conflict's answer then names the peer's current revision: the proposal can be
            // made again on it when this side's revision descends from it (`PeerSession.propose`).
            return .request(profile: "proposeChanges", properties: ["conflictIncludesRev": "true"],
                            body: JSONValue.array(rows).canonicalBytes, flags: flags)
        case let .rev(doc, rev, history, sequence, body, merged, _):
            var properties: BLIPProperties = ["id": try CBLDocumentIDs.cblID(doc), "rev": rev.description, "sequence": String(sequence)]
            if !history.isEmpty { properties["history"] = Self.historyProperty(history) }
            var json: JSONValue = .object([:])
            switch body {
            case .deleted:
                properties["deleted"] = "1"
            case .json(let value):
                json = try CBLBodies.toCBL(value, aliases: aliases)
            case .canonicalJSON(let body):
                guard let value = try? JSONParser.parse(body.bytes) else { throw CBLInteropError(status: 500, "the stored body of \(doc)@\(rev) is not JSON") }
                json = try CBLBodies.toCBL(value, aliases: aliases)
            case .blob(let ref):
                json = try CBLBodies.fileBody(ref, aliases: aliases)
            case .delta:
                throw CBLInteropError(status: 500, "deltas are not offered to Couchbase Lite peers")
            }
            if let merged { properties[mergedProperty] = merged.description }
            flags.insert(.compressed)
            return .request(profile: "rev", properties: properties, body: json.canonicalBytes, flags: flags)
        case let .norev(doc, rev, sequence, status, reason):
            let id = (try? CBLDocumentIDs.cblID(doc)) ?? doc.rawValue
            // A NUL cannot go in a BLIP property, and a `norev` that is not sent leaves the
            // peer waiting for the revision for ever.
            let reason = reason.replacingOccurrences(of: "\0", with: "\\u0000")
            return .request(profile: "norev", properties: ["id": id, "rev": rev.description, "sequence": String(sequence),
                                                           "error": String(status), "reason": reason], flags: flags)
        case .getAttachment, .hello:
            throw CBLInteropError(status: 500, "\(request.typeName) has no plain BLIP form")
        }
    }
}
