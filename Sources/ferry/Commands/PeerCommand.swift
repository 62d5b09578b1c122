import ArgumentParser
import FerryAgent
import FerryCore
import FerryNet
import FerryStore
import Foundation

/// `ferry peer add|list|remove`: the peers this folder remembers.
struct PeerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peer",
        abstract: "Remember peers by name: `ferry serve` replicates with every saved peer, and `ferry sync NAME` with one.",
        discussion: "Saved in .ferry/peers.json (passwords never, only the files that hold them). `ferry peers` browses DNS-SD instead.",
        subcommands: [Add.self, List.self, Remove.self])

    /// `ferry peer add NAME URL [trust options]`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Save a peer. A wss:// peer given no trust option has the certificate it presents now pinned (its SHA-256 printed to compare).")

        @Argument(help: "What to call it (letters, digits, '.', '_', '-').")
        var name: String

        @Argument(help: ArgumentHelp("Its listener, ws[s]://HOST:PORT/DB.", valueName: "url"))
        var url: String

        @OptionGroup var access: PeerAccessOptions

        @Flag(help: "Trust the system's roots (a certificate from a public CA) instead of pinning the one presented now.")
        var systemRoots = false

        @Option(name: .customLong("protocol"), help: ArgumentHelp("ferry, cbl or auto.", valueName: "ferry|cbl|auto"))
        var peerProtocol: PeerProtocol?

        @Flag(help: "Replace a saved peer of the same name.")
        var force = false

        @OptionGroup var folder: FolderOptions

        func validate() throws {
            if let problem = SavedPeer.nameProblem(name) { throw ValidationError(problem) }
            if systemRoots && access.choosesTrust { throw ValidationError("--system-roots is instead of --pin, --accept-self-signed and --ca-file") }
        }

        func run() async throws {
            let root = try folder.resolveRoot()
            guard FileSystem.exists(FolderLayout(root: root).stateDirectory + "/folder.json") else {
                throw StoreError(.notInitialized, "\(root) is not a ferry folder; run `ferry init` there")
            }
            let saved = SavedPeers(layout: FolderLayout(root: root))
            var peers = try saved.load()
            if !force, peers.contains(where: { $0.name == name }) {
                throw CLIError("a peer named \(name) is saved already (`ferry peer list`); give --force to replace it", exitCode: 2)
            }
            var peer = SavedPeer(name: name, url: url)
            peer.caFile = access.caFile.map(absolute)
            peer.acceptSelfSigned = access.acceptSelfSigned
            peer.user = access.user
            peer.passwordFile = access.passwordFile.map(absolute)
            peer.clientIdentity = access.clientIdentity.map(absolute)
            peer.clientIdentityPasswordFile = access.clientIdentityPasswordFile.map(absolute)
            peer.peerProtocol = peerProtocol?.rawValue
            if let pin = access.pin { peer.pin = try Self.fingerprint(pin) }
            // Checked as the command line would be, without asking for the password now.
            let options: ClientOptions
            do { options = try ClientOptions.parse(peer.arguments) } catch {
                throw CLIError(ClientOptions.message(for: error), exitCode: 2)
            }
            let endpoint = try options.endpoint(url, direction: .both, readingPassword: false)
            if endpoint.url.scheme == "wss" && !access.choosesTrust && !systemRoots {
                peer.pin = try await Self.pinPresented(by: endpoint.url)
            }
            peers.removeAll { $0.name == name }
            peers.append(peer)
            try saved.save(peers)
            print("saved \(name): \(endpoint.url) (\(peer.trustDescription)\(access.user.map { ", user \($0)" } ?? ""))")
        }

        /// `--pin` as a fingerprint: given as one, or read from a certificate file.
        static func fingerprint(_ pin: String) throws -> String {
            if !FileManager.default.fileExists(atPath: absolute(pin)), let fp = ServerTrust.fingerprint(parsing: pin) { return fp }
            do {
                guard let fp = try ServerTrust.pin(file: absolute(pin)).pinnedFingerprint else { throw CLIError("--pin \(pin): no certificate") }
                return fp
            } catch let error as TLSError {
                throw CLIError("--pin \(pin) is neither a SHA-256 fingerprint (64 hex digits) nor a readable certificate: \(error)", exitCode: 2)
            }
        }

        /// Trust on first use: the fingerprint of the certificate `url` presents now, printed
        /// so that it can be compared with `ferry identity show` on the peer's machine.
        static func pinPresented(by url: PeerURL) async throws -> String {
            guard let leaf = await Dialer.presentedCertificate(url, within: .seconds(5)) else {
                throw CLIError("""
                    cannot read \(url)'s certificate to pin it (is ferry serve running there with TLS?); give --pin FINGERPRINT \
                    (from `ferry identity show` there), --ca-file, --accept-self-signed or --system-roots
                    """)
            }
            let summary = CertificateSummary(der: leaf)
            print("pinned the certificate \(url) presents now: \(summary.subject), SHA-256 \(summary.fingerprint)")
            print("  compare it with `ferry identity show` on that machine; `ferry peer remove` it if they differ")
            return summary.fingerprint
        }
    }

    /// `ferry peer list`.
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the saved peers.")

        @OptionGroup var folder: FolderOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            let peers = try SavedPeers(layout: FolderLayout(root: try folder.resolveRoot())).load()
            if output.json {
                printJSON(.array(peers.map { p in
                    var o: [String: JSONValue] = ["name": .string(p.name), "url": .string(p.url), "trust": .string(p.trustDescription)]
                    if let user = p.user { o["user"] = .string(user) }
                    return .object(o)
                }))
                return
            }
            if peers.isEmpty { print("no saved peers (`ferry peer add NAME URL` saves one)") }
            for p in peers {
                print("\(p.name)\t\(p.url)\t\(p.trustDescription)\(p.user.map { "\tuser \($0)" } ?? "")")
            }
        }
    }

    /// `ferry peer remove NAME`.
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget a saved peer.")

        @Argument(help: "Its name.")
        var name: String

        @OptionGroup var folder: FolderOptions

        func run() throws {
            let saved = SavedPeers(layout: FolderLayout(root: try folder.resolveRoot()))
            var peers = try saved.load()
            guard peers.contains(where: { $0.name == name }) else {
                throw CLIError("no saved peer named \(name) (`ferry peer list` lists them)")
            }
            peers.removeAll { $0.name == name }
            try saved.save(peers)
            print("removed \(name)")
        }
    }
}
