/// Standard base64 (RFC 4648 §4) for HTTP Basic credentials.
enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 15) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for c in text.utf8 where c != UInt8(ascii: "=") {
            guard let v = alphabet.firstIndex(of: c) else { return nil }
            values.append(UInt8(v))
        }
        var out: [UInt8] = []
        var i = 0
        while i + 1 < values.count {
            out.append(values[i] << 2 | values[i + 1] >> 4)
            if i + 2 < values.count { out.append((values[i + 1] & 15) << 4 | values[i + 2] >> 2) }
            if i + 3 < values.count { out.append((values[i + 2] & 3) << 6 | values[i + 3]) }
            i += 4
        }
        return out
    }
}
