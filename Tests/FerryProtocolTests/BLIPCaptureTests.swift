import Foundation
import Testing
@testable import FerryProtocol

/// Every frame of the real Couchbase Lite sessions in `../shared/interop/captures` (2.8 and
/// 3.0, both directions) through ferry's BLIP decoder: checksums, one inflate context per
/// direction, reassembly, and the messages compared with the captures' decoded text.
@Suite struct BLIPCaptureTests {
    static var capturesFolder: URL {
        // Tests/FerryProtocolTests/<this file> → the repository root → its sibling `shared`.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/interop/captures").standardizedFileURL
    }

    static func pcaps() throws -> [URL] {
        let names = try FileManager.default.contentsOfDirectory(atPath: capturesFolder.path)
        return names.filter { $0.hasSuffix(".pcap") }.sorted().map { capturesFolder.appendingPathComponent($0) }
    }

    struct Counts: CustomStringConvertible {
        var connections = 0, webSocketConnections = 0, frames = 0, messages = 0, compressed = 0, checksums = 0, acks = 0, closes = 0
        var description: String {
            "\(connections) connections (\(webSocketConnections) WebSocket), \(frames) BLIP frames, \(messages) messages, \(compressed) compressed frames, \(checksums) CRCs checked, \(acks) ACKs, \(closes) close frames"
        }
    }

    struct Direction {
        let decoder = BLIPFrameDecoder()
        var assembler = BLIPMessageAssembler()
        var wire: [String: Int] = [:]
        var lines: [String] = []
        var bodies: [Int: [UInt8]] = [:]
        var messages: [BLIPMessage] = []
    }

    @Test func theCapturesAreThere() throws {
        let found = try Self.pcaps()
        #expect(!found.isEmpty, "no pcap in \(Self.capturesFolder.path)")
    }

    @Test(arguments: BLIPCaptureTests.pcapNames()) func everyFrameDecodesAsCouchbaseLiteSentIt(_ name: String) throws {
        let pcap = Self.capturesFolder.appendingPathComponent(name)
        let textURL = Self.capturesFolder.appendingPathComponent(name.replacingOccurrences(of: ".pcap", with: "-decoded.txt"))
        let bytes = [UInt8](try Data(contentsOf: pcap))
        let transcript = DecodedTranscript(try String(contentsOf: textURL, encoding: .utf8))
        let (_, _, segments) = try PcapReader.segments(bytes)
        let connections = try TCPStreams.connections(segments)
        var counts = Counts()
        counts.connections = connections.count
        #expect(connections.count == transcript.connections.count, "\(name): connections")

        for conn in connections {
            let expected = try #require(transcript.connections.first { $0.clientPort == conn.client.port }, "\(name): no text for client port \(conn.client.port)")
            var dirs = [Direction(), Direction()]   // 0: client → server, 1: server → client
            let request = try #require(WebSocketReader.httpHead(conn.toServer), "\(name): no HTTP request")
            dirs[0].lines = request.head.components(separatedBy: "\r\n")
            var events: [(dir: Int, order: Int, message: WebSocketMessage)] = []
            if let answer = WebSocketReader.httpHead(conn.toClient) {
                dirs[1].lines = answer.head.components(separatedBy: "\r\n")
                if answer.head.hasPrefix("HTTP/1.1 101") || answer.head.hasPrefix("HTTP/1.0 101") {
                    counts.webSocketConnections += 1
                    for (d, (direction, start)) in [(conn.toServer, request.rest), (conn.toClient, answer.rest)].enumerated() {
                        for m in try WebSocketReader.messages(direction, from: start) { events.append((d, events.count, m)) }
                    }
                }
            }
            // Both directions in capture order: a response is accepted only once its request was seen whole.
            events.sort { ($0.message.packet, $0.order) < ($1.message.packet, $1.order) }
            for (d, _, ws) in events {
                switch ws.opcode {
                case 2:
                    counts.frames += 1
                    let frame = try #require(try dirs[d].decoder.decode(ws.payload), "\(name): a frame of undefined type")
                    if frame.type.isAck { counts.acks += 1 } else { counts.checksums += 1 }
                    if frame.flags.contains(.compressed) { counts.compressed += 1 }
                    let key = "\(frame.type.isResponse) \(frame.number)"
                    dirs[d].wire[key, default: 0] += ws.payload.count
                    let received = try dirs[d].assembler.receive(frame)
                    if let m = received.message {
                        counts.messages += 1
                        let lines = DecodedTranscript.render(m, wire: dirs[d].wire.removeValue(forKey: key) ?? 0)
                        if !m.body.isEmpty { dirs[d].bodies[dirs[d].lines.count + 2] = m.body }
                        dirs[d].lines += lines
                        dirs[d].messages.append(m)
                        if m.type == .request && !m.flags.contains(.noReply) { dirs[1 - d].assembler.expectResponse(to: m.number) }
                    }
                case 8:
                    counts.closes += 1
                    dirs[d].lines.append(DecodedTranscript.renderClose(ws))
                default:
                    Issue.record("\(name): a WebSocket opcode \(ws.opcode) message; BLIP sends binary messages only")
                }
            }
            for (d, lines) in [expected.toServer, expected.toClient].enumerated() {
                let diff = DecodedTranscript.difference(expected: lines, actual: dirs[d].lines, bodies: dirs[d].bodies)
                #expect(diff == nil, "\(name), client port \(conn.client.port), \(d == 0 ? "client → server" : "server → client"): \(diff ?? "")")
                #expect(dirs[d].assembler.partialCount == 0, "\(name): a message left unfinished")
                try reencode(dirs[d].messages, name)
            }
        }
        #expect(counts.frames > 0, "\(name): no BLIP frame")
        print("BLIP capture \(name): \(counts)")
    }

    /// Each decoded message through ferry's own outbox and encoder, then a fresh decoder and
    /// assembler: the same message comes back (the encoder and decoder agree; LiteCore's
    /// compressed bytes need not be reproduced).
    func reencode(_ messages: [BLIPMessage], _ name: String) throws {
        var outbox = BLIPOutbox()
        let encoder = BLIPFrameEncoder()
        let decoder = BLIPFrameDecoder()
        var assembler = BLIPMessageAssembler()
        for m in messages {
            if m.type.isResponse { assembler.expectResponse(to: m.number) }
            let number = try outbox.send(m)
            #expect(number == m.number, "\(name): \(m.type.name) #\(m.number) renumbered \(number)")
            var back: BLIPMessage?
            while let f = try outbox.nextFrame(encoder) {
                let frame = try #require(try decoder.decode(f.bytes))
                if let done = try assembler.receive(frame).message { back = done }
            }
            #expect(back == m, "\(name): \(m.type.name) #\(m.number) did not round-trip")
        }
    }

    static func pcapNames() -> [String] {
        (try? pcaps().map(\.lastPathComponent)) ?? []
    }
}
