// Test support: the captures' `*-decoded.txt`, split into connections and directions, and
// the same text rendered from what ferry's BLIP codec decodes, so the two compare line by line.
import FerryProtocol

struct DecodedTranscript {
    struct Connection {
        var clientPort: UInt16
        var toServer: [String] = []
        var toClient: [String] = []
    }

    var connections: [Connection] = []

    init(_ text: String) {
        var toServer = true
        // "\r\n" is one Character in Swift, so both line ends are named.
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = String(raw)
            if line.isEmpty { continue }
            if line.hasPrefix("######## TCP connection from client port ") {
                connections.append(Connection(clientPort: UInt16(line.split(separator: " ").last!)!))
            } else if line == "==== client -> server: HTTP" {
                toServer = true
            } else if line == "==== server -> client: HTTP" {
                toServer = false
            } else if !connections.isEmpty {
                if toServer { connections[connections.count - 1].toServer.append(line) } else { connections[connections.count - 1].toClient.append(line) }
            }
        }
    }

    /// A message as the decoded text prints it: header line, properties, body when not empty.
    static func render(_ m: BLIPMessage, wire: Int) -> [String] {
        let flags = m.frameFlags
        let hex = String(flags.rawValue, radix: 16)
        let letters = flags.description.isEmpty ? "" : " " + flags.description
        var lines = ["  \(m.type.name) #\(m.number) flags=0x\(hex.count == 1 ? "0" + hex : hex)\(letters) wire=\(wire)B crc ok",
                     "      {" + m.properties.entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"]
        if !m.body.isEmpty { lines.append("      body: " + String(decoding: m.body, as: UTF8.self)) }
        return lines
    }

    /// A WebSocket close frame as the decoded text prints it.
    static func renderClose(_ w: WebSocketMessage) -> String {
        let masked = w.masked ? " masked" : ""
        guard w.payload.count >= 2 else { return "  [ws opcode \(w.opcode)\(masked)]" }
        let status = Int(w.payload[0]) << 8 | Int(w.payload[1])
        return "  [ws opcode \(w.opcode)\(masked) status=\(status) reason='\(String(decoding: w.payload.dropFirst(2), as: UTF8.self))']"
    }

    /// Compares rendered lines with the text's. A body the text prints as
    /// `<N binary bytes: hex…>` is compared by its length and hex prefix (`bodies` holds the
    /// raw bodies by line index); every other line must be equal. Returns the first difference.
    static func difference(expected: [String], actual: [String], bodies: [Int: [UInt8]]) -> String? {
        for i in 0..<max(expected.count, actual.count) {
            let e = i < expected.count ? expected[i] : "<nothing>"
            let a = i < actual.count ? actual[i] : "<nothing>"
            if e == a { continue }
            if let body = bodies[i], let (count, prefix) = binaryBody(e) {
                let hex = body.prefix(prefix.count / 2).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
                if body.count == count && hex == prefix { continue }
            }
            return "line \(i + 1):\n  expected: \(e)\n  decoded:  \(a)"
        }
        return nil
    }

    private static func binaryBody(_ line: String) -> (Int, String)? {
        let head = "      body: <"
        guard line.hasPrefix(head), line.hasSuffix("...>") else { return nil }
        let inner = line.dropFirst(head.count).dropLast(4)
        let parts = inner.split(separator: " ")
        guard parts.count == 4, parts[1] == "binary", parts[2] == "bytes:", let n = Int(parts[0]) else { return nil }
        return (n, String(parts[3]))
    }
}
