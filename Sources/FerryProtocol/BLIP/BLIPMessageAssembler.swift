/// Turns the peer's decoded frames into complete messages. Messages are multiplexed, so
/// frames of several interleave; partial ones are kept by (request or response, number),
/// bounded in count and bytes. It enforces BLIP's numbering: a request begins at the number
/// after the last one begun, a response answers a request of ours that is still waiting.
/// It counts what arrives of each message and says when to acknowledge it.
public struct BLIPMessageAssembler: Sendable {
    /// Bytes of one message received between two ACKs: LiteCore's `kIncomingAckThreshold`.
    public static let ackInterval = 50_000

    /// What one frame produced.
    public struct Received: Sendable, Equatable {
        /// A message this frame completed.
        public var message: BLIPMessage?
        /// An ACK this side should send now (the peer pauses the message without it).
        public var ackToSend: BLIPAck?
        /// An ACK the peer sent, for the outgoing side.
        public var ackReceived: BLIPAck?

        /// Nothing yet.
        public init(message: BLIPMessage? = nil, ackToSend: BLIPAck? = nil, ackReceived: BLIPAck? = nil) {
            self.message = message
            self.ackToSend = ackToSend
            self.ackReceived = ackReceived
        }
    }

    private struct Key: Hashable, Sendable {
        var isResponse: Bool
        var number: UInt64
    }

    private struct Partial: Sendable {
        var type: BLIPMessageType
        var flags: BLIPFrameFlags
        var data: [UInt8]
        var wireBytes: UInt64
        var unackedBytes: Int
    }

    private let limits: BLIPLimits
    private var lastRequestBegun: UInt64 = 0
    private var awaitingResponse: Set<UInt64> = []
    private var partial: [Key: Partial] = [:]
    private var partialBytes = 0

    /// An assembler bounded by `limits`.
    public init(limits: BLIPLimits = BLIPLimits()) {
        self.limits = limits
    }

    /// Records that request `number` of ours went out in full and wants an answer: only then
    /// may the peer's response frames for it arrive.
    public mutating func expectResponse(to number: UInt64) {
        awaitingResponse.insert(number)
    }

    /// The number of the peer's last request begun.
    public var lastRequestNumber: UInt64 { lastRequestBegun }

    /// Messages partly received.
    public var partialCount: Int { partial.count }

    /// Takes the next frame from the peer (in arrival order).
    public mutating func receive(_ frame: BLIPFrame) throws(BLIPError) -> Received {
        let type = frame.type
        if type.isAck {
            let count = try BLIPVarint.decode(frame.data[...])
            return Received(ackReceived: BLIPAck(ofResponse: type == .ackResponse, number: frame.number, byteCount: count))
        }
        let key = Key(isResponse: type.isResponse, number: frame.number)
        let more = frame.flags.contains(.moreComing)
        var message: Partial
        if let existing = partial.removeValue(forKey: key) {
            guard existing.type == type else {
                throw BLIPError(.unexpectedMessage, "\(type.name) #\(frame.number) continues a \(existing.type.name)")
            }
            message = existing
            partialBytes -= existing.data.count
        } else {
            try begin(type, frame.number)
            message = Partial(type: type, flags: frame.flags.options.subtracting(.moreComing), data: [], wireBytes: 0, unackedBytes: 0)
        }
        guard frame.data.count <= limits.maxMessageBytes - message.data.count else {
            throw BLIPError(.tooLarge, "\(type.name) #\(frame.number) grows over \(limits.maxMessageBytes) bytes")
        }
        message.data += frame.data
        message.wireBytes += UInt64(frame.wirePayloadCount)
        message.unackedBytes += frame.wirePayloadCount
        if message.data.count == frame.data.count {
            try checkPropertyLength(message, frame.number)
        }

        guard more else {
            let done = try BLIPMessage.decode(type: type, number: frame.number, flags: message.flags, payload: message.data, limits: limits)
            return Received(message: done)
        }
        guard partial.count < limits.maxPartialMessages else {
            throw BLIPError(.tooLarge, "over \(limits.maxPartialMessages) messages partly received at once")
        }
        guard message.data.count <= limits.maxPartialBytes - partialBytes else {
            throw BLIPError(.tooLarge, "partly received messages over \(limits.maxPartialBytes) bytes")
        }
        var ack: BLIPAck?
        // No ACK after a message's last frame: LiteCore's sender ignores ACKs of messages it finished.
        if message.unackedBytes >= Self.ackInterval {
            ack = BLIPAck(ofResponse: type.isResponse, number: frame.number, byteCount: message.wireBytes)
            message.unackedBytes = 0
        }
        partialBytes += message.data.count
        partial[key] = message
        return Received(ackToSend: ack)
    }

    private mutating func begin(_ type: BLIPMessageType, _ number: UInt64) throws(BLIPError) {
        if type.isResponse {
            guard awaitingResponse.remove(number) != nil else {
                throw BLIPError(.unexpectedMessage, "\(type.name) #\(number) answers no request waiting for one")
            }
        } else {
            guard number == lastRequestBegun &+ 1 else {
                let why = number <= lastRequestBegun ? "already received" : "skips from #\(lastRequestBegun)"
                throw BLIPError(.unexpectedMessage, "REQ #\(number): \(why)")
            }
            lastRequestBegun = number
        }
    }

    /// Refuses an oversized property block on the first frame, before any more of it is held.
    private func checkPropertyLength(_ message: Partial, _ number: UInt64) throws(BLIPError) {
        var i = 0
        guard let length = try? BLIPVarint.read(message.data[...], at: &i) else { return }
        if length > UInt64(limits.maxPropertiesBytes) {
            throw BLIPError(.tooLarge, "\(message.type.name) #\(number): properties of \(length) bytes, over \(limits.maxPropertiesBytes)")
        }
    }
}
