import FerryCore
import FerryStore

/// A peer saved with `ferry peer add`: a name, its URL, and how to trust it and log in to it.
/// Passwords are never saved, only the files that hold them.
public struct SavedPeer: Sendable, Equatable {
    /// What the user calls it (`ferry sync NAME`, `serve --peer NAME`).
    public var name: String
    /// `ws[s]://HOST:PORT/DB`.
    public var url: String
    /// SHA-256 fingerprint of the one certificate trusted (lowercase hex).
    public var pin: String?
    /// Roots (PEM) to trust instead of the system's.
    public var caFile: String?
    /// Any self-signed certificate is accepted.
    public var acceptSelfSigned = false
    /// The user name for HTTP Basic.
    public var user: String?
    /// A file whose first line is the password.
    public var passwordFile: String?
    /// A client certificate (PKCS#12).
    public var clientIdentity: String?
    /// A file whose first line is the client certificate's password.
    public var clientIdentityPasswordFile: String?
    /// `ferry`, `cbl` or `auto` (nil: auto).
    public var peerProtocol: String?

    /// A saved peer with nothing but a name and a URL.
    public init(name: String, url: String) {
        self.name = name
        self.url = url
    }

    /// Its optional text settings: the key in `peers.json`, the command-line option, the field.
    private static var textFields: [(key: String, option: String, field: WritableKeyPath<SavedPeer, String?>)] {
        [("pin", "--pin", \.pin), ("ca_file", "--ca-file", \.caFile), ("user", "--user", \.user),
         ("password_file", "--password-file", \.passwordFile), ("client_identity", "--client-identity", \.clientIdentity),
         ("client_identity_password_file", "--client-identity-password-file", \.clientIdentityPasswordFile),
         ("protocol", "--protocol", \.peerProtocol)]
    }

    /// The command-line options these settings stand for, so that a saved peer goes through
    /// the same checks as one given on the command line.
    public var arguments: [String] {
        var out = Self.textFields.flatMap { key in self[keyPath: key.field].map { [key.option, $0] } ?? [] }
        if acceptSelfSigned { out.append("--accept-self-signed") }
        return out
    }

    /// How its certificate is trusted, in words.
    public var trustDescription: String {
        if let pin { return "pinned sha256 \(pin)" }
        if let caFile { return "roots of \(caFile)" }
        if acceptSelfSigned { return "any self-signed certificate" }
        return url.hasPrefix("wss:") ? "the system's roots" : "no TLS"
    }

    /// Why `name` cannot name a saved peer, or nil: it must not pass for a URL or an option.
    public static func nameProblem(_ name: String) -> String? {
        guard !name.isEmpty, name.count <= 64 else { return "a peer name has 1 to 64 characters" }
        guard name.first != "-", name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
            return "a peer name is letters, digits, '.', '_' and '-', not starting with '-'"
        }
        return nil
    }

    var json: JSONValue {
        var o: [String: JSONValue] = ["url": .string(url)]
        for key in Self.textFields { if let value = self[keyPath: key.field] { o[key.key] = .string(value) } }
        if acceptSelfSigned { o["accept_self_signed"] = .bool(true) }
        return .object(o)
    }

    init?(name: String, json: JSONValue) {
        guard let url = json["url"]?.stringValue else { return nil }
        self.init(name: name, url: url)
        for key in Self.textFields { self[keyPath: key.field] = json[key.key]?.stringValue }
        acceptSelfSigned = json["accept_self_signed"]?.boolValue ?? false
    }
}

/// The folder's saved peers (`.ferry/peers.json`, an object by name, editable by hand):
/// `ferry serve` replicates with every one of them, and their names stand for URLs.
public struct SavedPeers {
    /// The file.
    public let path: String

    /// The saved peers of the folder laid out by `layout`.
    public init(layout: FolderLayout) { path = layout.stateDirectory + "/peers.json" }

    /// Every saved peer, by name; none when there is no file. A file that cannot be read is an
    /// error, not an empty list: `serve` would silently stop replicating with them.
    public func load() throws -> [SavedPeer] {
        guard FileSystem.exists(path) else { return [] }
        guard let bytes = try? FileSystem.readFile(path), let json = try? JSONParser.parse(bytes), case .object(let o) = json else {
            throw StoreError(.corrupt, "\(path) is not a JSON object of saved peers; fix it or remove it (`ferry peer add` makes a new one)")
        }
        return try o.keys.sorted().map { name in
            guard SavedPeer.nameProblem(name) == nil, let peer = SavedPeer(name: name, json: o[name]!) else {
                throw StoreError(.corrupt, "\(path): the saved peer \(String(reflecting: name)) has no valid name or url")
            }
            return peer
        }
    }

    /// The saved peer called `name`, if any.
    public func named(_ name: String) throws -> SavedPeer? { try load().first { $0.name == name } }

    /// Saves `peers` (replacing the file atomically).
    public func save(_ peers: [SavedPeer]) throws {
        let object = Dictionary(peers.map { ($0.name, $0.json) }, uniquingKeysWith: { _, last in last })
        try FileSystem.writeAtomically(JSONValue.object(object).prettyBytes, to: path, mode: 0o600)
    }
}
