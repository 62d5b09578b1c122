import Testing
import FerryCore

/// Bodies between ferry and Couchbase Lite: only blob digests change, through the aliases,
/// so a body that goes there and back is the same value (no new revision).
@Suite struct CBLBodyTests {
    /// The 1,024-byte blob of the 2.8 captures: bytes 0, 1, …, 255, 0, 1, …
    static let blob = (0..<1024).map { UInt8($0 % 256) }

    @Test func theCapturesBlobHasTheirSHA1() throws {
        #expect(CBLBlobDigest.of(Self.blob).description == "sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=")
        #expect(try CBLBlobDigest("sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=") == CBLBlobDigest.of(Self.blob))
        for bad in ["sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c", "sha256-WwBmnEgNXP+9+ovbqZVhFg8tG3c=", "sha1-" + String(repeating: "A", count: 28)] {
            #expect(throws: CBLBlobDigest.InvalidError.self, "\(bad)") { try CBLBlobDigest(bad) }
        }
    }

    @Test func aBodyGoesThereAndBackUnchanged() throws {
        let aliases = InMemoryBlobDigestAliases(bytesOf: { $0 == BlobDigest.of(Self.blob) ? Self.blob : nil })
        let sha256 = BlobDigest.of(Self.blob)
        let ferry = try JSONParser.parse(#"{"type":"photo","caption":"a doc with a blob","photo":{"@type":"blob","digest":"\#(sha256)","length":1024,"content_type":"image/png"},"list":[{"image":{"@type":"blob","digest":"\#(sha256)","length":1024}}]}"#)
        let cbl = try CBLBodies.toCBL(ferry, aliases: aliases)
        #expect(cbl["photo"]?["digest"]?.stringValue == "sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=")
        #expect(cbl["photo"]?["content_type"]?.stringValue == "image/png")
        #expect(try CBLBodies.fromCBL(cbl, aliases: aliases).canonicalBytes == ferry.canonicalBytes)
    }

    @Test func metadataAndBlobCopiesAreDroppedLegacyAttachmentsRefused() throws {
        let aliases = InMemoryBlobDigestAliases()
        let sha1 = CBLBlobDigest.of(Self.blob)
        #expect(try CBLBodies.unknownBlobs(in: JSONParser.parse(#"{"photo":{"@type":"blob","digest":"\#(sha1)","length":1024}}"#), aliases: aliases) == [sha1])
        aliases.record(sha1: sha1, sha256: BlobDigest.of(Self.blob))
        let received = try JSONParser.parse(#"{"_id":"img","_rev":"2-1b36","_revisions":{},"photo":{"@type":"blob","digest":"\#(sha1)","length":1024},"_attachments":{"blob_/photo":{"digest":"\#(sha1)","length":1024,"stub":true,"revpos":2}}}"#)
        let body = try CBLBodies.fromCBL(received, aliases: aliases)
        #expect(body.canonicalString == #"{"photo":{"@type":"blob","digest":"\#(BlobDigest.of(Self.blob))","length":1024}}"#)
        let legacy = try JSONParser.parse(#"{"_attachments":{"notes.txt":{"digest":"\#(sha1)","length":1024}}}"#)
        #expect(throws: CBLInteropError.self) { try CBLBodies.fromCBL(legacy, aliases: aliases) }
        #expect(throws: CBLInteropError.self) { try CBLBodies.fromCBL(.array([]), aliases: aliases) }
    }

    /// Couchbase Lite drops every top-level property whose name begins with `_` (LiteCore 3.0,
    /// by hand): such a body is refused rather than sent without it. Deeper ones are content.
    @Test func aTopLevelPropertyCouchbaseLiteWouldDropIsRefused() throws {
        let aliases = InMemoryBlobDigestAliases()
        for text in [#"{"_private":1,"ok":true}"#, #"{"_deleted":true}"#, #"{"_id":"x","a":1}"#, #"{"_attachments":{}}"#] {
            let body = try JSONParser.parse(text)
            do {
                _ = try CBLBodies.toCBL(body, aliases: aliases)
                Issue.record("sent to Couchbase Lite: \(text)")
            } catch {
                #expect(error.status == 422 && error.message.contains("begins with _"), "\(error)")
            }
        }
        let nested = try JSONParser.parse(#"{"meta":{"_private":1},"list":[{"_x":2}],"a_b":3}"#)
        #expect(try CBLBodies.toCBL(nested, aliases: aliases).canonicalBytes == nested.canonicalBytes)
    }

    @Test func aFileDocumentIsOneBlobReference() throws {
        let aliases = InMemoryBlobDigestAliases(bytesOf: { _ in Self.blob })
        let ref = BlobReference(digest: BlobDigest.of(Self.blob), length: 1024, contentType: nil)
        let body = try CBLBodies.fileBody(ref, aliases: aliases)
        #expect(body.canonicalString == #"{"file":{"@type":"blob","digest":"sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=","length":1024}}"#)
        #expect(try CBLBodies.fileReference(body, aliases: aliases) == ref)
        let extra = try JSONParser.parse(#"{"file":{"@type":"blob","digest":"sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=","length":1024},"note":"lost on disk"}"#)
        #expect(throws: CBLInteropError.self) { try CBLBodies.fileReference(extra, aliases: aliases) }
        // A blob whose other name is unknown cannot be sent.
        #expect(throws: CBLInteropError.self) { try CBLBodies.fileBody(ref, aliases: InMemoryBlobDigestAliases()) }
    }
}

