import FerryProtocol
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import NIOWebSocket

/// A `ws://HOST:PORT/DB` address.
public struct PeerURL: Sendable, Equatable, CustomStringConvertible {
    /// `ws` or `wss`.
    public var scheme: String
    /// Host name or address.
    public var host: String
    /// Port.
    public var port: Int
    /// The database name (the path without its slash).
    public var database: String

    /// Parses `ws://host:port/db` (or `wss://`); nil when it is not one.
    public init?(_ text: String) {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              scheme == "ws" || scheme == "wss", let host = components.host, !host.isEmpty
        else { return nil }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !path.isEmpty, !path.contains("/") else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = components.port ?? (scheme == "wss" ? 443 : 80)
        self.database = path
    }

    /// The URL text.
    public var description: String { "\(scheme)://\(host):\(port)/\(database)" }
}

/// Which protocol a dial asks for (`--protocol`).
public enum PeerProtocol: String, Sendable, CaseIterable {
    /// `ferry-1` at `/<db>`.
    case ferry
    /// Couchbase Lite's, `BLIP_3+CBMobile_3` or `_2` at `/<db>/_blipsync`.
    case cbl
    /// Both offered at `/<db>/_blipsync`: a ferry listener picks `ferry-1`, Couchbase Lite
    /// (or Sync Gateway) a BLIP one.
    case auto

    /// The request path for `database`.
    func path(_ database: String) -> String { self == .ferry ? "/" + database : "/" + database + "/_blipsync" }

    /// The subprotocols offered, best first.
    var offered: [WireFormat] {
        let blip = WireFormat.cbMobileVersions.map { WireFormat.cbMobile(version: $0) }
        switch self {
        case .ferry: return [.ferry1]
        case .cbl: return blip
        case .auto: return [.ferry1] + blip
        }
    }
}

/// Why a connection could not be made.
public struct DialError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
        /// TCP could not connect (refused, unreachable, timed out): transient.
        case unreachable
        /// The server answered the upgrade with this HTTP status (401, 403, 404, 5xx…).
        case refused(status: Int)
        /// The server upgraded without selecting a subprotocol that was offered.
        case protocolMismatch
        /// TLS: the server's certificate is not trusted, or the server refused ours.
        case untrusted
    }
    /// The kind.
    public let kind: Kind
    /// One sentence.
    public let message: String

    /// True for errors worth retrying (unreachable, 5xx, 408, 429).
    public var isTransient: Bool {
        switch kind {
        case .unreachable: return true
        case .refused(let status): return status >= 500 || status == 408 || status == 429
        case .protocolMismatch, .untrusted: return false
        }
    }

    /// The sentence.
    public var description: String { message }
}

extension DialError: ClassifiedFailure {
    /// 401 is an authentication failure (exit 3); other refusals are permanent unless transient.
    public var failureKind: FailureKind {
        if isTransient { return .transient }
        if case .refused(status: 401) = kind { return .authentication }
        if kind == .untrusted { return .authentication }
        return .permanent
    }
}

/// The active peer's network side: connects to a listener and upgrades to a WebSocket
/// speaking `ferry/1`, with optional HTTP Basic credentials.
public enum Dialer {
    /// Connects to `url`. `authorization` is a full header value (see `BasicCredentials`);
    /// `tls` says how a `wss://` server is trusted (default: the system's roots). The TCP
    /// connect, the TLS handshake and the HTTP upgrade are each bounded by `stageTimeout`; a
    /// server that goes silent fails the dial with the stage named. Cancelling the calling task
    /// closes the connection at once.
    public static func connect(to url: PeerURL, protocol peerProtocol: PeerProtocol = .ferry, authorization: String? = nil, tls: ClientTLS? = nil,
                               maxMessageBytes: Int = ProtocolLimits().maxTextFrameBytes,
                               stageTimeout: Duration = .seconds(10),
                               group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> PeerConnection {
        let (seconds, attoseconds) = stageTimeout.components
        let stageTimeout = TimeAmount.nanoseconds(max(seconds * 1_000_000_000 + attoseconds / 1_000_000_000, 1_000_000))
        let tls = url.scheme == "wss" ? (tls ?? ClientTLS(trust: .system)) : nil
        let presented = PresentedCertificate()
        let sslContext: NIOSSLContext?
        do { sslContext = try tls.map { try NIOSSLContext(configuration: $0.configuration()) } } catch {
            throw DialError(kind: .untrusted, message: "cannot set up TLS for \(url): \(error)")
        }
        let promise = group.next().makePromise(of: PeerConnection.self)
        let stages = DialStages(url: url, timeout: stageTimeout, promise: promise)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(stageTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext, let tls {
                        // SNI and name checks take a host name; an address is checked against the
                        // certificate's IP entries instead.
                        let isAddress = url.host.contains(":") || url.host.allSatisfy { $0.isNumber || $0 == "." }
                        let hostname = isAddress ? nil : url.host
                        let handler = try tls.customVerification(recording: presented).map {
                            try NIOSSLClientHandler(context: sslContext, serverHostname: hostname, customVerificationCallback: $0)
                        } ?? NIOSSLClientHandler(context: sslContext, serverHostname: hostname)
                        try channel.pipeline.syncOperations.addHandler(handler)
                        try channel.pipeline.syncOperations.addHandler(HandshakeWatcher(stages: stages))
                    }
                    let refusals = UpgradeRefusalHandler(url: url, promise: promise)
                    let upgrade = UpgradeRequest(url: url, peerProtocol: peerProtocol, authorization: authorization, maxMessageBytes: maxMessageBytes,
                                                 refusals: refusals)
                    let outcome = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: upgrade.configuration()))
                    try channel.pipeline.syncOperations.addHandler(refusals)
                    outcome.whenComplete { result in
                        switch result {
                        case .success(.webSocket(let connection)):
                            stages.finished()
                            promise.succeed(connection)
                        case .success(.refused):
                            break  // the answer's head reaches `refusals`, which names its status
                        case .failure(let error as DialError):
                            promise.fail(error)
                            channel.close(promise: nil)
                        case .failure:
                            break  // the pipeline's own error (TLS trust above all): `refusals` sees it next and names it
                        }
                    }
                }
            }
        let connecting = bootstrap.connect(host: url.host, port: url.port)
        return try await withTaskCancellationHandler {
            do {
                let channel = try await connecting.get()
                stages.connected(channel, tls: tls != nil)
                channel.closeFuture.whenComplete { _ in
                    promise.fail(DialError(kind: .unreachable, message: "\(url) closed the connection during the \(stages.current)"))
                }
            } catch {
                promise.fail(DialError(kind: .unreachable, message: connectFailure(url, error, timeout: stageTimeout)))
            }
            do {
                return try await promise.futureResult.get()
            } catch let error as DialError where error.kind == .untrusted {
                guard let tls else { throw error }
                throw await refusal(url: url, tls: tls, presented: presented.value, cause: error)
            } catch let error as DialError where tls == nil && error.kind == .unreachable && stages.current == "WebSocket upgrade"
                                                  && !stages.timedOut {
                // A TLS listener closes a plain request without a word: ask it for a certificate.
                if let leaf = await presentedCertificate(url, within: stageTimeout) {
                    let summary = CertificateSummary(der: leaf)
                    throw DialError(kind: .protocolMismatch, message: """
                        \(url.host):\(url.port) speaks TLS: use wss:// instead of ws:// (its certificate: \(summary.subject), \
                        SHA-256 fingerprint \(summary.fingerprint))
                        """)
                }
                throw error
            }
        } onCancel: {
            promise.fail(CancellationError())
            connecting.whenSuccess { $0.close(promise: nil) }
            promise.futureResult.whenSuccess { $0.channel.close(promise: nil) }
        }
    }

    /// A failed TCP connect in words: refused (nothing listens there), timed out, or not resolved.
    static func connectFailure(_ url: PeerURL, _ error: Error, timeout: TimeAmount) -> String {
        let at = "\(url.host):\(url.port)"
        let causes = (error as? NIOConnectionError)?.connectionErrors.map(\.error) ?? [error]
        if causes.contains(where: { ($0 as? IOError)?.errnoCode == ECONNREFUSED }) {
            return "nothing is listening at \(at) (connection refused): is ferry serve running there, on that port?"
        }
        if causes.contains(where: { if case .connectTimeout = $0 as? ChannelError { true } else { false } }) {
            return "\(at) did not answer within \(Double(timeout.nanoseconds) / 1e9) s during the TCP connect"
        }
        if let resolution = error as? NIOConnectionError, resolution.dnsAError != nil || resolution.dnsAAAAError != nil,
           resolution.connectionErrors.isEmpty {
            return "cannot find the host \(url.host) (name resolution failed)"
        }
        return "cannot connect to \(url): \(error)"
    }

    /// The message of a TLS refusal: what the server presented (fetched again without trusting
    /// it, if the verifier did not record it) and how to trust it.
    static func refusal(url: PeerURL, tls: ClientTLS, presented: [UInt8]?, cause: DialError) async -> DialError {
        if cause.message.contains("refused this client") { return cause }
        var leaf = presented
        if leaf == nil { leaf = await presentedCertificate(url) }
        guard let leaf else {
            return DialError(kind: .untrusted, message: "TLS with \(url) failed: \(cause.message)")
        }
        let summary = CertificateSummary(der: leaf)
        if let pinned = tls.trust.pinnedFingerprint, pinned != summary.fingerprint {
            // Not a setup mistake like the others: what was trusted before is not what answers now.
            return DialError(kind: .untrusted, message: """
                SECURITY WARNING: \(url) presented a certificate that is NOT the pinned one (pinned SHA-256 \(pinned), \
                presented \(summary.fingerprint), subject \(summary.subject)): someone may be intercepting the connection, \
                or the peer's identity was replaced; nothing was sent. Check the fingerprint on that machine (`ferry identity show`) \
                before trusting it; if the change is expected, pin the new one (--pin FINGERPRINT, or `ferry peer add NAME URL --pin FINGERPRINT`)
                """)
        }
        let named = "subject \(summary.subject), SHA-256 fingerprint \(summary.fingerprint)"
        let now = Date()
        if let end = summary.notValidAfter, end < now {
            return DialError(kind: .untrusted, message: "\(url) presented a certificate that expired on \(Self.day(end)) (\(named)): the listener needs a new one")
        }
        if let start = summary.notValidBefore, start > now {
            return DialError(kind: .untrusted, message: "\(url) presented a certificate not valid until \(Self.day(start)) (\(named)): check both machines' clocks")
        }
        if cause.message.contains(Self.wrongHost) {
            let names = summary.names.isEmpty ? "no host name" : summary.names.joined(separator: ", ")
            return DialError(kind: .untrusted, message: """
                \(url) presented a certificate for \(names), not for \(url.host) (\(named)): connect by a name it holds; \
                someone may also be intercepting the connection, so pin it only after checking that fingerprint on the \
                listener's machine (`ferry identity show`)
                """)
        }
        return DialError(kind: .untrusted, message: """
            \(url) presented a certificate not trusted by \(tls.trust.modeDescription): subject \(summary.subject), \
            SHA-256 fingerprint \(summary.fingerprint)\(summary.isSelfSigned ? " (self-signed)" : ""); \(tls.trust.advice(for: summary))
            """)
    }

    /// What a refusal's cause says when the certificate names another host.
    static let wrongHost = "the certificate names another host"

    /// `2026-11-28 03:12 UTC`.
    static func day(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        return String(format: "%04d-%02d-%02d %02d:%02d UTC", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0, c.minute ?? 0)
    }

    /// The leaf certificate `url` presents, read by a handshake that trusts nothing (and so
    /// sends nothing).
    public static func presentedCertificate(_ url: PeerURL, within timeout: TimeAmount = .seconds(5)) async -> [UInt8]? {
        let recorder = PresentedCertificate()
        var config = TLSConfiguration.makeClientConfiguration()
        config.certificateVerification = .noHostnameVerification
        guard let context = try? NIOSSLContext(configuration: config) else { return nil }
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                // A server that never answers the hello has nothing to tell: give up in time.
                channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil) { chain, promise in
                        recorder.set((try? chain.first?.toDERBytes()) ?? nil)
                        promise.succeed(NIOSSLVerificationResult.failed)
                    })
                }
            }
        guard let channel = try? await bootstrap.connect(host: url.host, port: url.port).get() else { return nil }
        _ = try? await channel.closeFuture.get()
        return recorder.value
    }
}

/// The stages of a dial after the TCP connect (TLS handshake, then HTTP upgrade), each given
/// its own deadline: when one passes, the dial fails naming the stage and the channel closes.
final class DialStages: Sendable {
    private struct State {
        var stage = "TCP connect"
        var deadline: Scheduled<Void>?
        var channel: Channel?
        var done = false
        var timedOut = false
    }
    private let state = NIOLockedValueBox(State())
    let url: PeerURL
    let timeout: TimeAmount
    let promise: EventLoopPromise<PeerConnection>

    init(url: PeerURL, timeout: TimeAmount, promise: EventLoopPromise<PeerConnection>) {
        self.url = url
        self.timeout = timeout
        self.promise = promise
    }

    /// The stage under way, in words.
    var current: String { state.withLockedValue { $0.stage } }
    /// True once a stage's deadline passed (the peer went silent; it did not hang up).
    var timedOut: Bool { state.withLockedValue { $0.timedOut } }

    /// TCP is connected: the TLS handshake (or, over `ws://`, the upgrade) begins.
    func connected(_ channel: Channel, tls: Bool) {
        state.withLockedValue { $0.channel = channel }
        enter(tls ? "TLS handshake" : "WebSocket upgrade")
    }

    /// The TLS handshake is done: the upgrade begins.
    func handshakeCompleted() { enter("WebSocket upgrade") }

    /// Upgraded: no more deadlines.
    func finished() {
        state.withLockedValue { s in
            s.done = true
            s.deadline?.cancel()
            s.deadline = nil
        }
    }

    private func enter(_ stage: String) {
        state.withLockedValue { s in
            guard !s.done, let channel = s.channel else { return }
            s.stage = stage
            s.deadline?.cancel()
            let seconds = Double(timeout.nanoseconds) / 1e9
            s.deadline = channel.eventLoop.scheduleTask(in: timeout) { [self, url, promise] in
                state.withLockedValue { $0.timedOut = true }
                promise.fail(DialError(kind: .unreachable, message: "\(url) did not answer within \(seconds) s during the \(stage)"))
                channel.close(promise: nil)
            }
        }
    }
}

/// Tells `DialStages` when the TLS handshake has completed.
final class HandshakeWatcher: ChannelInboundHandler, Sendable {
    typealias InboundIn = Any
    let stages: DialStages

    init(stages: DialStages) { self.stages = stages }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent { stages.handshakeCompleted() }
        context.fireUserInboundEventTriggered(event)
    }
}

/// What became of a dial's upgrade request.
enum DialOutcome: Sendable {
    /// Upgraded: a WebSocket (its `wireFormat` says what it speaks).
    case webSocket(PeerConnection)
    /// Answered without upgrading; `UpgradeRefusalHandler` reads the answer's status.
    case refused
}

/// The upgrade request of a dial, for NIO's typed client upgrader: `GET /<database>` offering
/// `ferry-1` (or `/<database>/_blipsync` offering BLIP too), with the credentials if any; on a
/// 101 that selects an offered subprotocol, the WebSocket's handlers (masking rule,
/// aggregator, bridge) replace HTTP's.
struct UpgradeRequest: Sendable {
    let url: PeerURL
    let peerProtocol: PeerProtocol
    let authorization: String?
    let maxMessageBytes: Int
    let refusals: UpgradeRefusalHandler

    /// The typed upgrade configuration.
    func configuration() -> NIOTypedHTTPClientUpgradeConfiguration<DialOutcome> {
        let url = url, maxMessageBytes = maxMessageBytes, refusals = refusals, offered = peerProtocol.offered
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "\(url.host):\(url.port)")
        headers.add(name: "Sec-WebSocket-Protocol", value: offered.map(\.subprotocol).joined(separator: ","))
        // Without a length NIO's encoder would frame the empty body as chunked.
        headers.add(name: "Content-Length", value: "0")
        if let authorization { headers.add(name: "Authorization", value: authorization) }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: peerProtocol.path(url.database), headers: headers)
        let upgrader = NIOTypedWebSocketClientUpgrader<DialOutcome>(
            maxFrameSize: min(maxMessageBytes, Int(UInt32.max)), enableAutomaticErrorHandling: false
        ) { channel, response in
            guard let selected = response.headers["Sec-WebSocket-Protocol"].first.flatMap(WireFormat.init(subprotocol:)),
                  offered.contains(selected) else {
                let names = offered.map(\.subprotocol).joined(separator: " or ")
                return channel.eventLoop.makeFailedFuture(
                    DialError(kind: .protocolMismatch, message: "\(url) did not select the \(names) subprotocol"))
            }
            return channel.eventLoop.makeCompletedFuture {
                channel.pipeline.syncOperations.removeHandler(refusals, promise: nil)
                let bridge = try WebSocketBridge.install(on: channel, role: .client, maxMessageBytes: maxMessageBytes)
                return .webSocket(PeerConnection(channel: channel, bridge: bridge, wireFormat: selected))
            }
        }
        return NIOTypedHTTPClientUpgradeConfiguration(upgradeRequestHead: head, upgraders: [upgrader]) { channel in
            channel.eventLoop.makeSucceededFuture(.refused)
        }
    }
}

/// Turns a refused upgrade (any status but 101, whose head NIO's typed upgrader passes on)
/// and the errors of the dial's pipeline (TLS trust above all) into a `DialError`.
final class UpgradeRefusalHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    let url: PeerURL
    let promise: EventLoopPromise<PeerConnection>

    init(url: PeerURL, promise: EventLoopPromise<PeerConnection>) {
        self.url = url
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let response) = unwrapInboundIn(data) else { return }
        let status = Int(response.status.code)
        var message = "\(url) refused the connection: HTTP \(status) \(response.status.reasonPhrase)"
        if status == 401 { message = "\(url) refused the credentials (HTTP 401)" }
        if status == 404 { message = "\(url): no database \"\(url.database)\" there (HTTP 404)" }
        if status == 503 { message = "\(url) is unavailable for now (HTTP 503)" }
        promise.fail(DialError(kind: .refused(status: status), message: message))
        context.close(promise: nil)
    }

    /// The alert a listener sent that refuses this client's certificate (or its absence), as
    /// BoringSSL's reason code names it; nil for any other error.
    static func clientCertificateAlert(_ text: String) -> String? {
        let refusals = ["ALERT_CERTIFICATE_REQUIRED", "ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_EXPIRED",
                        "ALERT_CERTIFICATE_REVOKED", "ALERT_CERTIFICATE_UNKNOWN", "ALERT_UNSUPPORTED_CERTIFICATE"]
        guard refusals.contains(where: text.contains) else { return nil }
        return text.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "_" }).first { $0.contains("_ALERT_") }.map(String.init) ?? text
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        let text = "\(error)"
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            promise.fail(DialError(kind: .untrusted, message: text))
        } else if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            promise.fail(DialError(kind: .untrusted, message: Dialer.wrongHost))
        } else if let code = Self.clientCertificateAlert(text) {
            // BoringSSL's reason code says it best (e.g. TLSV1_ALERT_CERTIFICATE_REQUIRED).
            let advice = code.contains("CERTIFICATE_EXPIRED") ? "it has expired: make a new one"
                : "present one issued by the listener's --client-ca with --client-identity"
            promise.fail(DialError(kind: .untrusted, message: "\(url) refused this client's certificate, or its absence (\(code)); \(advice)"))
        } else if text.contains("WRONG_VERSION_NUMBER") {
            // The server answered the TLS hello in plain text: a ws:// listener.
            promise.fail(DialError(kind: .protocolMismatch, message: "\(url.host):\(url.port) does not speak TLS (its listener is plain ws://): use ws:// instead of wss://"))
        } else if error is NIOSSLError || error is BoringSSLError {
            promise.fail(DialError(kind: .unreachable, message: "TLS with \(url) failed: \(text)"))
        } else {
            promise.fail(DialError(kind: .unreachable, message: "\(url): \(text)"))
        }
        context.close(promise: nil)
    }
}
