import Crypto

/// The SHA-256 digest of an object's exact bytes; written `sha256-<64 hex>`.
public struct BlobDigest: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The 32 digest bytes, packed (see `PackedHex`).
    public let packed: PackedHex

    /// 64 lowercase hex digits.
    public var hex: String { packed.text }
    /// Appends the hex text's bytes to `out`.
    public func appendHex(to out: inout [UInt8]) { packed.appendText(to: &out) }

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
        guard hex.utf8.count == 64, let packed = PackedHex(hex[...].utf8) else { throw InvalidError(text: hex) }
        self.packed = packed
    }

    /// A digest from its packing (as an index that keeps it packed gives it back).
    public init(packed: PackedHex) { self.packed = packed }

    /// From 64 lowercase hex digits given as ASCII bytes; nil otherwise.
    public init?(asciiHex: UnsafeBufferPointer<UInt8>) {
        guard asciiHex.count == 64, let packed = PackedHex(ascii: asciiHex) else { return nil }
        self.packed = packed
    }

    /// The digest of `bytes`.
    public static func of(_ bytes: some Sequence<UInt8>) -> BlobDigest {
        var hasher = BlobHasher()
        hasher.update(Array(bytes))
        return hasher.finalize()
    }

    /// `sha256-<hex>`.
    public var description: String { "sha256-" + hex }

    /// Orders by hex.
    public static func < (lhs: BlobDigest, rhs: BlobDigest) -> Bool { lhs.packed < rhs.packed }
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
        BlobDigest(packed: PackedHex(bytes: inner.finalize()))
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
