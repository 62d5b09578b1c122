import FerryProtocol
import Foundation
import NIOCore
import NIOWebSocket

/// One WebSocket message from the peer.
public typealias WebSocketMessage = TransportMessage

/// How a connection ended.
public struct CloseReason: Sendable, Equatable, CustomStringConvertible {
    /// The WebSocket close code (1006 when the connection dropped without a close frame).
    public var code: UInt16
    /// The reason text the peer gave, if any.
    public var reason: String

    /// "code: reason".
    public var description: String { reason.isEmpty ? "\(code)" : "\(code): \(reason)" }
}

/// An open WebSocket to a peer, as async values: everything NIO stays behind this type.
/// Incoming messages arrive on `inbound` (which finishes when the connection closes);
/// `enqueue` (or `send`) writes one frame; `close` sends a close frame and waits for the connection to end.
public final class PeerConnection: MessageTransport {
    /// Incoming messages, in order (bounded: while full, the socket is not read).
    public var inbound: TransportInbox { bridge.inbox }
    /// Who the peer is (address), for logs.
    public let remoteDescription: String
    /// What the connection speaks (the subprotocol both ends agreed on).
    public let wireFormat: WireFormat
    /// The peer's address as `IP:port` (`[IPv6]:port`), for logs and `ferry status`.
    public let remoteAddress: String
    /// The user the listener authenticated (HTTP Basic); nil when it checks no passwords, and
    /// on the dialing side.
    public let user: String?
    /// The path the peer asked for (`/DB` or `/DB/_blipsync`); empty on the dialing side.
    public let path: String
    /// When the connection became a WebSocket.
    public let since = Date()
    let channel: Channel
    let bridge: WebSocketBridge
    private let flushes: CoalescedFlush

    init(channel: Channel, bridge: WebSocketBridge, wireFormat: WireFormat, user: String? = nil, path: String = "") {
        self.channel = channel
        self.bridge = bridge
        self.flushes = CoalescedFlush(channel: channel)
        self.wireFormat = wireFormat
        self.user = user
        self.path = path
        self.remoteDescription = channel.remoteAddress?.description ?? "unknown peer"
        self.remoteAddress = Self.hostAndPort(channel.remoteAddress)
    }

    static func hostAndPort(_ address: SocketAddress?) -> String {
        guard let address, let ip = address.ipAddress else { return "unknown" }
        let host = ip.contains(":") ? "[\(ip)]" : ip
        return address.port.map { "\(host):\($0)" } ?? host
    }

    /// Queues one WebSocket frame (masked when this end dialed); NIO writes frames in the
    /// order they were queued. Frames that reach the event loop before its next flush (a
    /// session answering a group of revisions one after another) leave together: one socket
    /// write and one TLS flush instead of one per frame.
    public func enqueue(_ message: TransportMessage) -> TransportWrite {
        enqueue([message])[0]
    }

    /// Queues several frames, in order, written and flushed together (always one flush).
    public func enqueue(_ messages: [TransportMessage]) -> [TransportWrite] {
        let frames = messages.map { message in
            let opcode: WebSocketOpcode = if case .text = message { .text } else { .binary }
            return bridge.outgoing(opcode, channel.allocator.buffer(bytes: message.bytes))
        }
        let promises = frames.map { _ in channel.eventLoop.makePromise(of: Void.self) }
        if channel.eventLoop.inEventLoop {
            flushes.write(frames, promises: promises)
        } else {
            channel.eventLoop.execute { [flushes] in flushes.write(frames, promises: promises) }
        }
        return promises.map { promise in
            let future = promise.futureResult
            return TransportWrite { try await future.get() }
        }
    }

    /// Sends a close frame with `code` and `reason` and waits (bounded by the peer's answer
    /// or the connection dropping) until the connection has ended.
    public func close(code: UInt16 = 1000, reason: String = "") async {
        bridge.initiateClose(channel: channel, code: code, reason: reason)
        try? await channel.closeFuture.get()
    }

    /// Pings the peer every `interval` and drops the connection when it stays silent for two.
    public func startHeartbeat(every interval: Duration) {
        let (seconds, attoseconds) = interval.components
        let nanos = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        bridge.startHeartbeat(channel: channel, interval: .nanoseconds(max(nanos, 1_000_000)), closeCode: wireFormat.retryCloseCode)
    }

    /// How the connection ended; nil while it is open.
    public var closeReason: CloseReason? { bridge.closeReason }

    /// How the connection ended, as text; nil while it is open.
    public var closeDescription: String? { bridge.closeReason?.description }

    /// Waits until the connection has ended and says how.
    public func waitUntilClosed() async -> CloseReason {
        try? await channel.closeFuture.get()
        return bridge.closeReason ?? CloseReason(code: 1006, reason: "connection dropped")
    }
}

/// Writes frames on a channel's event loop and flushes once per burst: the first write after
/// a flush schedules the next flush behind every task already queued on the loop, so frames
/// queued together (from any thread, in order) leave in one socket write.
final class CoalescedFlush: Sendable {
    private let channel: Channel
    private let scheduled: NIOLoopBoundBox<Bool>

    init(channel: Channel) {
        self.channel = channel
        self.scheduled = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
    }

    /// Writes `frames` now (on the event loop) and makes sure a flush follows.
    func write(_ frames: [WebSocketFrame], promises: [EventLoopPromise<Void>]) {
        for (frame, promise) in zip(frames, promises) { channel.write(frame, promise: promise) }
        guard !scheduled.value else { return }
        scheduled.value = true
        channel.eventLoop.execute { [self] in
            scheduled.value = false
            channel.flush()
        }
    }
}
