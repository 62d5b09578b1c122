/// What a receiver needs to know of a JSON object before it writes it, found while checking
/// its canonical text (`CanonicalJSONCheck`) instead of from a parsed tree.
public struct CanonicalJSONFacts: Sendable, Equatable {
    /// The length of the value's pretty-printed text (`JSONValue.prettyBytes`).
    public let prettySize: Int
    /// The value's `blobReferences()`, in canonical order.
    public let blobReferences: [BlobReference]
}

/// Checks that bytes are exactly the canonical text (`JSONValue.canonicalBytes`) of a JSON
/// object the parser accepts, in one pass that builds no tree. A peer's body arrives as the
/// canonical bytes its store holds; parsing them into a tree only to serialize it again and
/// compare took most of a large body's time on the receiver.
///
/// The check accepts only what the serializer writes: no whitespace, members in UTF-16 order
/// without duplicates, numbers in their canonical form, strings escaped minimally, valid UTF-8,
/// nesting within `JSONParser.maxDepth`. Anything else (including a malformed blob reference)
/// is "not checked" (nil), and the caller parses the bytes, which says what is wrong with
/// them or finds their canonical form. So whatever passes parses to a value whose canonical
/// bytes are those bytes (FuzzJSON holds the check to that).
public enum CanonicalJSONCheck {
    /// The facts of `bytes` if they are, whole, the canonical text of a JSON object; nil if not.
    public static func object(_ bytes: UnsafeBufferPointer<UInt8>) -> CanonicalJSONFacts? {
        guard let (end, facts) = object(in: bytes, at: 0), end == bytes.count else { return nil }
        return facts
    }

    /// The end of the canonical object text starting at `start` in `buffer`, with its facts;
    /// nil if the bytes from there do not start with one.
    public static func object(in buffer: UnsafeBufferPointer<UInt8>, at start: Int) -> (end: Int, facts: CanonicalJSONFacts)? {
        guard start < buffer.count, buffer[start] == UInt8(ascii: "{") else { return nil }
        var scanner = Scanner(buffer, at: start)
        guard scanner.value(indent: 0) else { return nil }
        guard let references = blobReferences(in: buffer, at: scanner.references) else { return nil }
        let facts = CanonicalJSONFacts(prettySize: scanner.pos - start + scanner.prettyExtra + 1, blobReferences: references)
        return (scanner.pos, facts)
    }

    /// The blob references at `ranges` of canonical `text` (the outermost objects whose `@type`
    /// is `blob`, in text order), each read as `blobReferences()` reads it, once the whole text
    /// is read: what a reference holds is not looked into, so each byte is parsed at most once,
    /// however deep references nest. Nil if one is malformed: the parse says what is wrong.
    static func blobReferences(in text: UnsafeBufferPointer<UInt8>, at ranges: some Sequence<Range<Int>>) -> [BlobReference]? {
        var references: [BlobReference] = []
        for range in ranges {
            guard let parsed = try? JSONParser.parse(buffer: UnsafeBufferPointer(rebasing: text[range])),
                  let found = try? parsed.blobReferences(), found.count == 1 else { return nil }
            references.append(found[0])
        }
        return references
    }

    /// Whether a member whose key and value are at `key` and `value` in canonical `text` makes
    /// its object a blob reference (`"@type":"blob"`).
    static func marksBlobReference(_ text: UnsafeBufferPointer<UInt8>, key: Range<Int>, value: Range<Int>) -> Bool {
        func holds(_ range: Range<Int>, _ literal: StaticString) -> Bool {
            range.count == literal.utf8CodeUnitCount && JSONText.literal(literal, in: text, at: range.lowerBound)
        }
        return holds(key, "\"@type\"") && holds(value, "\"blob\"")
    }

    /// What pretty-printing adds to a non-empty object of `members` members at `indent`: a
    /// line and indentation for each member and for the closing brace, a space after each colon.
    static func prettyExtra(objectMembers members: Int, indent: Int) -> Int {
        members * (2 + 2 * (indent + 1)) + 1 + 2 * indent
    }

    /// What pretty-printing adds to a non-empty array of `elements` elements at `indent`.
    static func prettyExtra(arrayElements elements: Int, indent: Int) -> Int {
        elements * (1 + 2 * (indent + 1)) + 1 + 2 * indent
    }

    /// Whether the keys at `ranges` in `text` (canonical string texts, quotes included) are
    /// distinct as the parser tells keys apart: as Swift strings, so canonically equivalent
    /// ones (`é` and `e` with U+0301, `K` and U+212A KELVIN SIGN) are the same key, which the
    /// parser refuses as a duplicate. Only keys with a non-ASCII byte can be equivalent
    /// without being equal bytes, so only such objects need this: its callers look for such a
    /// byte as they read the keys, and call it only then.
    static func keysAreDistinct(_ text: UnsafeBufferPointer<UInt8>, _ ranges: some Collection<Range<Int>>) -> Bool {
        var seen = Set<String>()
        for range in ranges {
            guard case .string(let key)? = try? JSONParser.parse(buffer: UnsafeBufferPointer(rebasing: text[range])),
                  seen.insert(key).inserted else { return false }
        }
        return true
    }

    /// One pass over a buffer: `value` consumes one canonical value or returns false.
    struct Scanner {
        let buf: UnsafeBufferPointer<UInt8>
        var pos: Int
        var depth = 0
        /// What pretty-printing adds to the canonical text, as `JSONValue.prettySize` counts
        /// it (newlines, indentation, the space after each colon), less the final newline.
        var prettyExtra = 0
        /// Where the blob references found so far are, in text order (objects whose `@type`
        /// is `blob`, not inside another one).
        var references: [Range<Int>] = []
        /// The keys of the objects being checked, innermost last (`keysAreDistinct`).
        var keys: [Range<Int>] = []

        init(_ buf: UnsafeBufferPointer<UInt8>, at start: Int) {
            self.buf = buf
            self.pos = start
        }

        mutating func value(indent: Int) -> Bool {
            guard pos < buf.count else { return false }
            switch buf[pos] {
            case UInt8(ascii: "{"): return object(indent: indent)
            case UInt8(ascii: "["): return array(indent: indent)
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
            pos += text.utf8CodeUnitCount
            return true
        }

        mutating func object(indent: Int) -> Bool {
            depth += 1
            guard depth <= JSONParser.maxDepth else { return false }
            let start = pos
            pos += 1
            if pos < buf.count, buf[pos] == UInt8(ascii: "}") {
                pos += 1
                depth -= 1
                return true
            }
            let referencesBefore = references.count
            let firstKey = keys.count
            defer { keys.removeSubrange(firstKey...) }
            var previousKey: Range<Int>?
            var isBlobReference = false
            // Only keys with a non-ASCII byte can be equivalent without being equal bytes
            // (`keysAreDistinct`): most objects need no such check.
            var nonASCIIKey = false
            var count = 0
            while true {
                guard pos < buf.count, buf[pos] == UInt8(ascii: "\"") else { return false }
                let keyStart = pos
                guard string() else { return false }
                let key = keyStart..<pos
                if let previousKey, JSONText.keyOrder(in: buf, previousKey, key) != -1 { return false }
                keys.append(key)
                if !nonASCIIKey { nonASCIIKey = buf[key].contains { $0 >= 0x80 } }
                guard pos < buf.count, buf[pos] == UInt8(ascii: ":") else { return false }
                pos += 1
                let valueStart = pos
                guard value(indent: indent + 1) else { return false }
                if CanonicalJSONCheck.marksBlobReference(buf, key: key, value: valueStart..<pos) { isBlobReference = true }
                count += 1
                previousKey = key
                guard pos < buf.count else { return false }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "}") { pos += 1; break }
                return false
            }
            if nonASCIIKey { guard CanonicalJSONCheck.keysAreDistinct(buf, keys[firstKey...]) else { return false } }
            depth -= 1
            prettyExtra += CanonicalJSONCheck.prettyExtra(objectMembers: count, indent: indent)
            if isBlobReference {
                // References found inside this one do not count.
                references.removeSubrange(referencesBefore...)
                references.append(start..<pos)
            }
            return true
        }

        mutating func array(indent: Int) -> Bool {
            depth += 1
            guard depth <= JSONParser.maxDepth else { return false }
            pos += 1
            if pos < buf.count, buf[pos] == UInt8(ascii: "]") {
                pos += 1
                depth -= 1
                return true
            }
            var count = 0
            while true {
                guard value(indent: indent + 1) else { return false }
                count += 1
                guard pos < buf.count else { return false }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "]") { pos += 1; break }
                return false
            }
            depth -= 1
            prettyExtra += CanonicalJSONCheck.prettyExtra(arrayElements: count, indent: indent)
            return true
        }

        /// Consumes a string as the serializer writes it.
        mutating func string() -> Bool {
            pos += 1
            while pos < buf.count {
                let b = buf[pos]
                if b == UInt8(ascii: "\"") {
                    pos += 1
                    return true
                }
                if b < 0x20 { return false }
                if b == UInt8(ascii: "\\") {
                    guard pos + 1 < buf.count else { return false }
                    switch buf[pos + 1] {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "b"), UInt8(ascii: "t"),
                         UInt8(ascii: "n"), UInt8(ascii: "f"), UInt8(ascii: "r"):
                        pos += 2
                    case UInt8(ascii: "u"):
                        // Only control characters without a short escape, as `\u00xx` in
                        // lower-case hex.
                        guard pos + 5 < buf.count, buf[pos + 2] == UInt8(ascii: "0"), buf[pos + 3] == UInt8(ascii: "0"),
                              let high = Self.lowerHex(buf[pos + 4]), let low = Self.lowerHex(buf[pos + 5]), high < 2 else { return false }
                        switch high << 4 | low {
                        case 0x08, 0x09, 0x0A, 0x0C, 0x0D: return false
                        default: pos += 6
                        }
                    default:
                        return false
                    }
                    continue
                }
                if b < 0x80 {
                    pos += 1
                    continue
                }
                guard let length = JSONText.utf8Sequence(in: buf, at: pos) else { return false }
                pos += length
            }
            return false
        }

        static func lowerHex(_ b: UInt8) -> UInt8? {
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
            default: return nil
            }
        }

        /// Consumes a number written as the serializer writes it: most are integers written
        /// in full; anything else is compared with what the serializer writes for it.
        mutating func number() -> Bool {
            let start = pos
            guard let token = JSONText.numberToken(in: buf, at: start) else { return false }
            pos = token.end
            if token.canonical { return true }
            let text = UnsafeBufferPointer(rebasing: buf[start..<pos])
            guard case .number(let parsed)? = try? JSONParser.parse(buffer: text) else { return false }
            return parsed.canonicalBytes.elementsEqual(text)
        }
    }
}
