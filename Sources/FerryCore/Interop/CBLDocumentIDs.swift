import Foundation

/// The reversible mapping between ferry's document ids (paths) and Couchbase Lite's document
/// ids (any string), described in docs/interop.md.
///
/// - A Couchbase Lite document is a JSON document: id `X` is ferry's `X.json` (`a1` ↔ `a1.json`,
///   `list::alice` ↔ `list::alice.json`, `samplelist` ↔ `samplelist.json`).
/// - A ferry file document `P` is Couchbase Lite's `file::P` (`images/apples.jpg` ↔
///   `file::images/apples.jpg`), whose body holds the blob (`CBLBodies.fileBody`).
/// - What a path cannot hold is percent-escaped (`%XX`, uppercase): a `%` followed by two hex
///   digits, control characters, the dots of a `.`/`..`/`.ferry` segment, every `/` of an id
///   with an empty segment, the dot of a file document's trailing `.json`. Nothing else changes.
///
/// Couchbase Lite → ferry is injective (unescaping gives the id back). ferry → Couchbase Lite
/// unescapes and checks that escaping gives the path back; the few paths that are not the
/// escape of anything (a literal `%41`, a JSON document named `file::x.json`) are not
/// representable and are not offered to Couchbase Lite peers.
public enum CBLDocumentIDs {
    /// The prefix of a ferry file document's Couchbase Lite id.
    public static let filePrefix = "file::"
    /// Longest Couchbase Lite id taken (bytes); longer ones are refused, never truncated.
    public static let maxIDBytes = 4096

    /// ferry's document for Couchbase Lite's `id`; throws (status 400) when the id is empty,
    /// not NFC, or makes a path the file system refuses (a segment over 255 bytes).
    public static func ferryID(_ id: String) throws(CBLInteropError) -> DocumentID {
        guard !id.isEmpty else { throw CBLInteropError("an empty document id") }
        guard id.utf8.count <= maxIDBytes else { throw CBLInteropError("document id longer than \(maxIDBytes) bytes") }
        if !id.utf8.allSatisfy({ $0 < 0x80 }), !id.precomposedStringWithCanonicalMapping.utf8.elementsEqual(id.utf8) {
            throw CBLInteropError("document id \(quoted(id)) is not in Unicode NFC")
        }
        let isFile = id.hasPrefix(filePrefix)
        let name = isFile ? String(id.dropFirst(filePrefix.count)) : id
        guard !name.isEmpty else { throw CBLInteropError("document id \(quoted(id)) names no file") }
        var path = escape(name)
        if isFile {
            if path.hasSuffix(".json") { path = String(path.dropLast(5)) + "%2Ejson" }
        } else {
            path += ".json"
        }
        do {
            return try DocumentID(path)
        } catch {
            throw CBLInteropError("document id \(quoted(id)) cannot be a file name: \(error.reason)")
        }
    }

    /// Couchbase Lite's id for ferry's `doc`; throws (status 422) for the paths that are not
    /// the image of any Couchbase Lite id (see the type's note).
    public static func cblID(_ doc: DocumentID) throws(CBLInteropError) -> String {
        let raw = doc.rawValue
        let id = doc.kind == .json ? unescape(String(raw.dropLast(5))) : filePrefix + unescape(raw)
        guard let back = try? ferryID(id), back == doc else {
            throw CBLInteropError(status: 422, "\(doc) has no Couchbase Lite id (a literal %XX or file:: in its name)")
        }
        return id
    }

    // MARK: Escaping

    private static func quoted(_ s: String) -> String { String(reflecting: String(s.prefix(80))) }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
    }

    private static func isHexDigit(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b)
    }

    /// The path text of `name`: segment by segment, or as one segment when any is empty.
    private static func escape(_ name: String) -> String {
        let utf8 = Array(name.utf8)
        let segments = utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if segments.contains(where: \.isEmpty) { return escapeSegment(utf8[...], slashes: true) }
        return segments.map { escapeSegment($0, slashes: false) }.joined(separator: "/")
    }

    private static func escapeSegment(_ segment: ArraySlice<UInt8>, slashes: Bool) -> String {
        // `.`, `..` and `.ferry` are segments no document may have: their dots are escaped.
        if segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) {
            return String(repeating: "%2E", count: segment.count)
        }
        if segment.elementsEqual(".ferry".utf8) { return "%2Eferry" }
        var out: [UInt8] = []
        out.reserveCapacity(segment.count)
        var i = segment.startIndex
        while i < segment.endIndex {
            let b = segment[i]
            let escapesPercent = b == UInt8(ascii: "%") && i + 2 < segment.endIndex
                && isHexDigit(segment[i + 1]) && isHexDigit(segment[i + 2])
            if b < 0x20 || b == 0x7F || escapesPercent || (slashes && b == UInt8(ascii: "/")) {
                out += Array(hex(b).utf8)
            } else {
                out.append(b)
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes every `%XX` (uppercase hex) of an ASCII character; leaves anything else as it is.
    private static func unescape(_ text: String) -> String {
        let utf8 = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        var i = 0
        func value(_ b: UInt8) -> UInt8? {
            switch b {
            case 0x30...0x39: b - 0x30
            case 0x41...0x46: b - 0x41 + 10
            default: nil
            }
        }
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "%"), i + 2 < utf8.count, let hi = value(utf8[i + 1]), let lo = value(utf8[i + 2]), hi < 8 {
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(utf8[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
