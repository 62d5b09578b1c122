/// The three-bit type in a frame's flags.
public enum BLIPMessageType: UInt8, Sendable, CaseIterable {
    /// A request (MSG in the spec, REQ in LiteCore's logs).
    case request = 0
    /// A response to a request.
    case response = 1
    /// A response that reports a failure (`Error-Domain`, `Error-Code`).
    case error = 2
    /// Flow control: bytes received so far of a request.
    case ackRequest = 4
    /// Flow control: bytes received so far of a response.
    case ackResponse = 5

    /// True for `response` and `error`, which share the numbers of the requests they answer.
    public var isResponse: Bool { self == .response || self == .error }
    /// True for the two ACK types, which carry no checksum and never go through deflate.
    public var isAck: Bool { self == .ackRequest || self == .ackResponse }

    /// LiteCore's log name: REQ, RES, ERR, ACKREQ, ACKRES.
    public var name: String {
        switch self {
        case .request: "REQ"
        case .response: "RES"
        case .error: "ERR"
        case .ackRequest: "ACKREQ"
        case .ackResponse: "ACKRES"
        }
    }
}

/// A frame's flags byte: the message type in the low three bits, then four flags.
public struct BLIPFrameFlags: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// The byte as on the wire (bit 7 is undefined and dropped when read).
    public var rawValue: UInt8

    /// Flags from their byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The three type bits.
    public static let typeMask: UInt8 = 0x07
    /// This frame's data went through the direction's deflate context.
    public static let compressed = BLIPFrameFlags(rawValue: 0x08)
    /// The message jumps the queue (the spec's urgent rule).
    public static let urgent = BLIPFrameFlags(rawValue: 0x10)
    /// A request that gets no response.
    public static let noReply = BLIPFrameFlags(rawValue: 0x20)
    /// More frames of this message follow.
    public static let moreComing = BLIPFrameFlags(rawValue: 0x40)

    /// Flags for a frame of `type` with `options` (type bits in `options` are ignored).
    public init(type: BLIPMessageType, _ options: BLIPFrameFlags = []) {
        rawValue = type.rawValue | (options.rawValue & ~Self.typeMask)
    }

    /// The message type, or nil for the three values BLIP leaves undefined (3, 6, 7).
    public var type: BLIPMessageType? { BLIPMessageType(rawValue: rawValue & Self.typeMask) }

    /// The flags without the type bits.
    public var options: BLIPFrameFlags { BLIPFrameFlags(rawValue: rawValue & ~Self.typeMask) }

    /// LiteCore's letters, as in the captures' decoded text: Z compressed, U urgent, N no-reply, M more coming.
    public var description: String {
        var s = ""
        if contains(.compressed) { s += "Z" }
        if contains(.urgent) { s += "U" }
        if contains(.noReply) { s += "N" }
        if contains(.moreComing) { s += "M" }
        return s
    }
}
