/// A strict RFC 8259 parser: no comments, no trailing commas, no duplicate keys, valid UTF-8
/// only, no lone surrogates, nesting at most `maxDepth`.
public struct JSONParser {
    /// Deepest nesting accepted; deeper input is an error rather than a stack overflow.
    public static let maxDepth = 512

    /// Parses a whole text; anything but whitespace after the value is an error.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        let array = Array(bytes)
        defer { HeapTrim.note(array.count) }
        return try array.withUnsafeBufferPointer { buffer throws(JSONSyntaxError) in
            var parser = Cursor(buffer)
            return try parser.parseDocument()
        }
    }

    /// Parses a whole text given as a string.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Parses a buffer in place (no copy); used by the log reader on its mapped lines.
    public static func parse(buffer: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        defer { HeapTrim.note(buffer.count) }
        var parser = Cursor(buffer)
        return try parser.parseDocument()
    }

    /// Parses a whole text that is a JSON object, except that the top-level member named
    /// `member` is not parsed where its value is a canonical object's text
    /// (`CanonicalJSONCheck`): it is left out of the members and its range in `buffer` is
    /// returned instead, with what the check found. A frame carrying a document's body passes
    /// the body on as the bytes it is, checked, without a tree made of it. `members` is nil
    /// when the text is JSON but not an object.
    public static func parseObject(buffer: UnsafeBufferPointer<UInt8>, keepingCanonical member: String)
        throws(JSONSyntaxError) -> (members: [String: JSONValue]?, kept: (range: Range<Int>, facts: CanonicalJSONFacts)?) {
        defer { HeapTrim.note(buffer.count) }
        var parser = Cursor(buffer)
        parser.keep = member
        guard case .object(var members) = try parser.parseDocument() else { return (nil, nil) }
        if parser.kept != nil { members[member] = nil }
        return (members, parser.kept)
    }

    /// The state of one parse over a byte buffer.
    struct Cursor {
        let buf: UnsafeBufferPointer<UInt8>
        var pos = 0
        var depth = 0
        /// The top-level member to check as canonical text instead of parsing (`parseObject`).
        var keep: String?
        /// Where it was, and what its check found.
        var kept: (range: Range<Int>, facts: CanonicalJSONFacts)?

        init(_ buf: UnsafeBufferPointer<UInt8>) { self.buf = buf }

        mutating func parseDocument() throws(JSONSyntaxError) -> JSONValue {
            // A UTF-8 byte order mark is tolerated (some editors write one).
            if buf.count >= 3, buf[0] == 0xEF, buf[1] == 0xBB, buf[2] == 0xBF { pos = 3 }
            skipWhitespace()
            let value = try parseValue()
            skipWhitespace()
            if pos < buf.count { throw error("unexpected content after the JSON value") }
            return value
        }

        func error(_ message: String, at offset: Int? = nil) -> JSONSyntaxError {
            let at = min(offset ?? pos, buf.count)
            var line = 1
            var lineStart = 0
            for i in 0..<at where buf[i] == UInt8(ascii: "\n") {
                line += 1
                lineStart = i + 1
            }
            // Columns count Unicode scalars: skip UTF-8 continuation bytes.
            var column = 1
            var i = lineStart
            while i < at {
                if buf[i] & 0xC0 != 0x80 { column += 1 }
                i += 1
            }
            return JSONSyntaxError(message: message, line: line, column: column, offset: at)
        }

        @inline(__always) mutating func skipWhitespace() {
            while pos < buf.count {
                switch buf[pos] {
                case 0x20, 0x0A, 0x0D, 0x09: pos += 1
                default: return
                }
            }
        }

        func describeCurrent() -> String {
            guard pos < buf.count else { return "end of input" }
            let b = buf[pos]
            if b >= 0x21 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
            return "byte 0x\(String(b, radix: 16))"
        }

        mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
            guard pos < buf.count else { throw error("unexpected end of input, expected a value") }
            switch buf[pos] {
            case UInt8(ascii: "{"): return try parseObject()
            case UInt8(ascii: "["): return try parseArray()
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
            case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
            case UInt8(ascii: "n"): try expectWord("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
            default: throw error("unexpected \(describeCurrent()), expected a value")
            }
        }

        mutating func expectWord(_ word: StaticString) throws(JSONSyntaxError) {
            let start = pos
            let n = word.utf8CodeUnitCount
            let p = word.utf8Start
            guard pos + n <= buf.count else { throw error("invalid literal", at: start) }
            for i in 0..<n where buf[pos + i] != p[i] { throw error("invalid literal", at: start) }
            pos += n
        }

        mutating func enter() throws(JSONSyntaxError) {
            depth += 1
            if depth > JSONParser.maxDepth { throw error("nesting deeper than \(JSONParser.maxDepth)") }
        }

        mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
            try enter()
            pos += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if pos < buf.count, buf[pos] == UInt8(ascii: "}") {
                pos += 1
                depth -= 1
                return .object(members)
            }
            // Room for a few members from the start: growing one member at a time reallocated
            // and rehashed a small object's table twice.
            members.reserveCapacity(3)
            while true {
                skipWhitespace()
                guard pos < buf.count, buf[pos] == UInt8(ascii: "\"") else {
                    throw error("expected a string key, found \(describeCurrent())")
                }
                let keyStart = pos
                let key = try parseString()
                skipWhitespace()
                guard pos < buf.count, buf[pos] == UInt8(ascii: ":") else {
                    throw error("expected ':' after key, found \(describeCurrent())")
                }
                pos += 1
                skipWhitespace()
                let value: JSONValue
                if depth == 1, let keep, key == keep, let (end, facts) = CanonicalJSONCheck.object(in: buf, at: pos) {
                    // Stands in for the member until the parse ends, so that a second one is
                    // still a duplicate.
                    value = .null
                    kept = (pos..<end, facts)
                    pos = end
                } else {
                    value = try parseValue()
                }
                if members.updateValue(value, forKey: key) != nil {
                    throw error("duplicate key \"\(key)\"", at: keyStart)
                }
                skipWhitespace()
                guard pos < buf.count else { throw error("unexpected end of input, expected ',' or '}'") }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "}") { pos += 1; break }
                throw error("expected ',' or '}', found \(describeCurrent())")
            }
            depth -= 1
            return .object(members)
        }

        mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
            try enter()
            pos += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if pos < buf.count, buf[pos] == UInt8(ascii: "]") {
                pos += 1
                depth -= 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try parseValue())
                skipWhitespace()
                guard pos < buf.count else { throw error("unexpected end of input, expected ',' or ']'") }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "]") { pos += 1; break }
                throw error("expected ',' or ']', found \(describeCurrent())")
            }
            depth -= 1
            return .array(elements)
        }

        mutating func parseNumber() throws(JSONSyntaxError) -> JSONNumber {
            let start = pos
            var negative = false
            if buf[pos] == UInt8(ascii: "-") { negative = true; pos += 1 }
            let intStart = pos
            guard pos < buf.count, JSONText.isDigit(buf[pos]) else { throw error("invalid number", at: start) }
            if buf[pos] == UInt8(ascii: "0") {
                pos += 1
                if pos < buf.count, JSONText.isDigit(buf[pos]) { throw error("leading zeros are not allowed", at: start) }
            } else {
                while pos < buf.count, JSONText.isDigit(buf[pos]) { pos += 1 }
            }
            let intEnd = pos
            var fracStart = pos
            var fracEnd = pos
            if pos < buf.count, buf[pos] == UInt8(ascii: ".") {
                pos += 1
                fracStart = pos
                guard pos < buf.count, JSONText.isDigit(buf[pos]) else { throw error("expected digits after '.'") }
                while pos < buf.count, JSONText.isDigit(buf[pos]) { pos += 1 }
                fracEnd = pos
            }
            var exp = 0
            if pos < buf.count, buf[pos] == UInt8(ascii: "e") || buf[pos] == UInt8(ascii: "E") {
                pos += 1
                var expNegative = false
                if pos < buf.count, buf[pos] == UInt8(ascii: "+") || buf[pos] == UInt8(ascii: "-") {
                    expNegative = buf[pos] == UInt8(ascii: "-")
                    pos += 1
                }
                guard pos < buf.count, JSONText.isDigit(buf[pos]) else { throw error("expected digits in exponent") }
                while pos < buf.count, JSONText.isDigit(buf[pos]) {
                    exp = exp * 10 + Int(buf[pos] - UInt8(ascii: "0"))
                    if exp > 999_999_999 { throw error("number exponent out of range", at: start) }
                    pos += 1
                }
                if expNegative { exp = -exp }
            }
            // An integer (most numbers): its digits are the number's, without a first copy.
            if fracStart == fracEnd, exp == 0 {
                return JSONNumber(isNegative: negative, integerDigits: UnsafeBufferPointer(rebasing: buf[intStart..<intEnd]))
            }
            var raw: [UInt8] = []
            raw.reserveCapacity(intEnd - intStart + fracEnd - fracStart)
            raw += UnsafeBufferPointer(rebasing: buf[intStart..<intEnd])
            raw += UnsafeBufferPointer(rebasing: buf[fracStart..<fracEnd])
            let number = JSONNumber(parsedNegative: negative, rawDigits: raw[...], exponent: (intEnd - intStart) + exp)
            // The bound holds for the exponent the canonical text writes (one digit before the
            // point), not only the one in the input: `59e999999999` and `0.01e-999999999` move
            // past it once their digits are normalized, and would not parse back.
            if (number.exponent - 1).magnitude > 999_999_999 {
                throw error("number exponent out of range", at: start)
            }
            return number
        }

        mutating func parseString() throws(JSONSyntaxError) -> String {
            let quote = pos
            pos += 1
            let start = pos
            // Fast path: no escapes.
            while pos < buf.count {
                let b = buf[pos]
                if b == UInt8(ascii: "\"") {
                    let s = try makeString(UnsafeBufferPointer(rebasing: buf[start..<pos]), at: start)
                    pos += 1
                    return s
                }
                if b == UInt8(ascii: "\\") { break }
                if b < 0x20 { throw error("control character in string must be escaped") }
                pos += 1
            }
            guard pos < buf.count else { throw error("unterminated string", at: quote) }
            var bytes = Array(UnsafeBufferPointer(rebasing: buf[start..<pos]))
            while pos < buf.count {
                let b = buf[pos]
                if b == UInt8(ascii: "\"") {
                    let s = try bytes.withUnsafeBufferPointer { p throws(JSONSyntaxError) in try makeString(p, at: start) }
                    pos += 1
                    return s
                }
                if b < 0x20 { throw error("control character in string must be escaped") }
                if b != UInt8(ascii: "\\") { bytes.append(b); pos += 1; continue }
                pos += 1
                guard pos < buf.count else { break }
                let e = buf[pos]
                pos += 1
                switch e {
                case UInt8(ascii: "\""): bytes.append(0x22)
                case UInt8(ascii: "\\"): bytes.append(0x5C)
                case UInt8(ascii: "/"): bytes.append(0x2F)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    let escapeStart = pos - 2
                    var scalar = try hex4()
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard pos + 1 < buf.count, buf[pos] == UInt8(ascii: "\\"), buf[pos + 1] == UInt8(ascii: "u") else {
                            throw error("lone surrogate in \\u escape", at: escapeStart)
                        }
                        pos += 2
                        let low = try hex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw error("lone surrogate in \\u escape", at: escapeStart) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar < 0xE000 {
                        throw error("lone surrogate in \\u escape", at: escapeStart)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw error("invalid \\u escape", at: escapeStart) }
                    bytes += Array(String(Character(u)).utf8)
                default:
                    throw error("invalid escape '\\\(Character(Unicode.Scalar(e)))'", at: pos - 2)
                }
            }
            throw error("unterminated string", at: quote)
        }

        mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
            guard pos + 4 <= buf.count else { throw error("incomplete \\u escape") }
            guard let v = JSONText.hex4(in: buf, at: pos) else { throw error("invalid hex digit in \\u escape") }
            pos += 4
            return v
        }

        func makeString(_ p: UnsafeBufferPointer<UInt8>, at offset: Int) throws(JSONSyntaxError) -> String {
            // ASCII is always valid; otherwise validate strictly (no silent U+FFFD repair).
            var ascii = true
            for b in p where b >= 0x80 { ascii = false; break }
            if ascii { return String(decoding: p, as: UTF8.self) }
            guard let s = String(validating: p, as: UTF8.self) else { throw error("invalid UTF-8 in string", at: offset) }
            return s
        }
    }
}
