/// A service to announce on the local network.
public struct ServiceAdvertisement: Sendable, Equatable {
    /// The instance name people see ("inventory on vm").
    public var name: String
    /// The service type, e.g. `_cblistservicesync._tcp`.
    public var type: String
    /// The listener's port.
    public var port: Int
    /// TXT record entries.
    public var txt: [String: String]

    /// An advertisement.
    public init(name: String, type: String, port: Int, txt: [String: String]) {
        self.name = name
        self.type = type
        self.port = port
        self.txt = txt
    }

    /// The longest instance name DNS-SD takes, in UTF-8 bytes (one DNS label, RFC 6763 §4.1.1).
    public static let maxNameBytes = 63

    /// `base` followed by `suffix`, `base` cut at a character boundary where both would not
    /// fit in `bytes` (a `suffix` too long for any of `base` is cut instead).
    public static func name(_ base: String, suffix: String = "", within bytes: Int = maxNameBytes) -> String {
        let bytes = max(0, bytes), room = bytes - suffix.utf8.count
        guard room >= 0 else { return name(base + suffix, within: bytes) }
        var cut = ""
        for character in base {
            guard cut.utf8.count + character.utf8.count <= room else { break }
            cut.append(character)
        }
        return cut + suffix
    }
}

/// A service found on the network, resolved.
public struct DiscoveredService: Sendable, Equatable {
    /// The instance name.
    public var name: String
    /// The service type.
    public var type: String
    /// The host the service runs on (`vm.local`, without the trailing dot).
    public var host: String
    /// Its IPv4 address, when it could be looked up.
    public var address: String?
    /// The port.
    public var port: Int
    /// TXT record entries.
    public var txt: [String: String]

    /// A found service.
    public init(name: String, type: String, host: String, address: String?, port: Int, txt: [String: String]) {
        self.name = name
        self.type = type
        self.host = host
        self.address = address
        self.port = port
        self.txt = txt
    }
    /// The listener URL the advertisement describes: `wss://` when its TXT says `tls=1`, the
    /// address (or the host when none was looked up), the port, the `db` entry; nil without
    /// a `db` entry.
    public var url: String? {
        guard let db = txt["db"], !db.isEmpty else { return nil }
        return "\(txt["tls"] == "1" ? "wss" : "ws")://\(address ?? host):\(port)/\(db)"
    }
}

/// An announcement that stays on the network until withdrawn (or its process ends).
public protocol Advertisement: Sendable {
    /// The name it was registered under (the daemon may have renamed it after a conflict).
    var registeredName: String { get }
    /// True once it is no longer on the network although it was not withdrawn: the mDNS
    /// daemon stopped or restarted, and forgot it. It is then withdrawn and made again.
    var isLost: Bool { get }
    /// Withdraws it.
    func withdraw()
}

/// DNS-SD advertising and browsing: `DNSSDDiscovery` talks to the system's mDNS daemon; tests
/// can substitute their own.
public protocol Discovery: Sendable {
    /// Announces `service`; fails when no mDNS daemon can be reached.
    func advertise(_ service: ServiceAdvertisement) async throws -> Advertisement
    /// Every service of `type` found within `timeout`, resolved.
    func browse(type: String, timeout: Duration) async throws -> [DiscoveredService]
}

/// Why discovery failed, in one sentence.
public struct DiscoveryError: Error, Sendable, CustomStringConvertible {
    /// The sentence.
    public let description: String
    /// The DNS-SD error code, if one.
    public let code: Int32?
    /// True when no mDNS daemon answered (none running, no D-Bus, no confirmation in time):
    /// trying again later may work, unlike a refusal.
    public let daemonUnavailable: Bool

    /// An error.
    public init(_ description: String, code: Int32? = nil, daemonUnavailable: Bool = false) {
        self.description = description
        self.code = code
        self.daemonUnavailable = daemonUnavailable
    }
}

/// The TXT record's wire form: length-prefixed `key=value` strings (RFC 6763 §6).
public enum TXTRecord {
    /// Encodes entries (sorted by key, for a stable record); values longer than fit are cut.
    public static func encode(_ entries: [String: String]) -> [UInt8] {
        var out: [UInt8] = []
        for (key, value) in entries.sorted(by: { $0.key < $1.key }) {
            let item = Array("\(key)=\(value)".utf8.prefix(255))
            out.append(UInt8(item.count))
            out += item
        }
        return out
    }

    /// Decodes entries; a malformed record yields what could be read.
    public static func decode(_ bytes: [UInt8]) -> [String: String] {
        var out: [String: String] = [:]
        var i = 0
        while i < bytes.count {
            let length = Int(bytes[i])
            i += 1
            guard i + length <= bytes.count else { break }
            let item = bytes[i..<(i + length)]
            i += length
            if let eq = item.firstIndex(of: UInt8(ascii: "=")) {
                out[String(decoding: item[..<eq], as: UTF8.self)] = String(decoding: item[(eq + 1)...], as: UTF8.self)
            } else if !item.isEmpty {
                out[String(decoding: item, as: UTF8.self)] = ""
            }
        }
        return out
    }
}
