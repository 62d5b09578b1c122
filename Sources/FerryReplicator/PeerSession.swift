import FerryCore
import FerryProtocol
import FerryStore
import Logging

/// Why a replication ended early, and whether trying again may help.
public struct ReplicationError: Error, Sendable, CustomStringConvertible, ClassifiedFailure {
    /// One sentence.
    public let message: String
    /// Retry or stop (SPEC §4).
    public let failureKind: FailureKind

    /// An error; transient unless said otherwise.
    public init(_ message: String, kind: FailureKind = .transient) {
        self.message = message
        self.failureKind = kind
    }

    /// The sentence.
    public var description: String { message }
}

/// What a session did, and where it stands.
public struct ReplicationStats: Sendable, Equatable {
    /// Revisions received and stored.
    public var revisionsReceived = 0
    /// Revisions sent and accepted by the peer.
    public var revisionsSent = 0
    /// Blobs fetched from the peer.
    public var blobsReceived = 0
    /// Revisions the peer refused or that could not be stored.
    public var revisionsFailed = 0
    /// Revisions asked for (by either side) in this session: the progress total.
    public var revisionsWanted = 0
    /// True once the pull has caught up with the peer (since its last new change).
    public var pullCaughtUp = false
    /// True once the push has caught up with this folder (since its last new change).
    public var pushCaughtUp = false
    /// Message bytes sent and received (WebSocket payloads, without framing or TLS).
    public var bytesSent = 0, bytesReceived = 0

    /// Revisions done (received, sent or failed): the progress count.
    public var revisionsDone: Int { revisionsReceived + revisionsSent + revisionsFailed }

    /// Nothing done yet.
    public init() {}
}

/// Which ways a replication moves revisions.
public enum ReplicationDirection: String, Sendable, CaseIterable {
    /// From this folder to the peer.
    case push
    /// From the peer to this folder.
    case pull
    /// Both.
    case both

    /// True when revisions flow out.
    public var pushes: Bool { self != .pull }
    /// True when revisions flow in.
    public var pulls: Bool { self != .push }
}

/// One replication connection, either side, over any `MessageTransport`. It reads the
/// transport in one loop (responses and blob chunks go to whoever waits for them) and serves
/// the peer's requests in child tasks, so a request that itself waits for the peer (a `rev`
/// that needs `getAttachment`) never blocks the loop. Revisions from the peer are applied in
/// groups by one drain task: all that arrived while the previous group was being made durable
/// share the next group's fsyncs.
public actor PeerSession {
    let transport: MessageTransport
    let shared: SharedStore
    /// This session's own handle on the objects: blobs it fetches are written beside the
    /// folder's writer, never inside its batches.
    let objects: ObjectStore
    let logger: Logger
    var machine: ConnectionStateMachine
    var responders: [Int: AsyncStream<Response>.Continuation] = [:]
    var chunkSinks: [Int: AsyncStream<BlobChunk>.Continuation] = [:]
    var openedWaiter: AsyncStream<Bool>.Continuation?
    var caughtUpWaiter: AsyncStream<Int>.Continuation?
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
    /// Revisions this connection delivered, not announced back to it (echo cancellation bound
    /// to the connection, not to the peer id it claims, which any peer could claim).
    var receivedHere = ReceivedHere()
    var closed = false
    /// Why this side closed the connection (a protocol violation or a refused hello).
    var localCloseReason: String?
    /// When true (a `--read-only` listener), the peer may pull but every push is refused.
    let readOnly: Bool
    /// Called whenever the stats change (the replicator's status board listens).
    let onProgress: (@Sendable (ReplicationStats) -> Void)?
    /// What this session did so far.
    public private(set) var stats = ReplicationStats()

    /// A session over `transport` for the shared folder. The active side names the
    /// `remoteDatabase` it wants (its URL's path); the passive side serves its own folder's name.
    /// `features` are those this side offers in `hello` (`ProtocolFeature`); those both sides
    /// offer are used.
    public init(transport: MessageTransport, shared: SharedStore, role: ConnectionStateMachine.Role,
                remoteDatabase: String? = nil, readOnly: Bool = false, features: [String] = [], logger: Logger,
                onProgress: (@Sendable (ReplicationStats) -> Void)? = nil) {
        self.transport = transport
        self.shared = shared
        self.objects = ObjectStore(layout: shared.layout)
        self.logger = logger
        self.readOnly = readOnly
        self.onProgress = onProgress
        let database = role == .active ? (remoteDatabase ?? shared.info.name) : shared.info.name
        self.machine = ConnectionStateMachine(role: role, localPeer: shared.info.id, database: database, features: features)
    }

    /// True when both sides agreed on delta sync.
    var usesDeltas: Bool { machine.agreedFeatures.contains(ProtocolFeature.delta) }

    /// The peer's id once `hello` has been exchanged.
    public var remotePeer: String? { machine.remotePeer }

    func update(_ change: (inout ReplicationStats) -> Void) {
        change(&stats)
        onProgress?(stats)
    }

    // MARK: The loop

    /// Reads the connection until it closes, serving requests; returns when it has closed and
    /// every request it was serving has ended.
    public func run() async {
        let (signal, signalSink) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        inboxSignal = signalSink
        await withDiscardingTaskGroup { group in
            group.addTask { await self.drainInbox(signal) }
            for await message in transport.inbound {
                let action: ConnectionStateMachine.Action
                stats.bytesReceived += message.bytes.count
                switch message {
                case .text(let bytes): action = machine.receiveText(bytes)
                case .binary(let bytes): action = machine.receiveBinary(bytes)
                }
                switch action {
                case .none: break
                case .send(let frame): try? await write(.text(FrameCodec.encode(frame)))
                case .opened: openedWaiter?.yield(true); openedWaiter?.finish()
                case let .request(number, noReply, request):
                    guard budget.admit() else {
                        let reason = "more than \(RequestBudget.maxRequests) requests in flight"
                        localCloseReason = "the peer sent \(reason)"
                        logger.warning("closing connection", metadata: ["code": "1008", "reason": "\(reason)"])
                        await transport.close(code: 1008, reason: reason)
                        continue
                    }
                    if !receiveAtOnce(number: number, noReply: noReply, request, size: message.bytes.count) {
                        var ticket: Int?
                        if case .rev(let doc, _, _, _, _, _) = request, !readOnly { ticket = arrivalOrder.take(doc) }
                        group.addTask {
                            await self.serve(number: number, noReply: noReply, request, ticket: ticket)
                            await self.requestFinished()
                        }
                    }
                    if budget.storeQueueIsFull { await withCheckedContinuation { budget.waitForRoom($0) } }
                case let .response(to, _, response):
                    responders.removeValue(forKey: to).map { $0.yield(response); $0.finish() }
                case .chunk(let chunk):
                    let n = Int(chunk.requestNumber)
                    chunkSinks[n]?.yield(chunk)
                    if chunk.isLast { chunkSinks.removeValue(forKey: n)?.finish() }
                case let .close(code, reason, after):
                    if let after { try? await write(.text(FrameCodec.encode(after))) }
                    localCloseReason = reason
                    logger.warning("closing connection", metadata: ["code": "\(code)", "reason": "\(reason)"])
                    await transport.close(code: code, reason: reason)
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

    private func finishAll() {
        closed = true
        budget.releaseAll()
        for (_, r) in responders { r.finish() }
        responders.removeAll()
        for (_, c) in chunkSinks { c.finish() }
        chunkSinks.removeAll()
        openedWaiter?.finish()
        caughtUpWaiter?.finish()
        inboxSignal?.finish()
        arrivalOrder.releaseAll()
    }

    /// Why the connection ended, in one sentence (for errors and status).
    var endReason: String {
        if let localCloseReason { return localCloseReason }
        if let remote = transport.closeDescription { return "the connection closed (\(remote))" }
        return "the connection closed"
    }

    // MARK: Requests of ours

    /// Sends a request; returns the stream its response arrives on and, for `getAttachment`,
    /// the stream of its blob chunks (registered before sending: they may follow at once).
    func send(_ request: Request) async throws -> (response: AsyncStream<Response>, chunks: AsyncStream<BlobChunk>?) {
        guard !closed else { throw ReplicationError(endReason) }
        let frame = machine.send(request)
        guard case let .request(number, _, _) = frame else { throw ReplicationError("internal: not a request", kind: .permanent) }
        let (stream, continuation) = AsyncStream<Response>.makeStream()
        responders[number] = continuation
        var chunks: AsyncStream<BlobChunk>?
        if case .getAttachment = request {
            let (stream, sink) = AsyncStream<BlobChunk>.makeStream()
            chunkSinks[number] = sink
            chunks = stream
        }
        try await write(.text(FrameCodec.encode(frame)))
        return (stream, chunks)
    }

    /// Waits for the response on `stream`.
    func response(_ stream: AsyncStream<Response>, to what: String) async throws -> Response {
        for await response in stream { return response }
        throw ReplicationError("\(endReason) before \(what) was answered")
    }

    /// Sends a request and waits for its response.
    func request(_ request: Request) async throws -> Response {
        try await response(try await send(request).response, to: request.typeName)
    }

    /// Sends a request that gets no response.
    func notify(_ request: Request) async throws {
        guard !closed else { throw ReplicationError(endReason) }
        try await write(.text(FrameCodec.encode(machine.send(request, noReply: true))))
    }

    func respond(_ number: Int, _ response: Response) async {
        try? await write(.text(FrameCodec.encode(.response(to: number, response))))
    }

    /// Writes one message after every message written before it, and waits until it is sent.
    /// The message is queued before the first `await`: the actor runs other tasks at every
    /// `await`, so queuing later could put requests numbered 3 and 4 on the wire as 4, 3 —
    /// which the peer rightly refuses (request numbers must increase).
    func write(_ message: TransportMessage) async throws {
        stats.bytesSent += message.bytes.count
        try await transport.enqueue(message).sent()
    }

    /// Queues one message after every message written before it, without waiting for it to
    /// be sent (for answers given where nothing can wait; a failed write closes the connection).
    func queue(_ message: TransportMessage) {
        stats.bytesSent += message.bytes.count
        _ = transport.enqueue(message)
    }

    /// Closes the connection normally.
    public func close() async {
        await transport.close(code: 1000, reason: "done")
    }
}

/// A revision from the peer, ready for the store: its blobs are already here; a JSON body
/// travels as bytes so the store writes it inside its batch.
struct ReceivedRevision {
    var revision: RemoteRevision
    var then: AfterStoring
    /// Its request's size on the wire when it counts in `RequestBudget`'s store queue (0 when
    /// a serving task holds it and counts it as a request).
    var size = 0
}

/// Keeps the revisions of each document in the order they arrived on their way to the store:
/// a revision that waits (for blobs, for a delta's base) holds back the later revisions of its
/// document, so a document's history is stored parent first and a merge finds its base here.
struct ArrivalOrder {
    private var issued: [DocumentID: Int] = [:]
    private var admitted: [DocumentID: Int] = [:]
    private var waiters: [DocumentID: [Int: CheckedContinuation<Void, Never>]] = [:]
    private var released = false

    /// True when no revision of `doc` is on its way: the next one may go straight in.
    func isClear(_ doc: DocumentID) -> Bool { issued[doc] == nil }

    /// The place in line of the next revision of `doc`.
    mutating func take(_ doc: DocumentID) -> Int {
        let ticket = issued[doc, default: 0]
        issued[doc] = ticket + 1
        return ticket
    }

    /// True when `ticket` is the next to go in (or the line was released).
    func isTurn(_ doc: DocumentID, _ ticket: Int) -> Bool { released || admitted[doc, default: 0] == ticket }

    /// Parks the holder of `ticket` until its turn.
    mutating func park(_ doc: DocumentID, _ ticket: Int, _ waiter: CheckedContinuation<Void, Never>) {
        if isTurn(doc, ticket) { waiter.resume() } else { waiters[doc, default: [:]][ticket] = waiter }
    }

    /// The holder of the current turn of `doc` is done: the next one goes.
    mutating func next(_ doc: DocumentID) {
        let following = admitted[doc, default: 0] + 1
        if following >= issued[doc, default: 0] {
            issued[doc] = nil
            admitted[doc] = nil
            waiters[doc] = nil
            return
        }
        admitted[doc] = following
        waiters[doc]?.removeValue(forKey: following)?.resume()
    }

    /// Lets every waiter go (the connection closed).
    mutating func releaseAll() {
        released = true
        for (_, w) in waiters { for (_, c) in w { c.resume() } }
        waiters.removeAll()
    }
}

/// What happens once a received revision is stored or refused.
enum AfterStoring {
    /// A task waits for the result (it fetched blobs or expanded a delta first).
    case resume(CheckedContinuation<Result<[LogEntry], StoreError>, Never>)
    /// Nobody waits: the drain answers the peer's request itself. Most revisions go this way,
    /// so that 1,000 revisions in flight are 1,000 inbox entries, not 1,000 suspended tasks.
    case answer(number: Int, noReply: Bool)
}

/// The revisions a connection delivered, so that they are not announced back to it; bounded
/// (when full it starts over: an echo then costs one `changes` entry the peer answers "have").
struct ReceivedHere {
    private var keys: Set<Key> = []
    /// Most revisions remembered.
    static let capacity = 65_536

    private struct Key: Hashable {
        let doc: DocumentID
        let rev: RevisionID
    }

    /// Notes that the peer delivered `rev` of `doc`.
    mutating func insert(_ doc: DocumentID, _ rev: RevisionID) {
        if keys.count >= Self.capacity { keys.removeAll(keepingCapacity: true) }
        keys.insert(Key(doc: doc, rev: rev))
    }

    /// True (once) when the peer delivered `rev` of `doc`.
    mutating func take(_ doc: DocumentID, _ rev: RevisionID) -> Bool {
        keys.remove(Key(doc: doc, rev: rev)) != nil
    }
}
