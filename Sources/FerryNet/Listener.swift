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
    public var describe: [String: String] = [:]
    /// Largest WebSocket message accepted (after reassembly of fragments).
    public var maxMessageBytes = ProtocolLimits().maxTextFrameBytes
    /// Password check; nil accepts every client.
    public var passwordCheck: PasswordCheck?
    /// TLS (`wss://`); nil serves plain `ws://`.
    public var tls: ListenerTLS?

    /// A configuration serving `database`.
    public init(database: String) { self.database = database }
}

/// The passive peer's network side: an HTTP server on NIO that upgrades `GET /<database>`
/// to a WebSocket speaking `ferry/1`, after HTTP Basic authentication. Anything else gets a
/// plain HTTP answer: a JSON description of the database, 404, 400, or 401 with
/// `WWW-Authenticate`. Never crashes on what a client sends.
public final class Listener: Sendable {
    /// The configuration.
    public let configuration: ListenerConfiguration
    /// The bound port.
    public let port: Int
    private let channel: Channel
    private let registry: ConnectionRegistry

    private init(configuration: ListenerConfiguration, channel: Channel, registry: ConnectionRegistry) {
        self.configuration = configuration
        self.channel = channel
        self.registry = registry
        self.port = channel.localAddress?.port ?? configuration.port
    }

    /// Binds and starts accepting; `onConnection` is called (on an event loop: hand the
    /// connection to a task and return) for every upgraded WebSocket.
    public static func start(_ configuration: ListenerConfiguration, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                             onConnection: @escaping @Sendable (PeerConnection) -> Void) async throws -> Listener {
        let registry = ConnectionRegistry()
        let config = configuration
        let sslContext = try configuration.tls.map { try NIOSSLContext(configuration: $0.configuration()) }
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let upgrader = NIOWebSocketServerUpgrader(
                    maxFrameSize: min(config.maxMessageBytes, Int(UInt32.max)),
                    automaticErrorHandling: true,
                    shouldUpgrade: { channel, head in
                        guard case .upgrade = Route.decide(head, config) else { return channel.eventLoop.makeSucceededFuture(nil) }
                        var headers = HTTPHeaders()
                        headers.add(name: "Sec-WebSocket-Protocol", value: ProtocolVersion.subprotocol)
                        return channel.eventLoop.makeSucceededFuture(headers)
                    },
                    upgradePipelineHandler: { channel, _ in
                        let (stream, continuation) = AsyncStream<WebSocketMessage>.makeStream()
                        let bridge = WebSocketBridge(continuation: continuation)
                        let aggregator = NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1 << 16,
                                                                     maxAccumulatedFrameSize: config.maxMessageBytes)
                        return channel.pipeline.addHandlers([aggregator, bridge]).map {
                            let connection = PeerConnection(channel: channel, bridge: bridge, inbound: stream)
                            registry.add(connection)
                            channel.closeFuture.whenComplete { _ in registry.remove(connection) }
                            onConnection(connection)
                        }
                    })
                let plain = PlainHTTPHandler(configuration: config)
                if let sslContext {
                    do { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext)) } catch {
                        return channel.eventLoop.makeFailedFuture(error)
                    }
                }
                return channel.pipeline.configureHTTPServerPipeline(
                    withServerUpgrade: (upgraders: [upgrader], completionHandler: { context in
                        context.pipeline.removeHandler(plain, promise: nil)
                    })
                ).flatMap { channel.pipeline.addHandler(plain) }
            }
        let channel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        return Listener(configuration: configuration, channel: channel, registry: registry)
    }

    /// The listener's URL, e.g. `ws://127.0.0.1:4984/inventory`.
    public var url: String { "\(configuration.tls == nil ? "ws" : "wss")://\(configuration.host):\(port)/\(configuration.database)" }

    /// Connections accepted since start, and those open now.
    public var connectionCounts: (total: Int, active: Int) { registry.counts }

    /// Stops accepting, sends every peer a close frame (1001, going away) and waits (bounded)
    /// for the connections to end.
    public func stop() async {
        try? await channel.close()
        let open = registry.all
        for c in open { c.bridge.initiateClose(channel: c.channel, code: 1001, reason: "listener stopped") }
        for c in open { try? await c.channel.closeFuture.get() }
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

/// The open connections of a listener.
final class ConnectionRegistry: Sendable {
    private struct State {
        var open: [ObjectIdentifier: PeerConnection] = [:]
        var total = 0
    }
    private let state = NIOLockedValueBox(State())

    func add(_ c: PeerConnection) { state.withLockedValue { $0.open[ObjectIdentifier(c)] = c; $0.total += 1 } }
    func remove(_ c: PeerConnection) { state.withLockedValue { _ = $0.open.removeValue(forKey: ObjectIdentifier(c)) } }
    var all: [PeerConnection] { state.withLockedValue { Array($0.open.values) } }
    var counts: (total: Int, active: Int) { state.withLockedValue { ($0.total, $0.open.count) } }
}

/// What to do with an HTTP request.
enum Route: Equatable {
    case upgrade
    case describe
    case notFound(String)
    case unauthorized
    case badRequest(String)

    static func decide(_ head: HTTPRequestHead, _ config: ListenerConfiguration) -> Route {
        var path = head.uri
        if let q = path.firstIndex(of: "?") { path = String(path[..<q]) }
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        guard path == "/" + config.database else { return .notFound("no database at \(path)") }
        if let check = config.passwordCheck {
            let (user, password) = BasicCredentials.parse(head.headers["Authorization"].first)
            guard check(user, password) else { return .unauthorized }
        }
        let wantsUpgrade = head.headers["Upgrade"].contains { $0.lowercased() == "websocket" }
        guard wantsUpgrade else { return .describe }
        let offered = head.headers["Sec-WebSocket-Protocol"].flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        guard offered.contains(ProtocolVersion.subprotocol) else {
            return .badRequest("offer the WebSocket subprotocol \(ProtocolVersion.subprotocol)")
        }
        return .upgrade
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

/// Answers requests that were not upgraded: a description, 404, 400 or 401; then closes.
final class PlainHTTPHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let configuration: ListenerConfiguration
    private var head: HTTPRequestHead?

    init(configuration: ListenerConfiguration) { self.configuration = configuration }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h): head = h
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(context: context, route: Route.decide(head, configuration))
        }
    }

    private func respond(context: ChannelHandlerContext, route: Route) {
        var headers = HTTPHeaders([("Content-Type", "application/json"), ("Connection", "close")])
        let status: HTTPResponseStatus
        var body: [String: String]
        switch route {
        case .describe, .upgrade:
            status = .ok
            body = configuration.describe
            body["db"] = configuration.database
            body["protocol"] = ProtocolVersion.subprotocol
        case .notFound(let why):
            status = .notFound
            body = ["error": "not_found", "reason": why]
        case .unauthorized:
            status = .unauthorized
            headers.add(name: "WWW-Authenticate", value: "Basic realm=\"ferry\"")
            body = ["error": "unauthorized", "reason": "wrong or missing credentials"]
        case .badRequest(let why):
            status = .badRequest
            body = ["error": "bad_request", "reason": why]
        }
        let text = JSONValue.object(body.mapValues { .string($0) }).canonicalBytes + [0x0A]
        headers.add(name: "Content-Length", value: String(text.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: text)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

}
