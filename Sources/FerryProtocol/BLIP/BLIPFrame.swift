/// One BLIP frame as read off the wire: its header, and its data inflated and checked.
public struct BLIPFrame: Sendable, Equatable {
    /// The message number (a response carries its request's).
    public var number: UInt64
    /// The flags, type included.
    public var flags: BLIPFrameFlags
    /// The message data this frame carries, uncompressed (for an ACK: its varint byte count).
    public var data: [UInt8]
    /// Bytes after the header as sent (compressed data and checksum): what ACKs count.
    public var wirePayloadCount: Int

    /// A frame.
    public init(number: UInt64, flags: BLIPFrameFlags, data: [UInt8], wirePayloadCount: Int) {
        self.number = number
        self.flags = flags
        self.data = data
        self.wirePayloadCount = wirePayloadCount
    }

    /// The message type; a decoded frame always has one (frames of undefined types are skipped).
    public var type: BLIPMessageType { flags.type ?? .request }
}

/// The four bytes a zlib sync flush ends with; BLIP leaves them off every compressed frame.
let blipDeflateTrailer: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]
