import Synchronization

/// The write of one BLIP message, which may go out as many frames, some only after the peer's
/// ACKs: it is done when its last frame is on the transport. The `TransportWrite` a channel
/// hands out waits on it.
final class CBLMessageWrite: Sendable {
    private struct State {
        var last: TransportWrite?
        var failed = false
        var waiters: [CheckedContinuation<TransportWrite?, Never>] = []
    }
    private let state = Mutex(State())

    /// The message's last frame was queued on the transport as `write`.
    func finished(_ write: TransportWrite) {
        let waiters = state.withLock { s in
            s.last = write
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        waiters.forEach { $0.resume(returning: write) }
    }

    /// The connection ended before the message went out whole.
    func failed() {
        let waiters = state.withLock { s in
            s.failed = true
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        waiters.forEach { $0.resume(returning: nil) }
    }

    /// Waits until the message is on the wire; throws if it never will be.
    func sent() async throws {
        let last = await withCheckedContinuation { (waiter: CheckedContinuation<TransportWrite?, Never>) in
            let now: TransportWrite?? = state.withLock { s in
                if let last = s.last { return .some(last) }
                if s.failed { return .some(nil) }
                s.waiters.append(waiter)
                return nil
            }
            if let now { waiter.resume(returning: now) }
        }
        guard let last else { throw ChannelEnded() }
        try await last.sent()
    }

    /// The `TransportWrite` the seam hands out for this message.
    var transportWrite: TransportWrite { TransportWrite { try await self.sent() } }
}

/// Blobs fetched from the peer, whole (Couchbase Lite sends a blob as one reply), kept so the
/// session can read them a window at a time; bounded in bytes, oldest dropped first (a
/// dropped blob is fetched again if asked for).
struct CBLBlobCache {
    private var blobs: [BlobKey: [UInt8]] = [:]
    private var order: [BlobKey] = []
    private var bytes = 0
    let capacity: Int

    typealias BlobKey = String

    init(capacity: Int) { self.capacity = capacity }

    func get(_ key: BlobKey) -> [UInt8]? { blobs[key] }

    mutating func put(_ key: BlobKey, _ value: [UInt8]) {
        guard blobs[key] == nil else { return }
        blobs[key] = value
        order.append(key)
        bytes += value.count
        while bytes > capacity, order.count > 1 { remove(order[0]) }
    }

    mutating func remove(_ key: BlobKey) {
        guard let value = blobs.removeValue(forKey: key) else { return }
        bytes -= value.count
        order.removeAll { $0 == key }
    }
}
