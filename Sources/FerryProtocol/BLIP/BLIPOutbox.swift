/// The sending side of a BLIP connection: queued messages cut into frames, one frame per
/// turn in round-robin, with the spec's urgent rule and LiteCore's flow control. The caller
/// pulls frames (`nextFrame`) when its transport can take one, so nothing here blocks.
public struct BLIPOutbox: Sendable {
    /// Largest frame (header, data, checksum), as LiteCore's `kBigFrameSize`.
    public static let frameSize = 16_384
    /// A normal message's frame while an urgent one waits right behind it (LiteCore's
    /// `kDefaultFrameSize`), so the urgent one is not held up by a big frame.
    public static let smallFrameSize = 4_096
    /// A message whose unacknowledged bytes reach this is paused until an ACK comes
    /// (LiteCore's `kMaxUnackedBytes`).
    public static let maxUnackedBytes = 128_000

    /// A frame ready for the wire.
    public struct Frame: Sendable, Equatable {
        /// The frame's bytes: one WebSocket binary message.
        public var bytes: [UInt8]
        /// Its message number.
        public var number: UInt64
        /// Its flags (type included).
        public var flags: BLIPFrameFlags
        /// True on the last frame of a request that wants a response: the response may come now.
        public var awaitsResponse: Bool
    }

    private struct Outgoing: Sendable {
        var number: UInt64
        var flags: BLIPFrameFlags          // type included, never moreComing
        var payload: [UInt8]
        var offset = 0
        var bytesSent = 0
        var unackedBytes = 0

        var urgent: Bool { flags.contains(.urgent) }
        var isNew: Bool { bytesSent == 0 }
        var isResponse: Bool { flags.type?.isResponse ?? false }
    }

    private var queue: [Outgoing] = []
    private var paused: [Outgoing] = []
    private var lastRequestNumber: UInt64 = 0
    private let limits: BLIPLimits

    /// An empty outbox; `limits` bounds the property blocks it encodes.
    public init(limits: BLIPLimits = BLIPLimits()) {
        self.limits = limits
    }

    /// True when a frame is ready to send (paused messages wait for their ACK).
    public var hasFrameReady: Bool { !queue.isEmpty }
    /// Messages queued or paused.
    public var pendingCount: Int { queue.count + paused.count }

    /// Queues a message and returns its number: a request gets the next request number (its
    /// own `number` is ignored); a response or error keeps the number of the request it answers.
    @discardableResult
    public mutating func send(_ message: BLIPMessage) throws(BLIPError) -> UInt64 {
        precondition(!message.type.isAck, "ACKs are queued with sendAck")
        // Encoded before a number is taken: one that cannot be sent must not leave a gap, which
        // the peer would take for a lost message.
        let payload = try message.payload(limits: limits)
        var number = message.number
        if message.type == .request {
            lastRequestNumber += 1
            number = lastRequestNumber
        }
        enqueue(Outgoing(number: number, flags: message.frameFlags, payload: payload))
        return number
    }

    /// Queues an ACK (urgent, like every ACK).
    public mutating func sendAck(_ ack: BLIPAck) {
        enqueue(Outgoing(number: ack.number, flags: ack.flags, payload: BLIPVarint.encode(ack.byteCount)))
    }

    /// Applies the peer's ACK: a paused message whose unacknowledged bytes fall under the
    /// limit goes back in the queue. An ACK of a message no longer here is ignored.
    public mutating func receivedAck(_ ack: BLIPAck) {
        func apply(_ m: inout Outgoing) {
            let sent = UInt64(m.bytesSent)
            if ack.byteCount <= sent { m.unackedBytes = min(m.unackedBytes, Int(sent - ack.byteCount)) }
        }
        func matches(_ m: Outgoing) -> Bool { m.number == ack.number && m.isResponse == ack.ofResponse && !(m.flags.type?.isAck ?? true) }
        if let i = queue.firstIndex(where: matches) {
            apply(&queue[i])
        } else if let i = paused.firstIndex(where: matches) {
            apply(&paused[i])
            if paused[i].unackedBytes < Self.maxUnackedBytes {
                requeue(paused.remove(at: i))
            }
        }
    }

    /// Encodes the next frame with `encoder` (this direction's codec), or nil when nothing is
    /// ready. Frames must go on the wire in the order they come out of here.
    public mutating func nextFrame(_ encoder: BLIPFrameEncoder) throws(BLIPError) -> Frame? {
        guard !queue.isEmpty else { return nil }
        var m = queue.removeFirst()
        let size = (m.urgent || queue.first.map { !$0.urgent } ?? true) ? Self.frameSize : Self.smallFrameSize
        let header = BLIPVarint.encode(m.number).count + 1
        let room = max(1, size - header - (m.flags.type?.isAck == true ? 0 : 4))
        let end = min(m.payload.count, m.offset + room)
        var flags = m.flags
        let more = end < m.payload.count
        if more { flags.insert(.moreComing) }
        let bytes = try encoder.encode(number: m.number, flags: flags, data: m.payload[m.offset..<end])
        let sent = bytes.count - BLIPVarint.encode(m.number).count - BLIPVarint.encode(UInt64(flags.rawValue)).count
        m.offset = end
        m.bytesSent += sent
        m.unackedBytes += sent
        if more {
            if m.unackedBytes >= Self.maxUnackedBytes { paused.append(m) } else { requeue(m) }
        } else {
            m.payload = []
        }
        let awaits = !more && m.flags.type == .request && !m.flags.contains(.noReply)
        return Frame(bytes: bytes, number: m.number, flags: flags, awaitsResponse: awaits)
    }

    private mutating func enqueue(_ m: Outgoing) {
        requeue(m)
    }

    /// The spec's queue order (sec. 3.2): a normal message goes to the tail (round-robin); an
    /// urgent one goes after the last urgent message, one normal message further back when
    /// there is one, so normal messages are not starved; a new urgent message never goes
    /// before a message not yet begun, so messages begin in number order.
    private mutating func requeue(_ m: Outgoing) {
        var i = queue.count
        if m.urgent && queue.count > 1 {
            while true {
                i -= 1
                if queue[i].urgent {
                    if i + 1 != queue.count { i += 1 }
                    break
                } else if m.isNew && queue[i].isNew {
                    break
                }
                if i == 0 { break }
            }
            i += 1
        }
        queue.insert(m, at: i)
    }
}
