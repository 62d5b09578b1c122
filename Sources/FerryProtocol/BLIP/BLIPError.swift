/// Why BLIP bytes from a peer (or a message ferry was asked to send) were refused. A BLIP
/// connection that meets one is closed: the codec's state (deflate window, running CRC,
/// message numbering) cannot be trusted after it.
public struct BLIPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of violation; tests and logs tell the classes apart by it.
    public enum Code: String, Sendable {
        /// A varint runs past the end of its bytes or past 64 bits.
        case badVarint
        /// A frame too short for its header, its checksum or its properties.
        case truncated
        /// The running CRC32 in a frame does not match the bytes received so far.
        case badChecksum
        /// Compressed data zlib cannot inflate, or a deflate stream that ended.
        case badCompression
        /// Over one of `BLIPLimits` (a frame, an inflated frame, properties, a message, partial messages).
        case tooLarge
        /// A property block without its final NUL, with an odd number of strings, or not UTF-8.
        case badProperties
        /// A frame for a message number that is not expected (skipped, repeated, or never requested).
        case unexpectedMessage
        /// Something ferry was asked to send that BLIP cannot carry (a NUL in a property).
        case unencodable
    }

    /// The kind.
    public let code: Code
    /// One sentence for logs and the close frame's reason.
    public let message: String

    /// An error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The WebSocket close code to send: 1009 when too large, 1002 otherwise (as `ProtocolError`).
    public var closeCode: UInt16 { code == .tooLarge ? 1009 : 1002 }

    /// "BLIP error (code): message".
    public var description: String { "BLIP error (\(code.rawValue)): \(message)" }
}

/// Bounds on what a peer can make ferry hold; every one is checked before memory is used for it.
public struct BLIPLimits: Sendable, Equatable {
    /// Largest frame on the wire (a WebSocket message). LiteCore's frames are at most 16 KiB.
    public var maxFrameBytes = 1 << 20
    /// Most bytes one compressed frame may inflate to: a small frame of a deflate bomb stops
    /// here. LiteCore packs as much input as fits 16 KiB of output, so highly repetitive data
    /// legitimately inflates far beyond the frame's size.
    public var maxInflatedFrameBytes = 16 << 20
    /// Largest property block (LiteCore's own limit, `kMaxPropertiesSize`).
    public var maxPropertiesBytes = 100 << 10
    /// Largest message (properties and body, uncompressed): ferry's largest JSON document plus room.
    public var maxMessageBytes = (64 << 20) + (64 << 10)
    /// Most messages of the peer's partly received at once.
    public var maxPartialMessages = 256
    /// Most bytes held across all partly received messages.
    public var maxPartialBytes = 128 << 20

    /// The defaults.
    public init() {}
}
