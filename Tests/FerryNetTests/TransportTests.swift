import Foundation
import Testing
import FerryCore
import FerryNet
import FerryProtocol

/// The transport over real sockets on 127.0.0.1: upgrade, the `ferry/1` handshake, refusals,
/// limits, and a listener's goodbye.
@Suite(.serialized) struct TransportTests {
    /// A listener whose connections answer the protocol handshake and echo every later message.
    func startEchoListener(_ configure: (inout ListenerConfiguration) -> Void = { _ in }) async throws -> Listener {
        var config = ListenerConfiguration(database: "inventory")
        configure(&config)
        return try await Listener.start(config) { connection in
            Task {
                var machine = ConnectionStateMachine(role: .passive, localPeer: "listener", database: "inventory")
                for await message in connection.inbound {
                    guard case .text(let bytes) = message else { continue }
                    if machine.isOpen {
                        try? await connection.send(text: bytes)
                        continue
                    }
                    switch machine.receiveText(bytes) {
                    case .send(let frame): try? await connection.send(text: FrameCodec.encode(frame))
                    case .close(let code, let reason, let after):
                        if let after { try? await connection.send(text: FrameCodec.encode(after)) }
                        await connection.close(code: code, reason: reason)
                    default: break
                    }
                }
            }
        }
    }

    func url(_ listener: Listener, db: String = "inventory") -> PeerURL { PeerURL("ws://127.0.0.1:\(listener.port)/\(db)")! }

    @Test func aReplicatorAndAListenerShakeHandsOverARealSocket() async throws {
        let listener = try await startEchoListener()
        let connection = try await Dialer.connect(to: url(listener))
        var machine = ConnectionStateMachine(role: .active, localPeer: "replicator", database: "inventory")
        try await connection.send(text: FrameCodec.encode(machine.start()!))
        var iterator = connection.inbound.makeAsyncIterator()
        guard case .text(let reply)? = await iterator.next() else { Issue.record("no reply"); return }
        #expect(machine.receiveText(reply) == .opened(version: 1, peer: "listener", features: []))
        // Large messages cross intact (fragmented by nobody, reassembled if they were).
        let big = Array(repeating: UInt8(ascii: "x"), count: 3_000_000)
        try await connection.send(text: big)
        guard case .text(let echoed)? = await iterator.next() else { Issue.record("no echo"); return }
        #expect(echoed == big)
        #expect(listener.connectionCounts.active == 1)
        await connection.close()
        #expect(connection.closeReason?.code == 1000)
        await listener.stop()
    }

    @Test func refusalsCarryTheirHTTPStatus() async throws {
        let listener = try await startEchoListener { $0.passwordCheck = { user, password in user == "bob" && password == "password" } }
        do {
            _ = try await Dialer.connect(to: url(listener), authorization: BasicCredentials.header(user: "bob", password: "wrong"))
            Issue.record("wrong password accepted")
        } catch let error as DialError {
            #expect(error.kind == .refused(status: 401) && !error.isTransient)
        }
        do {
            _ = try await Dialer.connect(to: url(listener))
            Issue.record("missing password accepted")
        } catch let error as DialError {
            #expect(error.kind == .refused(status: 401))
        }
        do {
            _ = try await Dialer.connect(to: url(listener, db: "elsewhere"), authorization: BasicCredentials.header(user: "bob", password: "password"))
            Issue.record("unknown database accepted")
        } catch let error as DialError {
            #expect(error.kind == .refused(status: 404))
        }
        let ok = try await Dialer.connect(to: url(listener), authorization: BasicCredentials.header(user: "bob", password: "password"))
        await ok.close()
        await listener.stop()
    }

    @Test func plainHTTPGetsAnswersNotCrashes() async throws {
        let listener = try await startEchoListener { $0.passwordCheck = { user, _ in user == "bob" } }
        func get(_ path: String, auth: Bool = true) throws -> String {
            let header = auth ? "-H 'Authorization: \(BasicCredentials.header(user: "bob", password: "x"))'" : ""
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/bash")
            p.arguments = ["-c", "curl -s -i --max-time 5 \(header) http://127.0.0.1:\(listener.port)\(path)"]
            let pipe = Pipe()
            p.standardOutput = pipe
            try p.run()
            p.waitUntilExit()
            return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
        let described = try get("/inventory")
        #expect(described.hasPrefix("HTTP/1.1 200") && described.contains("\"db\":\"inventory\"") && described.contains("ferry-1"), "\(described)")
        #expect(try get("/nothing").hasPrefix("HTTP/1.1 404"))
        let unauthorized = try get("/inventory", auth: false)
        #expect(unauthorized.hasPrefix("HTTP/1.1 401") && unauthorized.contains("WWW-Authenticate: Basic"), "\(unauthorized)")
        #expect(try get("/%2e%2e/etc/passwd").hasPrefix("HTTP/1.1 404"))
        // A WebSocket upgrade that does not offer ferry/1 is a 400.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", "curl -s -i --max-time 5 -H 'Authorization: \(BasicCredentials.header(user: "bob", password: "x"))' -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' http://127.0.0.1:\(listener.port)/inventory"]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        p.waitUntilExit()
        #expect(String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).hasPrefix("HTTP/1.1 400"))
        await listener.stop()
    }

    @Test func anOversizedMessageClosesTheConnection() async throws {
        let listener = try await startEchoListener { $0.maxMessageBytes = 64 * 1024 }
        let connection = try await Dialer.connect(to: url(listener))
        try await connection.send(text: Array(repeating: UInt8(ascii: "y"), count: 200 * 1024))
        let reason = await connection.waitUntilClosed()
        #expect(reason.code == 1009 || reason.code == 1006, "\(reason)")
        await listener.stop()
    }

    @Test func aStoppingListenerSaysGoingAway() async throws {
        let listener = try await startEchoListener()
        let connection = try await Dialer.connect(to: url(listener))
        await listener.stop()
        let reason = await connection.waitUntilClosed()
        #expect(reason.code == 1001 && reason.reason == "listener stopped", "\(reason)")
        // And then nothing listens there: connecting is a transient failure.
        do {
            _ = try await Dialer.connect(to: url(listener), stageTimeout: .seconds(2))
            Issue.record("connected to a stopped listener")
        } catch let error as DialError {
            #expect(error.kind == .unreachable && error.isTransient)
        }
    }
}
