import Crypto
import Foundation

/// A Couchbase Lite blob digest: `sha1-` and the standard base64 of the 20-byte SHA-1 of the
/// blob's bytes (`sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=`). ferry names its objects by SHA-256
/// (`BlobDigest`); `BlobDigestAliases` ties the two names of one blob together.
public struct CBLBlobDigest: Hashable, Sendable, CustomStringConvertible {
    /// The 20 digest bytes.
    public let bytes: [UInt8]

    /// Why a string is not a Couchbase Lite digest.
    public struct InvalidError: Error, Sendable, CustomStringConvertible {
        /// The rejected text.
        public let text: String
        /// "invalid Couchbase Lite digest …".
        public var description: String { "invalid Couchbase Lite digest \(String(reflecting: String(text.prefix(80)))): expected sha1-<base64 of 20 bytes>" }
    }

    /// Parses `sha1-<base64>`; only the canonical base64 of 20 bytes is accepted, so that one
    /// blob has exactly one spelling (an alias table keyed by text cannot be fooled).
    public init(_ text: String) throws(InvalidError) {
        guard text.hasPrefix("sha1-"), text.utf8.count == 33,
              let data = Data(base64Encoded: String(text.dropFirst(5))), data.count == 20
        else { throw InvalidError(text: text) }
        self.bytes = Array(data)
        guard description == text else { throw InvalidError(text: text) }
    }

    /// A digest from its 20 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 20 else { return nil }
        self.bytes = bytes
    }

    /// The SHA-1 digest of `data`.
    public static func of(_ data: some Sequence<UInt8>) -> CBLBlobDigest {
        var hasher = Insecure.SHA1()
        hasher.update(data: Array(data))
        return CBLBlobDigest(bytes: Array(hasher.finalize()))!
    }

    /// `sha1-<base64>`.
    public var description: String { "sha1-" + Data(bytes).base64EncodedString() }

    /// A SHA-1 computed piece by piece (a large object is read in chunks, never whole).
    public struct Hasher {
        private var sha1 = Insecure.SHA1()

        /// An empty hash.
        public init() {}

        /// Hashes the next bytes.
        public mutating func update(_ bytes: UnsafeRawBufferPointer) { sha1.update(bufferPointer: bytes) }

        /// The digest of everything hashed.
        public func finalize() -> CBLBlobDigest { CBLBlobDigest(bytes: Array(sha1.finalize()))! }
    }
}
