import Testing
@testable import FerryProtocol

/// CRC-32 (IEEE, reflected, polynomial 0xEDB88320) bit by bit, independent of zlib, for vectors.
func referenceCRC32(_ bytes: [UInt8], from start: UInt32 = 0) -> UInt32 {
    var c = ~start
    for b in bytes {
        c ^= UInt32(b)
        for _ in 0..<8 { c = c & 1 == 1 ? (c >> 1) ^ 0xEDB8_8320 : c >> 1 }
    }
    return ~c
}

func bigEndian(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }

func expectBLIPError(_ code: BLIPError.Code, _ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("accepted: \(what)", sourceLocation: sourceLocation)
    } catch let error as BLIPError {
        #expect(error.code == code, "\(what): \(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(what): not a BLIPError: \(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct BLIPVarintTests {
    @Test func edgeCasesEncodeAsLEB128() throws {
        var vectors: [(UInt64, [UInt8])] = [(0, [0x00]), (1, [0x01]), (127, [0x7F]), (128, [0x80, 0x01])]
        vectors.append((300, [0xAC, 0x02]))
        vectors.append((16_383, [0xFF, 0x7F]))
        vectors.append((16_384, [0x80, 0x80, 0x01]))
        vectors.append((UInt64(UInt32.max), [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]))
        vectors.append((UInt64.max, [UInt8](repeating: 0xFF, count: 9) + [0x01]))
        for (value, bytes) in vectors {
            #expect(BLIPVarint.encode(value) == bytes, "\(value)")
            #expect(try BLIPVarint.decode(bytes[...]) == value, "\(value)")
        }
        // Reading stops after the varint and says where.
        var i = 0
        #expect(try BLIPVarint.read([0xAC, 0x02, 0x07][...], at: &i) == 300)
        #expect(i == 2)
    }

    @Test func malformedVarintsAreRefused() {
        expectBLIPError(.badVarint, "empty") { _ = try BLIPVarint.decode([][...]) }
        expectBLIPError(.badVarint, "continuation at the end") { _ = try BLIPVarint.decode([0x80][...]) }
        expectBLIPError(.badVarint, "over 64 bits") { _ = try BLIPVarint.decode([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02][...]) }
        expectBLIPError(.badVarint, "eleven bytes") { _ = try BLIPVarint.decode([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00][...]) }
        expectBLIPError(.badVarint, "trailing bytes") { _ = try BLIPVarint.decode([0x01, 0x01][...]) }
    }
}

@Suite struct BLIPPropertiesTests {
    @Test func aPropertyBlockIsKeyNulValueNul() throws {
        let props: BLIPProperties = ["Profile": "getCheckpoint", "client": "cp-1"]
        let block = Array("Profile\0getCheckpoint\0client\0cp-1\0".utf8)
        #expect(try props.encoded() == block)
        #expect(try BLIPProperties.decode(block[...]) == props)
        // The message payload: the block's length as a varint (34), the block, the body.
        let message = BLIPMessage(type: .request, properties: props, body: Array("{}".utf8))
        let expectedPayload: [UInt8] = [34] + block + [0x7B, 0x7D]
        #expect(try message.payload() == expectedPayload)
        // No properties still writes the length, zero.
        #expect(try BLIPMessage(type: .response).payload() == [0])
        // Order is kept, and the first of a repeated key is the one read.
        let repeated = try BLIPProperties.decode(Array("b\01\0a\02\0b\03\0".utf8)[...])
        let keys = repeated.entries.map { $0.key }
        #expect(keys == ["b", "a", "b"])
        #expect(repeated["b"] == "1")
        // An empty value is a value (LiteCore's setCheckpoint with no previous rev).
        #expect(try BLIPProperties.decode(Array("rev\0\0".utf8)[...])["rev"] == "")
    }

    @Test func malformedPropertiesAreRefused() {
        expectBLIPError(.badProperties, "no final NUL") { _ = try BLIPProperties.decode(Array("Profile\0rev".utf8)[...]) }
        expectBLIPError(.badProperties, "odd count") { _ = try BLIPProperties.decode(Array("Profile\0rev\0id\0".utf8)[...]) }
        expectBLIPError(.badProperties, "invalid UTF-8") { _ = try BLIPProperties.decode([0x61, 0, 0xC3, 0x28, 0][...]) }
        var small = BLIPLimits()
        small.maxPropertiesBytes = 8
        expectBLIPError(.tooLarge, "over the limit") { _ = try BLIPProperties.decode(Array("Profile\0rev\0".utf8)[...], limits: small) }
        let long: BLIPProperties = ["Profile": "rev"], nul: BLIPProperties = ["a": "b\0c"]
        expectBLIPError(.tooLarge, "encoding over the limit") { _ = try long.encoded(limits: small) }
        expectBLIPError(.unencodable, "a NUL in a value") { _ = try nul.encoded() }
        // A length prefix longer than the message, and a message with no prefix at all.
        expectBLIPError(.truncated, "length past the end") { _ = try BLIPMessage.decode(type: .request, number: 1, flags: [], payload: [9, 0x61, 0]) }
        expectBLIPError(.truncated, "no length") { _ = try BLIPMessage.decode(type: .request, number: 1, flags: [], payload: []) }
        expectBLIPError(.tooLarge, "a length over the limit") { _ = try BLIPMessage.decode(type: .request, number: 1, flags: [], payload: [0x80, 0x80, 0x80, 0x01]) }
    }
}

@Suite struct BLIPFrameCodecTests {
    @Test func anUncompressedFrameIsHeaderDataAndRunningCRC() throws {
        let encoder = BLIPFrameEncoder()
        // RES #2, no properties, no body: number 02, flags 01, payload 00, CRC32(00) = D202EF8D.
        let first = try encoder.encode(number: 2, flags: BLIPFrameFlags(type: .response), data: [0][...])
        #expect(first == [0x02, 0x01, 0x00, 0xD2, 0x02, 0xEF, 0x8D])
        // The checksum runs over the direction: the second frame's is CRC32(00 00) = 41D912FF.
        let second = try encoder.encode(number: 3, flags: BLIPFrameFlags(type: .response), data: [0][...])
        #expect(second == [0x03, 0x01, 0x00, 0x41, 0xD9, 0x12, 0xFF])
        // REQ #1 getCheckpoint: the property block as the captures show it, with its CRC.
        let payload = [UInt8(34)] + Array("Profile\0getCheckpoint\0client\0cp-1\0".utf8)
        let request = try BLIPFrameEncoder().encode(number: 1, flags: BLIPFrameFlags(type: .request), data: payload[...])
        #expect(request == [0x01, 0x00] + payload + bigEndian(referenceCRC32(payload)))
        #expect(referenceCRC32(payload) == 0xE597_7D5A)

        let decoder = BLIPFrameDecoder()
        #expect(try decoder.decode(first) == BLIPFrame(number: 2, flags: BLIPFrameFlags(type: .response), data: [0], wirePayloadCount: 5))
        #expect(try decoder.decode(second)?.number == 3)
        #expect(decoder.checksum == 0x41D9_12FF)
    }

    @Test func aHandBuiltDeflateFrameInflates() throws {
        // RFC 1951 by hand: a stored block (header 00, LEN 0001, NLEN FFFE) holding the payload
        // 00, then the header byte of the sync flush's empty stored block, whose 00 00 FF FF
        // BLIP leaves off. CRC32 is of the uncompressed byte 00.
        let frame: [UInt8] = [0x01, 0x08, 0x00, 0x01, 0x00, 0xFE, 0xFF, 0x00, 0x00, 0xD2, 0x02, 0xEF, 0x8D]
        let decoded = try #require(try BLIPFrameDecoder().decode(frame))
        #expect(decoded.data == [0] && decoded.flags == BLIPFrameFlags(type: .request, .compressed))
        // The same CRC with the compressed bytes' checksum instead is refused: it covers uncompressed data.
        var wrong = frame
        wrong.replaceSubrange(9..., with: bigEndian(referenceCRC32([0x00, 0x01, 0x00, 0xFE, 0xFF, 0x00, 0x00])))
        expectBLIPError(.badChecksum, "CRC of compressed bytes") { _ = try BLIPFrameDecoder().decode(wrong) }
    }

    @Test func compressedFramesShareOneContextPerDirection() throws {
        let encoder = BLIPFrameEncoder()
        let body = Array(#"{"type":"note","title":"hello from A","n":1,"tags":["x","y"],"nested":{"k":true}}"#.utf8)
        let flags = BLIPFrameFlags(type: .request, .compressed)
        let a = try encoder.encode(number: 1, flags: flags, data: body[...])
        let b = try encoder.encode(number: 2, flags: flags, data: body[...])
        #expect(a.count < body.count + 6)
        // The second copy is mostly a back-reference into the first frame's window.
        #expect(b.count < a.count / 2, "\(a.count) then \(b.count)")
        #expect(Array(a.dropLast(4).suffix(4)) != [0x00, 0x00, 0xFF, 0xFF], "the sync-flush trailer is stripped")
        #expect(Array(a.suffix(4)) == bigEndian(referenceCRC32(body)))
        #expect(Array(b.suffix(4)) == bigEndian(referenceCRC32(body, from: referenceCRC32(body))))

        let decoder = BLIPFrameDecoder()
        #expect(try decoder.decode(a)?.data == body)
        #expect(try decoder.decode(b)?.data == body)
        // A fresh context cannot read the second frame alone.
        #expect(throws: BLIPError.self) { try BLIPFrameDecoder().decode(b) }
        // Uncompressed and ACK frames between compressed ones leave the context alone.
        let c = try encoder.encode(number: 3, flags: BLIPFrameFlags(type: .request), data: [0][...])
        let ack = try encoder.encode(number: 1, flags: BLIPAck(ofResponse: false, number: 1, byteCount: 70_000).flags, data: BLIPVarint.encode(70_000)[...])
        #expect(ack == [0x01, 0x34, 0xF0, 0xA2, 0x04], "no checksum on an ACK")
        let d = try encoder.encode(number: 4, flags: flags, data: body[...])
        #expect(try decoder.decode(c)?.data == [0])
        #expect(try decoder.decode(ack)?.data == [0xF0, 0xA2, 0x04])
        #expect(try decoder.decode(d)?.data == body)
        #expect(decoder.checksum == encoder.checksum)
    }

    @Test func malformedFramesAreRefused() throws {
        expectBLIPError(.badVarint, "empty frame") { _ = try BLIPFrameDecoder().decode([]) }
        expectBLIPError(.badVarint, "no flags") { _ = try BLIPFrameDecoder().decode([0x01]) }
        expectBLIPError(.badVarint, "number over 64 bits") { _ = try BLIPFrameDecoder().decode([UInt8](repeating: 0xFF, count: 11)) }
        expectBLIPError(.truncated, "no checksum") { _ = try BLIPFrameDecoder().decode([0x01, 0x00, 0x00, 0xD2, 0x02]) }
        expectBLIPError(.badChecksum, "wrong checksum") { _ = try BLIPFrameDecoder().decode([0x01, 0x00, 0x00, 0xD2, 0x02, 0xEF, 0x8E]) }
        expectBLIPError(.badCompression, "not deflate") { _ = try BLIPFrameDecoder().decode([0x01, 0x08, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]) }
        // A final block ends the stream; BLIP's stream never ends.
        expectBLIPError(.badCompression, "final block") { _ = try BLIPFrameDecoder().decode([0x01, 0x08, 0x01, 0x01, 0x00, 0xFE, 0xFF, 0x00, 0xD2, 0x02, 0xEF, 0x8D]) }
        var small = BLIPLimits()
        small.maxFrameBytes = 8
        expectBLIPError(.tooLarge, "frame over the limit") { _ = try BLIPFrameDecoder(limits: small).decode([UInt8](repeating: 0, count: 9)) }
        // A deflate bomb: 8 MiB of zeros in a few KiB stops at the inflate limit.
        let bomb = try BLIPFrameEncoder(compressionLevel: 9).encode(number: 1, flags: BLIPFrameFlags(type: .request, .compressed), data: [UInt8](repeating: 0, count: 8 << 20)[...])
        #expect(bomb.count < 16 << 10)
        var tight = BLIPLimits()
        tight.maxInflatedFrameBytes = 1 << 20
        expectBLIPError(.tooLarge, "deflate bomb") { _ = try BLIPFrameDecoder(limits: tight).decode(bomb) }
        #expect(try BLIPFrameDecoder().decode(bomb)?.data.count == 8 << 20)
        // After an error a decoder refuses everything, even a good frame.
        let decoder = BLIPFrameDecoder()
        expectBLIPError(.badChecksum, "wrong checksum") { _ = try decoder.decode([0x01, 0x00, 0x00, 0, 0, 0, 0]) }
        expectBLIPError(.badChecksum, "after a failure") { _ = try decoder.decode([0x01, 0x00, 0x00, 0xD2, 0x02, 0xEF, 0x8D]) }
        // Undefined types are skipped, as LiteCore does; undefined flag bits are ignored.
        #expect(try BLIPFrameDecoder().decode([0x01, 0x03, 0x00]) == nil)
        #expect(try BLIPFrameDecoder().decode([0x01, 0x80, 0x01, 0x00, 0xD2, 0x02, 0xEF, 0x8D])?.flags == BLIPFrameFlags(type: .request))
    }
}

@Suite struct BLIPMessageTests {
    func frame(_ number: UInt64, _ type: BLIPMessageType, _ options: BLIPFrameFlags = [], _ data: [UInt8]) -> BLIPFrame {
        BLIPFrame(number: number, flags: BLIPFrameFlags(type: type, options), data: data, wirePayloadCount: data.count + 4)
    }

    @Test func multiplexedFramesAreReassembled() throws {
        var assembler = BLIPMessageAssembler()
        let one = try BLIPMessage.request(profile: "rev", properties: ["id": "a1"], body: Array("{\"n\":1}".utf8)).payload()
        let two = try BLIPMessage.request(profile: "changes", body: Array("[]".utf8)).payload()
        // REQ #1's first half, REQ #2 whole, REQ #1's second half.
        #expect(try assembler.receive(frame(1, .request, .moreComing, Array(one[..<5]))) == .init())
        let second = try assembler.receive(frame(2, .request, [.urgent, .noReply], two)).message
        #expect(second == BLIPMessage(type: .request, number: 2, flags: [.urgent, .noReply], properties: ["Profile": "changes"], body: Array("[]".utf8)))
        #expect(assembler.partialCount == 1)
        let first = try assembler.receive(frame(1, .request, [], Array(one[5...]))).message
        #expect(first?.properties == ["Profile": "rev", "id": "a1"] && first?.body == Array("{\"n\":1}".utf8) && first?.number == 1)
        #expect(assembler.partialCount == 0)
        // A response and a request of the same number are different messages.
        assembler.expectResponse(to: 3)
        #expect(try assembler.receive(frame(3, .response, .moreComing, [0])) == .init())
        #expect(try assembler.receive(frame(3, .request, [], [0])).message?.type == .request)
        #expect(try assembler.receive(frame(3, .response, [], [0x41])).message == BLIPMessage(type: .response, number: 3, body: [0x41]))
    }

    @Test func numbersThatSkipRepeatOrAnswerNothingAreRefused() throws {
        var a = BLIPMessageAssembler()
        expectBLIPError(.unexpectedMessage, "REQ #2 first") { _ = try a.receive(frame(2, .request, [], [0])) }
        var b = BLIPMessageAssembler()
        _ = try b.receive(frame(1, .request, [], [0]))
        expectBLIPError(.unexpectedMessage, "REQ #1 again") { _ = try b.receive(frame(1, .request, [], [0])) }
        expectBLIPError(.unexpectedMessage, "RES #1 unasked") { _ = try b.receive(frame(1, .response, [], [0])) }
        b.expectResponse(to: 1)
        _ = try b.receive(frame(1, .error, [], [0]))
        expectBLIPError(.unexpectedMessage, "RES #1 twice") { _ = try b.receive(frame(1, .response, [], [0])) }
        b.expectResponse(to: 2)
        _ = try b.receive(frame(2, .response, .moreComing, [0]))
        expectBLIPError(.unexpectedMessage, "RES then ERR") { _ = try b.receive(frame(2, .error, [], [])) }
        var c = BLIPMessageAssembler()
        expectBLIPError(.badVarint, "ACK without a count") { _ = try c.receive(frame(1, .ackRequest, [], [0x80])) }
        expectBLIPError(.truncated, "ends before its properties") { _ = try c.receive(frame(1, .request, [], [5, 0x61])) }
    }

    @Test func partialMessagesAreBounded() throws {
        var limits = BLIPLimits()
        limits.maxPartialMessages = 2
        limits.maxPartialBytes = 100
        limits.maxMessageBytes = 60
        limits.maxPropertiesBytes = 10
        var a = BLIPMessageAssembler(limits: limits)
        _ = try a.receive(frame(1, .request, .moreComing, [0]))
        _ = try a.receive(frame(2, .request, .moreComing, [0]))
        expectBLIPError(.tooLarge, "a third partial message") { _ = try a.receive(frame(3, .request, .moreComing, [0])) }
        var b = BLIPMessageAssembler(limits: limits)
        _ = try b.receive(frame(1, .request, .moreComing, [0] + [UInt8](repeating: 1, count: 49)))
        _ = try b.receive(frame(2, .request, .moreComing, [0] + [UInt8](repeating: 1, count: 49)))
        expectBLIPError(.tooLarge, "partial bytes over 100") { _ = try b.receive(frame(1, .request, .moreComing, [1])) }
        var c = BLIPMessageAssembler(limits: limits)
        _ = try c.receive(frame(1, .request, .moreComing, [0] + [UInt8](repeating: 1, count: 50)))
        expectBLIPError(.tooLarge, "a message over 60") { _ = try c.receive(frame(1, .request, [], [UInt8](repeating: 1, count: 10))) }
        var d = BLIPMessageAssembler(limits: limits)
        expectBLIPError(.tooLarge, "properties announced over the limit") { _ = try d.receive(frame(1, .request, .moreComing, [11])) }
    }

    @Test func errorRepliesCarryDomainAndCode() throws {
        let request = BLIPMessage(type: .request, number: 1, flags: .urgent, properties: ["Profile": "getCheckpoint"])
        let reply = BLIPMessage.error(to: request, BLIPErrorReply(domain: "HTTP", code: 404))
        #expect(reply.type == .error && reply.number == 1 && reply.flags == .urgent)
        #expect(reply.properties.entries == [BLIPProperty("Error-Domain", "HTTP"), BLIPProperty("Error-Code", "404")])
        #expect(reply.errorReply == BLIPErrorReply(domain: "HTTP", code: 404))
        // On the wire: 02 (number 1 → 01), flags 12, 33-byte block, no body, as LiteCore's ERR #1 (40 bytes).
        let bytes = try BLIPFrameEncoder().encode(number: 1, flags: BLIPFrameFlags(type: .error), data: BLIPMessage.error(to: BLIPMessage(type: .request, number: 1), BLIPErrorReply(domain: "HTTP", code: 404)).payload()[...])
        #expect(bytes.count == 40 && bytes[0...2] == [0x01, 0x02, 33])
        // Defaults: no domain is BLIP, a code that is not a number reads 0; the body is the message.
        let odd = BLIPMessage(type: .error, number: 2, properties: ["Error-Code": "x"], body: Array("no handler".utf8))
        #expect(odd.errorReply == BLIPErrorReply(domain: "BLIP", code: 0, message: "no handler"))
        #expect(BLIPMessage(type: .response, number: 2).errorReply == nil)
        #expect(BLIPMessage.response(to: request).flags == .urgent)
    }
}

@Suite struct BLIPOutboxTests {
    func drain(_ outbox: inout BLIPOutbox, _ encoder: BLIPFrameEncoder) throws -> [BLIPOutbox.Frame] {
        var out: [BLIPOutbox.Frame] = []
        while let f = try outbox.nextFrame(encoder) { out.append(f) }
        return out
    }

    @Test func largeMessagesAreCutIntoFramesAndInterleaved() throws {
        var outbox = BLIPOutbox()
        let encoder = BLIPFrameEncoder()
        let big = BLIPMessage.request(profile: "rev", body: [UInt8](repeating: 7, count: 40_000))
        try outbox.send(big)
        try outbox.send(BLIPMessage.request(profile: "changes"))
        let frames = try drain(&outbox, encoder)
        // Round-robin: #1's first frame, #2 whole, then the rest of #1.
        #expect(frames.map(\.number) == [1, 2, 1, 1])
        #expect(frames.map { $0.flags.contains(.moreComing) } == [true, false, true, false])
        #expect(frames.allSatisfy { $0.bytes.count <= BLIPOutbox.frameSize })
        #expect(frames[0].bytes.count == BLIPOutbox.frameSize)
        #expect(frames.map(\.awaitsResponse) == [false, true, false, true])

        let decoder = BLIPFrameDecoder()
        var assembler = BLIPMessageAssembler()
        var got: [BLIPMessage] = []
        for f in frames { if let m = try assembler.receive(try #require(try decoder.decode(f.bytes))).message { got.append(m) } }
        var numbered = big
        numbered.number = 1
        #expect(got.map(\.number) == [2, 1] && got[1] == numbered)
    }

    @Test func urgentMessagesFollowTheSpecsQueueRule() throws {
        let encoder = BLIPFrameEncoder()
        func kinds(_ frames: [BLIPOutbox.Frame]) -> [String] { frames.map { "\($0.flags.contains(.urgent) ? "U" : "N")\($0.number)" } }
        // An urgent message queued behind nothing urgent goes after the first normal message.
        var a = BLIPOutbox()
        try a.send(.request(profile: "n", body: [UInt8](repeating: 1, count: 20_000)))   // N1, two frames
        try a.send(.request(profile: "n", body: [UInt8](repeating: 1, count: 20_000)))   // N2
        _ = try a.nextFrame(encoder)                                                     // N1 begun, requeued behind N2
        _ = try a.nextFrame(encoder)                                                     // N2 begun, requeued behind N1
        try a.send(.request(profile: "u", flags: .urgent))                               // U3
        #expect(kinds(try drain(&a, encoder)) == ["N1", "U3", "N2"])
        // A new urgent message never overtakes a message not yet begun: requests begin in order.
        var b = BLIPOutbox()
        try b.send(.request(profile: "n", body: [UInt8](repeating: 1, count: 20_000)))
        _ = try b.nextFrame(encoder)                                                     // N1 begun
        try b.send(.request(profile: "n"))                                               // N2, not begun
        try b.send(.request(profile: "u", flags: .urgent))                               // U3
        #expect(kinds(try drain(&b, encoder)) == ["N1", "N2", "U3"])
        // Behind the last urgent message, one normal message further back: normal ones are not starved.
        var c = BLIPOutbox()
        for _ in 0..<3 { try c.send(.request(profile: "n", body: [UInt8](repeating: 1, count: 20_000))) }
        for _ in 0..<3 { _ = try c.nextFrame(encoder) }                                 // N1 N2 N3 begun
        try c.send(.request(profile: "u", flags: .urgent))                             // U4 after N1
        try c.send(.request(profile: "u", flags: .urgent))                               // U5 after U4 and N2
        #expect(kinds(try drain(&c, encoder)) == ["N1", "U4", "N2", "U5", "N3"])
        // A normal frame is small while an urgent message waits right behind it.
        var d = BLIPOutbox()
        try d.send(.request(profile: "n", body: [UInt8](repeating: 1, count: 40_000)))
        try d.send(.request(profile: "m"))
        _ = try d.nextFrame(encoder)
        _ = try d.nextFrame(encoder)
        try d.send(.request(profile: "u", flags: .urgent))                               // queue: N1, U3
        let small = try #require(try d.nextFrame(encoder))
        #expect(small.number == 1 && small.bytes.count == BLIPOutbox.smallFrameSize)
    }

    @Test func ackFlowControlPausesAndResumesAMessage() throws {
        let sender = BLIPMultiplexer(), receiver = BLIPMultiplexer()
        try sender.send(.request(profile: "getAttachment", body: [UInt8](repeating: 3, count: 400_000)))
        // Without ACKs the sender stops once 128,000 bytes are unacknowledged: 8 frames of 16,382
        // bytes after their 2-byte header (131,056).
        var frames: [[UInt8]] = []
        while let f = try sender.nextFrame() { frames.append(f) }
        #expect(frames.count == 8 && !sender.hasFrameReady)
        // The receiver acknowledges every 50,000 bytes: after frame 4 (65,528) and frame 8 (131,056).
        var acks: [[UInt8]] = []
        for f in frames {
            #expect(try receiver.receive(f) == nil)
            while let a = try receiver.nextFrame() { acks.append(a) }
        }
        #expect(acks == [[0x01, 0x34] + BLIPVarint.encode(65_528), [0x01, 0x34] + BLIPVarint.encode(131_056)])
        // The first ACK leaves 65,528 unacknowledged, under the limit: the message resumes.
        #expect(try sender.receive(acks[0]) == nil)
        #expect(sender.hasFrameReady)
        var message: BLIPMessage?
        var rounds = 0
        while message == nil && rounds < 100 {
            rounds += 1
            while let f = try sender.nextFrame() {
                if let m = try receiver.receive(f) { message = m }
                while let a = try receiver.nextFrame() { _ = try sender.receive(a) }
            }
        }
        #expect(message?.body.count == 400_000 && message?.number == 1)
    }
}
