import Synchronization

/// `ferry/1` behind the `ReplicationChannel` seam (docs/protocol.md): JSON text frames whose
/// requests are numbered per direction, the `hello` handshake, and blobs as binary chunks
/// naming their `getAttachment`. Every frame goes through the connection's
/// `ConnectionStateMachine` first, so a frame that breaks the protocol closes the connection
/// before anything of it reaches the session.
public final class Ferry1Channel: ReplicationChannel {
    private struct State {
        var machine: ConnectionStateMachine
        /// Where the answer to each of this side's requests goes, by request number.
        var answers: [Int: AsyncStream<Response>.Continuation] = [:]
        /// Where the chunks answering each `getAttachment` go, by request number.
        var blobs: [Int: AsyncStream<BlobPart>.Continuation] = [:]
        var openWaiter: CheckedContinuation<Bool, Never>?
        var ended = false
        var refusal: String?
        var traffic = ChannelTraffic()
    }

    private let transport: MessageTransport
    private let state: Mutex<State>

    /// A channel over `transport`. The active side names the `database` it wants, the passive
    /// side the one it serves; `features` are those this side offers in `hello`.
    public init(transport: MessageTransport, role: ConnectionStateMachine.Role, localPeer: String, database: String,
                features: [String] = [], limits: ProtocolLimits = ProtocolLimits()) {
        self.transport = transport
        self.state = Mutex(State(machine: ConnectionStateMachine(role: role, localPeer: localPeer, database: database,
                                                                 features: features, limits: limits)))
    }

    // MARK: Reading

    /// Reads frames until one is a request for the session (or this side closes the
    /// connection); answers, chunks and the handshake are handled on the way.
    public func next() async -> ChannelEvent? {
        while let message = await transport.inbound.next() {
            let action = state.withLock { s in
                s.traffic.received += message.bytes.count
                return switch message {
                case .text(let bytes): s.machine.receiveText(bytes)
                case .binary(let bytes): s.machine.receiveBinary(bytes)
                }
            }
            switch action {
            case .none:
                continue
            case .send(let frame):
                _ = state.withLock { enqueue(frame, &$0) }
            case .opened:
                state.withLock { $0.openWaiter.take() }?.resume(returning: true)
            case let .request(number, noReply, request):
                return .request(IncomingRequest(handle: RequestHandle(number: number, noReply: noReply), request: request,
                                                size: message.bytes.count))
            case let .response(to, _, response):
                state.withLock { $0.answers.removeValue(forKey: to) }.map { $0.yield(response); $0.finish() }
            case .chunk(let chunk):
                let number = Int(chunk.requestNumber)
                let sink = state.withLock { chunk.isLast ? $0.blobs.removeValue(forKey: number) : $0.blobs[number] }
                sink?.yield(BlobPart(bytes: chunk.bytes, isLast: chunk.isLast))
                if chunk.isLast { sink?.finish() }
            case let .close(code, reason, after):
                let written = state.withLock { s in
                    s.refusal = s.refusal ?? reason
                    return after.map { enqueue($0, &s) }
                }
                try? await written?.sent()
                await transport.close(code: code, reason: reason)
                return .closed(code: code, reason: reason)
            }
        }
        end()
        return nil
    }

    /// The connection ended: whoever waits for an answer, a chunk or the handshake gets none.
    private func end() {
        let (answers, blobs, opener) = state.withLock { s in
            s.ended = true
            defer { s.answers.removeAll(); s.blobs.removeAll() }
            return (Array(s.answers.values), Array(s.blobs.values), s.openWaiter.take())
        }
        answers.forEach { $0.finish() }
        blobs.forEach { $0.finish() }
        opener?.resume(returning: false)
    }

    // MARK: Sending

    /// Sends `hello` and waits for the peer's answer.
    public func open() async -> Bool {
        let hello: TransportWrite? = state.withLock { s in
            guard let frame = s.machine.start() else {
                s.refusal = s.refusal ?? "only the active side opens a session"
                return nil
            }
            return enqueue(frame, &s)
        }
        guard let hello else { return false }
        do { try await hello.sent() } catch { return false }
        return await withCheckedContinuation { waiter in
            let now: Bool? = state.withLock { s in
                if s.machine.isOpen { return true }
                if s.ended { return false }
                s.openWaiter = waiter
                return nil
            }
            if let now { waiter.resume(returning: now) }
        }
    }

    /// Numbers the request and queues its frame; its answer and chunks are routed by `next()`.
    public func send(_ request: Request) -> OutgoingRequest {
        send([request])[0]
    }

    /// Numbers the requests and queues their frames together (one write on the transport).
    public func send(_ requests: [Request]) -> [OutgoingRequest] {
        let sinks = requests.map { request in
            let answer = AsyncStream<Response>.makeStream()
            let blob: (stream: AsyncStream<BlobPart>, continuation: AsyncStream<BlobPart>.Continuation)? =
                if case .getAttachment = request { AsyncStream<BlobPart>.makeStream() } else { nil }
            return (answer: answer, blob: blob)
        }
        let written: [TransportWrite]? = state.withLock { s in
            guard !s.ended else { return nil }
            var messages: [TransportMessage] = []
            messages.reserveCapacity(requests.count)
            for (request, sink) in zip(requests, sinks) {
                let frame = s.machine.send(request)
                guard case let .request(number, _, _) = frame else { return nil }
                // Registered before the frame is queued: the answer may follow at once.
                s.answers[number] = sink.answer.continuation
                s.blobs[number] = sink.blob?.continuation
                messages.append(.text(FrameCodec.encode(frame)))
            }
            return enqueue(messages, &s)
        }
        guard let written else {
            for sink in sinks {
                sink.answer.continuation.finish()
                sink.blob?.continuation.finish()
            }
            return sinks.map { OutgoingRequest(written: Self.notSent, answer: $0.answer.stream, blob: $0.blob?.stream) }
        }
        return zip(written, sinks).map { OutgoingRequest(written: $0, answer: $1.answer.stream, blob: $1.blob?.stream) }
    }

    /// Numbers the request as wanting no answer and queues its frame.
    public func notify(_ request: Request) -> TransportWrite {
        state.withLock { s in s.ended ? Self.notSent : enqueue(s.machine.send(request, noReply: true), &s) }
    }

    /// Queues the response frame to the peer's request.
    public func respond(to request: RequestHandle, with response: Response) -> TransportWrite {
        state.withLock { s in enqueue(.response(to: request.number, response), &s) }
    }

    /// Queues a binary frame: the request's number, the last-chunk flag, the bytes.
    public func sendBlobPart(to request: RequestHandle, _ bytes: ArraySlice<UInt8>, isLast: Bool) -> TransportWrite {
        let chunk = BlobChunk(requestNumber: UInt32(truncatingIfNeeded: request.number), isLast: isLast, bytes: bytes).encoded()
        return state.withLock { enqueue(.binary(chunk), &$0) }
    }

    /// Closes the transport with a close frame and waits until it has ended.
    public func close(code: UInt16, reason: String) async {
        await transport.close(code: code, reason: reason)
    }

    /// Encodes and queues a frame while the state is locked, so that frames reach the wire in
    /// the order they were numbered (the peer refuses request numbers that do not increase).
    private func enqueue(_ frame: Frame, _ s: inout State) -> TransportWrite {
        enqueue(.text(FrameCodec.encode(frame)), &s)
    }

    /// Queues a message and counts its bytes (with the state locked).
    private func enqueue(_ message: TransportMessage, _ s: inout State) -> TransportWrite {
        s.traffic.sent += message.bytes.count
        return transport.enqueue(message)
    }

    /// Queues messages together and counts their bytes (with the state locked).
    private func enqueue(_ messages: [TransportMessage], _ s: inout State) -> [TransportWrite] {
        s.traffic.sent += messages.reduce(0) { $0 + $1.bytes.count }
        return transport.enqueue(messages)
    }

    private static let notSent = TransportWrite { throw ChannelEnded() }

    // MARK: Where it stands

    /// The id the peer gave in `hello`.
    public var remotePeer: String? { state.withLock { $0.machine.remotePeer } }
    /// The features both `hello`s named.
    public var agreedFeatures: [String] { state.withLock { $0.machine.agreedFeatures } }
    /// Why this side closed the connection, if it did.
    public var refusal: String? { state.withLock { $0.refusal } }
    /// How the transport ended.
    public var closeDescription: String? { transport.closeDescription }
    /// Frame payload bytes both ways.
    public var traffic: ChannelTraffic { state.withLock { $0.traffic } }
}
