/// Pieces of JSON text read the same way by the parser, the canonical check and the
/// canonicalizer, so that the three agree on what a text is.
enum JSONText {
    /// Whether the text `word` (`true`, `false`, `null`, a key) stands in `buf` at `pos`.
    static func literal(_ word: StaticString, in buf: UnsafeBufferPointer<UInt8>, at pos: Int) -> Bool {
        let n = word.utf8CodeUnitCount
        guard pos + n <= buf.count else { return false }
        for i in 0..<n where buf[pos + i] != word.utf8Start[i] { return false }
        return true
    }

    /// The end of the number token starting at `start` (a sign, digits, a fraction, an
    /// exponent, as far as they go), and whether it is an integer of at most 21 digits other
    /// than `-0`: written in full, such an integer is its own canonical form
    /// (`JSONNumber.writeCanonical`). Nil where no JSON number starts: no digit, or a leading
    /// zero followed by a digit. What the token holds beyond that is the parser's to judge.
    static func numberToken(in buf: UnsafeBufferPointer<UInt8>, at start: Int) -> (end: Int, canonical: Bool)? {
        var pos = start
        let negative = buf[pos] == UInt8(ascii: "-")
        if negative { pos += 1 }
        guard pos < buf.count, isDigit(buf[pos]) else { return nil }
        let digitsStart = pos
        if buf[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < buf.count, isDigit(buf[pos]) { return nil }
        } else {
            while pos < buf.count, isDigit(buf[pos]) { pos += 1 }
        }
        let integerEnd = pos
        if pos < buf.count, buf[pos] == UInt8(ascii: ".") {
            pos += 1
            while pos < buf.count, isDigit(buf[pos]) { pos += 1 }
        }
        if pos < buf.count, buf[pos] == UInt8(ascii: "e") || buf[pos] == UInt8(ascii: "E") {
            pos += 1
            if pos < buf.count, buf[pos] == UInt8(ascii: "+") || buf[pos] == UInt8(ascii: "-") { pos += 1 }
            while pos < buf.count, isDigit(buf[pos]) { pos += 1 }
        }
        let digits = integerEnd - digitsStart
        let canonical = pos == integerEnd && digits <= 21 && !(negative && buf[digitsStart] == UInt8(ascii: "0"))
        return (pos, canonical)
    }

    @inline(__always) static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    /// The value of the four hex digits (either case) at `pos`, or nil.
    static func hex4(in buf: UnsafeBufferPointer<UInt8>, at pos: Int) -> UInt32? {
        guard pos + 4 <= buf.count else { return nil }
        var v: UInt32 = 0
        for i in pos..<pos + 4 {
            let b = buf[i]
            let d: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(b - UInt8(ascii: "A") + 10)
            default: return nil
            }
            v = v << 4 | d
        }
        return v
    }

    /// The length of the valid UTF-8 sequence of a non-ASCII scalar at `i` (no overlong
    /// forms, no surrogates, nothing above U+10FFFF: what `String(validating:)` accepts).
    static func utf8Sequence(in buf: UnsafeBufferPointer<UInt8>, at i: Int) -> Int? {
        let lead = buf[i]
        let length: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF  // the second byte's range
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return nil
        }
        guard i + length <= buf.count, buf[i + 1] >= low, buf[i + 1] <= high else { return nil }
        for j in 2..<length where buf[i + j] & 0xC0 != 0x80 { return nil }
        return length
    }

    /// The UTF-16 order of two strings' UTF-8 bytes (negative, zero when equal, positive),
    /// found from the bytes, which order the same way except where the first difference sets
    /// a character beyond U+FFFF against one from U+E000 to U+FFFF (a byte of 0xEE or above):
    /// nil there, and the caller compares UTF-16 units.
    static func utf8Order(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Int? {
        let n = min(x.count, y.count)
        var i = 0
        while i < n, x[i] == y[i] { i += 1 }
        guard i < n else { return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1) }
        if x[i] >= 0xEE || y[i] >= 0xEE { return nil }
        return x[i] < y[i] ? -1 : 1
    }

    /// A string text's range (quotes included) without its quotes, by integer bounds:
    /// `dropFirst().dropLast()` went through the generic collection code in every comparison.
    @inline(__always) static func insideQuotes(_ r: Range<Int>) -> Range<Int> {
        assert(r.count >= 2, "a string text holds its two quotes")
        return r.lowerBound + 1..<r.upperBound - 1
    }

    /// The canonical order (`JSONWriter.precedesInUTF16`) of two canonical string texts in
    /// `text`, quotes included: negative, positive, or nil when they are equal. Compared as
    /// bytes where that is the order (no escapes, and a first difference below 0xEE),
    /// otherwise as the strings they decode to.
    static func keyOrder(in text: UnsafeBufferPointer<UInt8>, _ a: Range<Int>, _ b: Range<Int>) -> Int? {
        let x = UnsafeBufferPointer(rebasing: text[insideQuotes(a)])
        let y = UnsafeBufferPointer(rebasing: text[insideQuotes(b)])
        // One pass up to the first difference: an escape there or before it decides nothing
        // as bytes, and neither do bytes that order differently in UTF-16 (`utf8Order`).
        let n = min(x.count, y.count)
        var i = 0
        while i < n, x[i] == y[i], x[i] != UInt8(ascii: "\\") { i += 1 }
        if i == n { return x.count == y.count ? nil : (x.count < y.count ? -1 : 1) }
        if x[i] != y[i], x[i] != UInt8(ascii: "\\"), y[i] != UInt8(ascii: "\\"), x[i] < 0xEE, y[i] < 0xEE {
            return x[i] < y[i] ? -1 : 1
        }
        guard case .string(let s)? = try? JSONParser.parse(buffer: UnsafeBufferPointer(rebasing: text[a])),
              case .string(let t)? = try? JSONParser.parse(buffer: UnsafeBufferPointer(rebasing: text[b])) else { return nil }
        if s == t { return nil }
        return JSONWriter.precedesInUTF16(s, t) ? -1 : 1
    }
}
