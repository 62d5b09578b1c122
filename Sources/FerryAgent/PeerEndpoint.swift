import FerryCore
import FerryNet
import FerryProtocol
import FerryReplicator
import FerryStore
import Logging

/// The listener's TLS mode (SPEC §5).
public enum TLSMode: String, Sendable, CaseIterable {
    /// Plain `ws://`.
    case off
    /// A self-signed identity generated on first start and kept in `.ferry/tls/`.
    case anonymous
    /// The identity made by `ferry identity create` or `import`.
    case identity
}

/// One peer to replicate with, as the command line describes it (`--peer URL` with the
/// client options of SPEC §4).
public struct PeerEndpoint: Sendable {
    /// Where the peer listens.
    public var url: PeerURL
    /// The name it was saved under (`ferry peer add`), if any.
    public var name: String?
    /// Push, pull or both.
    public var direction: ReplicationDirection = .both
    /// `Authorization` header value for HTTP Basic, if credentials were given.
    public var authorization: String?
    /// One-shot give-up count.
    public var maxAttempts = 10
    /// Longest wait between attempts.
    public var maxAttemptWait: Duration = .seconds(300)
    /// Ping interval; a peer silent for two intervals is taken as gone.
    public var heartbeat: Duration = .seconds(30)
    /// How long each stage of a dial (TCP connect, TLS handshake, upgrade) may take.
    public var connectTimeout: Duration = .seconds(10)
    /// Only these documents (nil: all).
    public var docIDs: [DocumentID]?
    /// How a `wss://` peer is trusted and which client certificate to offer (nil: the system's roots).
    public var tls: ClientTLS?
    /// Which protocol to ask for (`--protocol`): ferry's, Couchbase Lite's, or either.
    public var peerProtocol: PeerProtocol = .auto
    /// Refuse the first sync if the peer's folder is unrelated to this one (not `--allow-unrelated`).
    public var refuseUnrelated = true

    /// A peer at `url`.
    public init(url: PeerURL) { self.url = url }

    /// A replicator for this peer over the shared folder.
    public func makeReplicator(shared: SharedStore, continuous: Bool, logger: Logger) -> Replicator {
        var config = ReplicatorConfiguration(url: url.description, remoteDatabase: url.database)
        config.direction = direction
        config.continuous = continuous
        config.maxAttempts = maxAttempts
        config.maxAttemptWait = maxAttemptWait
        config.docIDs = docIDs
        config.refuseUnrelated = refuseUnrelated
        let url = self.url, authorization = self.authorization, heartbeat = self.heartbeat, tls = self.tls
        let stageTimeout = connectTimeout, peerProtocol = self.peerProtocol
        return Replicator(configuration: config, shared: shared, connect: {
            let connection = try await Dialer.connect(to: url, protocol: peerProtocol, authorization: authorization, tls: tls,
                                                      stageTimeout: stageTimeout)
            connection.startHeartbeat(every: heartbeat)
            return connection
        }, logger: logger)
    }
}

/// How the agent listens (SPEC §4's listener options that this build has).
public struct ListenOptions: Sendable {
    /// `--interface`: an IP address or an interface name; nil: every interface.
    public var interface: String?
    /// `--port`; 0: any free port; nil: the port this folder's listener used last, else any.
    public var port: Int?
    /// `--users`: who may connect (nil: everyone).
    public var users: UserDirectory?
    /// `--read-only`: peers may pull, not push.
    public var readOnly = false
    /// `--delta-sync`: peers may send JSON bodies as deltas (and get them).
    public var deltaSync = false
    /// `--tls`.
    public var tls: TLSMode = .anonymous
    /// `--client-ca`: roots client certificates must chain to (nil: none asked for).
    public var clientRoots: TrustedRoots?
    /// `--heartbeat`: the listener pings its peers too; one silent for two intervals is dropped.
    public var heartbeat: Duration = .seconds(30)

    /// Defaults: every interface, a free port, no authentication, read-write.
    public init() {}
}
