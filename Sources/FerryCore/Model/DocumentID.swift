import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A document's id: its path relative to the folder, `/`-separated, Unicode NFC.
///
/// Validation is the one gate every id passes through, whether it comes from the disk, the
/// log or a peer, so that no id can name a path outside the folder or inside `.ferry/`.
public struct DocumentID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The id text.
    public let rawValue: String

    /// Longest id accepted, in UTF-8 bytes (Linux `PATH_MAX`).
    public static let maxBytes = 4096
    /// Longest path component accepted, in UTF-8 bytes (Linux `NAME_MAX`).
    public static let maxComponentBytes = 255

    /// Why a string is not a valid document id.
    public struct InvalidError: Error, Sendable, CustomStringConvertible {
        /// The rejected text.
        public let text: String
        /// Why it was rejected.
        public let reason: String
        /// "invalid document id "…": reason".
        public var description: String { "invalid document id \(String(reflecting: text)): \(reason)" }
    }

    /// Validates `rawValue`; throws when it is empty, absolute, has `.`/`..`/empty components,
    /// a NUL byte or another control character, lies under a `.ferry/` directory, is too long, or is not NFC.
    public init(_ rawValue: String) throws(InvalidError) {
        func fail(_ reason: String) -> InvalidError { InvalidError(text: rawValue, reason: reason) }
        if rawValue.isEmpty { throw fail("empty") }
        if rawValue.utf8.count > Self.maxBytes { throw fail("longer than \(Self.maxBytes) bytes") }
        if rawValue.utf8.contains(0) { throw fail("contains a NUL byte") }
        if rawValue.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { throw fail("contains a control character") }
        if rawValue.utf8.first == UInt8(ascii: "/") { throw fail("absolute path") }
        for component in rawValue.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if component.isEmpty { throw fail("empty path component") }
            if component.elementsEqual(".".utf8) || component.elementsEqual("..".utf8) {
                throw fail("'.' or '..' path component")
            }
            if component.count > Self.maxComponentBytes { throw fail("path component longer than 255 bytes") }
            // Any `.ferry` directory, not only this folder's: a ferry folder nested in this
            // one (or this one mounted inside itself) keeps its state there, never a document.
            if component.elementsEqual(".ferry".utf8) { throw fail("inside a .ferry/ directory") }
        }
        if !rawValue.utf8.allSatisfy({ $0 < 0x80 }) {
            let nfc = rawValue.precomposedStringWithCanonicalMapping
            if !nfc.utf8.elementsEqual(rawValue.utf8) { throw fail("not in Unicode NFC") }
        }
        self.rawValue = rawValue
    }

    /// `.json` ids are JSON documents; everything else is a file document.
    public var kind: DocumentKind { rawValue.hasSuffix(".json") ? .json : .file }

    /// The id text.
    public var description: String { rawValue }

    /// Orders ids by their UTF-8 bytes (stable across platforms and locales).
    public static func < (lhs: DocumentID, rhs: DocumentID) -> Bool {
        var a = lhs.rawValue, b = rhs.rawValue
        return a.withUTF8 { pa in
            b.withUTF8 { pb in
                let n = min(pa.count, pb.count)
                let c = n == 0 ? 0 : memcmp(pa.baseAddress!, pb.baseAddress!, n)
                return c != 0 ? c < 0 : pa.count < pb.count
            }
        }
    }

    /// Equality by UTF-8 bytes (Swift's `String ==` would equate NFC and NFD forms).
    public static func == (lhs: DocumentID, rhs: DocumentID) -> Bool {
        lhs.rawValue.utf8.elementsEqual(rhs.rawValue.utf8)
    }

    /// Hashes the UTF-8 bytes, consistent with `==`.
    public func hash(into hasher: inout Hasher) {
        var s = rawValue
        s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// What a document's content is.
public enum DocumentKind: String, Sendable, Codable {
    /// A JSON object stored as canonical JSON.
    case json
    /// Any other regular file, stored as a blob.
    case file
}
