import FerryProtocol

/// Bursts of frames queued on a channel whose writes have not been seen to finish, bounded
/// in bytes. A sender queues a batch's revisions a burst at a time (each burst leaves in one
/// socket write) instead of waiting for each revision to reach the socket before queuing the
/// next, a round trip between threads per revision; past `maxBytes` it waits for the oldest
/// bursts, so a batch of large bodies never sits in memory twice.
struct WritesInFlight {
    /// Most revisions in one burst.
    static let burstCount = 64
    /// Most bytes in one burst (a single larger revision is a burst of its own).
    static let burstBytes = 256 << 10
    /// Most bytes (as estimated by the caller) of queued bursts not yet seen written.
    static let maxBytes = 4 << 20

    private var bursts: [(write: TransportWrite, bytes: Int)] = []
    private var oldest = 0
    private var bytes = 0

    /// Counts a queued burst of about `bytes` bytes in (`write` ends once all of its frames
    /// are written), then waits for the oldest bursts while past `maxBytes`. Throws when a
    /// write failed (the connection ended).
    mutating func add(_ write: TransportWrite, bytes: Int) async throws {
        bursts.append((write, bytes))
        self.bytes += bytes
        while self.bytes > Self.maxBytes, oldest < bursts.count {
            try await bursts[oldest].write.sent()
            self.bytes -= bursts[oldest].bytes
            oldest += 1
        }
    }

    /// Waits until every burst counted in is written.
    mutating func finish() async throws {
        for burst in bursts[oldest...] { try await burst.write.sent() }
        bursts.removeAll()
        oldest = 0
        bytes = 0
    }
}
