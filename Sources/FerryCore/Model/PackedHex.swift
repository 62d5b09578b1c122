/// Up to 64 lowercase hex digits packed as nibbles into four words, first digit in the top
/// nibble of `w0`. A plain value: ids and digests are hashed and compared millions of times
/// when a folder opens, and a `String` would cost a heap object and reference counting each.
/// Comparing (w0, w1, w2, w3, count) orders exactly as the hex text does, because `0` is the
/// smallest hex digit and the padding is zero.
public struct PackedHex: Hashable, Sendable, Comparable {
    var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0, w3: UInt64 = 0
    /// Number of hex digits.
    public let count: UInt8

    /// Packs `text` (1 to 64 lowercase hex digits); nil otherwise.
    public init?(_ text: Substring.UTF8View) {
        var sub = Substring(text)
        guard let packed = sub.withUTF8({ PackedHex(ascii: $0) }) else { return nil }
        self = packed
    }

    /// Packs hex digits given as ASCII bytes (1 to 64 lowercase hex digits); nil otherwise.
    public init?(ascii text: UnsafeBufferPointer<UInt8>) {
        guard !text.isEmpty, text.count <= 64 else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var i = 0
        for c in text {
            let nibble: UInt64
            switch c {
            case 48...57: nibble = UInt64(c - 48)
            case 97...102: nibble = UInt64(c - 87)
            default: return nil
            }
            let shift = UInt64(60 - (i % 16) * 4)
            switch i / 16 {
            case 0: words.0 |= nibble << shift
            case 1: words.1 |= nibble << shift
            case 2: words.2 |= nibble << shift
            default: words.3 |= nibble << shift
            }
            i += 1
        }
        (w0, w1, w2, w3) = words
        count = UInt8(i)
    }

    /// Packs raw bytes (two hex digits each), e.g. a SHA-256 digest.
    init(bytes: some Sequence<UInt8>, limit: Int = 32) {
        var words: [UInt64] = [0, 0, 0, 0]
        var n = 0
        for b in bytes where n < limit {
            words[n / 8] |= UInt64(b) << UInt64(56 - (n % 8) * 8)
            n += 1
        }
        (w0, w1, w2, w3) = (words[0], words[1], words[2], words[3])
        count = UInt8(n * 2)
    }

    /// The hex text.
    public var text: String {
        var out = [UInt8]()
        out.reserveCapacity(Int(count))
        appendText(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the hex text's bytes to `out` (no String made: a stat cache of 100,000 lines).
    /// The digits are written into a buffer on the stack and appended at once: appending them
    /// one by one checked the array's capacity and uniqueness per digit, a visible cost where
    /// every log line and frame carries two or three of them.
    public func appendText(to out: inout [UInt8]) {
        let n = min(Int(count), 64)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { digits in
            var word = w0
            for i in 0..<n {
                if i & 15 == 0 { word = i == 0 ? w0 : i == 16 ? w1 : i == 32 ? w2 : w3 }
                let nibble = UInt8(truncatingIfNeeded: word >> 60)
                word <<= 4
                digits[i] = nibble < 10 ? 0x30 + nibble : 0x57 + nibble
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[..<n]))
        }
    }

    /// Orders as the hex text orders.
    public static func < (a: PackedHex, b: PackedHex) -> Bool {
        if a.w0 != b.w0 { return a.w0 < b.w0 }
        if a.w1 != b.w1 { return a.w1 < b.w1 }
        if a.w2 != b.w2 { return a.w2 < b.w2 }
        if a.w3 != b.w3 { return a.w3 < b.w3 }
        return a.count < b.count
    }
}
