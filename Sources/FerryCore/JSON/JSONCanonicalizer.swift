/// Writes the canonical bytes of a JSON text (`JSONValue.canonicalBytes` of what the parser
/// makes of it) straight from the text, without building its tree: whitespace dropped,
/// strings re-escaped minimally, numbers in canonical form, each object's members sorted as
/// the text is read. A saved file is read this way: parsing a large document into a tree only
/// to serialize it took most of the time between a save and its revision.
///
/// What it cannot do simply it leaves to the parser: it returns nil on anything the parser
/// would refuse (the parser then says where and why) and on the rare texts it does not
/// handle alone. Whatever it returns is the parse's canonical bytes (FuzzJSON holds it to that).
public enum JSONCanonicalizer {
    /// The canonical bytes of `text`, or nil (see the type's comment).
    public static func canonicalBytes(of text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var writer = Writer(text)
        defer { writer.out.free() }
        return writer.document()
    }

    /// The canonical bytes of `text` with the facts `CanonicalJSONCheck.object` would find in
    /// them, gathered as they are written (a saved file's bytes are not checked again); nil
    /// where the check would give none (not an object, a malformed blob reference) or where
    /// `canonicalBytes` gives nothing.
    public static func canonicalObject(of text: UnsafeBufferPointer<UInt8>) -> (bytes: [UInt8], facts: CanonicalJSONFacts)? {
        var writer = Writer(text)
        defer { writer.out.free() }
        guard let bytes = writer.document(), bytes.first == UInt8(ascii: "{") else { return nil }
        let ranges = writer.references.sorted { $0.lowerBound < $1.lowerBound }
        guard let references = bytes.withUnsafeBufferPointer({ CanonicalJSONCheck.blobReferences(in: $0, at: ranges) }) else { return nil }
        return (bytes, CanonicalJSONFacts(prettySize: bytes.count + writer.prettyExtra + 1, blobReferences: references))
    }

    /// One pass over a text into `out`.
    struct Writer {
        let buf: UnsafeBufferPointer<UInt8>
        var pos = 0
        var depth = 0
        /// Written through a pointer: appending to an array checked its capacity and uniqueness,
        /// and retained it, at every byte of a large file.
        var out: GrowingBytes
        /// The members of the objects being written, innermost last: where each one's key
        /// (quotes included) and value end in `out`, and where its blob references begin in
        /// `references` (they run to the next member's, or to the end).
        var members: [(key: Range<Int>, end: Int, references: Int)] = []
        /// What pretty-printing adds to the text written (`CanonicalJSONCheck.Scanner`'s count).
        var prettyExtra = 0
        /// Where the blob references written so far are in `out` (objects whose `@type` is
        /// `blob`, not inside another one): kept up to date as objects' members move, so that
        /// they can be read in canonical order at the end.
        var references: [Range<Int>] = []

        init(_ buf: UnsafeBufferPointer<UInt8>) {
            self.buf = buf
            out = GrowingBytes(capacity: buf.count + 16)
        }

        mutating func document() -> [UInt8]? {
            // A UTF-8 byte order mark is tolerated, as the parser does.
            if buf.count >= 3, buf[0] == 0xEF, buf[1] == 0xBB, buf[2] == 0xBF { pos = 3 }
            skipWhitespace()
            guard value() else { return nil }
            skipWhitespace()
            return pos == buf.count ? out.array : nil
        }

        @inline(__always) mutating func skipWhitespace() {
            while pos < buf.count {
                switch buf[pos] {
                case 0x20, 0x0A, 0x0D, 0x09: pos += 1
                default: return
                }
            }
        }

        mutating func value() -> Bool {
            guard pos < buf.count else { return false }
            switch buf[pos] {
            case UInt8(ascii: "{"): return object()
            case UInt8(ascii: "["): return array()
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: "t"): return word("true")
            case UInt8(ascii: "f"): return word("false")
            case UInt8(ascii: "n"): return word("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
            default: return false
            }
        }

        mutating func word(_ text: StaticString) -> Bool {
            guard JSONText.literal(text, in: buf, at: pos) else { return false }
            out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
            pos += text.utf8CodeUnitCount
            return true
        }

        mutating func enter() -> Bool {
            depth += 1
            return depth <= JSONParser.maxDepth
        }

        mutating func array() -> Bool {
            guard enter() else { return false }
            pos += 1
            out.append(UInt8(ascii: "["))
            skipWhitespace()
            var count = 0
            if pos < buf.count, buf[pos] == UInt8(ascii: "]") {
                pos += 1
            } else {
                while true {
                    skipWhitespace()
                    guard value() else { return false }
                    count += 1
                    skipWhitespace()
                    guard pos < buf.count else { return false }
                    if buf[pos] == UInt8(ascii: ",") {
                        out.append(UInt8(ascii: ","))
                        pos += 1
                        continue
                    }
                    guard buf[pos] == UInt8(ascii: "]") else { return false }
                    pos += 1
                    break
                }
            }
            out.append(UInt8(ascii: "]"))
            depth -= 1
            if count > 0 { prettyExtra += CanonicalJSONCheck.prettyExtra(arrayElements: count, indent: depth) }
            return true
        }

        mutating func object() -> Bool {
            guard enter() else { return false }
            pos += 1
            let start = out.count
            out.append(UInt8(ascii: "{"))
            let first = members.count
            let referencesBefore = references.count
            defer { members.removeSubrange(first...) }
            skipWhitespace()
            var sorted = true
            // Only keys with a non-ASCII byte can be equivalent without being equal bytes
            // (`CanonicalJSONCheck.keysAreDistinct`): most objects need no such check.
            var nonASCIIKey = false
            if pos < buf.count, buf[pos] == UInt8(ascii: "}") {
                pos += 1
            } else {
                while true {
                    skipWhitespace()
                    guard pos < buf.count, buf[pos] == UInt8(ascii: "\"") else { return false }
                    if members.count > first { out.append(UInt8(ascii: ",")) }
                    let keyStart = out.count
                    let memberReferences = references.count
                    guard string() else { return false }
                    let key = keyStart..<out.count
                    if !nonASCIIKey { nonASCIIKey = out.withUnsafeBufferPointer { o in o[key].contains { $0 >= 0x80 } } }
                    skipWhitespace()
                    guard pos < buf.count, buf[pos] == UInt8(ascii: ":") else { return false }
                    pos += 1
                    out.append(UInt8(ascii: ":"))
                    skipWhitespace()
                    guard value() else { return false }
                    if sorted, members.count > first {
                        // Equal keys are a duplicate, which the parser refuses.
                        guard let order = compareKeys(members[members.count - 1].key, key) else { return false }
                        if order > 0 { sorted = false }
                    }
                    members.append((key, out.count, memberReferences))
                    skipWhitespace()
                    guard pos < buf.count else { return false }
                    if buf[pos] == UInt8(ascii: ",") {
                        pos += 1
                        continue
                    }
                    guard buf[pos] == UInt8(ascii: "}") else { return false }
                    pos += 1
                    break
                }
            }
            if nonASCIIKey {
                let keys = members[first...].map { $0.key }
                guard out.withUnsafeBufferPointer({ CanonicalJSONCheck.keysAreDistinct($0, keys) }) else { return false }
            }
            let isBlobReference = members[first...].contains { member in
                out.withUnsafeBufferPointer { CanonicalJSONCheck.marksBlobReference($0, key: member.key, value: member.key.upperBound + 1..<member.end) }
            }
            if !sorted, !reorder(from: first, objectStart: start) { return false }
            out.append(UInt8(ascii: "}"))
            depth -= 1
            let count = members.count - first
            if count > 0 { prettyExtra += CanonicalJSONCheck.prettyExtra(objectMembers: count, indent: depth) }
            if isBlobReference {
                // References inside this one do not count.
                references.removeSubrange(referencesBefore...)
                references.append(start..<out.count)
            }
            return true
        }

        /// Objects with at most this many members are sorted by insertion.
        static let insertionSortLimit = 16

        /// Rewrites the members from `first` on, written in the text's order after the `{` at
        /// `objectStart`, in canonical order (the same bytes, moved); false on a duplicate key.
        mutating func reorder(from first: Int, objectStart: Int) -> Bool {
            let count = members.count - first
            let base = objectStart + 1
            let length = out.count - base
            // The members read through a copy (one retain), and `out` through one pointer per
            // step: going through `self` in each comparison retained and released both arrays
            // every time, which took as long as the comparisons.
            let members = self.members
            // In buffers on the stack where they fit: a file's objects are many and small.
            return withUnsafeTemporaryAllocation(of: Int.self, capacity: count) { order in
                for i in 0..<count { (order.baseAddress! + i).initialize(to: first + i) }
                let distinct = out.withUnsafeBufferPointer { o in
                    members.withUnsafeBufferPointer { m in
                        var sorting = order  // another view of the same memory: `order` reads it sorted
                        if count <= Self.insertionSortLimit {
                            // Most objects are small: an insertion sort, which meets an equal key
                            // (a duplicate, which the parser refuses) where it stops.
                            for i in 1..<count {
                                let member = sorting[i]
                                var j = i
                                while j > 0 {
                                    guard let order = JSONText.keyOrder(in: o, m[sorting[j - 1]].key, m[member].key) else { return false }
                                    if order < 0 { break }
                                    sorting[j] = sorting[j - 1]
                                    j -= 1
                                }
                                sorting[j] = member
                            }
                            return true
                        }
                        sorting.sort { a, b in (JSONText.keyOrder(in: o, m[a].key, m[b].key) ?? 0) < 0 }
                        // Equal keys end up side by side: a duplicate, which the parser refuses.
                        for i in 1..<count where JSONText.keyOrder(in: o, m[order[i - 1]].key, m[order[i]].key) == nil { return false }
                        return true
                    }
                }
                guard distinct else { return false }
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length) { written in
                    members.withUnsafeBufferPointer { m in
                        out.withUnsafeMutableBufferPointer { o in
                            _ = written.initialize(fromContentsOf: UnsafeMutableBufferPointer(rebasing: o[base...]))
                            var at = base
                            for (i, index) in order.enumerated() {
                                if i > 0 {
                                    o[at] = UInt8(ascii: ",")
                                    at += 1
                                }
                                let member = m[index].key.lowerBound - base..<m[index].end - base
                                _ = UnsafeMutableBufferPointer(rebasing: o[at..<at + member.count]).update(fromContentsOf: written[member])
                                // The references inside the member move with it: each member's
                                // are a run of their own, so each moves once.
                                let runEnd = index + 1 < m.count ? m[index + 1].references : references.count
                                let shift = at - m[index].key.lowerBound
                                for r in m[index].references..<runEnd { references[r] = references[r].lowerBound + shift..<references[r].upperBound + shift }
                                at += member.count
                            }
                        }
                    }
                }
                return true
            }
        }

        /// The order of two keys written in `out` (negative, positive; nil when equal).
        func compareKeys(_ a: Range<Int>, _ b: Range<Int>) -> Int? {
            out.withUnsafeBufferPointer { JSONText.keyOrder(in: $0, a, b) }
        }

        /// A string, re-escaped as the serializer writes it (`JSONWriter.writeString`).
        mutating func string() -> Bool {
            pos += 1
            out.append(UInt8(ascii: "\""))
            var run = pos  // the start of bytes copied as they are
            while pos < buf.count {
                let b = buf[pos]
                if b == UInt8(ascii: "\"") {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[run..<pos]))
                    out.append(UInt8(ascii: "\""))
                    pos += 1
                    return true
                }
                if b < 0x20 { return false }
                if b < 0x80 && b != UInt8(ascii: "\\") {
                    pos += 1
                    continue
                }
                if b >= 0x80 {
                    guard let length = JSONText.utf8Sequence(in: buf, at: pos) else { return false }
                    pos += length
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[run..<pos]))
                guard pos + 1 < buf.count else { return false }
                let e = buf[pos + 1]
                pos += 2
                switch e {
                case UInt8(ascii: "\""): out.append(0x5C, 0x22)
                case UInt8(ascii: "\\"): out.append(0x5C, 0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x5C, UInt8(ascii: "b"))
                case UInt8(ascii: "f"): out.append(0x5C, UInt8(ascii: "f"))
                case UInt8(ascii: "n"): out.append(0x5C, UInt8(ascii: "n"))
                case UInt8(ascii: "r"): out.append(0x5C, UInt8(ascii: "r"))
                case UInt8(ascii: "t"): out.append(0x5C, UInt8(ascii: "t"))
                case UInt8(ascii: "u"):
                    guard var scalar = JSONText.hex4(in: buf, at: pos) else { return false }
                    pos += 4
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard pos + 1 < buf.count, buf[pos] == UInt8(ascii: "\\"), buf[pos + 1] == UInt8(ascii: "u") else { return false }
                        pos += 2
                        guard let low = JSONText.hex4(in: buf, at: pos), low >= 0xDC00 && low < 0xE000 else { return false }
                        pos += 4
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar < 0xE000 {
                        return false
                    }
                    guard let u = Unicode.Scalar(scalar) else { return false }
                    writeScalar(u)
                default:
                    return false
                }
                run = pos
            }
            return false
        }

        /// A scalar from a `\u` escape, as the serializer writes it: escaped if a quote, a
        /// backslash or a control character, as UTF-8 otherwise.
        mutating func writeScalar(_ u: Unicode.Scalar) {
            var bytes: [UInt8] = []
            if u.value < 0x20 || u.value == 0x22 || u.value == 0x5C {
                JSONWriter.writeEscape(of: UInt8(u.value), into: &bytes)
            } else {
                bytes.append(contentsOf: UTF8.encode(u)!)
            }
            bytes.withUnsafeBufferPointer { out.append(contentsOf: $0) }
        }

        /// A number in canonical form: most are integers written in full, their own canonical
        /// form; anything else is written by `JSONNumber` as the parser reads it.
        mutating func number() -> Bool {
            let start = pos
            guard let token = JSONText.numberToken(in: buf, at: start) else { return false }
            pos = token.end
            let text = UnsafeBufferPointer(rebasing: buf[start..<pos])
            if token.canonical {
                out.append(contentsOf: text)
                return true
            }
            guard case .number(let parsed)? = try? JSONParser.parse(buffer: text) else { return false }
            var canonical: [UInt8] = []
            parsed.writeCanonical(into: &canonical)
            canonical.withUnsafeBufferPointer { out.append(contentsOf: $0) }
            return true
        }
    }
}
