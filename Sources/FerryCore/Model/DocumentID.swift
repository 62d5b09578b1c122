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
        // Loops over the bytes rather than `split`, `contains(where:)` and `allSatisfy`: every
        // file a scan finds and every log line passes here (a large share of a big folder's
        // `status`). The checks and their order, and so the reason given, are as listed above.
        var text = rawValue
        let problem: String? = text.withUTF8 { bytes in
            if bytes.isEmpty { return "empty" }
            if bytes.count > Self.maxBytes { return "longer than \(Self.maxBytes) bytes" }
            if bytes.contains(0) { return "contains a NUL byte" }
            if bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return "contains a control character" }
            if bytes[0] == UInt8(ascii: "/") { return "absolute path" }
            var start = 0
            for i in 0...bytes.count where i == bytes.count || bytes[i] == UInt8(ascii: "/") {
                let component = UnsafeBufferPointer(rebasing: bytes[start..<i])
                start = i + 1
                if component.isEmpty { return "empty path component" }
                if component.elementsEqual(".".utf8) || component.elementsEqual("..".utf8) {
                    return "'.' or '..' path component"
                }
                if component.count > Self.maxComponentBytes { return "path component longer than 255 bytes" }
                // Any `.ferry` directory, not only this folder's: a ferry folder nested in this
                // one (or this one mounted inside itself) keeps its state there, never a document.
                if component.elementsEqual(".ferry".utf8) { return "inside a .ferry/ directory" }
            }
            return bytes.contains(where: { $0 >= 0x80 }) ? "" : nil  // "": to be checked for NFC, below
        }
        if let problem, !problem.isEmpty { throw InvalidError(text: rawValue, reason: problem) }
        if problem != nil {
            let nfc = rawValue.precomposedStringWithCanonicalMapping
            if !nfc.utf8.elementsEqual(rawValue.utf8) { throw InvalidError(text: rawValue, reason: "not in Unicode NFC") }
        }
        self.rawValue = rawValue
    }

    /// `.json` ids are JSON documents; everything else is a file document.
    public var kind: DocumentKind { rawValue.hasSuffix(".json") ? .json : .file }

    /// The id text.
    public var description: String { rawValue }

    /// Orders ids by their UTF-8 bytes (stable across platforms and locales).
    public static func < (lhs: DocumentID, rhs: DocumentID) -> Bool {
        let ordered = lhs.rawValue.utf8.withContiguousStorageIfAvailable { pa in
            rhs.rawValue.utf8.withContiguousStorageIfAvailable { pb in
                let n = min(pa.count, pb.count)
                let c = n == 0 ? 0 : memcmp(pa.baseAddress!, pb.baseAddress!, n)
                return c != 0 ? c < 0 : pa.count < pb.count
            }
        }
        if case .some(.some(let ordered)) = ordered { return ordered }
        return lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }

    /// Equality by UTF-8 bytes (Swift's `String ==` would equate NFC and NFD forms).
    public static func == (lhs: DocumentID, rhs: DocumentID) -> Bool {
        // The bytes are read in place: `withUTF8` is mutating, and the copy it needs costs a
        // retain and a release per comparison (docs/performance.md, fourteenth part).
        let equal = lhs.rawValue.utf8.withContiguousStorageIfAvailable { pa in
            rhs.rawValue.utf8.withContiguousStorageIfAvailable { pb in
                pa.count == pb.count && (pa.count == 0 || memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0)
            }
        }
        if case .some(.some(let equal)) = equal { return equal }
        return lhs.rawValue.utf8.elementsEqual(rhs.rawValue.utf8)
    }

    /// Hashes the UTF-8 bytes, consistent with `==`.
    public func hash(into hasher: inout Hasher) {
        let hashed = rawValue.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            return true
        } ?? false
        if !hashed { Array(rawValue.utf8).withUnsafeBytes { hasher.combine(bytes: $0) } }
    }
}

/// What a document's content is.
public enum DocumentKind: String, Sendable, Codable {
    /// A JSON object stored as canonical JSON.
    case json
    /// Any other regular file, stored as a blob.
    case file
}
