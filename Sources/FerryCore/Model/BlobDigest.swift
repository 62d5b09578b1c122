import Crypto

/// The SHA-256 digest of an object's exact bytes; written `sha256-<64 hex>`.
public struct BlobDigest: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// 64 lowercase hex digits.
    public let hex: String

    /// Why a string is not a digest.
    public struct InvalidError: Error, Sendable, CustomStringConvertible {
        /// The rejected text.
        public let text: String
        /// "invalid digest …".
        public var description: String { "invalid digest \(String(reflecting: text)): expected sha256-<64 lowercase hex digits>" }
    }

    /// Parses `sha256-<hex>`.
    public init(_ text: String) throws(InvalidError) {
        guard text.hasPrefix("sha256-") else { throw InvalidError(text: text) }
        try self.init(hex: String(text.dropFirst(7)))
    }

    /// From 64 lowercase hex digits.
    public init(hex: String) throws(InvalidError) {
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else {
            throw InvalidError(text: hex)
        }
        self.hex = hex
    }

    init(uncheckedHex: String) { self.hex = uncheckedHex }

    /// The digest of `bytes`.
    public static func of(_ bytes: some Sequence<UInt8>) -> BlobDigest {
        var hasher = BlobHasher()
        hasher.update(Array(bytes))
        return hasher.finalize()
    }

    /// `sha256-<hex>`.
    public var description: String { "sha256-" + hex }

    /// Orders by hex.
    public static func < (lhs: BlobDigest, rhs: BlobDigest) -> Bool { lhs.hex < rhs.hex }
}

/// Incremental SHA-256 over a stream of chunks.
public struct BlobHasher {
    private var inner = SHA256()
    /// Bytes fed so far.
    public private(set) var count: Int = 0

    /// A fresh hasher.
    public init() {}

    /// Feeds a chunk.
    public mutating func update(_ chunk: UnsafeRawBufferPointer) {
        inner.update(bufferPointer: chunk)
        count += chunk.count
    }

    /// Feeds a chunk.
    public mutating func update(_ chunk: [UInt8]) {
        chunk.withUnsafeBytes { update($0) }
    }

    /// The digest of everything fed.
    public func finalize() -> BlobDigest {
        BlobDigest(uncheckedHex: Hex.encode(inner.finalize()))
    }
}

/// Lowercase hex encoding.
public enum Hex {
    static let digits = Array("0123456789abcdef".utf8)
    /// Lowercase hex of `bytes`.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
