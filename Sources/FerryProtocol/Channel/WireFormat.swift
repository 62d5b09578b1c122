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

    /// The close code that asks the peer to come back later (a listener stopping, a peer gone
    /// silent, an error worth retrying): 1001 (going away) for a ferry peer, which retries after
    /// any close; 4001 for Couchbase Lite, whose replicator takes a peer's 1000 or 1001 as the
    /// end of its replication and stops for good, and retries after 4001 (LiteCore's
    /// "transient" code), an abnormal close, or 408, 429 and 502-504 (`docs/interop.md`).
    public var retryCloseCode: UInt16 {
        switch self {
        case .ferry1: 1001
        case .cbMobile: 4001
        }
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
