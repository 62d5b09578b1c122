import ArgumentParser
import FerryAgent
import FerryCore
import FerryNet
import FerryReplicator
import FerryStore
import Foundation

/// The listener options of SPEC §4 that this build has.
struct ListenerOptions: ParsableArguments {
    @Option(help: "Port to listen on (0 or absent: any free port).")
    var port = 0

    @Option(help: ArgumentHelp("IP address or interface name to listen on (default: every interface).", valueName: "ip|ifname"))
    var interface: String?

    @Option(help: ArgumentHelp("TLS mode. This build speaks plain ws:// only, so only 'off' is accepted; TLS arrives with the security work.", valueName: "off"))
    var tls = "off"

    @Option(help: ArgumentHelp("Users allowed to connect: a JSON array or JSON Lines of {\"name\", \"password\"} or {\"name\", \"password_hash\"}.", valueName: "file"))
    var users: String?

    @Flag(help: "Peers may pull from this folder but not push to it.")
    var readOnly = false

    @Flag(help: "Accept no connections: watch and replicate with the --peer URLs only.")
    var noListen = false

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
        guard tls == "off" else {
            throw ValidationError("--tls \(tls): this build has no TLS yet; use --tls off (plain ws://)")
        }
    }

    /// The agent's listen options; nil with `--no-listen`.
    func resolve() throws -> ListenOptions? {
        guard !noListen else { return nil }
        var options = ListenOptions()
        options.port = port
        options.interface = interface
        options.readOnly = readOnly
        if let users {
            let path = absolute(users)
            let bytes: [UInt8]
            do { bytes = try FileSystem.readFile(path) } catch { throw CLIError("cannot read the users file: \(error)") }
            do { options.users = try UserDirectory(fileBytes: bytes, source: path) } catch { throw CLIError("\(error)") }
        }
        return options
    }
}

/// The client options of SPEC §4 that this build has.
struct ClientOptions: ParsableArguments {
    @Option(help: "User name for HTTP Basic authentication; the password comes from --password-file or $FERRY_PASSWORD.")
    var user: String?

    @Option(help: ArgumentHelp("A file whose first line is the password (never give it on the command line).", valueName: "file"))
    var passwordFile: String?

    @Option(help: "A one-shot replication gives up after this many failed attempts in a row.")
    var maxAttempts = 10

    @Option(help: ArgumentHelp("Longest wait between attempts, in seconds.", valueName: "seconds"))
    var maxAttemptWait: Double = 300

    @Option(help: ArgumentHelp("Seconds between heartbeats; a peer silent for two is taken as gone.", valueName: "seconds"))
    var heartbeat: Double = 30

    @Option(name: .customLong("doc-id"), help: ArgumentHelp("Replicate only this document (repeatable).", valueName: "id"))
    var docIDs: [String] = []

    func validate() throws {
        guard maxAttempts >= 1 else { throw ValidationError("--max-attempts must be at least 1") }
        guard maxAttemptWait > 0, heartbeat > 0 else { throw ValidationError("--max-attempt-wait and --heartbeat must be positive") }
        if passwordFile != nil && user == nil { throw ValidationError("--password-file needs --user") }
    }

    /// The peer at `url` as these options describe it.
    func endpoint(_ text: String, direction: ReplicationDirection) throws -> PeerEndpoint {
        guard let url = PeerURL(text) else {
            throw CLIError("\(text) is not a peer URL; use ws://HOST:PORT/DB", exitCode: 2)
        }
        var peer = PeerEndpoint(url: url)
        peer.direction = direction
        peer.maxAttempts = maxAttempts
        peer.maxAttemptWait = .milliseconds(Int(maxAttemptWait * 1000))
        peer.heartbeat = .milliseconds(Int(heartbeat * 1000))
        if !docIDs.isEmpty {
            peer.docIDs = try docIDs.map { id in
                do { return try DocumentID(id) } catch { throw CLIError("--doc-id \(id): \(error)", exitCode: 2) }
            }
        }
        if let user {
            guard passwordFile != nil || ProcessInfo.processInfo.environment["FERRY_PASSWORD"] != nil else {
                throw CLIError("--user \(user) needs a password: --password-file F or $FERRY_PASSWORD", exitCode: 2)
            }
            peer.authorization = BasicCredentials.header(user: user, password: try readPassword(file: passwordFile))
        }
        return peer
    }
}
