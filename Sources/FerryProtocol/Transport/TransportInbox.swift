import Synchronization

/// The messages a transport received and the session has not yet taken, bounded: once
/// `highWater` messages or `highWaterBytes` bytes wait, `yield` says so and the transport
/// stops reading its socket; when the session has taken enough that fewer than half wait,
/// `onRoom` is called once so the transport reads again. A peer that sends faster than the
/// session serves is slowed by TCP, not buffered here.
public final class TransportInbox: AsyncSequence, Sendable {
    /// One message at a time.
    public typealias Element = TransportMessage

    private struct State {
        var buffer: [TransportMessage] = []
        var head = 0
        var bytes = 0
        var finished = false
        var waiter: CheckedContinuation<TransportMessage?, Never>?
        var full = false
        var onRoom: (@Sendable () -> Void)?
    }
    private let state = Mutex(State())
    /// Messages waiting at which the transport stops reading.
    public let highWater: Int
    /// Bytes waiting at which the transport stops reading.
    public let highWaterBytes: Int

    /// An empty inbox; the defaults hold a few full batches of changes.
    public init(highWater: Int = 256, highWaterBytes: Int = 32 << 20) {
        self.highWater = highWater
        self.highWaterBytes = highWaterBytes
    }

    /// Called (once per time the inbox was full) when there is room again.
    public func setOnRoom(_ action: @escaping @Sendable () -> Void) {
        state.withLock { $0.onRoom = action }
    }

    /// Adds a message; returns false when the inbox is now full (stop reading until `onRoom`).
    @discardableResult
    public func yield(_ message: TransportMessage) -> Bool {
        let (waiter, hasRoom) = state.withLock { s -> (CheckedContinuation<TransportMessage?, Never>?, Bool) in
            guard !s.finished else { return (nil, true) }
            if let w = s.waiter {
                s.waiter = nil
                return (w, true)
            }
            s.buffer.append(message)
            s.bytes += message.bytes.count
            let waiting = s.buffer.count - s.head
            if waiting >= highWater || s.bytes >= highWaterBytes { s.full = true }
            return (nil, !s.full)
        }
        waiter?.resume(returning: message)
        return hasRoom
    }

    /// No more messages: the session takes what waits, then the sequence ends.
    public func finish() {
        let waiter = state.withLock { s -> CheckedContinuation<TransportMessage?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// What a look at the inbox found.
    private enum Look {
        /// A message (and, when taking it made room, the action that reads again).
        case message(TransportMessage, room: (@Sendable () -> Void)?)
        /// Finished and empty.
        case end
    }

    /// Takes the first waiting message, or says the inbox ended; nil when it must wait.
    private func look(_ s: inout State) -> Look? {
        guard s.head < s.buffer.count else { return s.finished ? .end : nil }
        let message = s.buffer[s.head]
        s.head += 1
        s.bytes -= message.bytes.count
        if s.head == s.buffer.count {
            s.buffer.removeAll(keepingCapacity: true)
            s.head = 0
        } else if s.head > 64, s.head * 2 > s.buffer.count {
            s.buffer.removeFirst(s.head)
            s.head = 0
        }
        var room: (@Sendable () -> Void)?
        if s.full, (s.buffer.count - s.head) * 2 < highWater, s.bytes * 2 < highWaterBytes {
            s.full = false
            room = s.onRoom
        }
        return .message(message, room: room)
    }

    private static func deliver(_ look: Look) -> TransportMessage? {
        guard case .message(let message, let room) = look else { return nil }
        room?()
        return message
    }

    /// The next message, or nil once finished and empty.
    func next() async -> TransportMessage? {
        if let now = state.withLock({ look(&$0) }) { return Self.deliver(now) }
        return await withCheckedContinuation { continuation in
            let now = state.withLock { s -> Look? in
                if let found = look(&s) { return found }
                s.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: Self.deliver(now)) }
        }
    }

    /// Iterates the messages in order.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbox: TransportInbox
        /// The next message, or nil at the end.
        public mutating func next() async -> TransportMessage? { await inbox.next() }
    }

    /// An iterator (one consumer).
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inbox: self) }
}
