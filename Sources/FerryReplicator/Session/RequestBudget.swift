/// What a peer's requests may hold on this side at once. The socket is read only while the
/// session's transport inbox has room; these bounds cover what leaves that inbox:
/// - requests being handled (answered or not yet): past `maxRequests` the peer is cut off
///   (a ferry pusher keeps at most three `changes` batches of revisions, 1,500 `rev`s, and two
///   `changes` unanswered);
/// - bytes of received revisions queued for the store: above `maxQueuedRevisionBytes` the
///   session stops reading until the store has taken some (it needs nothing from the peer
///   to do so, so waiting cannot deadlock);
/// - blob streams: one at a time per session, so a peer that does not read its chunks holds
///   at most one chunk here, however many blobs it asks for;
/// - blobs this side fetches: at most `maxFetches` at once, however many received revisions
///   wait for theirs (each fetch's bytes wait in its stream until its task writes them).
struct RequestBudget {
    /// Most requests of the peer handled at once.
    static let maxRequests = 2_048
    /// Most bytes of received revisions waiting for the store.
    static let maxQueuedRevisionBytes = 64 << 20

    private(set) var requests = 0
    private(set) var queuedRevisionBytes = 0
    private var roomWaiter: CheckedContinuation<Void, Never>?
    private var blobStreams = Turns(count: 1)
    /// Most blobs fetched from the peer at once: enough for the peer always to have the next
    /// one asked for while this side writes the last.
    static let maxFetches = 16
    private var fetches = Turns(count: maxFetches)

    /// Counts a request in; false when the peer is past `maxRequests`.
    mutating func admit() -> Bool {
        guard requests < Self.maxRequests else { return false }
        requests += 1
        return true
    }

    /// A request's handling ended.
    mutating func finished() { requests -= 1 }

    /// A received revision of `bytes` joined the store's queue.
    mutating func queued(_ bytes: Int) { queuedRevisionBytes += bytes }

    /// The store took revisions of `bytes`.
    mutating func stored(_ bytes: Int) {
        queuedRevisionBytes -= bytes
        if queuedRevisionBytes <= Self.maxQueuedRevisionBytes { roomWaiter.take()?.resume() }
    }

    /// True when reading must wait for the store.
    var storeQueueIsFull: Bool { queuedRevisionBytes > Self.maxQueuedRevisionBytes }

    /// Parks the reading loop until the store queue has room.
    mutating func waitForRoom(_ waiter: CheckedContinuation<Void, Never>) {
        if storeQueueIsFull { roomWaiter = waiter } else { waiter.resume() }
    }

    /// Takes the blob turn, or parks `waiter` until it is free.
    mutating func takeBlobTurn(_ waiter: CheckedContinuation<Void, Never>) { blobStreams.take(waiter) }

    /// Hands the blob turn to the next waiter.
    mutating func endBlobTurn() { blobStreams.end() }

    /// Takes one of the `maxFetches` fetch turns, or parks `waiter` until one is free.
    mutating func takeFetchTurn(_ waiter: CheckedContinuation<Void, Never>) { fetches.take(waiter) }

    /// Hands a fetch turn to the next waiter, or frees it.
    mutating func endFetchTurn() { fetches.end() }

    /// The connection ended: nobody waits any more.
    mutating func releaseAll() {
        roomWaiter.take()?.resume()
        blobStreams.releaseAll()
        fetches.releaseAll()
    }
}

/// `count` turns handed out first come, first served; a waiter parks until a turn is free.
private struct Turns {
    let count: Int
    private var taken = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(count: Int) { self.count = count }

    /// Takes a turn, or parks `waiter` until one is free.
    mutating func take(_ waiter: CheckedContinuation<Void, Never>) {
        if taken < count {
            taken += 1
            waiter.resume()
        } else {
            waiters.append(waiter)
        }
    }

    /// Hands the turn to the next waiter, or frees it.
    mutating func end() {
        if waiters.isEmpty { taken = max(taken - 1, 0) } else { waiters.removeFirst().resume() }
    }

    /// Resumes every waiter and frees every turn (the connection ended; the turns' holders
    /// end them, which frees nothing more).
    mutating func releaseAll() {
        taken = 0
        for w in waiters { w.resume() }
        waiters.removeAll()
    }
}
