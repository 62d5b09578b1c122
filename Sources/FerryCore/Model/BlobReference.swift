/// A blob referenced from a JSON document:
/// `{"@type": "blob", "digest": "sha256-…", "length": N, "content_type": "…"}`.
public struct BlobReference: Sendable, Hashable {
    /// The blob's digest.
    public var digest: BlobDigest
    /// Its length in bytes.
    public var length: Int
    /// Its MIME type, when given.
    public var contentType: String?

    /// A reference.
    public init(digest: BlobDigest, length: Int, contentType: String?) {
        self.digest = digest
        self.length = length
        self.contentType = contentType
    }

    /// The JSON object for this reference.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["@type": "blob", "digest": .string(digest.description), "length": .int(length)]
        if let contentType { o["content_type"] = .string(contentType) }
        return .object(o)
    }
}

extension JSONValue {
    /// Every blob reference anywhere in this value, in document order; throws on a
    /// `"@type": "blob"` object whose digest or length is malformed.
    public func blobReferences() throws(BlobDigest.InvalidError) -> [BlobReference] {
        var found: [BlobReference] = []
        // Members in any order first: sorting every object's keys is most of the walk of a
        // large body, and most bodies hold one reference or none. In canonical order only when
        // the order can matter: several references, or a malformed one (whichever is first).
        do {
            try collectBlobReferences(into: &found, ordered: false)
            guard found.count > 1 else { return found }
        } catch {}
        found.removeAll()
        try collectBlobReferences(into: &found, ordered: true)
        return found
    }

    private func collectBlobReferences(into found: inout [BlobReference], ordered: Bool) throws(BlobDigest.InvalidError) {
        switch self {
        case .array(let elements):
            for e in elements { try e.collectBlobReferences(into: &found, ordered: ordered) }
        case .object(let members):
            if members["@type"]?.stringValue == "blob" {
                guard let d = members["digest"]?.stringValue else { throw BlobDigest.InvalidError(text: "(missing)") }
                let digest = try BlobDigest(d)
                let length = members["length"]?.intValue ?? -1
                found.append(BlobReference(digest: digest, length: length, contentType: members["content_type"]?.stringValue))
                return
            }
            if ordered {
                for member in JSONWriter.sortedMembers(members) { try member.value.collectBlobReferences(into: &found, ordered: true) }
            } else {
                for value in members.values { try value.collectBlobReferences(into: &found, ordered: false) }
            }
        default:
            break
        }
    }
}
