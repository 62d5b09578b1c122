// Test support: the HTTP head and RFC 6455 frames of one direction of a WebSocket connection.

struct WebSocketMessage {
    var opcode: UInt8
    var masked: Bool
    var payload: [UInt8]
    /// The packet that completed the message (for ordering both directions).
    var packet: Int
}

enum WebSocketReader {
    /// Splits a direction into its HTTP head (text before the blank line) and the bytes after.
    static func httpHead(_ d: TCPDirection) -> (head: String, rest: Int)? {
        let marker: [UInt8] = [13, 10, 13, 10]
        guard d.bytes.count >= 4 else { return nil }
        for i in 0...(d.bytes.count - 4) where d.bytes[i..<(i + 4)].elementsEqual(marker) {
            return (String(decoding: d.bytes[..<i], as: UTF8.self), i + 4)
        }
        return nil
    }

    /// Reads frames from `start`, unmasking and joining fragments into messages.
    static func messages(_ d: TCPDirection, from start: Int) throws -> [WebSocketMessage] {
        let b = d.bytes
        var i = start
        var out: [WebSocketMessage] = []
        var fragments: (opcode: UInt8, masked: Bool, payload: [UInt8])?
        while i < b.count {
            guard b.count - i >= 2 else { throw PcapError("a WebSocket frame header cut off") }
            let fin = b[i] & 0x80 != 0, opcode = b[i] & 0x0F
            let masked = b[i + 1] & 0x80 != 0
            var length = UInt64(b[i + 1] & 0x7F)
            var at = i + 2
            if length == 126 { length = UInt64(be16(b, at)); at += 2 } else if length == 127 {
                length = UInt64(be32(b, at)) << 32 | UInt64(be32(b, at + 4)); at += 8
            }
            var key: [UInt8] = []
            if masked { key = Array(b[at..<(at + 4)]); at += 4 }
            guard UInt64(b.count - at) >= length else { throw PcapError("a WebSocket frame cut off") }
            var payload = Array(b[at..<(at + Int(length))])
            if masked { for j in payload.indices { payload[j] ^= key[j & 3] } }
            i = at + Int(length)
            let packet = d.packet(at: i - 1)
            if opcode >= 8 {
                out.append(WebSocketMessage(opcode: opcode, masked: masked, payload: payload, packet: packet))
            } else if opcode == 0 {
                guard var f = fragments else { throw PcapError("a continuation frame without a first frame") }
                f.payload += payload
                fragments = f
                if fin { out.append(WebSocketMessage(opcode: f.opcode, masked: f.masked, payload: f.payload, packet: packet)); fragments = nil }
            } else if fin {
                out.append(WebSocketMessage(opcode: opcode, masked: masked, payload: payload, packet: packet))
            } else {
                fragments = (opcode, masked, payload)
            }
        }
        return out
    }
}
