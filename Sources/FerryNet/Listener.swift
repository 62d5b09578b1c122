import FerryCore
import FerryProtocol
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// Checks HTTP Basic credentials from an upgrade request (nil user: none were sent).
public typealias PasswordCheck = @Sendable (_ user: String?, _ password: String?) -> Bool

/// What a listener serves and how.
public struct ListenerConfiguration: Sendable {
    /// Address to bind (an IP address).
    public var host = "127.0.0.1"
    /// Port; 0 picks a free one.
    public var port = 0
    /// The database served at `/<database>`.
    public var database: String
    /// Extra members of the JSON description answered to a plain GET of `/<database>`.
    public var describe: [String: JSONValue] = [:]
    /// Largest WebSocket message accepted (after reassembly of fragments).
    public var maxMessageBytes = ProtocolLimits().maxTextFrameBytes
    /// Password check; nil accepts every client. It may be slow (PBKDF2): it runs on a
    /// thread of its own, never on an event loop, once per request.
    public var passwordCheck: PasswordCheck?
    /// A cheap check of credentials verified before (a reconnecting replicator), tried first.
    public var recentlyVerified: PasswordCheck?
    /// TLS (`wss://`); nil serves plain `ws://`.
    public var tls: ListenerTLS?
    /// How long a connection may take from accept to upgraded WebSocket (TLS handshake, the
    /// request, authentication); then it is dropped.
    public var setupTimeout: Duration = .seconds(10)
    /// Most connections being set up at once; past it the oldest is dropped, so connections
    /// that send nothing cannot lock real peers out.
    public var maxConnectionsInSetup = 128
    /// Most upgraded connections open at once; past it an upgrade request is answered 503
    /// (the client retries with its backoff), so a crowd of clients cannot exhaust the
    /// descriptors the folder itself needs.
    public var maxConnections = 256
    /// Most upgraded connections open at once from one IP address (503 past it), so that one
    /// host cannot take every connection the listener allows.
    public var maxConnectionsPerAddress = 64
    /// The passive side's ping interval (a peer silent for two is dropped); nil: no pings.
    public var heartbeat: Duration? = .seconds(30)
    /// Failed logins go here (user and address, never a secret).
    public var logger = Logger(label: "ferry.listener")

    /// A configuration serving `database`.
    public init(database: String) { self.database = database }
}

/// The passive peer's network side: an HTTP server on NIO whose connections NIO's typed
/// upgrader turns into WebSockets speaking `ferry/1` (`GET /<database>`, after HTTP Basic
/// authentication); accepted connections arrive as an `NIOAsyncChannel` and each one's
/// outcome is awaited in a child task. Anything else gets a plain HTTP answer: a JSON
/// description of the database, 404, 400, 401 with `WWW-Authenticate`, or 503 when it serves
/// as many connections as it allows. Never crashes on what a client sends.
public final class Listener: Sendable {
    /// The configuration.
    public let configuration: ListenerConfiguration
    /// The bound port.
    public let port: Int
    private let channel: Channel
    private let accepting: Task<Void, Never>
    private let registry: ConnectionRegistry
    private let setups: SetupTracker
    private let logins: LoginGuard

    private init(configuration: ListenerConfiguration, channel: Channel, accepting: Task<Void, Never>,
                 registry: ConnectionRegistry, setups: SetupTracker, logins: LoginGuard) {
        self.configuration = configuration
        self.channel = channel
        self.accepting = accepting
        self.registry = registry
        self.setups = setups
        self.logins = logins
        self.port = channel.localAddress?.port ?? configuration.port
    }

    /// Binds and starts accepting; `onConnection` is called for every upgraded WebSocket
    /// (hand the connection to a task and return).
    public static func start(_ configuration: ListenerConfiguration, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                             onConnection: @escaping @Sendable (PeerConnection) -> Void) async throws -> Listener {
        let registry = ConnectionRegistry()
        let config = configuration
        let sslContext = try configuration.tls.map { try NIOSSLContext(configuration: $0.configuration()) }
        let logins = LoginGuard(check: config.passwordCheck, recentlyVerified: config.recentlyVerified, logger: config.logger)
        let setups = SetupTracker(limit: max(config.maxConnectionsInSetup, 1), timeout: TimeAmount(config.setupTimeout))
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.socketOption(.so_keepalive), value: 1)
            .bind(host: configuration.host, port: configuration.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    setups.admit(channel)
                    if let sslContext { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext)) }
                    return try ConnectionSetup(configuration: config, logins: logins, setups: setups, registry: registry)
                        .configure(channel)
                }
            }
        let accepting = Task<Void, Never> {
            _ = try? await server.executeThenClose { inbound in
                await withDiscardingTaskGroup { group in
                    do {
                        for try await outcome in inbound {
                            group.addTask {
                                if case .webSocket(let connection)? = try? await outcome.get() { onConnection(connection) }
                            }
                        }
                    } catch {}
                }
            }
        }
        return Listener(configuration: configuration, channel: server.channel, accepting: accepting, registry: registry, setups: setups, logins: logins)
    }

    /// True when `error`, thrown by `start`, says the address and port are taken (EADDRINUSE).
    public static func isAddressInUse(_ error: Error) -> Bool {
        (error as? IOError)?.errnoCode == EADDRINUSE
    }

    /// The listener's URL, e.g. `ws://127.0.0.1:4984/inventory`.
    public var url: String { "\(configuration.tls == nil ? "ws" : "wss")://\(configuration.host):\(port)/\(configuration.database)" }

    /// Connections accepted since start, and those open now.
    public var connectionCounts: (total: Int, active: Int) { registry.counts }

    /// Stops accepting, sends every peer a close frame that asks it to come back
    /// (`WireFormat.retryCloseCode`) and waits (bounded) for the connections to end.
    public func stop() async {
        try? await channel.close()
        // Connections still in setup would hold the accept loop until their deadline.
        setups.closeAll()
        await accepting.value
        logins.shutdown()
        let open = registry.all
        for c in open { c.bridge.initiateClose(channel: c.channel, code: c.wireFormat.retryCloseCode, reason: "listener stopped") }
        // Each peer has 2 s to answer its close frame; cancelling (a forced stop) closes them now.
        await withTaskCancellationHandler {
            for c in open { try? await c.channel.closeFuture.get() }
        } onCancel: {
            for c in open { c.channel.close(promise: nil) }
        }
    }
}

/// What became of an accepted connection's HTTP request.
enum ConnectionOutcome: Sendable {
    /// Upgraded: a WebSocket (its `wireFormat` says what it speaks).
    case webSocket(PeerConnection)
    /// Answered with plain HTTP (a description, 404, 400, 401, 503), then closed.
    case plainHTTP
}

/// The pipeline of one accepted connection: HTTP with NIO's typed WebSocket upgrader, whose
/// refusal (or a request that asks for no upgrade) hands the request to `PlainHTTPHandler`.
struct ConnectionSetup: Sendable {
    let configuration: ListenerConfiguration
    let logins: LoginGuard
    let setups: SetupTracker
    let registry: ConnectionRegistry

    /// Adds the handlers; the future completes with what the request became.
    func configure(_ channel: Channel) throws -> EventLoopFuture<ConnectionOutcome> {
        let config = configuration, setups = setups, registry = registry
        let decision = RouteDecision(configuration: config, logins: logins, registry: registry)
        let upgrader = NIOTypedWebSocketServerUpgrader<ConnectionOutcome>(
            maxFrameSize: min(config.maxMessageBytes, Int(UInt32.max)),
            // The bridge answers a frame over the limit with a close frame that says why.
            enableAutomaticErrorHandling: false,
            shouldUpgrade: { channel, head in
                decision.decide(head, channel: channel).map { route in
                    guard case .upgrade(let format) = route else { return nil }
                    var headers = HTTPHeaders()
                    // Couchbase Lite fails a connection whose answer names no subprotocol.
                    headers.add(name: "Sec-WebSocket-Protocol", value: format.subprotocol)
                    return headers
                }
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    let offered = head.headers["Sec-WebSocket-Protocol"].flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
                    let format = WireFormat.chosen(from: offered, blipPath: Route.path(of: head).hasSuffix("/_blipsync")) ?? .ferry1
                    let bridge = try WebSocketBridge.install(on: channel, role: .server, maxMessageBytes: config.maxMessageBytes)
                    setups.upgraded(channel)
                    if let heartbeat = config.heartbeat { bridge.startHeartbeat(channel: channel, interval: TimeAmount(heartbeat), closeCode: format.retryCloseCode) }
                    // The user is named only when a password check let it in (without one, the
                    // header proves nothing); never the password.
                    let user = config.passwordCheck == nil ? nil : BasicCredentials.parse(head.headers["Authorization"].first).0
                    let connection = PeerConnection(channel: channel, bridge: bridge, wireFormat: format,
                                                    user: user, path: Route.path(of: head))
                    registry.add(connection, channel: channel, address: ConnectionRegistry.address(of: channel))
                    channel.closeFuture.whenComplete { _ in registry.remove(connection) }
                    return .webSocket(connection)
                }
            })
        let upgrades = NIOTypedHTTPServerUpgradeConfiguration(upgraders: [upgrader]) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(PlainHTTPHandler(configuration: config, decision: decision))
                return .plainHTTP
            }
        }
        let outcome = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(
            configuration: NIOUpgradableHTTPServerPipelineConfiguration(upgradeConfiguration: upgrades))
        let upgradeHandler = try channel.pipeline.syncOperations.handler(type: NIOTypedHTTPServerUpgradeHandler<ConnectionOutcome>.self)
        try channel.pipeline.syncOperations.addHandler(RequestPeek(decision: decision), position: .before(upgradeHandler))
        return outcome
    }
}

/// A listener's TLS: its identity and, to require client certificates, the roots they must
/// chain to (`--client-ca`). TLS 1.2 at least; 1.3 is preferred by both ends.
public struct ListenerTLS: Sendable {
    /// What the listener presents.
    public var identity: TLSIdentity
    /// Roots a client certificate must chain to; nil: no client certificate is asked for.
    public var clientRoots: TrustedRoots?

    /// TLS with `identity`, and client certificates checked against `clientRoots` if given.
    public init(identity: TLSIdentity, clientRoots: TrustedRoots? = nil) {
        self.identity = identity
        self.clientRoots = clientRoots
    }

    func configuration() -> TLSConfiguration {
        var config = TLSConfiguration.makeServerConfiguration(
            certificateChain: identity.certificateChain.map { .certificate($0) }, privateKey: .privateKey(identity.privateKey))
        config.minimumTLSVersion = .tlsv12
        if let clientRoots {
            // A client must present a certificate that chains to these roots.
            config.certificateVerification = .noHostnameVerification
            config.trustRoots = .certificates(clientRoots.certificates)
        }
        return config
    }
}

/// The open connections of a listener, and how many come from each address. An upgrade is
/// counted from the moment it is let in (`reserve`), not once it completes: upgrades sent all
/// at once would otherwise all find the same count and all get in.
final class ConnectionRegistry: Sendable {
    private struct State {
        var open: [ObjectIdentifier: (connection: PeerConnection, address: String)] = [:]
        /// Channels let in whose upgrade has not completed yet, with their address.
        var reserved: [ObjectIdentifier: String] = [:]
        /// Open and reserved, per address.
        var perAddress: [String: Int] = [:]
        var total = 0
        /// Gives back one of `address`'s places (an open connection's or a reservation's).
        mutating func release(_ address: String) {
            perAddress[address] = perAddress[address]! > 1 ? perAddress[address]! - 1 : nil
        }
        /// Upgrades refused as busy since the last one logged (`noteRefusal`).
        var refusedUnlogged = 0
        var lastRefusalLogged: NIODeadline?
    }
    private let state = NIOLockedValueBox(State())

    /// Lets one more upgrade on `channel` in, counted at once; nil, or why not (full).
    func reserve(_ channel: Channel, address: String, _ config: ListenerConfiguration) -> String? {
        let id = ObjectIdentifier(channel)
        let refusal = state.withLockedValue { s -> String? in
            let load = ConnectionLoad(open: s.open.count + s.reserved.count, fromAddress: s.perAddress[address] ?? 0)
            if let why = load.refusal(config) { return why }
            s.reserved[id] = address
            s.perAddress[address, default: 0] += 1
            return nil
        }
        // An upgrade that never completes gives its place back when its channel closes.
        if refusal == nil { channel.closeFuture.whenComplete { [self] _ in release(id) } }
        return refusal
    }

    private func release(_ id: ObjectIdentifier) {
        state.withLockedValue { s in
            guard let address = s.reserved.removeValue(forKey: id) else { return }
            s.release(address)
        }
    }

    /// Counts the upgraded connection on `channel` (in the place its reservation took).
    func add(_ c: PeerConnection, channel: Channel, address: String) {
        state.withLockedValue { s in
            s.open[ObjectIdentifier(c)] = (c, address)
            if s.reserved.removeValue(forKey: ObjectIdentifier(channel)) == nil { s.perAddress[address, default: 0] += 1 }
            s.total += 1
        }
    }

    func remove(_ c: PeerConnection) {
        state.withLockedValue { s in
            guard let (_, address) = s.open.removeValue(forKey: ObjectIdentifier(c)) else { return }
            s.release(address)
        }
    }

    var all: [PeerConnection] { state.withLockedValue { $0.open.values.map(\.connection) } }
    var counts: (total: Int, active: Int) { state.withLockedValue { ($0.total, $0.open.count) } }

    /// The client's IP address, as connections are counted by (and logins checked by).
    static func address(of channel: Channel) -> String { channel.remoteAddress?.ipAddress ?? "unknown" }

    /// Connections open or being upgraded now, in all and from `address`.
    func load(from address: String) -> ConnectionLoad {
        state.withLockedValue { ConnectionLoad(open: $0.open.count + $0.reserved.count, fromAddress: $0.perAddress[address] ?? 0) }
    }

    /// Counts a busy refusal; returns how many to log now (this one and those not logged
    /// before), at most once a minute, so that clients retrying a full listener do not flood
    /// the log; nil otherwise.
    func noteRefusal() -> Int? {
        state.withLockedValue { s in
            s.refusedUnlogged += 1
            let now = NIODeadline.now()
            if let last = s.lastRefusalLogged, now - last < .minutes(1) { return nil }
            defer { s.refusedUnlogged = 0 }
            s.lastRefusalLogged = now
            return s.refusedUnlogged
        }
    }
}

/// Connections open (or being upgraded) at a moment: in all, and from one address.
struct ConnectionLoad {
    var open: Int
    var fromAddress: Int

    /// Why one more connection from that address is refused, if it is (nil: let it in).
    func refusal(_ config: ListenerConfiguration) -> String? {
        if open >= max(config.maxConnections, 1) { return "the listener serves \(config.maxConnections) connections already" }
        if fromAddress >= max(config.maxConnectionsPerAddress, 1) {
            return "the listener serves \(config.maxConnectionsPerAddress) connections from this address already"
        }
        return nil
    }
}

/// What to do with an HTTP request.
enum Route: Equatable {
    case upgrade(WireFormat)
    case describe
    case notFound(String)
    case unauthorized
    case badRequest(String)
    case busy(String)

    /// The route of `head`; `authorized` is the outcome of the password check (true when none
    /// is configured; false at once, unchecked, without credentials); `load`: the upgraded
    /// connections open now.
    static func decide(_ head: HTTPRequestHead, _ config: ListenerConfiguration, authorized: Bool, load: ConnectionLoad) -> Route {
        // Credentials first: a 404 for a name the listener does not serve, beside a 401 for
        // the one it does, would tell anyone which database is here.
        guard authorized else { return .unauthorized }
        if let missing = missingDatabase(head, config) { return missing }
        guard asksForUpgrade(head) else { return .describe }
        let offered = head.headers["Sec-WebSocket-Protocol"].flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        let blipPath = path(of: head) == "/" + config.database + "/_blipsync"
        guard let format = WireFormat.chosen(from: offered, blipPath: blipPath) else {
            return .badRequest(blipPath ? "offer the WebSocket subprotocol BLIP_3+CBMobile_3, BLIP_3+CBMobile_2 or \(ProtocolVersion.subprotocol)"
                                        : "offer the WebSocket subprotocol \(ProtocolVersion.subprotocol)")
        }
        if let why = load.refusal(config) { return .busy(why) }
        return .upgrade(format)
    }

    /// True when the request asks for a WebSocket.
    static func asksForUpgrade(_ head: HTTPRequestHead) -> Bool {
        head.headers["Upgrade"].contains { $0.lowercased() == "websocket" }
    }

    /// 404 unless the path is `/<database>` (ferry's) or `/<database>/_blipsync` (Couchbase
    /// Lite's replication endpoint).
    static func missingDatabase(_ head: HTTPRequestHead, _ config: ListenerConfiguration) -> Route? {
        let path = path(of: head)
        return path == "/" + config.database || path == "/" + config.database + "/_blipsync" ? nil : .notFound("no database at \(path)")
    }

    /// The request's path without its query and trailing slashes.
    static func path(of head: HTTPRequestHead) -> String {
        var path = head.uri
        if let q = path.firstIndex(of: "?") { path = String(path[..<q]) }
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        return path
    }
}

/// The route of a connection's request, decided once: the upgrader asks first for an upgrade
/// request, and the plain handler gets the same answer if the upgrade is refused (the password
/// check, which is slow on purpose, runs once per request).
final class RouteDecision: Sendable {
    let configuration: ListenerConfiguration
    let logins: LoginGuard
    /// The open connections, counted against `maxConnections` when the request is decided;
    /// one let in is counted at once (`ConnectionRegistry.reserve`).
    let registry: ConnectionRegistry
    private let decided = NIOLockedValueBox<EventLoopFuture<Route>?>(nil)

    init(configuration: ListenerConfiguration, logins: LoginGuard, registry: ConnectionRegistry) {
        self.configuration = configuration
        self.logins = logins
        self.registry = registry
    }

    /// The route of `head`, computed on first ask.
    func decide(_ head: HTTPRequestHead, channel: Channel) -> EventLoopFuture<Route> {
        if let known = decided.withLockedValue({ $0 }) { return known }
        let config = configuration
        let future: EventLoopFuture<Route>
        let (user, password) = BasicCredentials.parse(head.headers["Authorization"].first)
        let address = ConnectionRegistry.address(of: channel)
        let registry = self.registry
        let busy: @Sendable (Route) -> Route = { route in
            if case .busy(let why) = route, let refused = registry.noteRefusal() {
                config.logger.warning("refused a connection: \(why)\(refused > 1 ? " (\(refused) since the last such message)" : "")",
                                      metadata: ["address": "\(address)"])
            }
            return route
        }
        if Route.missingDatabase(head, config) == nil, Route.asksForUpgrade(head), let why = registry.load(from: address).refusal(config) {
            // Full already: the password check (slow on purpose) would be for nothing.
            future = channel.eventLoop.makeSucceededFuture(busy(.busy(why)))
        } else {
            future = logins.authorize(user: user, password: password, address: address, on: channel).map { authorized in
                var route = Route.decide(head, config, authorized: authorized, load: registry.load(from: address))
                // Let in means counted now, in the same step as the check.
                if case .upgrade = route, let why = registry.reserve(channel, address: address, config) { route = .busy(why) }
                return busy(route)
            }
        }
        decided.withLockedValue { $0 = future }
        return future
    }

    /// The request, if it asked for an upgrade (`RequestPeek` records it).
    var upgradeRequest: HTTPRequestHead? {
        get { upgradeHead.withLockedValue { $0 } }
        set { upgradeHead.withLockedValue { $0 = newValue } }
    }
    private let upgradeHead = NIOLockedValueBox<HTTPRequestHead?>(nil)
}

/// Connections between accept and upgrade: each gets a deadline, and at most `limit` are in
/// setup at once (the oldest is dropped for a new one), so idle or slow connections cannot
/// exhaust the listener's descriptors and lock real peers out.
final class SetupTracker: Sendable {
    private struct Pending {
        let channel: Channel
        let deadline: Scheduled<Void>
    }
    private struct State {
        var pending: [ObjectIdentifier: Pending] = [:]
        var order: [ObjectIdentifier] = []
    }
    private let state = NIOLockedValueBox(State())
    let limit: Int
    let timeout: TimeAmount

    init(limit: Int, timeout: TimeAmount) {
        self.limit = limit
        self.timeout = timeout
    }

    /// A new connection: it must upgrade within the timeout.
    func admit(_ channel: Channel) {
        let key = ObjectIdentifier(channel)
        let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        let evicted = state.withLockedValue { s -> [Channel] in
            s.pending[key] = Pending(channel: channel, deadline: deadline)
            s.order.append(key)
            var evicted: [Channel] = []
            while s.pending.count > limit, !s.order.isEmpty {
                let oldest = s.order.removeFirst()
                if let p = s.pending.removeValue(forKey: oldest) {
                    p.deadline.cancel()
                    evicted.append(p.channel)
                }
            }
            if s.order.count > 4 * limit { s.order.removeAll { s.pending[$0] == nil } }
            return evicted
        }
        for c in evicted { c.close(promise: nil) }
        channel.closeFuture.whenComplete { [self] _ in forget(key) }
    }

    /// The connection became a WebSocket: no more deadline.
    func upgraded(_ channel: Channel) { forget(ObjectIdentifier(channel)) }

    /// Closes every connection still being set up (the listener is stopping).
    func closeAll() {
        let pending = state.withLockedValue { s in
            defer { s.pending.removeAll(); s.order.removeAll() }
            return s.pending.values.map { $0.deadline.cancel(); return $0.channel }
        }
        for c in pending { c.close(promise: nil) }
    }

    private func forget(_ key: ObjectIdentifier) {
        state.withLockedValue { s in s.pending.removeValue(forKey: key)?.deadline.cancel() }
    }
}

/// Password checks off the event loops, one at a time on a thread of their own (PBKDF2 costs
/// a quarter of a second by design: two at once would take both cores), after a cheap look at
/// credentials verified before. The checks of one address wait for each other, and each
/// failure delays that address's next answer: 0.1 s after the first, doubling up to 10 s,
/// forgotten after 10 minutes. A connection that closed while waiting is not checked. Every
/// failed login is logged (user and address, never the password).
final class LoginGuard: Sendable {
    private let check: PasswordCheck?
    private let recentlyVerified: PasswordCheck?
    private let logger: Logger
    private let pool: NIOThreadPool?
    private struct Address {
        var failures = 0
        var lastFailure = NIODeadline.uptimeNanoseconds(0)
        /// Completes when the address's latest attempt has been answered.
        var tail: EventLoopFuture<Void>?
    }
    private let addresses = NIOLockedValueBox<[String: Address]>([:])

    init(check: PasswordCheck?, recentlyVerified: PasswordCheck?, logger: Logger) {
        self.check = check
        self.recentlyVerified = recentlyVerified
        self.logger = logger
        if check != nil {
            let pool = NIOThreadPool(numberOfThreads: 1)
            pool.start()
            self.pool = pool
        } else {
            self.pool = nil
        }
    }

    /// The delay after `failures` failed logins in a row.
    static func delay(after failures: Int) -> TimeAmount {
        guard failures > 0 else { return .zero }
        return .milliseconds(min(100 << min(failures - 1, 10), 10_000))
    }

    /// True when the credentials are accepted (answered after the address's delay when not).
    func authorize(user: String?, password: String?, address: String, on channel: Channel) -> EventLoopFuture<Bool> {
        let eventLoop = channel.eventLoop
        guard let check, let pool else { return eventLoop.makeSucceededFuture(true) }
        if let recentlyVerified, recentlyVerified(user, password) { return eventLoop.makeSucceededFuture(true) }
        // No credentials at all is how Couchbase Lite asks for the challenge (it sends them only
        // after a 401): refused at once, not checked, not counted or logged as a failed login.
        if user == nil && password == nil { return eventLoop.makeSucceededFuture(false) }
        let answered = eventLoop.makePromise(of: Void.self)
        let previous = addresses.withLockedValue { a -> EventLoopFuture<Void>? in
            let now = NIODeadline.now()
            if a.count > 10_000 { a = a.filter { $0.value.tail != nil || now - $0.value.lastFailure < .minutes(10) } }
            var entry = a[address] ?? Address()
            if entry.failures > 0, now - entry.lastFailure > .minutes(10) { entry.failures = 0 }
            let previous = entry.tail
            entry.tail = answered.futureResult
            a[address] = entry
            return previous
        }
        answered.futureResult.whenComplete { [self] _ in
            addresses.withLockedValue { a in
                if a[address]?.tail === answered.futureResult { a[address]?.tail = nil }
                if let entry = a[address], entry.tail == nil, entry.failures == 0 { a[address] = nil }
            }
        }
        let turn = previous.map { $0.hop(to: eventLoop) } ?? eventLoop.makeSucceededVoidFuture()
        let result = turn.flatMap { () -> EventLoopFuture<Bool> in
            guard channel.isActive else { return eventLoop.makeSucceededFuture(false) }
            return pool.runIfActive(eventLoop: eventLoop) { check(user, password) }
        }.flatMap { [self] accepted -> EventLoopFuture<Bool> in
            if accepted {
                addresses.withLockedValue { $0[address]?.failures = 0 }
                return eventLoop.makeSucceededFuture(true)
            }
            guard channel.isActive else { return eventLoop.makeSucceededFuture(false) }
            let failures = addresses.withLockedValue { a -> Int in
                a[address, default: Address()].failures += 1
                a[address]?.lastFailure = .now()
                return a[address]?.failures ?? 1
            }
            logger.warning("failed login", metadata: [
                "user": "\(user.map { String($0.prefix(64)) } ?? "(none)")", "address": "\(address)", "failuresInARow": "\(failures)",
            ])
            return eventLoop.scheduleTask(in: Self.delay(after: failures)) { false }.futureResult
        }.flatMapErrorThrowing { _ in false }
        result.whenComplete { _ in answered.succeed() }
        return result
    }

    /// Stops the checking thread.
    func shutdown() {
        pool?.shutdownGracefully { _ in }
    }
}

/// HTTP Basic credentials.
public enum BasicCredentials {
    /// The user and password of an `Authorization: Basic …` header (nils when absent or malformed).
    public static func parse(_ header: String?) -> (String?, String?) {
        guard let header, header.lowercased().hasPrefix("basic "),
              let decoded = Base64.decode(String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
              let colon = decoded.firstIndex(of: UInt8(ascii: ":"))
        else { return (nil, nil) }
        return (String(decoding: decoded[..<colon], as: UTF8.self), String(decoding: decoded[(colon + 1)...], as: UTF8.self))
    }

    /// The header value for a user and password.
    public static func header(user: String, password: String) -> String {
        "Basic " + Base64.encode(Array("\(user):\(password)".utf8))
    }
}

/// Sits before NIO's typed upgrade handler and remembers a request that asks for an upgrade,
/// which that handler keeps to itself when it refuses it. A connection carries one request:
/// after its head this handler leaves the pipeline (an upgrade removes HTTP's decoder, and
/// what follows is WebSocket bytes, not request parts).
final class RequestPeek: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    let decision: RouteDecision

    init(decision: RouteDecision) { self.decision = decision }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if case .head(let head) = part, !head.headers["Upgrade"].isEmpty { decision.upgradeRequest = head }
        context.fireChannelRead(data)
        if case .head = part { context.pipeline.syncOperations.removeHandler(context: context, promise: nil) }
    }
}

/// Answers requests that were not upgraded: a description, 404, 400, 401 or 503; then closes.
final class PlainHTTPHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let configuration: ListenerConfiguration
    let decision: RouteDecision
    private var head: HTTPRequestHead?

    init(configuration: ListenerConfiguration, decision: RouteDecision) {
        self.configuration = configuration
        self.decision = decision
    }

    /// An upgrade request NIO's typed upgrader refused never reaches this handler (it does not
    /// pass such a request on), so it is answered from what `RequestPeek` saw.
    func handlerAdded(context: ChannelHandlerContext) {
        guard let head = decision.upgradeRequest else { return }
        let context = NIOLoopBound(context, eventLoop: context.eventLoop)
        decision.decide(head, channel: context.value.channel).whenSuccess { [self] route in
            // Routed to an upgrade yet refused by NIO: the key or version was not RFC 6455's.
            if case .upgrade = route {
                respond(context: context.value, route: .badRequest("not a valid WebSocket upgrade (RFC 6455 section 4.1)"))
            } else {
                respond(context: context.value, route: route)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard decision.upgradeRequest == nil else { return }
        switch unwrapInboundIn(data) {
        case .head(let h): head = h
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            let context = NIOLoopBound(context, eventLoop: context.eventLoop)
            decision.decide(head, channel: context.value.channel).whenSuccess { [self] route in
                respond(context: context.value, route: route)
            }
        }
    }

    private func respond(context: ChannelHandlerContext, route: Route) {
        var headers = HTTPHeaders([("Content-Type", "application/json"), ("Connection", "close")])
        let status: HTTPResponseStatus
        var body: [String: JSONValue]
        switch route {
        case .describe, .upgrade:
            status = .ok
            body = configuration.describe
            body["db"] = .string(configuration.database)
            body["protocol"] = .string(ProtocolVersion.subprotocol)
        case .notFound(let why):
            status = .notFound
            body = ["error": "not_found", "reason": .string(why)]
        case .unauthorized:
            status = .unauthorized
            headers.add(name: "WWW-Authenticate", value: "Basic realm=\"ferry\"")
            body = ["error": "unauthorized", "reason": "wrong or missing credentials"]
        case .badRequest(let why):
            status = .badRequest
            body = ["error": "bad_request", "reason": .string(why)]
        case .busy(let why):
            status = .serviceUnavailable
            headers.add(name: "Retry-After", value: "5")
            body = ["error": "busy", "reason": .string(why)]
        }
        let text = JSONValue.object(body).canonicalBytes + [0x0A]
        headers.add(name: "Content-Length", value: String(text.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: text)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

}
