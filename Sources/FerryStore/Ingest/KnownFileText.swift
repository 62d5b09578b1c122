import FerryCore

/// What a large JSON document's file held when the store last read or wrote it: the SHA-256
/// of its bytes as they are on disk, and the body they parse to. Reading the file again —
/// before a peer's revision is written over it, when the watcher reports the store's own
/// write, when a scan finds it changed — is then a hash of its bytes instead of a parse,
/// canonicalization and hash: for a 3 MB list, milliseconds instead of a tenth of a second.
/// Kept in memory only, and only for files of at least `minimumSize` bytes (small ones parse
/// quickly, and a folder of many small documents would pay memory for nothing).
struct KnownFileText: Sendable, Equatable {
    /// The SHA-256 of the file's bytes.
    var text: BlobDigest
    /// The body's object (the digest of its canonical bytes).
    var object: BlobDigest
    /// The body's canonical size.
    var size: Int

    /// Files smaller than this are not remembered.
    static let minimumSize = 64 << 10

    /// The digest to remember for a file holding `bytes` (nil below `minimumSize`).
    static func digest(of bytes: [UInt8]) -> BlobDigest? {
        bytes.count >= minimumSize ? BlobDigest.of(bytes) : nil
    }
}
