extension LogEntry {
    /// Decodes a line in exactly the shape `encodedLine` writes (no whitespace, no escapes,
    /// known keys) without building a JSON tree: opening a folder reads every line, and this
    /// is most of that time. Returns nil for anything else (a line edited by hand, say), which
    /// the caller then decodes with the general parser; validation is the same either way.
    public static func fastDecode(_ line: UnsafeBufferPointer<UInt8>) throws(LogEntryDecodingError) -> LogEntry? {
        var scanner = FlatScanner(buf: line)
        guard let fields = scanner.scanEntry() else { return nil }
        return try LogEntry(fields)
    }
}

/// A cursor over one log line for `fastDecode`; every method returns nil on a surprise.
private struct FlatScanner {
    let buf: UnsafeBufferPointer<UInt8>
    var pos = 0

    mutating func expect(_ b: UInt8) -> Bool {
        guard pos < buf.count, buf[pos] == b else { return false }
        pos += 1
        return true
    }

    /// A string with no escapes and no control characters.
    mutating func string() -> String? {
        guard expect(UInt8(ascii: "\"")) else { return nil }
        let start = pos
        var ascii = true
        while pos < buf.count {
            let b = buf[pos]
            if b == UInt8(ascii: "\"") {
                let bytes = UnsafeBufferPointer(rebasing: buf[start..<pos])
                pos += 1
                if ascii { return String(decoding: bytes, as: UTF8.self) }
                return String(validating: bytes, as: UTF8.self)
            }
            if b == UInt8(ascii: "\\") || b < 0x20 { return nil }
            if b >= 0x80 { ascii = false }
            pos += 1
        }
        return nil
    }

    /// The bytes of a key (keys are ASCII and unescaped).
    mutating func key() -> UnsafeBufferPointer<UInt8>? {
        guard expect(UInt8(ascii: "\"")) else { return nil }
        let start = pos
        while pos < buf.count, buf[pos] != UInt8(ascii: "\"") {
            if buf[pos] == UInt8(ascii: "\\") { return nil }
            pos += 1
        }
        guard pos < buf.count else { return nil }
        let k = UnsafeBufferPointer(rebasing: buf[start..<pos])
        pos += 1
        guard expect(UInt8(ascii: ":")) else { return nil }
        return k
    }

    mutating func int() -> Int? {
        var v = 0
        let start = pos
        while pos < buf.count, buf[pos] >= 48, buf[pos] <= 57 {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int(buf[pos] - 48))
            if o1 || o2 { return nil }
            v = a
            pos += 1
        }
        // JSON has no leading zeros: "0692" goes to the general parser, which refuses it.
        guard pos > start, buf[start] != 48 || pos == start + 1 else { return nil }
        return v
    }

    mutating func literal(_ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard pos + n <= buf.count else { return false }
        for i in 0..<n where buf[pos + i] != word.utf8Start[i] { return false }
        pos += n
        return true
    }

    mutating func bool() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    static func equals(_ k: UnsafeBufferPointer<UInt8>, _ name: StaticString) -> Bool {
        k.count == name.utf8CodeUnitCount && memcmp(k.baseAddress!, name.utf8Start, k.count) == 0
    }

    /// A bit per key for duplicate detection, distinct for each known key (an unknown key
    /// ends the scan anyway; a clash would only send a line to the general parser).
    static func fieldBit(_ k: UnsafeBufferPointer<UInt8>) -> UInt64 {
        1 << UInt64((Int(k[0]) &* 2 &+ Int(k[1]) &+ k.count) & 63)
    }

    mutating func scanEntry() -> LogEntry.RawFields? {
        var f = LogEntry.RawFields()
        guard expect(UInt8(ascii: "{")) else { return nil }
        // A key seen twice sends the line to the general parser, which refuses it.
        var seen: UInt64 = 0
        while true {
            guard let k = key(), k.count >= 2 else { return nil }
            let bit = Self.fieldBit(k)
            guard seen & bit == 0 else { return nil }
            seen |= bit
            switch k.count {
            case 3 where Self.equals(k, "seq"): guard let v = int() else { return nil }; f.seq = v
            case 3 where Self.equals(k, "doc"): guard let v = string() else { return nil }; f.doc = v
            case 3 where Self.equals(k, "rev"): guard let v = string() else { return nil }; f.rev = v
            case 6 where Self.equals(k, "parent"):
                if literal("null") { f.parent = nil } else { guard let v = string() else { return nil }; f.parent = v }
            case 7 where Self.equals(k, "deleted"): guard let v = bool() else { return nil }; f.deleted = v
            case 6 where Self.equals(k, "merged"): guard let v = string() else { return nil }; f.merged = v
            case 4 where Self.equals(k, "kind"): guard let v = string() else { return nil }; f.kind = v
            case 6 where Self.equals(k, "object"): guard let v = string() else { return nil }; f.object = v
            case 4 where Self.equals(k, "size"): guard let v = int() else { return nil }; f.size = v
            case 4 where Self.equals(k, "pack"):
                // Always followed by its offset (as `encodedLine` writes them).
                guard let v = int(), expect(UInt8(ascii: ",")), let k2 = key(), Self.equals(k2, "offset"), let o = int() else { return nil }
                f.pack = (v, o)
            case 6 where Self.equals(k, "origin"): guard let v = string() else { return nil }; f.origin = v
            case 6 where Self.equals(k, "author"): guard let v = string() else { return nil }; f.author = v
            case 4 where Self.equals(k, "time"): guard let v = string() else { return nil }; f.time = v
            case 9 where Self.equals(k, "compacted"): guard let v = bool() else { return nil }; f.compacted = v
            case 9 where Self.equals(k, "ancestors"):
                guard expect(UInt8(ascii: "[")) else { return nil }
                if !expect(UInt8(ascii: "]")) {
                    while true {
                        guard let v = string() else { return nil }
                        f.ancestors.append(v)
                        if expect(UInt8(ascii: "]")) { break }
                        guard expect(UInt8(ascii: ",")) else { return nil }
                    }
                }
            case 8 where Self.equals(k, "conflict"):
                guard expect(UInt8(ascii: "{")),
                      let k1 = key(), Self.equals(k1, "winner"), let w = string(), expect(UInt8(ascii: ",")),
                      let k2 = key(), Self.equals(k2, "loser"), let l = string(), expect(UInt8(ascii: ",")),
                      let k3 = key(), Self.equals(k3, "resolution"), let r = string(), expect(UInt8(ascii: "}"))
                else { return nil }
                f.conflict = (w, l, r)
            default:
                return nil
            }
            if expect(UInt8(ascii: "}")) { return pos == buf.count ? f : nil }
            guard expect(UInt8(ascii: ",")) else { return nil }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
