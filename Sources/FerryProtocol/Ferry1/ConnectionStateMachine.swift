/// The per-connection protocol state of `ferry/1`, as a value: feed it every incoming frame
/// and it says what to do. It negotiates the version with `hello`, numbers outgoing requests,
/// matches responses and blob chunks to them, and turns every violation into a close with a
/// clear reason, before any of the frame reaches the replicator. No I/O; tested without sockets.
public struct ConnectionStateMachine: Sendable {
    /// Who opened the connection: the active peer (replicator) speaks first.
    public enum Role: Sendable { case active, passive }

    /// What the owner of the connection must do next.
    public enum Action: Sendable, Equatable {
        /// Nothing (e.g. a response that completed the handshake is handled here).
        case none
        /// Send this frame.
        case send(Frame)
        /// The handshake finished: the version and features in use, and the peer's id.
        case opened(version: Int, peer: String, features: [String])
        /// Hand this request to the replication logic.
        case request(number: Int, noReply: Bool, Request)
        /// Hand this response to whoever sent request `to` (whose type is `answering`).
        case response(to: Int, answering: String, Response)
        /// Hand this blob chunk to whoever sent the `getAttachment` request it answers.
        case chunk(BlobChunk)
        /// Send a close frame with this code and reason, then close (after the frame, if any).
        case close(code: UInt16, reason: String, after: Frame?)
    }

    enum State: Sendable, Equatable {
        case awaitingHello
        case open(version: Int)
        case closed
    }

    /// This side's role.
    public let role: Role
    /// This side's peer id (its folder id).
    public let localPeer: String
    /// The database this side serves (passive) or wants (active).
    public let database: String
    /// Optional features this side supports (e.g. "delta").
    public let features: [String]
    /// Frame limits.
    public let limits: ProtocolLimits
    var state: State = .awaitingHello
    var nextNumber = 1
    var helloNumber: Int?
    /// Our requests awaiting a response (or blob chunks), by number.
    var outstanding: [Int: String] = [:]
    var lastIncomingNumber = 0
    /// The other side's peer id, once `hello` has been exchanged.
    public private(set) var remotePeer: String?
    /// Features both sides support, once `hello` has been exchanged.
    public private(set) var agreedFeatures: [String] = []

    /// A state machine for one connection.
    public init(role: Role, localPeer: String, database: String, features: [String] = [], limits: ProtocolLimits = ProtocolLimits()) {
        self.role = role
        self.localPeer = localPeer
        self.database = database
        self.features = features
        self.limits = limits
    }

    /// True once `hello` has been exchanged.
    public var isOpen: Bool { if case .open = state { return true } else { return false } }

    /// The active side's first frame (`hello`); nil for the passive side.
    public mutating func start() -> Frame? {
        guard role == .active, helloNumber == nil else { return nil }
        let frame = send(.hello(versions: ProtocolVersion.supported, peer: localPeer, database: database, features: features))
        helloNumber = frameNumber(frame)
        return frame
    }

    /// Numbers a request to send; remembers it until its response arrives.
    public mutating func send(_ request: Request, noReply: Bool = false) -> Frame {
        let number = nextNumber
        nextNumber += 1
        if !noReply { outstanding[number] = request.typeName }
        return .request(number: number, noReply: noReply, request)
    }

    /// Handles a text frame.
    public mutating func receiveText(_ bytes: [UInt8]) -> Action {
        guard state != .closed else { return .none }
        let frame: Frame
        do {
            frame = try FrameCodec.decode(bytes, limits: limits) { [outstanding] n in outstanding[n] }
        } catch {
            return fail(error)
        }
        switch frame {
        case let .response(to, response):
            guard let answering = outstanding.removeValue(forKey: to) else {
                return fail(ProtocolError(.outOfOrder, "response to unknown request \(to)"))
            }
            if to == helloNumber {
                helloNumber = nil
                guard case let .hello(version, peer, agreed) = response, ProtocolVersion.supported.contains(version) else {
                    if case let .error(status, message) = response {
                        state = .closed
                        return .close(code: 1000, reason: "peer refused: \(status) \(message)", after: nil)
                    }
                    return fail(ProtocolError(.unsupportedVersion, "peer answered hello with no version this side speaks"))
                }
                if let why = PeerID.problem(peer) { return fail(ProtocolError(.malformed, "the peer's hello: \(why)")) }
                state = .open(version: version)
                remotePeer = peer
                agreedFeatures = agreed.filter(features.contains)
                return .opened(version: version, peer: peer, features: agreedFeatures)
            }
            guard isOpen else { return fail(ProtocolError(.outOfOrder, "response before hello completed")) }
            if answering == "getAttachment", case .attachment = response { outstanding[to] = answering }  // chunks follow
            return .response(to: to, answering: answering, response)
        case let .request(number, noReply, request):
            guard number > lastIncomingNumber else {
                return fail(ProtocolError(.outOfOrder, "request number \(number) does not increase"))
            }
            lastIncomingNumber = number
            if case let .hello(versions, peer, wanted, theirFeatures) = request {
                return handleHello(number: number, versions: versions, peer: peer, database: wanted, features: theirFeatures)
            }
            guard isOpen else { return fail(ProtocolError(.outOfOrder, "\(request.typeName) before hello")) }
            return .request(number: number, noReply: noReply, request)
        }
    }

    /// Handles a binary frame: a chunk of a blob this side asked for.
    public mutating func receiveBinary(_ bytes: [UInt8]) -> Action {
        guard state != .closed else { return .none }
        let chunk: BlobChunk
        do { chunk = try BlobChunk.decode(bytes, limits: limits) } catch { return fail(error) }
        guard isOpen, outstanding[Int(chunk.requestNumber)] == "getAttachment" else {
            return fail(ProtocolError(.outOfOrder, "blob bytes for request \(chunk.requestNumber), which asked for none"))
        }
        if chunk.isLast { outstanding[Int(chunk.requestNumber)] = nil }
        return .chunk(chunk)
    }

    private mutating func handleHello(number: Int, versions: [Int], peer: String, database wanted: String, features theirs: [String]) -> Action {
        guard role == .passive, !isOpen else { return fail(ProtocolError(.outOfOrder, "unexpected hello")) }
        guard wanted == database else {
            state = .closed
            return .close(code: 1008, reason: "no database \(String(reflecting: wanted)) here",
                          after: .response(to: number, .error(status: 404, message: "no database \(String(reflecting: wanted)) here")))
        }
        guard let version = versions.filter(ProtocolVersion.supported.contains).max() else {
            state = .closed
            let message = "no common protocol version (peer offers \(versions), this side speaks \(ProtocolVersion.supported))"
            return .close(code: 1002, reason: message, after: .response(to: number, .error(status: 400, message: message)))
        }
        if let why = PeerID.problem(peer) {
            state = .closed
            return .close(code: 1002, reason: why, after: .response(to: number, .error(status: 400, message: why)))
        }
        state = .open(version: version)
        let agreed = theirs.filter(features.contains)
        remotePeer = peer
        agreedFeatures = agreed
        return .send(.response(to: number, .hello(version: version, peer: localPeer, features: agreed)))
    }

    private mutating func fail(_ error: ProtocolError) -> Action {
        state = .closed
        return .close(code: error.closeCode, reason: error.description, after: nil)
    }

    private func frameNumber(_ frame: Frame) -> Int? {
        if case let .request(number, _, _) = frame { return number }
        return nil
    }
}

/// The id a peer gives in `hello`: it names the peer in `origin` and in logs, so it is short
/// and plain, and it can never be `local` (this folder's own revisions).
public enum PeerID {
    /// Longest id accepted (a folder id is a 36-character UUID).
    public static let maxLength = 64

    /// Why `id` cannot name a peer, or nil.
    public static func problem(_ id: String) -> String? {
        guard !id.isEmpty, id.utf8.count <= maxLength else { return "a peer id has 1 to \(maxLength) characters" }
        guard id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || "-_.".utf8.contains($0) }) else {
            return "a peer id has only letters, digits, '-', '_' and '.'"
        }
        guard id != "local" else { return "a peer cannot call itself \"local\"" }
        return nil
    }
}
