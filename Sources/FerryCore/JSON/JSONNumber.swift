/// An exact decimal number as written in JSON: sign, significant digits and decimal exponent.
///
/// The value is `0.d1d2…dk × 10^exponent` (the ECMAScript `n` convention). Digits carry no
/// leading or trailing zeros; zero has no digits. Keeping the decimal digits (rather than a
/// `Double`) is what lets integers beyond 2^53 and long decimals round-trip unchanged.
public struct JSONNumber: Sendable, Hashable {
    /// True for a negative, non-zero number.
    public let isNegative: Bool
    /// Significant decimal digits as ASCII bytes, no leading or trailing zeros.
    public let digits: [UInt8]
    /// Decimal exponent `n` such that the value is `0.digits × 10^n`.
    public let exponent: Int

    /// A number from its parts; normalizes zeros.
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

    /// An integer.
    public init(_ value: Int) {
        let text = Array(String(value.magnitude).utf8)
        self.init(isNegative: value < 0, rawDigits: text[...], exponent: text.count)
    }

    /// The shortest decimal that round-trips `value`; nil for NaN and infinities.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        guard let parsed = try? JSONParser.parseNumberLiteral(Array("\(value)".utf8)) else { return nil }
        self = parsed
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
    /// the exact digits. For every number written as the shortest round-trip form of a double
    /// (what any RFC 8785 producer writes) this is exactly RFC 8785's output; other numbers keep
    /// their exact value instead of being rounded to a double.
    public var canonicalBytes: [UInt8] {
        if isZero { return [UInt8(ascii: "0")] }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count + 8)
        if isNegative { out.append(UInt8(ascii: "-")) }
        let k = digits.count
        let n = exponent
        let zero = UInt8(ascii: "0")
        if k <= n && n <= 21 {
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
        return out
    }
}

extension JSONNumber: CustomStringConvertible {
    /// The canonical text.
    public var description: String { String(decoding: canonicalBytes, as: UTF8.self) }
}
