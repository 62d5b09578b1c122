/// `ferry/1` on the wire: what a WebSocket text or binary frame carries.

/// One text frame: a request with its number, or a response to a numbered request.
public enum Frame: Sendable, Equatable {
    /// A request; `number` is unique per direction; `noReply` requests get no response.
    case request(number: Int, noReply: Bool, Request)
    /// A response to the request `number` of the other side.
    case response(to: Int, Response)
}

/// One binary frame: a chunk of a blob answering a `getAttachment` request.
public struct BlobChunk: Sendable, Equatable {
    /// Header: 4 bytes request number (big-endian), 1 byte flags (bit 0: last chunk).
    public static let headerSize = 5
    /// The `getAttachment` request this answers.
    public var requestNumber: UInt32
    /// True on the final chunk.
    public var isLast: Bool
    /// The bytes (a slice: a received chunk is not copied out of its frame).
    public var bytes: ArraySlice<UInt8>

    /// A chunk.
    public init(requestNumber: UInt32, isLast: Bool, bytes: ArraySlice<UInt8>) {
        self.requestNumber = requestNumber
        self.isLast = isLast
        self.bytes = bytes
    }

    /// The frame's bytes.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.headerSize + bytes.count)
        out += [UInt8(requestNumber >> 24), UInt8((requestNumber >> 16) & 0xFF), UInt8((requestNumber >> 8) & 0xFF), UInt8(requestNumber & 0xFF)]
        out.append(isLast ? 1 : 0)
        out += bytes
        return out
    }

    /// Decodes a binary frame.
    public static func decode(_ frame: [UInt8], limits: ProtocolLimits = ProtocolLimits()) throws(ProtocolError) -> BlobChunk {
        guard frame.count <= limits.maxBinaryFrameBytes else {
            throw ProtocolError(.tooLarge, "binary frame of \(frame.count) bytes exceeds \(limits.maxBinaryFrameBytes)")
        }
        guard frame.count >= headerSize else { throw ProtocolError(.malformed, "binary frame shorter than its header") }
        guard frame[4] & ~1 == 0 else { throw ProtocolError(.malformed, "unknown flags in binary frame") }
        let number = UInt32(frame[0]) << 24 | UInt32(frame[1]) << 16 | UInt32(frame[2]) << 8 | UInt32(frame[3])
        return BlobChunk(requestNumber: number, isLast: frame[4] & 1 == 1, bytes: frame[headerSize...])
    }
}
