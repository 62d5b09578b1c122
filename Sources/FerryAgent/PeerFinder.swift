import FerryCore
import FerryDiscovery
import FerryNet
import FerryStore
import Logging

/// DNS-SD for the agent: what the listener advertises, and turning services found on the
/// network into peers to replicate with (SPEC §6).
public struct DiscoveryOptions: Sendable {
    /// Advertise the listener (`--no-advertise` turns it off).
    public var advertise = true
    /// `--service-type`.
    public var serviceType = "_cblistservicesync._tcp"
    /// `--service-name` (default: "DB on HOST").
    public var serviceName: String?
    /// `serve --discover`: replicate with every peer found that serves the same database.
    public var discover = false
    /// Credentials, heartbeat and retry settings for discovered peers (their URL and trust
    /// come from the advertisement).
    public var template: PeerEndpoint?

    /// Advertise with the default type; do not discover.
    public init() {}
}

/// Turns advertisements into peers: same database, not this folder, and a fingerprint that
/// is pinned on first use and must not change afterwards.
public struct PeerFinder: Sendable {
    /// The service type browsed.
    public let serviceType: String
    /// This folder's database name and id.
    public let database: String, folderID: String
    let discovery: Discovery
    let layout: FolderLayout

    /// A finder for the folder laid out by `layout`.
    public init(discovery: Discovery, serviceType: String, layout: FolderLayout, database: String, folderID: String) {
        self.discovery = discovery
        self.serviceType = serviceType
        self.layout = layout
        self.database = database
        self.folderID = folderID
    }

    /// A peer found, and why it can or cannot be used.
    public struct Candidate: Sendable {
        /// The service.
        public var service: DiscoveredService
        /// Its endpoint, nil when it must not be used.
        public var endpoint: PeerEndpoint?
        /// Why not, or a notice about it (e.g. its fingerprint was pinned now).
        public var note: String?
        /// Refused because its certificate is not the one pinned (or the pins are unreadable):
        /// possibly someone else answering in its name.
        public var distrusted = false
    }

    /// Browses for `timeout` and returns every service of the same database but another
    /// folder, optionally only the one named `name`, with the endpoint to use.
    public func find(timeout: Duration, name: String? = nil, template: PeerEndpoint?) async throws -> [Candidate] {
        let services = try await discovery.browse(type: serviceType, timeout: timeout)
        var out: [Candidate] = []
        for s in services where s.txt["db"] == database && s.txt["id"] != folderID {
            if let name, s.name != name { continue }
            out.append(try candidate(s, template: template))
        }
        return out
    }

    func candidate(_ s: DiscoveredService, template: PeerEndpoint?) throws -> Candidate {
        let tls = s.txt["tls"] == "1"
        guard let url = s.url.flatMap(PeerURL.init) else {
            return Candidate(service: s, endpoint: nil, note: "its address \(s.address ?? s.host):\(s.port) makes no URL")
        }
        var endpoint = template ?? PeerEndpoint(url: url)
        endpoint.url = url
        var note: String?
        if tls {
            guard let fp = s.txt["fp"]?.lowercased(), fp.count == 64 else {
                return Candidate(service: s, endpoint: nil, note: "it advertises TLS without a fingerprint to pin")
            }
            let verdict: KnownPeers.Verdict
            do { verdict = try KnownPeers(layout: layout).check(id: s.txt["id"] ?? s.name, name: s.name, fingerprint: fp) } catch {
                return Candidate(service: s, endpoint: nil, note: "\(error)", distrusted: true)  // fail closed: an unreadable pin trusts nothing
            }
            switch verdict {
            case .pinnedNow: note = "first seen: its fingerprint \(fp) is now pinned (.ferry/known-peers.json)"
            case .known: break
            case .changed(let old):
                return Candidate(service: s, endpoint: nil, note: """
                    its certificate fingerprint changed from \(old) to \(fp): not trusted. If the change is expected \
                    (a new identity), remove its entry from \(KnownPeers(layout: layout).path)
                    """, distrusted: true)
            }
            endpoint.tls = ClientTLS(trust: .fingerprint(fp), identity: template?.tls?.identity)
        }
        return Candidate(service: s, endpoint: endpoint, note: note)
    }

    /// The TXT record this folder's listener advertises.
    public static func txt(database: String, folderID: String, fingerprint: String?) -> [String: String] {
        ["db": database, "tls": fingerprint == nil ? "0" : "1", "fp": fingerprint ?? "", "v": "1", "id": folderID]
    }
}
