/// The wire formats a connection may speak, each chosen by its WebSocket subprotocol.
public enum WireFormat: Sendable, Hashable, CustomStringConvertible {
    /// ferry's own: JSON text messages and binary blob chunks (`ferry-1`, at `/<db>`).
    case ferry1
    /// Couchbase Lite's replication protocol over BLIP 3 (`BLIP_3+CBMobile_<version>`, at
    /// `/<db>/_blipsync`); version 3 is Couchbase Lite 3.x's, 2 that of 2.8.
    case cbMobile(version: Int)

    /// The Couchbase Mobile versions spoken, best first.
    public static let cbMobileVersions = [3, 2]

    /// The WebSocket subprotocol naming this format.
    public var subprotocol: String {
        switch self {
        case .ferry1: ProtocolVersion.subprotocol
        case .cbMobile(let version): "BLIP_3+CBMobile_\(version)"
        }
    }

    /// The format a subprotocol names, if this build speaks it.
    public init?(subprotocol: String) {
        if subprotocol == ProtocolVersion.subprotocol { self = .ferry1; return }
        let prefix = "BLIP_3+CBMobile_"
        guard subprotocol.hasPrefix(prefix), let version = Int(subprotocol.dropFirst(prefix.count)),
              Self.cbMobileVersions.contains(version) else { return nil }
        self = .cbMobile(version: version)
    }

    /// The format a listener picks from what a client offers at a path: `ferry-1` wherever
    /// it is offered (ferry's own dialer offers it beside BLIP when it does not know what it
    /// will reach), else the newest Couchbase Mobile version, but only at `/<db>/_blipsync`.
    public static func chosen(from offered: [String], blipPath: Bool) -> WireFormat? {
        let formats = offered.compactMap(WireFormat.init(subprotocol:))
        if formats.contains(.ferry1) { return .ferry1 }
        guard blipPath else { return nil }
        return cbMobileVersions.lazy.map { WireFormat.cbMobile(version: $0) }.first { formats.contains($0) }
    }

    /// `ferry-1` or `BLIP_3+CBMobile_3`.
    public var description: String { subprotocol }
}
