/// Both directions of one BLIP connection, without I/O: the caller hands it each binary
/// WebSocket message received and writes out each frame it pulls. It wires the parts
/// together the way LiteCore's connection does: the peer's ACKs resume paused messages, this
/// side's ACKs are queued as they fall due, and a response is accepted only for a request
/// of ours that went out in full and wants one.
public final class BLIPMultiplexer {
    private let encoder: BLIPFrameEncoder
    private let decoder: BLIPFrameDecoder
    private var outbox: BLIPOutbox
    private var assembler: BLIPMessageAssembler

    /// A connection's state; `compressionLevel` is zlib's (LiteCore uses 6).
    public init(limits: BLIPLimits = BLIPLimits(), compressionLevel: Int32 = 6) {
        encoder = BLIPFrameEncoder(compressionLevel: compressionLevel)
        decoder = BLIPFrameDecoder(limits: limits)
        outbox = BLIPOutbox(limits: limits)
        assembler = BLIPMessageAssembler(limits: limits)
    }

    /// Queues a message; returns its number (a request's is assigned here).
    @discardableResult
    public func send(_ message: BLIPMessage) throws(BLIPError) -> UInt64 {
        try outbox.send(message)
    }

    /// Takes one frame from the peer; returns the message it completed, if any.
    public func receive(_ frame: ArraySlice<UInt8>) throws(BLIPError) -> BLIPMessage? {
        guard let decoded = try decoder.decode(frame) else { return nil }
        let received = try assembler.receive(decoded)
        if let ack = received.ackReceived { outbox.receivedAck(ack) }
        if let ack = received.ackToSend { outbox.sendAck(ack) }
        return received.message
    }

    /// Takes one frame from the peer given as an array.
    public func receive(_ frame: [UInt8]) throws(BLIPError) -> BLIPMessage? {
        try receive(frame[...])
    }

    /// The next frame to write, or nil when nothing is ready (all sent, or paused for ACKs).
    public func nextFrame() throws(BLIPError) -> [UInt8]? {
        guard let frame = try outbox.nextFrame(encoder) else { return nil }
        if frame.awaitsResponse { assembler.expectResponse(to: frame.number) }
        return frame.bytes
    }

    /// True when a frame is ready to write.
    public var hasFrameReady: Bool { outbox.hasFrameReady }
}
