import FerryCore

/// A request of the peer's, in arrival order: ready for the session, waiting for the blobs
/// whose SHA-256 the channel must learn first, or answered by the channel already.
struct CBLArrival {
    enum State {
        case ready(Request)
        case waiting(CBLIncomingRev, missing: Set<CBLBlobDigest>)
    }
    let number: UInt64
    let noReply: Bool
    let size: Int
    var state: State
}

/// How the session's answer to one of the peer's requests goes on the wire.
struct CBLAnswering {
    var urgent: Bool
    /// For `changes`/`proposeChanges`: which entries of the message the session saw.
    var kept: [Int]?
    var total: Int
    /// For `getAttachment`: the blob's parts, collected into one reply.
    var blob: CBLBlobReply?
}

/// A blob the peer asked for, collected from the session's parts.
struct CBLBlobReply {
    var compress: Bool
    var expected: Int?
    var bytes: [UInt8] = []
    /// For `proveAttachment`: the peer's nonce; the reply is the proof instead of the bytes.
    var proofNonce: [UInt8]?

    init(compress: Bool, proofNonce: [UInt8]? = nil) {
        self.compress = compress
        self.proofNonce = proofNonce
    }

    /// The reply's body: the bytes, or the proof that this side holds them (Couchbase Mobile's
    /// `proveAttachment`: `sha1-` and the base64 of the SHA-1 of the nonce's length as one
    /// byte, the nonce, and the blob).
    var replyBody: [UInt8] {
        guard let nonce = proofNonce else { return bytes }
        var sha1 = CBLBlobDigest.Hasher()
        ([UInt8(nonce.count)] + nonce).withUnsafeBytes { sha1.update($0) }
        bytes.withUnsafeBytes { sha1.update($0) }
        return Array(sha1.finalize().description.utf8)
    }
}

/// A `getAttachment` of the session's: the blob under both names and the window asked.
struct CBLBlobRequest: Sendable {
    var sha256: BlobDigest
    var sha1: CBLBlobDigest
    var offset: Int
    var length: Int?
}

/// Where a `changes` answer's entries go when the channel left some out of the message.
struct CBLPositions: Sendable {
    var kept: [Int]
    var total: Int

    /// The answers for every entry the session sent: the left-out ones are "not wanted".
    func expand(_ answers: [ChangeAnswer]) -> [ChangeAnswer] {
        var all = [ChangeAnswer](repeating: .notWanted, count: total)
        for (i, answer) in answers.enumerated() where i < kept.count { all[kept[i]] = answer }
        return all
    }
}

/// What one of this side's requests waits for.
enum CBLAwaiting {
    /// The session's request: its answer.
    case answer(CBLAnswerKind, CBLPositions?, AsyncStream<Response>.Continuation)
    /// The session's `getAttachment`: the blob, handed out as the window asked.
    case blob(CBLBlobRequest, AsyncStream<Response>.Continuation, AsyncStream<BlobPart>.Continuation)
    /// The channel's own fetch of a blob whose SHA-256 a `rev` needs.
    case alias(CBLBlobDigest)
}

/// Which message a write belongs to.
struct CBLWriteKey: Hashable {
    var isResponse: Bool
    var number: UInt64
}

/// Everything a `CBLChannel` keeps, behind its lock.
struct CBLChannelState {
    var mux: BLIPMultiplexer
    var awaiting: [UInt64: CBLAwaiting] = [:]
    var answering: [UInt64: CBLAnswering] = [:]
    var arrivals: [CBLArrival] = []
    var fetching: Set<CBLBlobDigest> = []
    var cache: CBLBlobCache
    var writes: [CBLWriteKey: CBLMessageWrite] = [:]
    /// Which document named a blob (3.x sends `docID` with `getAttachment`).
    var docOfBlob: [CBLBlobDigest: String] = [:]
    var remotePeer: String?
    /// True once a checkpoint request named a ferry replicator (`CBLPeerID.ferryFolder`).
    var peerIsFerryReplicator = false
    var ended = false
    var refusal: String?
    var traffic = ChannelTraffic()

    init(mux: BLIPMultiplexer, cache: CBLBlobCache, remotePeer: String?) {
        self.mux = mux
        self.cache = cache
        self.remotePeer = remotePeer
    }

    /// A `norev` for a `rev` the channel refused (its ERR sent by the channel): never answered.
    static func norevArrival(number: UInt64, size: Int, doc: DocumentID, rev: RevisionID, sequence: Int, _ reply: BLIPErrorReply) -> CBLArrival {
        CBLArrival(number: number, noReply: true, size: size,
                   state: .ready(.norev(doc: doc, rev: rev, sequence: sequence, status: Int(reply.code), reason: reply.message)))
    }

    /// The first request at the head of the arrivals, if it is ready.
    mutating func takeArrival() -> IncomingRequest? {
        while let head = arrivals.first {
            switch head.state {
            case .waiting:
                // A blob request never waits behind a waiting `rev`: that `rev` may be waiting
                // for the peer's answer to this side's own blob request, which the peer may hold
                // behind its own waiting `rev` until this one is served (both sides pushing
                // files at once would deadlock). It has no order to keep with revisions.
                guard let i = arrivals.firstIndex(where: { if case .ready(.getAttachment) = $0.state { true } else { false } }) else { return nil }
                let blob = arrivals.remove(at: i)
                guard case .ready(let request) = blob.state else { return nil }
                return IncomingRequest(handle: RequestHandle(number: Int(blob.number), noReply: blob.noReply), request: request, size: blob.size)
            case .ready(let request):
                arrivals.removeFirst()
                return IncomingRequest(handle: RequestHandle(number: Int(head.number), noReply: head.noReply), request: request, size: head.size)
            }
        }
        return nil
    }

    /// Fixes the peer's id the first time it can: from a checkpoint request's client, or, when
    /// something else comes first, `CBLPeerID.unknown`. It never changes afterwards.
    mutating func learnPeer(from request: Request?) {
        guard remotePeer == nil else { return }
        switch request {
        case .getCheckpoint(let client)?, .setCheckpoint(let client, _, _)?:
            peerIsFerryReplicator = CBLPeerID.ferryFolder(inCheckpointClient: client) != nil
            remotePeer = CBLPeerID.from(checkpointClient: client)
        default:
            remotePeer = CBLPeerID.unknown
        }
    }

    /// Remembers the document that named a blob (bounded: forgotten wholesale past 10,000).
    mutating func remember(_ sha1: CBLBlobDigest, in doc: String) {
        if docOfBlob.count >= 10_000 { docOfBlob.removeAll() }
        docOfBlob[sha1] = doc
    }

    /// Hands out the window of `bytes` a `getAttachment` asked for; the blob leaves the cache
    /// once its end has been handed out.
    mutating func deliver(_ request: CBLBlobRequest, _ bytes: [UInt8], _ answer: AsyncStream<Response>.Continuation,
                          _ parts: AsyncStream<BlobPart>.Continuation) -> @Sendable () -> Void {
        let start = min(max(0, request.offset), bytes.count)
        let end = request.length.map { start + min($0, bytes.count - start) } ?? bytes.count
        // The session asks window after window until one is short: a blob of whole windows
        // ends with an empty one, which must still find the blob here (not fetch it again).
        if end == bytes.count, request.length.map({ end - start < $0 }) ?? true { cache.remove(request.sha256.description) }
        return {
            answer.yield(.attachment(length: end - start))
            answer.finish()
            var at = start
            repeat {
                let next = min(end, at + CBLChannelState.partSize)
                parts.yield(BlobPart(bytes: bytes[at..<next], isLast: next == end))
                at = next
            } while at < end
            parts.finish()
        }
    }

    /// Largest part handed to the session.
    static let partSize = 1 << 20

    /// An ERR answering request `number`.
    static func errorMessage(number: UInt64, urgent: Bool, _ reply: BLIPErrorReply) -> BLIPMessage {
        BLIPMessage(type: .error, number: number, flags: urgent ? [.urgent] : [],
                    properties: ["Error-Domain": reply.domain, "Error-Code": String(reply.code)], body: Array(reply.message.utf8))
    }
}
