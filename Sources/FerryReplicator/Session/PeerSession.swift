import FerryCore
import FerryProtocol
import FerryStore
import Logging

/// One replication connection, either side, over any `ReplicationChannel`: it sees requests
/// and answers, never frames, so the wire format (`ferry/1`, or BLIP for Couchbase Lite) is the
/// channel's business. It reads the channel in one loop (answers and blob bytes go to whoever
/// waits for them) and serves the peer's requests in child tasks, so a request that itself waits for the peer (a `rev`
/// that needs `getAttachment`) never blocks the loop. Revisions from the peer are applied in
/// groups by one drain task: what arrived while the previous group was being made durable, up
/// to `maxRevisionsPerGroup`, shares the next group's fsyncs.
public actor PeerSession {
    let channel: ReplicationChannel
    let shared: SharedStore
    /// This session's own handle on the objects: blobs it fetches are written to temp files
    /// beside the folder's writer, which adopts them into its next batch (`keepFetched`).
    let objects: ObjectStore
    let logger: Logger
    var caughtUpWaiter: AsyncStream<Int>.Continuation?
    /// True when a one-shot replication's round moved something but the channel cannot hold
    /// another round (`ReplicationChannel.resubscribes`): the replicator connects again for it.
    public internal(set) var wantsAnotherRound = false
    /// Revisions received and waiting for the drain task.
    var inbox: [ReceivedRevision] = []
    /// What the peer's requests hold here, bounded (`RequestBudget`).
    var budget = RequestBudget()
    /// Revisions of one document reach the inbox in the order they arrived, even when one
    /// waits for blobs or a delta's base and the next does not (`ArrivalOrder`).
    var arrivalOrder = ArrivalOrder()
    var inboxSignal: AsyncStream<Void>.Continuation?
    /// Highest sequence announced by the peer in `changes` so far (the pull checkpoint).
    var highestSequenceAnnounced = 0
    /// The pull has taken the peer's "caught up" once (`ReplicationChannel.saysCaughtUpOnce`).
    var pullCaughtUpOnce = false
    /// `changes` messages with entries the peer sent so far (`takeQuietCaughtUp`).
    var changesAnnounced = 0
    /// The wait before a quiet moment counts as caught up (`scheduleQuietCaughtUp`).
    var quietCaughtUp: Task<Void, Never>?
    /// Revisions this side asked the peer for (answering `changes` or `proposeChanges`) that
    /// have not arrived yet (`AwaitedRevisions`).
    var awaited = AwaitedRevisions()
    /// Of the count the peer gave on `subChanges`, the revisions not announced yet: at "caught
    /// up" whatever is left (revisions it did not send back to this connection) is taken off
    /// `revisionsOffered`, so the progress total is what really came.
    var pullUnannounced = 0
    /// Revisions this connection delivered, not announced back to it (echo cancellation bound
    /// to the connection, not to the peer id it claims, which any peer could claim).
    var receivedHere = ReceivedHere()
    /// A continuous replication's checkpoints waiting to be saved, by client id.
    var deferredCheckpoints: [String: DeferredCheckpoint] = [:]
    var closed = false
    /// True once the peer refused a `changes` with 409 (a Couchbase Lite or Sync Gateway that
    /// refuses conflicts): the push goes on as proposals (`propose`).
    var proposesChanges = false
    /// Set while the first sync with a peer checks that the folders are related (a dry pull).
    var relatedness: RelatednessProbe?
    /// Why the session closed the connection (the channel keeps its own: a protocol
    /// violation or a refused hello).
    var localCloseReason: String?
    /// When true (a `--read-only` listener), the peer may pull but every push is refused.
    let readOnly: Bool
    /// Called whenever the stats change (the replicator's status board listens).
    let onProgress: (@Sendable (ReplicationStats) -> Void)?
    /// What this session did so far, without the bytes (the channel counts those).
    var counts = ReplicationStats()

    /// A session over `channel` for the shared folder; with `readOnly` (a `--read-only`
    /// listener) the peer may pull but every push is refused.
    public init(channel: ReplicationChannel, shared: SharedStore, readOnly: Bool = false, logger: Logger,
                onProgress: (@Sendable (ReplicationStats) -> Void)? = nil) {
        self.channel = channel
        self.shared = shared
        self.objects = ObjectStore(layout: shared.layout)
        self.logger = logger
        self.readOnly = readOnly
        self.onProgress = onProgress
    }

    /// A session speaking `ferry/1` over `transport`. The active side names the
    /// `remoteDatabase` it wants (its URL's path); the passive side serves its own folder's name.
    /// `features` are those this side offers in `hello` (`ProtocolFeature`); those both sides
    /// offer are used.
    public init(transport: MessageTransport, shared: SharedStore, role: ConnectionStateMachine.Role,
                remoteDatabase: String? = nil, remoteURL: String? = nil, readOnly: Bool = false, features: [String] = [], logger: Logger,
                onProgress: (@Sendable (ReplicationStats) -> Void)? = nil) {
        let database = role == .active ? (remoteDatabase ?? shared.info.name) : shared.info.name
        let channel: ReplicationChannel
        switch transport.wireFormat {
        case .ferry1:
            channel = Ferry1Channel(transport: transport, role: role, localPeer: shared.info.id, database: database, features: features)
        case .cbMobile:
            // Couchbase Lite's protocol names no peer: the active side names its listener by URL,
            // the passive side learns its client's id from the first checkpoint request.
            channel = CBLChannel(transport: transport, role: role, localPeer: shared.info.id, database: database,
                                 aliases: shared.blobAliases, remotePeer: remoteURL.map(CBLPeerID.from(url:)))
        }
        self.init(channel: channel, shared: shared, readOnly: readOnly, logger: logger, onProgress: onProgress)
    }

    /// What this session did so far.
    public var stats: ReplicationStats {
        var stats = counts
        let traffic = channel.traffic
        (stats.bytesSent, stats.bytesReceived) = (traffic.sent, traffic.received)
        return stats
    }

    /// True when both sides agreed on delta sync.
    var usesDeltas: Bool { channel.agreedFeatures.contains(ProtocolFeature.delta) }

    /// The peer's id once the handshake is done.
    public var remotePeer: String? { channel.remotePeer }

    func update(_ change: (inout ReplicationStats) -> Void) {
        change(&counts)
        onProgress?(stats)
    }

    // MARK: The loop

    /// Reads the connection until it closes, serving requests; returns when it has closed and
    /// every request it was serving has ended. With `firstMessageWithin`, a peer that sends
    /// nothing at all (no `hello`, request or answer) within that time is closed (1001).
    public func run(firstMessageWithin limit: Duration? = nil) async {
        let (signal, signalSink) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        inboxSignal = signalSink
        await withDiscardingTaskGroup { group in
            group.addTask { await self.drainInbox(signal) }
            if let limit { group.addTask { await self.closeIfSilent(for: limit) } }
            while let event = await channel.next() {
                switch event {
                case .request(let incoming):
                    guard budget.admit() else {
                        await closeConnection(code: 1008, reason: "more than \(RequestBudget.maxRequests) requests in flight",
                                              because: "the peer sent more than \(RequestBudget.maxRequests) requests in flight")
                        continue
                    }
                    if !receiveAtOnce(incoming) {
                        var ticket: Int?
                        if case .rev(let doc, _, _, _, _, _, _) = incoming.request, !readOnly, relatedness == nil { ticket = arrivalOrder.take(doc) }
                        // Counted here, in the order they came: a "caught up" the peer sends
                        // before this is answered (Couchbase Lite does) must wait for it, even
                        // when its own task runs first.
                        var announces = false
                        if case .changes(let entries) = incoming.request, !entries.isEmpty { announces = true }
                        if announces { awaited.answering += 1 }
                        group.addTask {
                            await self.serve(incoming, ticket: ticket)
                            if announces { await self.changesAnswered() }
                            await self.requestFinished()
                        }
                    }
                    if budget.storeQueueIsFull { await withCheckedContinuation { budget.waitForRoom($0) } }
                case let .closed(code, reason):
                    logger.warning("closing connection", metadata: ["code": "\(code)", "reason": "\(reason)"])
                }
            }
            finishAll()
            // Requests still being served wait on the store's change feed or on responses that
            // will never come: end them.
            group.cancelAll()
        }
        // A pass cut short leaves its conflicts open: resolve them with what arrived.
        await shared.resolvePendingConflicts()
    }

    private func requestFinished() { budget.finished() }

    /// Closes the connection if the peer has sent no message within `limit`. A client that
    /// completes the WebSocket upgrade and answers pings but never speaks is not silent to the
    /// heartbeat, and would otherwise hold a listener's session (and its descriptors) for
    /// ever; a peer that spoke once may then stay quiet (a continuous replication waits so).
    private func closeIfSilent(for limit: Duration) async {
        do { try await Task.sleep(for: limit) } catch { return }
        // Not while a close is under way (the peer's or this side's): it is not silence.
        guard !closed, channel.closeDescription == nil, channel.traffic.received == 0 else { return }
        await closeConnection(code: 1001, reason: "nothing received within \(Self.text(limit))",
                              because: "the peer sent nothing within \(Self.text(limit))")
    }

    private func finishAll() {
        closed = true
        budget.releaseAll()
        caughtUpWaiter?.finish()
        quietCaughtUp?.cancel()
        inboxSignal?.finish()
        arrivalOrder.releaseAll()
    }

    /// Why the connection ended, in one sentence (for errors and status).
    var endReason: String {
        if let reason = localCloseReason ?? channel.refusal { return reason }
        if let remote = channel.closeDescription { return "the connection closed (\(remote))" }
        return "the connection closed"
    }

    // MARK: Requests of ours
    //
    // Every message is queued on the channel before the first `await`: the actor runs other
    // tasks at every `await`, so queuing later could put requests numbered 3 and 4 on the
    // wire as 4, 3, which the peer rightly refuses.

    /// Sends a request; returns the stream its answer arrives on and, for `getAttachment`,
    /// the stream of the blob's bytes.
    func send(_ request: Request) async throws -> OutgoingRequest {
        guard !closed else { throw ReplicationError(endReason) }
        let outgoing = channel.send(request)
        try await outgoing.written.sent()
        return outgoing
    }

    /// Queues requests together without waiting for them to be written (`WritesInFlight`
    /// bounds how many are waiting).
    func queue(_ requests: [Request]) throws -> [OutgoingRequest] {
        guard !closed else { throw ReplicationError(endReason) }
        return channel.send(requests)
    }

    /// Waits for the answer on `stream`.
    func response(_ stream: AsyncStream<Response>, to what: String) async throws -> Response {
        for await response in stream { return response }
        throw ReplicationError("\(endReason) before \(what) was answered")
    }

    /// Sends a request and waits for its answer.
    func request(_ request: Request) async throws -> Response {
        try await response(try await send(request).answer, to: request.typeName)
    }

    /// Sends a request that gets no answer.
    func notify(_ request: Request) async throws {
        guard !closed else { throw ReplicationError(endReason) }
        try await channel.notify(request).sent()
    }

    /// Answers one of the peer's requests (nothing when it wants no answer) and waits until
    /// the answer is sent.
    func respond(_ handle: RequestHandle, _ response: Response) async {
        guard !handle.noReply else { return }
        try? await channel.respond(to: handle, with: response).sent()
    }

    /// Closes the connection because of something the peer did (`because`, logged and kept
    /// as the session's end reason; `reason` goes on the wire).
    func closeConnection(code: UInt16, reason: String, because: String? = nil) async {
        localCloseReason = localCloseReason ?? because ?? reason
        logger.warning("closing connection", metadata: ["code": "\(code)", "reason": "\(because ?? reason)"])
        await channel.close(code: code, reason: String(reason.prefix(120)))
    }

    /// Closes the connection normally.
    public func close() async {
        await channel.close(code: 1000, reason: "done")
    }
}
