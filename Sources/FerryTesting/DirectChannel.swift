import FerryProtocol
import Synchronization

/// Two ends of a `ReplicationChannel` that hand requests, answers and blob bytes to each
/// other as values, with no wire format at all: no frames, no encoding, a handshake that only
/// exchanges names. A session that syncs over it shows the replication logic needs nothing of
/// `ferry/1` (the seam BLIP goes behind). It counts no traffic, so a session over it must not
/// be given a first-message limit (`PeerSession.run(firstMessageWithin:)`).
public final class DirectChannel: ReplicationChannel {
    private struct State {
        var events: [ChannelEvent] = []
        var reader: CheckedContinuation<ChannelEvent?, Never>?
        var ended: String?
        var nextNumber = 1
        var answers: [Int: AsyncStream<Response>.Continuation] = [:]
        var blobs: [Int: AsyncStream<BlobPart>.Continuation] = [:]
        var traffic = ChannelTraffic()
    }

    private let state = Mutex(State())
    private let name: String
    private let features: [String]
    /// The other end; set once by `pair`, then only read.
    nonisolated(unsafe) private weak var other: DirectChannel?

    private init(name: String, features: [String]) {
        self.name = name
        self.features = features
    }

    /// A connected pair: `first` and `second` are the peer ids each end shows the other;
    /// `features` are agreed on both ends.
    public static func pair(first: String, second: String, features: [String] = []) -> (DirectChannel, DirectChannel) {
        let a = DirectChannel(name: first, features: features), b = DirectChannel(name: second, features: features)
        a.other = b
        b.other = a
        return (a, b)
    }

    /// The next request the other end sent, or nil once the channel is closed and drained.
    public func next() async -> ChannelEvent? {
        await withCheckedContinuation { reader in
            let now: ChannelEvent?? = state.withLock { s in
                if !s.events.isEmpty { return .some(s.events.removeFirst()) }
                if s.ended != nil { return .some(nil) }
                s.reader = reader
                return nil
            }
            if let now { reader.resume(returning: now) }
        }
    }

    /// Open at once (nothing to negotiate) unless already closed.
    public func open() async -> Bool { state.withLock { $0.ended == nil } }

    /// Hands the request to the other end.
    public func send(_ request: Request) -> OutgoingRequest {
        let (answer, answerSink) = AsyncStream<Response>.makeStream()
        var blob: (stream: AsyncStream<BlobPart>, continuation: AsyncStream<BlobPart>.Continuation)?
        if case .getAttachment = request { blob = AsyncStream<BlobPart>.makeStream() }
        let number: Int? = state.withLock { s in
            guard s.ended == nil else { return nil }
            defer { s.nextNumber += 1 }
            s.answers[s.nextNumber] = answerSink
            s.blobs[s.nextNumber] = blob?.continuation
            return s.nextNumber
        }
        guard let number, let other else {
            answerSink.finish()
            blob?.continuation.finish()
            return OutgoingRequest(written: Self.notSent, answer: answer, blob: blob?.stream)
        }
        other.deliver(IncomingRequest(handle: RequestHandle(number: number, noReply: false), request: request, size: 0))
        return OutgoingRequest(written: Self.sent, answer: answer, blob: blob?.stream)
    }

    /// Hands the request to the other end, which does not answer it.
    public func notify(_ request: Request) -> TransportWrite {
        let number: Int? = state.withLock { s in
            guard s.ended == nil else { return nil }
            defer { s.nextNumber += 1 }
            return s.nextNumber
        }
        guard let number, let other else { return Self.notSent }
        other.deliver(IncomingRequest(handle: RequestHandle(number: number, noReply: true), request: request, size: 0))
        return Self.sent
    }

    /// Hands the answer to whoever waits for it on the other end.
    public func respond(to request: RequestHandle, with response: Response) -> TransportWrite {
        guard state.withLock({ $0.ended == nil }), let other else { return Self.notSent }
        other.answer(request.number, response)
        return Self.sent
    }

    /// Hands blob bytes to whoever fetches them on the other end.
    public func sendBlobPart(to request: RequestHandle, _ bytes: ArraySlice<UInt8>, isLast: Bool) -> TransportWrite {
        guard state.withLock({ $0.ended == nil }), let other else { return Self.notSent }
        other.blobPart(request.number, BlobPart(bytes: bytes, isLast: isLast))
        return Self.sent
    }

    /// Ends both ends.
    public func close(code: UInt16, reason: String) async {
        end("\(code): \(reason)")
        other?.end("\(code): \(reason)")
    }

    /// The other end's name.
    public var remotePeer: String? { other?.name }
    /// The features given to `pair`.
    public var agreedFeatures: [String] { features }
    /// Never: nothing here can break a protocol.
    public var refusal: String? { nil }
    /// The close code and reason, once closed.
    public var closeDescription: String? { state.withLock { $0.ended } }
    /// Always zero: nothing is encoded.
    public var traffic: ChannelTraffic { state.withLock { $0.traffic } }

    // MARK: What the other end does to this one

    private func deliver(_ request: IncomingRequest) {
        let reader: CheckedContinuation<ChannelEvent?, Never>? = state.withLock { s in
            guard s.ended == nil else { return nil }
            if let reader = s.reader.take() { return reader }
            s.events.append(.request(request))
            return nil
        }
        reader?.resume(returning: .request(request))
    }

    private func answer(_ number: Int, _ response: Response) {
        let (sink, blob): (AsyncStream<Response>.Continuation?, AsyncStream<BlobPart>.Continuation?) = state.withLock { s in
            let sink = s.answers.removeValue(forKey: number)
            // Bytes follow an `attachment` answer only.
            if case .attachment = response { return (sink, nil) }
            return (sink, s.blobs.removeValue(forKey: number))
        }
        sink?.yield(response)
        sink?.finish()
        blob?.finish()
    }

    private func blobPart(_ number: Int, _ part: BlobPart) {
        let sink = state.withLock { part.isLast ? $0.blobs.removeValue(forKey: number) : $0.blobs[number] }
        sink?.yield(part)
        if part.isLast { sink?.finish() }
    }

    private func end(_ why: String) {
        let (reader, answers, blobs) = state.withLock { s in
            if s.ended == nil { s.ended = why }
            defer { s.answers.removeAll(); s.blobs.removeAll() }
            return (s.events.isEmpty ? s.reader.take() : nil, Array(s.answers.values), Array(s.blobs.values))
        }
        reader?.resume(returning: nil)
        answers.forEach { $0.finish() }
        blobs.forEach { $0.finish() }
    }

    private static let sent = TransportWrite {}
    private static let notSent = TransportWrite { throw ChannelEnded() }
}
