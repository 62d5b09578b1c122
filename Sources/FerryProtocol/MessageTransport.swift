/// One message from the other side of a connection.
public enum TransportMessage: Sendable, Equatable {
    /// A text frame's bytes (UTF-8 JSON in `ferry/1`).
    case text([UInt8])
    /// A binary frame's bytes.
    case binary([UInt8])
}

/// A message-framed connection to a peer: what the replication logic needs from a transport
/// (the WebSocket of `FerryNet` today; a BLIP framing or an in-memory pair could serve too).
public protocol MessageTransport: Sendable {
    /// Incoming messages, in order; finishes when the connection closes.
    var inbound: AsyncStream<TransportMessage> { get }
    /// Sends a text message.
    func send(text: [UInt8]) async throws
    /// Sends a binary message.
    func send(binary: [UInt8]) async throws
    /// Closes with a code and reason and waits until the connection has ended.
    func close(code: UInt16, reason: String) async
    /// How the connection ended ("1001: listener stopped"); nil while it is open.
    var closeDescription: String? { get }
}
