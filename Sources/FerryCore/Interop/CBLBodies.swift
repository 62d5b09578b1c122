/// Documents' bodies between ferry and Couchbase Lite (docs/interop.md): blob references
/// change their digest between `sha256-<hex>` and `sha1-<base64>` through `BlobDigestAliases`
/// and nothing else changes, so a body that goes to Couchbase Lite and back is the same value
/// (same canonical bytes, same revision id).
public enum CBLBodies {
    /// The key of a file document's blob in its Couchbase Lite body: `{"file": {blob}}`.
    public static let fileKey = "file"
    /// Top-level properties Couchbase Lite may put in a body that are metadata, not content.
    public static let metadataKeys: Set<String> = ["_id", "_rev", "_deleted", "_revisions"]
    /// 2.x keeps a copy of each blob reference in `_attachments` under `blob_<path>`.
    static let attachmentsKey = "_attachments"

    // MARK: ferry → Couchbase Lite

    /// A ferry JSON body as Couchbase Lite's: every blob reference's digest in SHA-1 form.
    /// Throws (404) when a blob's SHA-1 is not known and cannot be computed here, and (422)
    /// when a top-level property's name begins with `_`: Couchbase Lite reserves those and
    /// drops them without a word, so the document would arrive without it, and an edit made
    /// there would come back without it.
    public static func toCBL(_ body: JSONValue, aliases: some BlobDigestAliases) throws(CBLInteropError) -> JSONValue {
        if case .object(let members) = body, let reserved = members.keys.filter({ $0.hasPrefix("_") }).min() {
            // The name as JSON writes it: a control character in it stays readable (and out of
            // the BLIP property that carries this message, where a NUL cannot go).
            let name = JSONValue.string(String(reserved.prefix(80))).canonicalString
            throw CBLInteropError(status: 422, "its top-level property \(name) begins with _, which Couchbase Lite reserves (it would drop it)")
        }
        return try rewriteBlobs(body) { (digest: String) throws(CBLInteropError) -> String in
            guard let sha256 = try? BlobDigest(digest) else { throw CBLInteropError("a blob reference with digest \(digest.prefix(80)) is not ferry's") }
            guard let sha1 = aliases.sha1(for: sha256) else { throw CBLInteropError(status: 404, "no SHA-1 known for blob \(sha256)") }
            return sha1.description
        }
    }

    /// A ferry file document's body for Couchbase Lite: `{"file": {"@type": "blob", "digest":
    /// "sha1-…", "length": N}}` (and `content_type` when the reference has one).
    public static func fileBody(_ ref: BlobReference, aliases: some BlobDigestAliases) throws(CBLInteropError) -> JSONValue {
        guard let sha1 = aliases.sha1(for: ref.digest) else { throw CBLInteropError(status: 404, "no SHA-1 known for blob \(ref.digest)") }
        var blob: [String: JSONValue] = ["@type": "blob", "digest": .string(sha1.description), "length": .int(ref.length)]
        if let type = ref.contentType { blob["content_type"] = .string(type) }
        return .object([fileKey: .object(blob)])
    }

    // MARK: Couchbase Lite → ferry

    /// The SHA-1 digests of the blobs a Couchbase Lite body names whose SHA-256 is not known
    /// yet (the channel fetches those blobs first to learn it), without duplicates.
    public static func unknownBlobs(in body: JSONValue, aliases: some BlobDigestAliases) throws(CBLInteropError) -> [CBLBlobDigest] {
        var missing: [CBLBlobDigest] = []
        _ = try rewriteBlobs(try content(of: body)) { (digest: String) throws(CBLInteropError) -> String in
            let sha1 = try parseSHA1(digest)
            if aliases.sha256(for: sha1) == nil, !missing.contains(sha1) { missing.append(sha1) }
            return digest
        }
        return missing
    }

    /// A Couchbase Lite JSON body as ferry's: metadata (`_id`, `_rev`, `_deleted`,
    /// `_revisions`) and 2.x's `_attachments` copies dropped, every blob digest in SHA-256
    /// form. Throws (400) on a body that is not an object, a malformed digest or legacy
    /// attachments ferry cannot keep; (404) on a blob whose SHA-256 is not known.
    public static func fromCBL(_ body: JSONValue, aliases: some BlobDigestAliases) throws(CBLInteropError) -> JSONValue {
        try rewriteBlobs(try content(of: body)) { (digest: String) throws(CBLInteropError) -> String in
            let sha1 = try parseSHA1(digest)
            guard let sha256 = aliases.sha256(for: sha1) else { throw CBLInteropError(status: 404, "no SHA-256 known for blob \(sha1)") }
            return sha256.description
        }
    }

    /// The blob of a Couchbase Lite body that stands for a ferry file document: exactly
    /// `{"file": {blob reference}}` once metadata is dropped; anything else would be lost on
    /// disk, so it is refused (400).
    public static func fileReference(_ body: JSONValue, aliases: some BlobDigestAliases) throws(CBLInteropError) -> BlobReference {
        let value = try fromCBL(body, aliases: aliases)
        guard let members = value.objectValue, members.count == 1, let blob = members[fileKey],
              let refs = try? blob.blobReferences(), refs.count == 1, blob.objectValue?["@type"]?.stringValue == "blob",
              let ref = refs.first, ref.length >= 0
        else { throw CBLInteropError("a file document's body must be {\"file\": <blob reference>} and nothing else") }
        return ref
    }

    // MARK: Helpers

    private static func parseSHA1(_ digest: String) throws(CBLInteropError) -> CBLBlobDigest {
        do { return try CBLBlobDigest(digest) } catch { throw CBLInteropError(error.description) }
    }

    /// The body without Couchbase Lite's metadata and 2.x's `blob_` attachment copies.
    static func content(of body: JSONValue) throws(CBLInteropError) -> JSONValue {
        guard var members = body.objectValue else { throw CBLInteropError("a document body must be a JSON object") }
        for key in metadataKeys { members[key] = nil }
        if let attachments = members[attachmentsKey] {
            guard let entries = attachments.objectValue else { throw CBLInteropError("_attachments must be an object") }
            // 2.x mirrors each blob of the body as `blob_<path>`; the body's reference is the
            // one ferry keeps. Other (1.x-style) attachments have no place in a ferry body.
            guard entries.keys.allSatisfy({ $0.hasPrefix("blob_") }) else {
                throw CBLInteropError("legacy _attachments (not blob_ copies) are not supported")
            }
            members[attachmentsKey] = nil
        }
        return .object(members)
    }

    /// `value` with each blob reference's digest replaced by `map(digest)`; every other
    /// member of the reference is kept as it is.
    static func rewriteBlobs(_ value: JSONValue, _ map: (String) throws(CBLInteropError) -> String) throws(CBLInteropError) -> JSONValue {
        switch value {
        case .array(let elements):
            var out: [JSONValue] = []
            out.reserveCapacity(elements.count)
            for e in elements { out.append(try rewriteBlobs(e, map)) }
            return .array(out)
        case .object(var members):
            if members["@type"]?.stringValue == "blob" {
                guard let digest = members["digest"]?.stringValue else { throw CBLInteropError("a blob reference without a digest") }
                members["digest"] = .string(try map(digest))
                return .object(members)
            }
            for (key, member) in members { members[key] = try rewriteBlobs(member, map) }
            return .object(members)
        default:
            return value
        }
    }
}
