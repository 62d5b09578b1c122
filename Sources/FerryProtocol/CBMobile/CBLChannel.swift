import FerryCore
import Synchronization

/// Couchbase Lite's replication protocol (CBMobile_2/_3 over BLIP 3) behind the
/// `ReplicationChannel` seam (docs/interop.md): each transport message is one BLIP frame in a
/// WebSocket binary message; `BLIPMultiplexer` does frames, ACKs, CRCs and deflate, this
/// class maps the messages both ways. Ids go through `CBLDocumentIDs`, bodies through
/// `CBLBodies` with the folder's `BlobDigestAliases`; everything the peer sends is decoded
/// and checked (`CBLRequestDecoding`) before it comes out of `next()`.
///
/// There is no handshake: `open()` succeeds at once. The peer's id is the one given, or the
/// one its first checkpoint request names (`CBLPeerID`). No optional features: revisions
/// always travel as whole bodies.
public final class CBLChannel: ReplicationChannel {
    /// Whether this side dialed (active) or accepted (passive) the connection.
    public typealias Role = ConnectionStateMachine.Role

    private let transport: MessageTransport
    private let aliases: any BlobDigestAliases
    private let limits: CBLLimits
    private let state: Mutex<CBLChannelState>

    /// A channel over `transport`. `remotePeer` names the peer when the caller knows it (the
    /// active side: e.g. its URL's identity); otherwise it is learned from the peer's first
    /// checkpoint request. `localPeer` and `database` are kept for logs: BLIP names neither.
    public init(transport: MessageTransport, role: Role, localPeer: String, database: String,
                aliases: any BlobDigestAliases, remotePeer: String? = nil, limits: CBLLimits = CBLLimits()) {
        self.transport = transport
        self.aliases = aliases
        self.limits = limits
        self.role = role
        self.localPeer = localPeer
        self.database = database
        state = Mutex(CBLChannelState(mux: BLIPMultiplexer(limits: limits.blip), cache: CBLBlobCache(capacity: limits.blobCacheBytes),
                                      remotePeer: remotePeer))
    }

    /// Couchbase Lite's passive side answers a second `subChanges` on a connection without
    /// ever sending its changes (seen against LiteCore 3.0), so each round gets a connection.
    public var resubscribes: Bool { false }
    /// Only current revisions to a Couchbase Lite client: it stores each revision it is sent,
    /// takes the last of a document as the server's (a deletion closing a merged branch, sent
    /// after the merge, made it purge the merge), and reports
    /// one that arrives beside a revision of its own as a conflict, to the app. Every revision
    /// to a ferry replicator (its checkpoints name its folder), whose folder must hold the same
    /// histories as this one, and from the active side, which cannot tell a ferry listener
    /// from a Couchbase Lite one.
    public var announcesIntermediateRevisions: Bool { role == .active || state.withLock { $0.peerIsFerryReplicator } }
    /// Couchbase Lite's `subChanges` reply is empty (`CBLResponses`): no count to compute.
    public var answersSubscriptionWithCount: Bool { false }
    /// LiteCore's pusher says "caught up" once per subscription, to the puller this active
    /// side runs (a ferry listener speaking this protocol says it after each pass, which the
    /// puller takes as well).
    public var saysCaughtUpOnce: Bool { role == .active }

    /// This side's role.
    public let role: Role
    /// This side's peer id.
    public let localPeer: String
    /// The database served or asked for.
    public let database: String

    // MARK: Reading

    /// The peer's next request, once it is checked and its blob digests are ferry's; replies,
    /// ACKs and this channel's own blob fetches are handled on the way.
    public func next() async -> ChannelEvent? {
        while true {
            if let ready = state.withLock({ $0.takeArrival() }) { return .request(ready) }
            guard let message = await transport.inbound.next() else {
                end()
                return nil
            }
            var effects: [@Sendable () -> Void] = []
            let close = state.withLock { s in receive(message, &s, &effects) }
            effects.forEach { $0() }
            if let (code, reason) = close {
                state.withLock { s in
                    s.refusal = s.refusal ?? reason
                    s.arrivals.removeAll()
                }
                await transport.close(code: code, reason: String(reason.prefix(120)))
                end()
                return .closed(code: code, reason: reason)
            }
        }
    }

    /// Everything one transport message does (with the state locked); returns a close when
    /// the peer broke the protocol.
    private func receive(_ message: TransportMessage, _ s: inout CBLChannelState, _ effects: inout [@Sendable () -> Void]) -> (UInt16, String)? {
        guard case .binary(let bytes) = message else { return (1002, "a text message on a BLIP connection") }
        s.traffic.received += bytes.count
        let received: BLIPMessage?
        do {
            received = try s.mux.receive(bytes)
        } catch {
            return (error.closeCode, "peer protocol error: \(error.message)")
        }
        if let failure = drain(&s) { return failure }
        guard let received else { return nil }
        switch received.type {
        case .request:
            guard s.arrivals.count < limits.maxWaitingRequests else { return (1008, "more than \(limits.maxWaitingRequests) requests waiting") }
            return handleRequest(received, &s)
        case .response, .error:
            return handleReply(received, &s, &effects)
        case .ackRequest, .ackResponse:
            return nil
        }
    }

    private func handleRequest(_ message: BLIPMessage, _ s: inout CBLChannelState) -> (UInt16, String)? {
        let number = message.number
        let noReply = message.flags.contains(.noReply)
        let urgent = message.flags.contains(.urgent)
        let size = message.body.count + 64
        func refuse(_ reply: BLIPErrorReply) -> (UInt16, String)? {
            noReply ? nil : queue(CBLChannelState.errorMessage(number: number, urgent: urgent, reply), &s).failure
        }
        /// Refuses a `rev` and hands the session its `norev` (answered here already).
        func refuseRevision(_ doc: DocumentID, _ rev: RevisionID, sequence: Int, _ reply: BLIPErrorReply) -> (UInt16, String)? {
            s.arrivals.append(CBLChannelState.norevArrival(number: number, size: size, doc: doc, rev: rev, sequence: sequence, reply))
            return refuse(reply)
        }
        switch CBLRequestDecoding.decode(message, limits: limits) {
        case .refused(let reply):
            return refuse(reply)
        case let .refusedRevision(doc, rev, sequence, reply):
            return refuseRevision(doc, rev, sequence: sequence, reply)
        case let .request(request, kept, total):
            s.learnPeer(from: request)
            if !noReply { s.answering[number] = CBLAnswering(urgent: urgent, kept: kept, total: total) }
            s.arrivals.append(CBLArrival(number: number, noReply: noReply, size: size, state: .ready(request)))
        case let .attachment(sha1, _, compress, proofNonce):
            guard let sha256 = aliases.sha256(for: sha1) else {
                return refuse(CBLResponses.error(status: 404, message: "no blob \(sha1)"))
            }
            s.learnPeer(from: nil)
            s.answering[number] = CBLAnswering(urgent: urgent, kept: nil, total: 0, blob: CBLBlobReply(compress: compress, proofNonce: proofNonce))
            s.arrivals.append(CBLArrival(number: number, noReply: noReply, size: size,
                                         state: .ready(.getAttachment(digest: sha256, offset: 0, length: nil))))
        case .rev(let rev):
            s.learnPeer(from: nil)
            do {
                let missing = try rev.unknownBlobs(aliases)
                let arrivalState: CBLArrival.State = missing.isEmpty ? .ready(try rev.resolve(aliases)) : .waiting(rev, missing: Set(missing))
                for sha1 in missing where !s.fetching.contains(sha1) {
                    // The SHA-256 of a blob is only known from its bytes: fetch it first.
                    let fetch = BLIPMessage.request(profile: "getAttachment", properties: ["digest": sha1.description, "docID": rev.cblID])
                    guard let fetched = try? s.mux.send(fetch) else {
                        return refuseRevision(rev.doc, rev.rev, sequence: rev.sequence, CBLResponses.error(status: 400, message: "cannot ask for \(sha1)"))
                    }
                    s.awaiting[fetched] = .alias(sha1)
                    s.fetching.insert(sha1)
                    s.remember(sha1, in: rev.cblID)
                }
                if !noReply { s.answering[number] = CBLAnswering(urgent: urgent, kept: nil, total: 0) }
                s.arrivals.append(CBLArrival(number: number, noReply: noReply, size: size, state: arrivalState))
                return drain(&s)
            } catch {
                return refuseRevision(rev.doc, rev.rev, sequence: rev.sequence,
                                      CBLResponses.error(status: error.status == 404 ? 400 : error.status, message: "rejected \(rev.doc)@\(rev.rev): \(error.message)"))
            }
        }
        return nil
    }

    private func handleReply(_ reply: BLIPMessage, _ s: inout CBLChannelState, _ effects: inout [@Sendable () -> Void]) -> (UInt16, String)? {
        guard let awaiting = s.awaiting.removeValue(forKey: reply.number) else { return nil }
        switch awaiting {
        case let .answer(kind, positions, sink):
            var response = CBLResponses.decode(reply, kind: kind)
            if let positions, case let .changes(answers, maxHistory) = response {
                response = .changes(positions.expand(answers), maxHistory: maxHistory)
            }
            let answer = response
            effects.append { sink.yield(answer); sink.finish() }
        case let .blob(request, answer, parts):
            if let error = reply.errorReply {
                let response = CBLResponses.response(for: error)
                effects.append { answer.yield(response); answer.finish(); parts.finish() }
                return nil
            }
            guard reply.body.count <= limits.maxBlobBytes, CBLBlobDigest.of(reply.body) == request.sha1 else {
                return (1002, "peer protocol error: the bytes of \(request.sha1) do not hash to it")
            }
            guard BlobDigest.of(reply.body) == request.sha256 else {
                effects.append { answer.yield(.error(status: 502, message: "\(request.sha1) is not \(request.sha256)")); answer.finish(); parts.finish() }
                return nil
            }
            s.cache.put(request.sha256.description, reply.body)
            effects.append(s.deliver(request, reply.body, answer, parts))
        case .alias(let sha1):
            s.fetching.remove(sha1)
            if reply.errorReply == nil, reply.body.count > limits.maxBlobBytes || CBLBlobDigest.of(reply.body) != sha1 {
                return (1002, "peer protocol error: the bytes of \(sha1) do not hash to it")
            }
            if reply.errorReply == nil {
                let sha256 = BlobDigest.of(reply.body)
                aliases.record(sha1: sha1, sha256: sha256)
                s.cache.put(sha256.description, reply.body)
            }
            for i in s.arrivals.indices {
                guard case .waiting(let rev, var missing) = s.arrivals[i].state, missing.contains(sha1) else { continue }
                missing.remove(sha1)
                var result: Result<Request, CBLInteropError>?
                if let error = reply.errorReply {
                    // Its refusal (a 4xx: no such blob) stands; anything else may pass, and the
                    // revision is asked for again by a later pull (`AwaitedRevisions`).
                    let status = (400..<500).contains(error.code) ? Int(error.code) : 502
                    result = .failure(CBLInteropError(status: status, "the peer could not send blob \(sha1): \(error.message)"))
                } else if missing.isEmpty {
                    result = Result { () throws(CBLInteropError) -> Request in try rev.resolve(aliases) }
                }
                switch result {
                case nil:
                    s.arrivals[i].state = .waiting(rev, missing: missing)
                case .success(let request)?:
                    s.arrivals[i].state = .ready(request)
                case .failure(let error)?:
                    let arrival = s.arrivals[i]
                    let reply = CBLResponses.error(status: error.status, message: "rejected \(rev.doc)@\(rev.rev): \(error.message)")
                    // The session gets a `norev` in its place: a pull that asked for it stops waiting.
                    s.arrivals[i] = CBLChannelState.norevArrival(number: arrival.number, size: arrival.size, doc: rev.doc, rev: rev.rev,
                                                                 sequence: rev.sequence, reply)
                    if let answering = s.answering.removeValue(forKey: arrival.number), !arrival.noReply {
                        let message = CBLChannelState.errorMessage(number: arrival.number, urgent: answering.urgent, reply)
                        if let failure = queue(message, &s).failure { return failure }
                    }
                }
            }
        }
        return nil
    }

    /// The connection ended: whoever waits for an answer, a blob or a write gets none.
    private func end() {
        let (awaiting, writes) = state.withLock { s in
            s.ended = true
            s.arrivals.removeAll()
            defer { s.awaiting.removeAll(); s.writes.removeAll(); s.answering.removeAll() }
            return (Array(s.awaiting.values), Array(s.writes.values))
        }
        for waiting in awaiting {
            switch waiting {
            case .answer(_, _, let sink): sink.finish()
            case let .blob(_, answer, parts): answer.finish(); parts.finish()
            case .alias: break
            }
        }
        writes.forEach { $0.failed() }
    }

    // MARK: Sending

    /// Nothing to negotiate over BLIP: open as long as the connection is.
    public func open() async -> Bool {
        state.withLock { !$0.ended }
    }

    /// Sends a request as Couchbase Lite's message. `getAttachment` asks for the whole blob
    /// once and hands out the window asked for (the rest stays in a bounded cache for the next
    /// windows); a blob fetched to learn its SHA-256 is served from that cache without asking again.
    public func send(_ request: Request) -> OutgoingRequest {
        if case let .getAttachment(digest, offset, length) = request { return sendGetAttachment(digest, offset: offset, length: length) }
        var request = request
        var positions: CBLPositions?
        if case .changes(let entries) = request {
            // Entries whose id Couchbase Lite cannot be given are "not wanted" (answered here).
            let kept = entries.indices.filter { (try? CBLDocumentIDs.cblID(entries[$0].doc)) != nil }
            if kept.count < entries.count {
                positions = CBLPositions(kept: kept, total: entries.count)
                if kept.isEmpty { return Self.answered(.changes([], maxHistory: nil)) }
                request = .changes(kept.map { entries[$0] })
            }
        }
        let message: BLIPMessage
        do {
            message = try CBLRequestEncoding.encode(request, aliases: aliases)
        } catch {
            return unsendable(request, status: error.status, reason: error.message)
        }
        let (answer, sink) = AsyncStream<Response>.makeStream()
        let kind = CBLAnswerKind(request)
        let written = state.withLock { s -> Result<TransportWrite, BLIPError>? in
            guard !s.ended else { return nil }
            let number: UInt64
            do throws(BLIPError) { number = try s.mux.send(message) } catch { return .failure(error) }
            // Registered before the frames are queued: the answer may follow at once.
            s.awaiting[number] = .answer(kind, positions, sink)
            return .success(track(number, isResponse: false, &s))
        }
        switch written {
        case .success(let written):
            return OutgoingRequest(written: written, answer: answer, blob: nil)
        case .failure(let error):
            // Over one of BLIP's limits (properties over 100 KiB): this message cannot go, the
            // connection can.
            sink.finish()
            return unsendable(request, status: error.code == .tooLarge ? 413 : 400, reason: error.message)
        case nil:
            sink.finish()
            return OutgoingRequest(written: Self.notSent, answer: answer, blob: nil)
        }
    }

    /// A request that cannot be put in Couchbase Lite's message: answered here with an error,
    /// and a `rev`, which the peer asked for, is followed by a `norev` so that it does not wait.
    private func unsendable(_ request: Request, status: Int, reason: String) -> OutgoingRequest {
        if case let .rev(doc, rev, _, sequence, _, _, _) = request {
            _ = notify(.norev(doc: doc, rev: rev, sequence: sequence, status: status, reason: reason))
        }
        return Self.answered(.error(status: status, message: "not sent to Couchbase Lite: " + reason))
    }

    private func sendGetAttachment(_ digest: BlobDigest, offset: Int, length: Int?) -> OutgoingRequest {
        let (answer, answerSink) = AsyncStream<Response>.makeStream()
        let (parts, partSink) = AsyncStream<BlobPart>.makeStream()
        let sha1 = aliases.sha1(for: digest)
        let request = CBLBlobRequest(sha256: digest, sha1: sha1 ?? CBLBlobDigest(bytes: [UInt8](repeating: 0, count: 20))!, offset: offset, length: length)
        let outcome: (TransportWrite?, (@Sendable () -> Void)?) = state.withLock { s in
            if let cached = s.cache.get(digest.description) { return (Self.done, s.deliver(request, cached, answerSink, partSink)) }
            guard let sha1 else {
                return (Self.done, { answerSink.yield(.error(status: 404, message: "no Couchbase Lite digest known for \(digest)")); answerSink.finish(); partSink.finish() })
            }
            guard !s.ended else { return (nil, nil) }
            var properties: BLIPProperties = ["digest": sha1.description]
            if let doc = s.docOfBlob[sha1] { properties["docID"] = doc }
            guard let number = try? s.mux.send(.request(profile: "getAttachment", properties: properties)) else { return (nil, nil) }
            s.awaiting[number] = .blob(request, answerSink, partSink)
            return (track(number, isResponse: false, &s), nil)
        }
        outcome.1?()
        guard let written = outcome.0 else {
            answerSink.finish()
            partSink.finish()
            return OutgoingRequest(written: Self.notSent, answer: answer, blob: parts)
        }
        return OutgoingRequest(written: written, answer: answer, blob: parts)
    }

    /// Sends a request with the no-reply flag.
    public func notify(_ request: Request) -> TransportWrite {
        guard let message = try? CBLRequestEncoding.encode(request, aliases: aliases, noReply: true) else { return Self.notSent }
        return state.withLock { s in
            guard !s.ended, let number = try? s.mux.send(message) else { return Self.notSent }
            return track(number, isResponse: false, &s)
        }
    }

    /// Answers one of the peer's requests with Couchbase Lite's RES or ERR.
    public func respond(to request: RequestHandle, with response: Response) -> TransportWrite {
        let number = UInt64(request.number)
        return state.withLock { s in
            guard var answering = s.answering[number] else { return Self.done }
            if var blob = answering.blob {
                switch response {
                case .attachment(let length) where length <= limits.maxBlobBytes:
                    // The bytes follow as parts; they go out as one reply with the last.
                    blob.expected = length
                    answering.blob = blob
                    s.answering[number] = answering
                    return Self.done
                case .attachment(let length):
                    s.answering[number] = nil
                    let reply = CBLResponses.error(status: 413, message: "a blob of \(length) bytes, over \(limits.maxBlobBytes)")
                    return queue(CBLChannelState.errorMessage(number: number, urgent: answering.urgent, reply), &s).write
                default:
                    break
                }
            }
            s.answering[number] = nil
            let message: BLIPMessage
            switch CBLResponses.encode(response, kept: answering.kept, total: answering.total) {
            case let .success((properties, body)):
                var flags: BLIPFrameFlags = answering.urgent ? [.urgent] : []
                if body.count > 64 { flags.insert(.compressed) }
                message = BLIPMessage(type: .response, number: number, flags: flags, properties: properties, body: body)
            case .failure(let reply):
                message = CBLChannelState.errorMessage(number: number, urgent: answering.urgent, reply)
            }
            return queue(message, &s).write
        }
    }

    /// Collects the parts of a blob the peer asked for; the last sends them as the reply's body.
    public func sendBlobPart(to request: RequestHandle, _ bytes: ArraySlice<UInt8>, isLast: Bool) -> TransportWrite {
        let number = UInt64(request.number)
        return state.withLock { s in
            guard var answering = s.answering[number], var blob = answering.blob, blob.expected != nil else { return Self.done }
            blob.bytes += bytes
            guard blob.bytes.count <= limits.maxBlobBytes else {
                s.answering[number] = nil
                let reply = CBLResponses.error(status: 413, message: "a blob over \(limits.maxBlobBytes) bytes")
                return queue(CBLChannelState.errorMessage(number: number, urgent: answering.urgent, reply), &s).write
            }
            guard isLast else {
                answering.blob = blob
                s.answering[number] = answering
                return Self.done
            }
            s.answering[number] = nil
            var flags: BLIPFrameFlags = answering.urgent ? [.urgent] : []
            if blob.compress { flags.insert(.compressed) }
            return queue(BLIPMessage(type: .response, number: number, flags: flags, body: blob.replyBody), &s).write
        }
    }

    /// Closes the transport and waits until it has ended. The session's closes that ask the
    /// peer to come back (1001: silent, stopping; 1011: an error here worth retrying) go out
    /// as 4001, after which Couchbase Lite's replicator retries (`WireFormat.retryCloseCode`).
    public func close(code: UInt16, reason: String) async {
        let code = code == 1001 || code == 1011 ? WireFormat.cbMobile(version: 3).retryCloseCode : code
        await transport.close(code: code, reason: reason)
    }

    /// Queues a reply (with the state locked): its write, or a close when BLIP cannot encode it.
    private func queue(_ message: BLIPMessage, _ s: inout CBLChannelState) -> (write: TransportWrite, failure: (UInt16, String)?) {
        guard !s.ended else { return (Self.notSent, nil) }
        do {
            let number = try s.mux.send(message)
            return (track(number, isResponse: true, &s), nil)
        } catch {
            return (Self.notSent, nil)
        }
    }

    /// Registers the write of message `number` and sends what is ready (with the state locked).
    private func track(_ number: UInt64, isResponse: Bool, _ s: inout CBLChannelState) -> TransportWrite {
        let write = CBLMessageWrite()
        s.writes[CBLWriteKey(isResponse: isResponse, number: number)] = write
        if let (code, reason) = drain(&s) {
            s.refusal = s.refusal ?? reason
            let transport = self.transport
            Task { await transport.close(code: code, reason: reason) }
        }
        return write.transportWrite
    }

    /// Writes every frame the multiplexer has ready, in order (with the state locked), and
    /// completes the writes of messages whose last frame went.
    private func drain(_ s: inout CBLChannelState) -> (UInt16, String)? {
        do {
            while let frame = try s.mux.nextFrame() {
                var i = frame.startIndex
                let number = (try? BLIPVarint.read(frame[...], at: &i)) ?? 0
                let flags = BLIPFrameFlags(rawValue: UInt8(truncatingIfNeeded: (try? BLIPVarint.read(frame[...], at: &i)) ?? 0))
                s.traffic.sent += frame.count
                let write = transport.enqueue(.binary(frame))
                if !flags.contains(.moreComing), let type = flags.type, !type.isAck {
                    s.writes.removeValue(forKey: CBLWriteKey(isResponse: type.isResponse, number: number))?.finished(write)
                }
            }
        } catch {
            return (error.closeCode, "cannot encode a frame: \(error.message)")
        }
        return nil
    }

    private static let notSent = TransportWrite { throw ChannelEnded() }
    private static let done = TransportWrite {}

    /// A request answered here, without the wire.
    private static func answered(_ response: Response) -> OutgoingRequest {
        let (answer, sink) = AsyncStream<Response>.makeStream()
        sink.yield(response)
        sink.finish()
        return OutgoingRequest(written: done, answer: answer, blob: nil)
    }

    // MARK: Where it stands

    /// The peer's id: given, or learned from its first checkpoint request.
    public var remotePeer: String? { state.withLock { $0.remotePeer } }
    /// Always empty: no delta sync with Couchbase Lite (whole bodies only).
    public var agreedFeatures: [String] { [] }
    /// Why this side closed the connection, if it did.
    public var refusal: String? { state.withLock { $0.refusal } }
    /// How the transport ended.
    public var closeDescription: String? { transport.closeDescription }
    /// Frame bytes both ways.
    public var traffic: ChannelTraffic { state.withLock { $0.traffic } }
}
