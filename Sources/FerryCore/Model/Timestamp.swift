#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// RFC 3339 UTC timestamps with millisecond precision, e.g. `2026-11-22T10:04:05.123Z`.
public enum Timestamp {
    /// Now, formatted.
    public static func now() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return format(seconds: Int(ts.tv_sec), milliseconds: Int(ts.tv_nsec) / 1_000_000)
    }

    /// Formats seconds since the epoch plus milliseconds.
    public static func format(seconds: Int, milliseconds: Int) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        let year = Int(parts.tm_year) + 1900
        if (0...9999).contains(year), (0...999).contains(milliseconds) {
            // Written digit by digit into the string's own 24 bytes: every revision recorded
            // gets a timestamp, and the padded interpolation below allocates for each field.
            return String(unsafeUninitializedCapacity: 24) { out in
                var at = 0
                func put(_ value: Int, _ width: Int, _ separator: Unicode.Scalar) {
                    var v = value
                    for k in stride(from: width - 1, through: 0, by: -1) {
                        out[at + k] = UInt8(ascii: "0") + UInt8(v % 10)
                        v /= 10
                    }
                    out[at + width] = UInt8(separator.value)
                    at += width + 1
                }
                put(year, 4, "-"); put(Int(parts.tm_mon) + 1, 2, "-"); put(Int(parts.tm_mday), 2, "T")
                put(Int(parts.tm_hour), 2, ":"); put(Int(parts.tm_min), 2, ":"); put(Int(parts.tm_sec), 2, ".")
                put(milliseconds, 3, "Z")
                return at
            }
        }
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(milliseconds), 3))Z"
    }
}
