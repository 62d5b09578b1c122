import ArgumentParser
import FerryAgent
import FerryCore
import FerryDiscovery
import FerryNet
import FerryReplicator
import FerryStore
import Foundation

extension TLSMode: ExpressibleByArgument {}
extension PeerProtocol: ExpressibleByArgument {}

/// The listener options of SPEC §4 that this build has.
struct ListenerOptions: ParsableArguments {
    @Option(help: "Port to listen on (0: any free port; absent: the one this folder's listener used last, else any free port).")
    var port: Int?

    @Option(help: ArgumentHelp("IP address or interface name to listen on (default: every interface).", valueName: "ip|ifname"))
    var interface: String?

    @Option(help: ArgumentHelp("TLS: off (plain ws://), anonymous (a self-signed identity generated on first start and kept), or identity (the one from `ferry identity create|import`).", valueName: "off|anonymous|identity"))
    var tls: TLSMode = .anonymous

    @Option(help: ArgumentHelp("Require client certificates issued by these roots (PEM).", valueName: "pem"))
    var clientCa: String?

    @Option(help: ArgumentHelp("Users allowed to connect: a JSON array or JSON Lines of {\"name\", \"password\"} or {\"name\", \"password_hash\"}.", valueName: "file"))
    var users: String?

    @Flag(help: "Peers may pull from this folder but not push to it.")
    var readOnly = false

    @Flag(help: "Let peers send a changed JSON document as a delta against a revision this folder has (they negotiate it).")
    var deltaSync = false

    @Flag(help: "Accept no connections: watch and replicate with the --peer URLs only.")
    var noListen = false

    @Flag(help: "Do not advertise the listener over DNS-SD.")
    var noAdvertise = false

    @Option(help: ArgumentHelp("DNS-SD service type to advertise (and, with --discover, to browse).", valueName: "type"))
    var serviceType = "_cblistservicesync._tcp"

    @Option(help: ArgumentHelp("DNS-SD service name (default: \"DB on HOST\").", valueName: "name"))
    var serviceName: String?

    func validate() throws {
        if let port, !(0...65535).contains(port) { throw ValidationError("--port must be 0…65535") }
        if clientCa != nil && tls == .off { throw ValidationError("--client-ca needs TLS (--tls anonymous or identity)") }
        if let serviceName, serviceName.utf8.count > ServiceAdvertisement.maxNameBytes || serviceName.isEmpty {
            throw ValidationError("--service-name must be 1 to \(ServiceAdvertisement.maxNameBytes) bytes (DNS-SD's limit); this one is \(serviceName.utf8.count)")
        }
    }

    /// The agent's listen options; nil with `--no-listen`.
    func resolve() throws -> ListenOptions? {
        guard !noListen else { return nil }
        var options = ListenOptions()
        options.port = port
        options.interface = interface
        // Checked before anything starts, so that its error is the only line.
        do { _ = try NetworkInterfaces.resolve(interface) } catch let error as InterfaceError {
            throw CLIError("--interface: \(error)", exitCode: 2)
        }
        options.readOnly = readOnly
        options.deltaSync = deltaSync
        options.tls = tls
        if let clientCa {
            do { options.clientRoots = try TrustedRoots(pemFile: absolute(clientCa)) } catch { throw CLIError("--client-ca: \(error)") }
        }
        if let users {
            let path = absolute(users)
            let bytes: [UInt8]
            do { bytes = try FileSystem.readFile(path) } catch { throw CLIError("cannot read the users file: \(error)") }
            do { options.users = try UserDirectory(fileBytes: bytes, source: path) } catch { throw CLIError("\(error)") }
        }
        return options
    }
}

/// How a peer is trusted and logged in to: the options `sync`, `serve` and `peer add` share.
struct PeerAccessOptions: ParsableArguments {
    @Option(help: "User name for HTTP Basic authentication; the password comes from --password-file or $FERRY_PASSWORD.")
    var user: String?

    @Option(help: ArgumentHelp("A file whose first line is the password (never give it on the command line).", valueName: "file"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("wss://: trust only a server whose certificate is this one: its SHA-256 fingerprint (hex, colons allowed) or the certificate (DER or PEM).", valueName: "sha256|cert"))
    var pin: String?

    @Flag(help: "wss://: accept any self-signed server certificate (traffic is still encrypted; the server is not authenticated).")
    var acceptSelfSigned = false

    @Option(help: ArgumentHelp("wss://: trust servers whose certificates chain to these roots (PEM) instead of the system's.", valueName: "pem"))
    var caFile: String?

    @Option(help: ArgumentHelp("wss://: present this client certificate (PKCS#12 with its key).", valueName: "p12"))
    var clientIdentity: String?

    @Option(help: ArgumentHelp("A file whose first line is the --client-identity password (or $FERRY_CLIENT_IDENTITY_PASSWORD).", valueName: "file"))
    var clientIdentityPasswordFile: String?

    func validate() throws {
        if passwordFile != nil && user == nil { throw ValidationError("--password-file needs --user") }
        if [pin != nil, acceptSelfSigned, caFile != nil].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --pin, --accept-self-signed and --ca-file")
        }
    }

    /// True when any way of trusting a server is given.
    var choosesTrust: Bool { pin != nil || acceptSelfSigned || caFile != nil }

    /// The trust and client certificate for `wss://` peers.
    func clientTLS() throws -> ClientTLS {
        do {
            var trust = ServerTrust.system
            if let pin {
                if !FileManager.default.fileExists(atPath: absolute(pin)) {
                    guard let fingerprint = ServerTrust.fingerprint(parsing: pin) else {
                        throw CLIError("--pin \(pin): neither a SHA-256 fingerprint (64 hex digits) nor a certificate file", exitCode: 2)
                    }
                    trust = .fingerprint(fingerprint)
                } else {
                    trust = try ServerTrust.pin(file: absolute(pin))
                }
            }
            if acceptSelfSigned { trust = .anySelfSigned }
            if let caFile { trust = try ServerTrust.caFile(absolute(caFile)) }
            var tls = ClientTLS(trust: trust)
            if let clientIdentity {
                var password = ProcessInfo.processInfo.environment["FERRY_CLIENT_IDENTITY_PASSWORD"]
                if let clientIdentityPasswordFile { password = try readPassword(file: clientIdentityPasswordFile) }
                tls.identity = try TLSIdentity.pkcs12(path: absolute(clientIdentity), password: password,
                                                      passwordHint: "--client-identity-password-file F or $FERRY_CLIENT_IDENTITY_PASSWORD")
            }
            return tls
        } catch let error as TLSError {
            throw CLIError("\(error)", exitCode: 1)
        }
    }
}

/// The client options of SPEC §4 that this build has.
struct ClientOptions: ParsableArguments {
    @OptionGroup var access: PeerAccessOptions

    @Option(help: "A one-shot replication gives up after this many failed attempts in a row.")
    var maxAttempts = 10

    @Option(help: ArgumentHelp("Longest wait between attempts, in seconds.", valueName: "seconds"))
    var maxAttemptWait: Double = 300

    @Option(help: ArgumentHelp("Seconds between heartbeats; a peer silent for two is taken as gone.", valueName: "seconds"))
    var heartbeat: Double = 30

    @Option(help: ArgumentHelp("Seconds each stage of a connection (TCP connect, TLS handshake, WebSocket upgrade) may take.", valueName: "seconds"))
    var connectTimeout: Double = 10

    @Option(name: .customLong("protocol"), help: ArgumentHelp(
        "ferry: ferry's own (ferry-1); cbl: Couchbase Lite's (BLIP_3+CBMobile_3 or _2, for a Couchbase Lite listener or Sync Gateway); auto: offer both, the listener picks.",
        valueName: "ferry|cbl|auto"))
    var peerProtocol: PeerProtocol = .auto

    @Flag(help: "Sync even with a folder of another database name, or one that shares no history with this one and holds other documents at the same paths (they are merged).")
    var allowUnrelated = false

    @Option(name: .customLong("doc-id"), help: ArgumentHelp("Replicate only this document (repeatable).", valueName: "id"))
    var docIDs: [String] = []

    func validate() throws {
        guard maxAttempts >= 1 else { throw ValidationError("--max-attempts must be at least 1") }
        guard maxAttemptWait > 0, heartbeat > 0, connectTimeout > 0 else {
            throw ValidationError("--max-attempt-wait, --heartbeat and --connect-timeout must be positive")
        }
    }

    /// The peer `target` names: a URL, or the name of a peer saved with `ferry peer add` in
    /// the folder laid out by `layout` (its settings, with these options' over them).
    func endpoint(naming target: String, layout: FolderLayout, direction: ReplicationDirection) throws -> PeerEndpoint {
        guard !target.contains("://") else { return try endpoint(target, direction: direction) }
        guard let saved = try SavedPeers(layout: layout).named(target) else {
            throw CLIError("\(target) is neither a peer URL (ws[s]://HOST:PORT/DB) nor the name of a saved peer (`ferry peer list`)", exitCode: 2)
        }
        return try endpoint(saved: saved, direction: direction)
    }

    /// A saved peer as an endpoint: its settings, with these options' over them.
    func endpoint(saved: SavedPeer, direction: ReplicationDirection) throws -> PeerEndpoint {
        var peer = try overlaid(on: saved).endpoint(saved.url, direction: direction)
        peer.name = saved.name
        return peer
    }

    /// The saved peer's settings with the ones given on this command line over them.
    private func overlaid(on saved: SavedPeer) throws -> ClientOptions {
        var merged: ClientOptions
        do { merged = try ClientOptions.parse(saved.arguments) } catch {
            throw CLIError("the saved peer \(saved.name) (in .ferry/peers.json): \(ClientOptions.message(for: error))")
        }
        merged.maxAttempts = maxAttempts
        merged.maxAttemptWait = maxAttemptWait
        merged.heartbeat = heartbeat
        merged.connectTimeout = connectTimeout
        merged.docIDs = docIDs
        merged.allowUnrelated = allowUnrelated
        if peerProtocol != .auto { merged.peerProtocol = peerProtocol }
        if access.choosesTrust {
            (merged.access.pin, merged.access.acceptSelfSigned, merged.access.caFile) = (access.pin, access.acceptSelfSigned, access.caFile)
        }
        if access.user != nil { (merged.access.user, merged.access.passwordFile) = (access.user, access.passwordFile) }
        if access.clientIdentity != nil {
            (merged.access.clientIdentity, merged.access.clientIdentityPasswordFile) = (access.clientIdentity, access.clientIdentityPasswordFile)
        }
        return merged
    }

    /// The peer at `url` as these options describe it; its password is read (or asked for)
    /// unless `readingPassword` is false.
    func endpoint(_ text: String, direction: ReplicationDirection, readingPassword: Bool = true) throws -> PeerEndpoint {
        if let parts = URLComponents(string: text), parts.user != nil || parts.password != nil {
            // Not echoed: the URL holds a password. A URL shows in `ps`, logs and shell history.
            throw CLIError("a peer URL may not carry credentials; give --user NAME, and the password with --password-file F or $FERRY_PASSWORD", exitCode: 2)
        }
        guard let url = PeerURL(text) else {
            throw CLIError("\(text) is not a peer URL; use ws://HOST:PORT/DB or wss://HOST:PORT/DB", exitCode: 2)
        }
        if url.scheme == "ws", access.pin != nil || access.acceptSelfSigned || access.caFile != nil || access.clientIdentity != nil {
            throw CLIError("--pin, --accept-self-signed, --ca-file and --client-identity are for wss:// peers, and \(url) is plain ws:// (no TLS): use wss:// or leave them out", exitCode: 2)
        }
        var peer = PeerEndpoint(url: url)
        peer.direction = direction
        peer.maxAttempts = maxAttempts
        peer.maxAttemptWait = .milliseconds(Int(maxAttemptWait * 1000))
        peer.heartbeat = .milliseconds(Int(heartbeat * 1000))
        peer.connectTimeout = .milliseconds(Int(connectTimeout * 1000))
        peer.peerProtocol = peerProtocol
        peer.refuseUnrelated = !allowUnrelated
        if !docIDs.isEmpty {
            peer.docIDs = try docIDs.map { id in
                do { return try DocumentID(id) } catch { throw CLIError("--doc-id \(id): \(error)", exitCode: 2) }
            }
        }
        peer.tls = try access.clientTLS()
        if let user = access.user, readingPassword {
            guard access.passwordFile != nil || ProcessInfo.processInfo.environment["FERRY_PASSWORD"] != nil || isatty(0) == 1 else {
                throw CLIError("--user \(user) needs a password: --password-file F, $FERRY_PASSWORD, or a terminal to type it on", exitCode: 2)
            }
            peer.authorization = BasicCredentials.header(user: user, password: try readPassword(file: access.passwordFile, prompt: "password for \(user) at \(url): "))
            if url.scheme == "ws" && !url.host.hasPrefix("127.") && !["localhost", "::1", "[::1]"].contains(url.host) {
                FileHandleOutput.stderr("ferry: warning: \(user)'s password crosses the network in clear over ws://; use wss://")
            }
        }
        return peer
    }
}
