import Foundation
import Testing
import FerryNet

/// The active side's heartbeat against a server that upgrades and then goes silent (it never
/// answers a ping), as a peer behind a dead link does.
@Suite struct HeartbeatTests {
    @Test func aSilentPeerIsDroppedAfterTwoHeartbeats() async throws {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        server.arguments = ["-c", """
            import base64, hashlib, socket, sys, time
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
            print(s.getsockname()[1], flush=True)
            c, _ = s.accept(); head = b""
            while b"\\r\\n\\r\\n" not in head: head += c.recv(1)
            key = [l.split(b":", 1)[1].strip() for l in head.split(b"\\r\\n") if l.lower().startswith(b"sec-websocket-key")][0]
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + b"\\r\\nSec-WebSocket-Protocol: ferry-1\\r\\n\\r\\n")
            time.sleep(60)  # silent, until the test ends it
            """]
        let out = Pipe()
        server.standardOutput = out
        try server.run()
        defer { server.terminate() }
        var portLine = Data()
        while !portLine.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            portLine += chunk
        }
        let port = try #require(Int(String(decoding: portLine, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))

        let connection = try await Dialer.connect(to: PeerURL("ws://127.0.0.1:\(port)/inventory")!)
        let start = ContinuousClock.now
        connection.startHeartbeat(every: .milliseconds(200))
        let reason = await connection.waitUntilClosed()
        let elapsed = ContinuousClock.now - start
        #expect(reason.code == 1001 && reason.reason.contains("heartbeat"), "\(reason)")
        #expect(elapsed >= .milliseconds(400) && elapsed < .seconds(20), "\(elapsed)")  // bounded loosely: a loaded machine delays timers
    }

    /// The listener's heartbeat drops a Couchbase Lite client gone silent (a suspended app)
    /// with 4001, after which its replicator retries (after 1001 it would stop for good).
    @Test func aSilentCouchbaseLiteClientIsAskedToComeBack() async throws {
        var config = ListenerConfiguration(database: "inventory")
        config.heartbeat = .milliseconds(200)
        let listener = try await Listener.start(config) { connection in
            Task { for await _ in connection.inbound {} }
        }
        defer { Task { await listener.stop() } }
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        client.arguments = ["-c", """
            import socket, struct
            c = socket.create_connection(("127.0.0.1", \(listener.port))); c.settimeout(20)
            c.sendall(b"GET /inventory/_blipsync HTTP/1.1\\r\\nHost: x\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n"
                      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\nSec-WebSocket-Version: 13\\r\\nSec-WebSocket-Protocol: BLIP_3+CBMobile_3\\r\\n\\r\\n")
            data = b""
            while b"\\r\\n\\r\\n" not in data: data += c.recv(1)
            print(data.split(b"\\r\\n")[0].decode(), flush=True)
            def read(n):
                out = b""
                while len(out) < n:
                    chunk = c.recv(n - len(out))
                    if not chunk: raise SystemExit("closed without a close frame")
                    out += chunk
                return out
            while True:  # never answers a ping: silent
                b0, b1 = read(2)
                length = b1 & 0x7F
                if length == 126: length = struct.unpack(">H", read(2))[0]
                payload = read(length)
                if b0 & 0x0F == 8:
                    print(struct.unpack(">H", payload[:2])[0], payload[2:].decode(), flush=True)
                    break
            """]
        let out = Pipe()
        client.standardOutput = out
        try client.run()
        client.waitUntilExit()
        let lines = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("HTTP/1.1 101") == true, "\(lines)")
        #expect(lines.last?.hasPrefix("4001 no answer to heartbeat") == true, "\(lines)")
    }
}
