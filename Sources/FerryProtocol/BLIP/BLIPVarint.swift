/// Unsigned LEB128 varints, as BLIP writes message numbers, flags, property lengths and ACK counts.
public enum BLIPVarint {
    /// The longest encoding of a 64-bit value; anything longer is refused, not wrapped.
    public static let maxLength = 10

    /// Appends `value`'s encoding to `bytes`: seven bits a byte, least significant first.
    public static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// `value`'s encoding.
    public static func encode(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        append(value, to: &out)
        return out
    }

    /// Reads a varint starting at `index` and moves `index` past it. Refuses one that ends
    /// with the bytes, runs over ten bytes, or overflows 64 bits (the tenth byte may hold one bit).
    public static func read(_ bytes: ArraySlice<UInt8>, at index: inout Int) throws(BLIPError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var i = index
        while true {
            guard i < bytes.endIndex else { throw BLIPError(.badVarint, "a varint ends with its frame") }
            let byte = bytes[i]
            i += 1
            // The tenth byte holds bit 63 only: more is an overflow or an eleventh byte.
            if shift == 63 && byte > 1 { throw BLIPError(.badVarint, "a varint over \(maxLength) bytes or 64 bits") }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
        }
        index = i
        return value
    }

    /// Decodes a whole buffer holding exactly one varint (an ACK's body).
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(BLIPError) -> UInt64 {
        var i = bytes.startIndex
        let value = try read(bytes, at: &i)
        guard i == bytes.endIndex else { throw BLIPError(.badVarint, "bytes after a varint") }
        return value
    }
}
