/// A JSON number as a decimal: sign, significant digits and decimal exponent.
///
/// The value is `0.d1d2…dk × 10^exponent` (the ECMAScript `n` convention). Digits carry no
/// leading or trailing zeros; zero has no digits.
///
/// What a number *is* follows RFC 8785 where that loses nothing a writer could have meant:
/// a non-integral number of at most 17 significant digits (a double's precision) is the IEEE
/// double nearest to it, kept as that double's shortest round-trip digits, exactly as RFC 8785
/// canonicalizes it. Integers of any size, and decimals with more than 17 significant digits,
/// keep their exact digits (RFC 8785 would round them to a double); so do numbers beyond a
/// double's range. See docs/format.md.
public struct JSONNumber: Sendable, Hashable {
    /// True for a negative, non-zero number.
    public let isNegative: Bool
    /// Significant decimal digits as ASCII bytes, no leading or trailing zeros.
    public let digits: [UInt8]
    /// Decimal exponent `n` such that the value is `0.digits × 10^n`.
    public let exponent: Int

    /// A number as parsed: exact digits, then the double rule above.
    init(parsedNegative: Bool, rawDigits: ArraySlice<UInt8>, exponent: Int) {
        let exact = JSONNumber(isNegative: parsedNegative, rawDigits: rawDigits, exponent: exponent)
        guard !exact.isZero, exact.exponent < exact.digits.count, exact.digits.count <= 17,
              let double = Double(String(decoding: exact.canonicalBytes, as: UTF8.self)),
              double.isFinite, double != 0
        else {
            self = exact
            return
        }
        self = JSONNumber(shortestOf: double)
    }

    /// The shortest digits that round-trip `double` (Swift prints exactly those).
    init(shortestOf double: Double) {
        let text = Array("\(double.magnitude)".utf8)
        var digits: [UInt8] = []
        var pointAt: Int?
        var exp = 0
        var i = 0
        while i < text.count {
            let c = text[i]
            if c == UInt8(ascii: ".") {
                pointAt = digits.count
            } else if c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                exp = Int(String(decoding: text[(i + 1)...], as: UTF8.self)) ?? 0
                break
            } else {
                digits.append(c)
            }
            i += 1
        }
        self.init(isNegative: double < 0, rawDigits: digits[...], exponent: (pointAt ?? digits.count) + exp)
    }

    /// A number from its exact parts; normalizes zeros.
    init(isNegative: Bool, rawDigits: ArraySlice<UInt8>, exponent: Int) {
        var d = rawDigits
        var n = exponent
        while let first = d.first, first == UInt8(ascii: "0") { d.removeFirst(); n -= 1 }
        while let last = d.last, last == UInt8(ascii: "0") { d.removeLast() }
        if d.isEmpty {
            self.isNegative = false
            self.digits = []
            self.exponent = 0
        } else {
            self.isNegative = isNegative
            self.digits = Array(d)
            self.exponent = n
        }
    }

    /// An integer as written in JSON: `digits` (no sign, no leading zero unless it is `0`).
    /// Trailing zeros are dropped into the exponent, as the general initializer does, without
    /// copying the digits twice (a parser meets many integers).
    init(isNegative: Bool, integerDigits: UnsafeBufferPointer<UInt8>) {
        var end = integerDigits.count
        while end > 0, integerDigits[end - 1] == UInt8(ascii: "0") { end -= 1 }
        if end == 0 {
            self.isNegative = false
            self.digits = []
            self.exponent = 0
        } else {
            self.isNegative = isNegative
            self.digits = Array(UnsafeBufferPointer(rebasing: integerDigits[..<end]))
            self.exponent = integerDigits.count
        }
    }

    /// An integer.
    public init(_ value: Int) {
        let text = Array(String(value.magnitude).utf8)
        self.init(isNegative: value < 0, rawDigits: text[...], exponent: text.count)
    }

    /// The shortest decimal that round-trips `value`; nil for NaN and infinities.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        if value == 0 {
            self.init(isNegative: false, rawDigits: [], exponent: 0)
        } else {
            self.init(shortestOf: value)
        }
    }

    /// True when the value is zero.
    public var isZero: Bool { digits.isEmpty }

    /// The value as `Int` when integral and in range.
    public var intValue: Int? {
        if isZero { return 0 }
        guard exponent >= digits.count, exponent <= 19 else { return nil }
        var result = 0
        for i in 0..<exponent {
            let d = i < digits.count ? Int(digits[i] - UInt8(ascii: "0")) : 0
            let (m, o1) = result.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(isNegative ? -d : d)
            if o1 || o2 { return nil }
            result = s
        }
        return result
    }

    /// The nearest `Double`.
    public var doubleValue: Double { Double(String(decoding: canonicalBytes, as: UTF8.self)) ?? .nan }

    /// The canonical text: ECMAScript `Number.prototype.toString` layout (RFC 8785) applied to
    /// the digits; integers of more than 17 digits are written out in full
    /// (unless that needs more than 21 trailing zeros).
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(digits.count + 8)
        writeCanonical(into: &out)
        return out
    }

    /// Appends `canonicalBytes` to `out` (a serializer writes a number without an array of
    /// its own).
    func writeCanonical(into out: inout [UInt8]) {
        if isZero { out.append(UInt8(ascii: "0")); return }
        if isNegative { out.append(UInt8(ascii: "-")) }
        let k = digits.count
        let n = exponent
        let zero = UInt8(ascii: "0")
        if k <= n && (n <= 21 || (k > 17 && n - k <= 21)) {
            // Integers longer than a double's 17 digits are written out in full: their digits
            // are exact (not a double's), and a long id should read as the id it is. Not when
            // that takes more than 21 zeros: `1234567890123456789e999999999` would be a
            // gigabyte (docs/security.md).
            out += digits
            out += repeatElement(zero, count: n - k)
        } else if 0 < n && n <= 21 {
            out += digits[0..<n]
            out.append(UInt8(ascii: "."))
            out += digits[n...]
        } else if -6 < n && n <= 0 {
            out += [zero, UInt8(ascii: ".")]
            out += repeatElement(zero, count: -n)
            out += digits
        } else {
            out.append(digits[0])
            if k > 1 {
                out.append(UInt8(ascii: "."))
                out += digits[1...]
            }
            out.append(UInt8(ascii: "e"))
            out.append(n - 1 >= 0 ? UInt8(ascii: "+") : UInt8(ascii: "-"))
            out += Array(String((n - 1).magnitude).utf8)
        }
    }
}

extension JSONNumber: CustomStringConvertible {
    /// The canonical text.
    public var description: String { String(decoding: canonicalBytes, as: UTF8.self) }
}
