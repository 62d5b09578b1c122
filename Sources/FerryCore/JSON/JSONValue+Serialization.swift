extension JSONValue {
    /// RFC 8785 canonical bytes: keys sorted by UTF-16 code units, no insignificant whitespace,
    /// canonical numbers (see `JSONNumber.canonicalBytes`), minimal string escaping.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        JSONWriter.writeCanonical(self, into: &out)
        return out
    }

    /// The canonical text as a `String`.
    public var canonicalString: String { String(decoding: canonicalBytes, as: UTF8.self) }

    /// Pretty-printed bytes: canonical content, 2-space indent, `": "` after keys, trailing newline.
    public var prettyBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        JSONWriter.writePretty(self, indent: 0, into: &out)
        out.append(0x0A)
        return out
    }

    /// The length of `prettyBytes`, given the canonical length, counted without writing them
    /// (indentation, newlines, the space after each colon); stops counting past `limit` and
    /// returns a number above it. Indentation grows with depth, so a deep body pretty-prints
    /// to many times its canonical size: a receiver checks this before writing the file.
    public func prettySize(canonicalCount: Int, limit: Int) -> Int {
        var total = canonicalCount + 1  // the trailing newline
        func walk(_ v: JSONValue, _ indent: Int) -> Bool {
            switch v {
            case .array(let elements) where !elements.isEmpty:
                total += elements.count * (1 + 2 * (indent + 1)) + 1 + 2 * indent
                if total > limit { return false }
                for e in elements where !walk(e, indent + 1) { return false }
            case .object(let members) where !members.isEmpty:
                total += members.count * (2 + 2 * (indent + 1)) + 1 + 2 * indent
                if total > limit { return false }
                for m in members.values where !walk(m, indent + 1) { return false }
            default:
                break
            }
            return true
        }
        _ = walk(self, 0)
        return total
    }
}

/// Serialization of `JSONValue` into byte buffers.
enum JSONWriter {
    static func sortedKeys(_ object: [String: JSONValue]) -> [String] {
        // RFC 8785 §3.2.3: sort by UTF-16 code units, not by scalars or by Swift's collation.
        object.keys.sorted { $0.utf16.lexicographicallyPrecedes($1.utf16) }
    }

    static func writeCanonical(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += b ? Array("true".utf8) : Array("false".utf8)
        case .number(let n): out += n.canonicalBytes
        case .string(let s): writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeCanonical(e, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, key) in sortedKeys(members).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                writeCanonical(members[key]!, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writePretty(_ value: JSONValue, indent: Int, into out: inout [UInt8]) {
        switch value {
        case .array(let elements) where !elements.isEmpty:
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1, into: &out)
                writePretty(e, indent: indent + 1, into: &out)
            }
            newline(indent, into: &out)
            out.append(UInt8(ascii: "]"))
        case .object(let members) where !members.isEmpty:
            out.append(UInt8(ascii: "{"))
            for (i, key) in sortedKeys(members).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1, into: &out)
                writeString(key, into: &out)
                out += [UInt8(ascii: ":"), UInt8(ascii: " ")]
                writePretty(members[key]!, indent: indent + 1, into: &out)
            }
            newline(indent, into: &out)
            out.append(UInt8(ascii: "}"))
        default:
            writeCanonical(value, into: &out)
        }
    }

    static func newline(_ indent: Int, into out: inout [UInt8]) {
        out.append(0x0A)
        out += repeatElement(UInt8(ascii: " "), count: indent * 2)
    }

    static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Runs of bytes that need no escape (nearly all of them) are copied whole.
            var start = 0
            for i in 0..<bytes.count {
                let b = bytes[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                if start < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i])) }
                start = i + 1
                switch b {
                case 0x22: out += [0x5C, 0x22]
                case 0x5C: out += [0x5C, 0x5C]
                case 0x08: out += [0x5C, UInt8(ascii: "b")]
                case 0x09: out += [0x5C, UInt8(ascii: "t")]
                case 0x0A: out += [0x5C, UInt8(ascii: "n")]
                case 0x0C: out += [0x5C, UInt8(ascii: "f")]
                case 0x0D: out += [0x5C, UInt8(ascii: "r")]
                default:
                    out += [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigits[Int(b >> 4)], hexDigits[Int(b & 0xF)]]
                }
            }
            if start < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
