import FerryCore

/// What a large JSON document's file held when the store last read or wrote it: the SHA-256
/// of its bytes as they are on disk, and the body they parse to. Reading the file again —
/// before a peer's revision is written over it, when the watcher reports the store's own
/// write, when a scan finds its fingerprint changed — is then a hash of its bytes instead of
/// a parse, canonicalization and hash (docs/performance.md). Any changed byte changes the
/// hash, so nothing is taken on trust from a fingerprint. Kept in memory only, and only for
/// files of at least `minimumSize` bytes: small ones parse quickly, and a folder of many
/// small documents would pay memory for nothing.
struct KnownFileText: Sendable, Equatable {
    /// The SHA-256 of the file's bytes.
    var text: BlobDigest
    /// The body's object (the digest of its canonical bytes).
    var object: BlobDigest
    /// The body's canonical size.
    var size: Int
    /// The blobs the body references: a file read again by its text is recorded only while
    /// they are all stored, as a parse would check.
    var blobs: [BlobDigest]

    /// Files smaller than this are not remembered.
    static let minimumSize = 64 << 10

    /// What a file holding `bytes`, whose body is `object` of canonical size `size`, is
    /// remembered as; nil below `minimumSize` (then `blobs` is not evaluated) or when the
    /// blobs cannot be told.
    static func of(_ bytes: [UInt8], object: BlobDigest, size: Int, blobs: () -> [BlobDigest]?) -> KnownFileText? {
        guard bytes.count >= minimumSize, let blobs = blobs() else { return nil }
        return KnownFileText(text: BlobDigest.of(bytes), object: object, size: size, blobs: blobs)
    }
}
