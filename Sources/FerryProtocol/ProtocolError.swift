/// Why a frame from a peer was refused. Every such error ends the connection (a close frame
/// with `closeCode`) after nothing from the frame was written anywhere.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of violation.
    public enum Code: String, Sendable {
        /// Not JSON, not an object, or a field of the wrong type.
        case malformed
        /// A message type this version does not know.
        case unknownType
        /// Larger than the limits allow.
        case tooLarge
        /// An invalid document id, revision id, digest or sequence.
        case invalidField
        /// No protocol version in common.
        case unsupportedVersion
        /// A message out of order (before `hello`, a response to nothing, a duplicate request number).
        case outOfOrder
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

    /// The WebSocket close code to send: 1009 for too large, 1002 for everything else.
    public var closeCode: UInt16 { code == .tooLarge ? 1009 : 1002 }

    /// "peer protocol error (code): message".
    public var description: String { "peer protocol error (\(code.rawValue)): \(message)" }
}

/// Limits every incoming frame is checked against before anything is decoded further.
public struct ProtocolLimits: Sendable, Equatable {
    /// Largest text frame (a JSON document's body travels in one): the largest JSON document
    /// ferry records plus room for the envelope.
    public var maxTextFrameBytes = (64 << 20) + (64 << 10)
    /// Largest binary frame (a blob chunk plus its header).
    public var maxBinaryFrameBytes = (1 << 20) + BlobChunk.headerSize
    /// Most entries in one `changes` or `proposeChanges` message.
    public var maxChangesPerMessage = 1_000
    /// Longest revision history carried by one `rev`.
    public var maxHistory = 10_000

    /// The defaults.
    public init() {}
}
