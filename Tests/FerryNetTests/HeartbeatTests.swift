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
}
