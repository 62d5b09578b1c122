/// One message from the other side of a connection.
public enum TransportMessage: Sendable, Equatable {
    /// A text frame's bytes (UTF-8 JSON in `ferry/1`).
    case text([UInt8])
    /// A binary frame's bytes.
    case binary([UInt8])

    /// The message's bytes, whichever kind it is.
    public var bytes: [UInt8] {
        switch self {
        case .text(let bytes), .binary(let bytes): bytes
        }
    }
}

/// A message-framed connection to a peer: what the replication logic needs from a transport
/// (the WebSocket of `FerryNet` today; a BLIP framing or an in-memory pair could serve too).
public protocol MessageTransport: Sendable {
    /// Incoming messages, in order; finishes when the connection closes. Bounded: while it is
    /// full the transport reads nothing more from the peer.
    var inbound: TransportInbox { get }
    /// Queues a message behind every message queued before it and returns at once: the order
    /// of the calls is the order on the wire. (It is not `async` on purpose: an async send
    /// starts off the caller's actor, so two sends from one actor could swap.) Wait on the
    /// result to know it was sent and to keep the bytes in flight bounded.
    func enqueue(_ message: TransportMessage) -> TransportWrite
    /// Queues several messages, in order, as `enqueue` does each; a transport that can sends
    /// them in one write (a sender's burst) instead of one write each.
    func enqueue(_ messages: [TransportMessage]) -> [TransportWrite]
    /// Closes with a code and reason and waits until the connection has ended.
    func close(code: UInt16, reason: String) async
    /// How the connection ended ("1001: listener stopped"); nil while it is open.
    var closeDescription: String? { get }
    /// What the connection speaks (a WebSocket's agreed subprotocol).
    var wireFormat: WireFormat { get }
}

extension MessageTransport {
    /// One `enqueue` per message, for transports that have no cheaper way.
    public func enqueue(_ messages: [TransportMessage]) -> [TransportWrite] { messages.map { enqueue($0) } }

    /// Transports that do not negotiate (in-memory pairs in tests) speak `ferry/1`.
    public var wireFormat: WireFormat { .ferry1 }
}

/// A message queued on a transport.
public struct TransportWrite: Sendable {
    private let waiter: @Sendable () async throws -> Void

    /// A write that is sent when `waiter` returns (or has failed when it throws).
    public init(_ waiter: @escaping @Sendable () async throws -> Void) {
        self.waiter = waiter
    }

    /// Waits until the message is sent; throws if it cannot be.
    public func sent() async throws { try await waiter() }
}

extension MessageTransport {
    /// Sends a text message and waits until it is sent.
    public func send(text: [UInt8]) async throws { try await enqueue(.text(text)).sent() }

    /// Sends a binary message and waits until it is sent.
    public func send(binary: [UInt8]) async throws { try await enqueue(.binary(binary)).sent() }
}
