extension JSONValue {
    /// RFC 8785 canonical bytes: keys sorted by UTF-16 code units, no insignificant whitespace,
    /// canonical numbers (see `JSONNumber.canonicalBytes`), minimal string escaping.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        JSONWriter.writeCanonical(self, into: &out)
        HeapTrim.note(out.count)
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
        HeapTrim.note(out.count)
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
        object.keys.sorted(by: precedesInUTF16)
    }

    /// The members in canonical order, each with its value (no lookup per key afterwards).
    static func sortedMembers(_ object: [String: JSONValue]) -> [(key: String, value: JSONValue)] {
        object.sorted { precedesInUTF16($0.key, $1.key) }
    }

    /// RFC 8785 §3.2.3's order: by UTF-16 code units, not by scalars or by Swift's collation.
    /// Compared as UTF-8 bytes, which order the same way, except where the first difference
    /// sets a character beyond U+FFFF (a surrogate pair in UTF-16) against one from U+E000 to
    /// U+FFFF: only there (a lead byte of 0xEE or above) are the UTF-16 units compared.
    static func precedesInUTF16(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        let order = a.withUTF8 { x in b.withUTF8 { y in JSONText.utf8Order(x, y) } }
        guard let order else { return a.utf16.lexicographicallyPrecedes(b.utf16) }
        return order < 0
    }

    static func writeCanonical(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: nullText)
        case .bool(let b): out.append(contentsOf: b ? trueText : falseText)
        case .number(let n): n.writeCanonical(into: &out)
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
            forEachSorted(members) { i, key, value in
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                writeCanonical(value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Calls `body` with each member in canonical order and its position. The order is found
    /// by sorting the dictionary's indices in a buffer on the stack (most objects have a few
    /// members; an array of members per object was a heap allocation and a copy of each).
    static func forEachSorted(_ object: [String: JSONValue], _ body: (Int, String, JSONValue) -> Void) {
        let count = object.count
        guard count > 1 else {
            if let (key, value) = object.first { body(0, key, value) }
            return
        }
        guard count <= 32 else {
            for (i, member) in sortedMembers(object).enumerated() { body(i, member.key, member.value) }
            return
        }
        withUnsafeTemporaryAllocation(of: Dictionary<String, JSONValue>.Index.self, capacity: count) { order in
            order.initialize(repeating: object.startIndex)
            defer { order.baseAddress!.deinitialize(count: count) }
            var n = 0
            var index = object.startIndex
            while index != object.endIndex {
                // Insertion sort: few members, and no comparison closure to call through.
                var j = n
                let key = object[index].key
                while j > 0, precedesInUTF16(key, object[order[j - 1]].key) {
                    order[j] = order[j - 1]
                    j -= 1
                }
                order[j] = index
                n += 1
                object.formIndex(after: &index)
            }
            for i in 0..<n {
                let member = object[order[i]]
                body(i, member.key, member.value)
            }
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
            forEachSorted(members) { i, key, value in
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1, into: &out)
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                out.append(UInt8(ascii: " "))
                writePretty(value, indent: indent + 1, into: &out)
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
    static let nullText = Array("null".utf8), trueText = Array("true".utf8), falseText = Array("false".utf8)

    /// The escape of a quote, a backslash or a control character: short where JSON has one,
    /// `\u00xx` in lower-case hex otherwise.
    static func writeEscape(of b: UInt8, into out: inout [UInt8]) {
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
                writeEscape(of: b, into: &out)
            }
            if start < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// Appends `text` as a JSON string, quoted and escaped as canonical JSON writes it.
    package static func appendString(_ text: String, to out: inout [UInt8]) {
        JSONWriter.writeString(text, into: &out)
    }

    /// `prettyBytes` of the value whose canonical bytes are `canonical`, made from the bytes
    /// alone: canonical text has no whitespace, so pretty-printing only inserts newlines and
    /// indentation around its punctuation (outside strings), and a large body received from a
    /// peer is written out without building its tree again. `canonical` must be canonical.
    package static func prettyBytes(fromCanonical canonical: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        // Written through a pointer (`GrowingBytes`), not appended to an array byte by byte
        // (which checks capacity and uniqueness at every byte): this runs on every large body
        // a peer sends.
        var out = GrowingBytes(capacity: canonical.count * 2 + 64)
        defer { out.free() }
        var depth = 0, i = 0
        let n = canonical.count
        while i < n {
            let b = canonical[i]
            switch b {
            case 0x22:  // a string: copied whole, escapes and all
                var j = i + 1
                while j < n, canonical[j] != 0x22 { j += canonical[j] == 0x5C ? 2 : 1 }
                j = min(j + 1, n)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: canonical[i..<j]))
                i = j
                continue
            case 0x5B, 0x7B:  // [ {
                if i + 1 < n, canonical[i + 1] == b + 2 {  // [] {}
                    out.append(b, b + 2)
                    i += 2
                    continue
                }
                out.append(b)
                depth += 1
                out.append(0x0A)
                out.append(0x20, times: depth * 2)
            case 0x5D, 0x7D:  // ] }
                depth = max(depth - 1, 0)  // never below the top, whatever the input
                out.append(0x0A)
                out.append(0x20, times: depth * 2)
                out.append(b)
            case 0x2C:  // ,
                out.append(b)
                out.append(0x0A)
                out.append(0x20, times: depth * 2)
            case 0x3A:  // :
                out.append(0x3A, 0x20)
            default:
                // A number or a literal: copied up to the punctuation after it.
                var j = i + 1
                while j < n, !isPunctuation(canonical[j]) { j += 1 }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: canonical[i..<j]))
                i = j
                continue
            }
            i += 1
        }
        out.append(0x0A)
        return out.array
    }

    /// What ends a number or a literal in canonical text.
    @inline(__always) private static func isPunctuation(_ b: UInt8) -> Bool {
        b == 0x2C || b == 0x5D || b == 0x7D || b == 0x3A || b == 0x22 || b == 0x5B || b == 0x7B
    }
}
