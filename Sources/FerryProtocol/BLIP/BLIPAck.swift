/// A flow-control acknowledgement: how many bytes of one message have arrived.
public struct BLIPAck: Sendable, Equatable {
    /// True when it acknowledges a response (ACKRES), false for a request (ACKREQ).
    public var ofResponse: Bool
    /// The acknowledged message's number.
    public var number: UInt64
    /// Bytes of the message's frames received so far, counted after each frame's header
    /// (compressed data and checksum), as LiteCore counts them on both sides.
    public var byteCount: UInt64

    /// An acknowledgement.
    public init(ofResponse: Bool, number: UInt64, byteCount: UInt64) {
        self.ofResponse = ofResponse
        self.number = number
        self.byteCount = byteCount
    }

    /// The ACK message type it travels as.
    public var type: BLIPMessageType { ofResponse ? .ackResponse : .ackRequest }

    /// The ACK's frame flags: urgent and no-reply, as LiteCore sends them.
    public var flags: BLIPFrameFlags { BLIPFrameFlags(type: type, [.urgent, .noReply]) }
}
