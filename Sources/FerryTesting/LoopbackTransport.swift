import FerryProtocol
import Foundation

/// Two ends of an in-memory connection (LiteCore's loopback WebSocket): what one end sends,
/// the other receives, in order. Closing either end ends both streams and records the code
/// and reason on both. Lets a test speak for a peer, frame by frame, without sockets.
public final class LoopbackTransport: MessageTransport, @unchecked Sendable {
    /// What the other end sent.
    public let inbound = TransportInbox(highWater: .max, highWaterBytes: .max)
    private var peer: LoopbackTransport?
    private let lock = NSLock()
    private var reason: String?
    /// Longest random pause a `send` takes before it delivers (zero: none).
    private let jitter: Duration

    private init(jitter: Duration) {
        self.jitter = jitter
    }

    /// A connected pair. With `jitter`, waiting for a write to be sent takes a random time up
    /// to it, as a real network write may (messages still arrive in the order queued).
    public static func pair(jitter: Duration = .zero) -> (LoopbackTransport, LoopbackTransport) {
        let a = LoopbackTransport(jitter: jitter), b = LoopbackTransport(jitter: jitter)
        a.peer = b
        b.peer = a
        return (a, b)
    }

    private func pause() async {
        guard jitter > .zero else { return }
        let (seconds, attoseconds) = jitter.components
        let micros = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        try? await Task.sleep(for: .microseconds(Int64.random(in: 0...max(micros, 1))))
    }

    private func deliver(_ message: TransportMessage) throws {
        guard lock.withLock({ reason == nil }) else { throw CocoaError(.fileWriteUnknown) }
        inbound.yield(message)
    }

    /// Delivers a message to the other end at once.
    public func enqueue(_ message: TransportMessage) -> TransportWrite {
        let result = Result { try peer?.deliver(message) }
        return TransportWrite { [self] in
            await pause()
            try result.get()
        }
    }

    /// Closes both ends with `code` and `reason`.
    public func close(code: UInt16, reason: String) async {
        sever(code: code, reason: reason)
    }

    /// Ends both ends at once, as a network failure would (no close handshake).
    public func sever(code: UInt16 = 1006, reason: String = "connection lost") {
        for end in [self, peer].compactMap({ $0 }) { end.ended("\(code): \(reason)") }
    }

    private func ended(_ why: String) {
        let first = lock.withLock { () -> Bool in
            defer { if reason == nil { reason = why } }
            return reason == nil
        }
        if first { inbound.finish() }
    }

    /// "code: reason" once closed.
    public var closeDescription: String? { lock.withLock { reason } }
}

/// One end of a loopback connection that is cut after it has sent a number of messages: the
/// message past the limit is lost and both ends see the connection end (a network failure in
/// the middle of a replication, for simulations).
public final class CutLoopbackTransport: MessageTransport, @unchecked Sendable {
    private let end: LoopbackTransport
    private let lock = NSLock()
    private var remaining: Int

    /// `end`, cut once it has sent `limit` messages.
    public init(_ end: LoopbackTransport, after limit: Int) {
        self.end = end
        self.remaining = limit
    }

    /// What the other end sent.
    public var inbound: TransportInbox { end.inbound }

    /// Sends, or cuts the connection when the limit is reached.
    public func enqueue(_ message: TransportMessage) -> TransportWrite {
        let cut = lock.withLock { () -> Bool in
            remaining -= 1
            return remaining < 0
        }
        guard cut else { return end.enqueue(message) }
        end.sever(reason: "simulated network failure")
        return TransportWrite { throw CocoaError(.fileWriteUnknown) }
    }

    /// Closes both ends.
    public func close(code: UInt16, reason: String) async { await end.close(code: code, reason: reason) }

    /// How the connection ended.
    public var closeDescription: String? { end.closeDescription }
}
