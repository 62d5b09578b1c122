/// What the replication logic sees of a connection to a peer: requests it sends and the
/// answers they get, requests the peer sends and the answers it gives, and blob bytes — never
/// frames. A wire format lives behind it: `ferry/1` (`Ferry1Channel`) today; Couchbase Lite's
/// BLIP (issue 19) is the next. The channel checks everything the peer sends before any of it
/// comes out of `next()`.
///
/// Ordering: every call that sends (`send`, `notify`, `respond`, `sendBlobPart`) queues its
/// message at once, behind every message queued before it, and returns; the order of the
/// calls is the order on the wire. Wait on the returned `TransportWrite` to know the message
/// was sent and to keep the bytes in flight bounded.
public protocol ReplicationChannel: AnyObject, Sendable {
    /// The next request from the peer, or nil once the connection has ended. Reading is what
    /// drives the connection: answers to this side's requests and blob bytes are delivered
    /// while one task awaits it (one reader only), and while nobody does, nothing more is read
    /// from the peer.
    func next() async -> ChannelEvent?

    /// The active side's handshake; call while another task reads `next()`. True once the
    /// session is open; false when the connection ended first or this side refused the peer
    /// (then `refusal` says why).
    func open() async -> Bool

    /// Sends a request that gets an answer (and, for `getAttachment`, blob bytes).
    func send(_ request: Request) -> OutgoingRequest

    /// Sends several requests, in order, as `send` does each; a channel that can writes them
    /// together (a batch of revisions in one socket write).
    func send(_ requests: [Request]) -> [OutgoingRequest]

    /// Sends a request that gets no answer.
    func notify(_ request: Request) -> TransportWrite

    /// Answers one of the peer's requests.
    func respond(to request: RequestHandle, with response: Response) -> TransportWrite

    /// Sends bytes of a blob the peer asked for with `getAttachment`, after answering it with
    /// `.attachment(length:)`; the last part has `isLast` (an empty range is one empty part).
    func sendBlobPart(to request: RequestHandle, _ bytes: ArraySlice<UInt8>, isLast: Bool) -> TransportWrite

    /// Closes the connection with a code and reason and waits until it has ended.
    func close(code: UInt16, reason: String) async

    /// The peer's id, once the handshake is done.
    var remotePeer: String? { get }
    /// Optional features both sides offered (`ProtocolFeature`), once the handshake is done.
    var agreedFeatures: [String] { get }
    /// Why this side closed the connection (the peer broke the protocol or was refused).
    var refusal: String? { get }
    /// How the connection ended ("1001: listener stopped"); nil while it is open.
    var closeDescription: String? { get }
    /// Message bytes sent and received so far (payloads, without framing or TLS). `received`
    /// grows with every message as it is read, before it is checked: a session's first-message
    /// limit (`PeerSession.run(firstMessageWithin:)`) relies on it.
    var traffic: ChannelTraffic { get }
    /// True when the peer answers a second `subChanges` on the same connection (ferry does;
    /// Couchbase Lite's passive side serves one subscription per connection, so a later
    /// round of a one-shot replication needs a new connection).
    var resubscribes: Bool { get }
    /// True when the peer is announced every revision after its checkpoint, intermediate
    /// ones too (a ferry peer: synced folders hold the same histories); false when only each
    /// document's current revision is (a Couchbase Lite client, whose app sees each revision
    /// that arrives beside one of its own as a conflict, and which takes the last revision it
    /// pulls as the server's; Sync Gateway announces each document once). Asked when a pass
    /// begins.
    var announcesIntermediateRevisions: Bool { get }
    /// True when the answer to a peer's `subChanges` carries how many changes its first pass
    /// will announce (ferry/1); false when it has no room for it (Couchbase Lite's is empty),
    /// so that the passive side does not walk the feed to count them.
    var answersSubscriptionWithCount: Bool { get }
    /// True when the peer serving a continuous pull says "caught up" (an empty `changes`) only
    /// the first time (LiteCore's pusher); false when it says so after each pass (ferry). From
    /// the first, a puller takes each moment when everything announced since has arrived as
    /// caught up again: its status goes back to idle and its checkpoint moves on.
    var saysCaughtUpOnce: Bool { get }
}

extension ReplicationChannel {
    /// One `send` per request, for channels that have no cheaper way.
    public func send(_ requests: [Request]) -> [OutgoingRequest] { requests.map { send($0) } }

    /// ferry's own channels re-subscribe.
    public var resubscribes: Bool { true }

    /// ferry's own channels carry whole histories.
    public var announcesIntermediateRevisions: Bool { true }

    /// ferry's own channels tell a subscriber its first pass's size.
    public var answersSubscriptionWithCount: Bool { true }

    /// ferry's own peers say "caught up" after each pass.
    public var saysCaughtUpOnce: Bool { false }
}

/// Something the peer did that the replication logic must handle.
public enum ChannelEvent: Sendable {
    /// A request: answer it with `respond(to:with:)` unless `handle.noReply`.
    case request(IncomingRequest)
    /// This side closed the connection because the peer broke the protocol or was refused:
    /// a code and a sentence for the log. `next()` returns nil once the connection has ended.
    case closed(code: UInt16, reason: String)
}

/// Which request of the peer's an answer goes to.
public struct RequestHandle: Sendable, Hashable {
    /// The request's number on the wire (per direction, increasing).
    public let number: Int
    /// True when the peer wants no answer.
    public let noReply: Bool

    /// A handle for request `number`.
    public init(number: Int, noReply: Bool) {
        self.number = number
        self.noReply = noReply
    }
}

/// A request from the peer, checked and decoded.
public struct IncomingRequest: Sendable {
    /// Where its answer goes.
    public let handle: RequestHandle
    /// What the peer asks.
    public let request: Request
    /// Its size on the wire (what holding it costs).
    public let size: Int

    /// A request as it arrived.
    public init(handle: RequestHandle, request: Request, size: Int) {
        self.handle = handle
        self.request = request
        self.size = size
    }
}

/// A request on its way: the stream its answer arrives on and, for `getAttachment`, the
/// stream of the blob's bytes. Both finish without an element when the connection ends first.
public struct OutgoingRequest: Sendable {
    /// Done when the request is on the wire.
    public let written: TransportWrite
    /// One answer.
    public let answer: AsyncStream<Response>
    /// The blob's bytes, for `getAttachment`; nil otherwise.
    public let blob: AsyncStream<BlobPart>?

    /// A request sent on `written`, answered on `answer`.
    public init(written: TransportWrite, answer: AsyncStream<Response>, blob: AsyncStream<BlobPart>?) {
        self.written = written
        self.answer = answer
        self.blob = blob
    }
}

/// Consecutive bytes of a blob the peer is sending.
public struct BlobPart: Sendable, Equatable {
    /// The bytes (a slice: not copied out of the message that carried them).
    public let bytes: ArraySlice<UInt8>
    /// True on the final part.
    public let isLast: Bool

    /// A part.
    public init(bytes: ArraySlice<UInt8>, isLast: Bool) {
        self.bytes = bytes
        self.isLast = isLast
    }
}

/// Message bytes a channel moved.
public struct ChannelTraffic: Sendable, Equatable {
    /// Bytes sent.
    public var sent = 0
    /// Bytes received.
    public var received = 0

    /// Nothing moved yet.
    public init() {}
}

/// A message could not be queued: the connection had already ended.
public struct ChannelEnded: Error, Sendable, CustomStringConvertible, ClassifiedFailure {
    /// Retrying on a new connection may help.
    public var failureKind: FailureKind { .transient }
    /// The sentence.
    public var description: String { "the connection has ended" }

    /// The error.
    public init() {}
}
