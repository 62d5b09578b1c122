import Synchronization

/// The two names of one blob: Couchbase Lite's SHA-1 (`CBLBlobDigest`) and ferry's SHA-256
/// (`BlobDigest`). A Couchbase Lite channel translates every blob reference through it, in
/// both directions, so a body that travelled to Couchbase Lite and back is byte for byte the
/// body it was (same revision id: no new revision, no ping-pong between the two forms). The
/// folder keeps its aliases under `.ferry/`; `InMemoryBlobDigestAliases` serves tests.
public protocol BlobDigestAliases: Sendable {
    /// ferry's name for the blob Couchbase Lite calls `sha1`, when known.
    func sha256(for sha1: CBLBlobDigest) -> BlobDigest?
    /// Couchbase Lite's name for the object `sha256`, when known or computable here (an
    /// implementation over the object store hashes the object once and remembers it).
    func sha1(for sha256: BlobDigest) -> CBLBlobDigest?
    /// Remembers that both digests name the same bytes (the caller hashed them both).
    func record(sha1: CBLBlobDigest, sha256: BlobDigest)
}

/// Both directions of an alias table, kept in step: what every `BlobDigestAliases` holds.
public struct BlobDigestAliasTable: Sendable {
    /// ferry's name of each blob Couchbase Lite names.
    public private(set) var toSHA256: [CBLBlobDigest: BlobDigest] = [:]
    /// Couchbase Lite's name of each object.
    public private(set) var toSHA1: [BlobDigest: CBLBlobDigest] = [:]

    /// An empty table.
    public init() {}

    /// Records both names of one blob; false when the table already held exactly that pair.
    @discardableResult
    public mutating func insert(sha1: CBLBlobDigest, sha256: BlobDigest) -> Bool {
        guard toSHA1[sha256] != sha1 || toSHA256[sha1] != sha256 else { return false }
        toSHA256[sha1] = sha256
        toSHA1[sha256] = sha1
        return true
    }
}

/// Aliases in memory; with `bytesOf`, the SHA-1 of an object it has not seen is computed
/// from the object's bytes (as the store's implementation does from `.ferry/objects`).
public final class InMemoryBlobDigestAliases: BlobDigestAliases {
    private let table = Mutex(BlobDigestAliasTable())
    private let bytesOf: (@Sendable (BlobDigest) -> [UInt8]?)?

    /// An empty table; `bytesOf` reads an object's bytes, if there is a store behind it.
    public init(bytesOf: (@Sendable (BlobDigest) -> [UInt8]?)? = nil) {
        self.bytesOf = bytesOf
    }

    /// The SHA-256 recorded for `sha1`.
    public func sha256(for sha1: CBLBlobDigest) -> BlobDigest? {
        table.withLock { $0.toSHA256[sha1] }
    }

    /// The SHA-1 recorded for `sha256`, or computed from the object's bytes (which must hash
    /// to `sha256`: a damaged object gets no alias).
    public func sha1(for sha256: BlobDigest) -> CBLBlobDigest? {
        if let known = table.withLock({ $0.toSHA1[sha256] }) { return known }
        guard let bytes = bytesOf?(sha256), BlobDigest.of(bytes) == sha256 else { return nil }
        let sha1 = CBLBlobDigest.of(bytes)
        record(sha1: sha1, sha256: sha256)
        return sha1
    }

    /// Records both names of one blob.
    public func record(sha1: CBLBlobDigest, sha256: BlobDigest) {
        table.withLock { _ = $0.insert(sha1: sha1, sha256: sha256) }
    }

    /// How many blobs have both names recorded.
    public var count: Int { table.withLock { $0.toSHA1.count } }
}
