import FerryCore

/// What a Couchbase Lite peer may send over one connection, checked before anything of it
/// reaches the session.
public struct CBLLimits: Sendable, Equatable {
    /// The BLIP layer's own limits (frames, properties, messages).
    public var blip = BLIPLimits()
    /// Largest `rev` body (ferry's largest JSON document).
    public var maxBodyBytes = 64 << 20
    /// Largest blob moved by one `getAttachment` (its bytes travel as one BLIP reply, held in
    /// memory whole: Couchbase Lite has no ranged form).
    public var maxBlobBytes = 64 << 20
    /// Most entries in one `changes` or `proposeChanges`.
    public var maxChangesPerMessage = 1_000
    /// Longest history of one `rev`.
    public var maxHistory = 10_000
    /// Most of the peer's requests held by the channel while a `rev` at their head waits for
    /// the blobs whose SHA-256 it must learn first.
    public var maxWaitingRequests = 2_048
    /// Bytes of blobs fetched from the peer kept for the session to read.
    public var blobCacheBytes = 64 << 20

    /// The defaults.
    public init() {}
}

/// The id a Couchbase Lite channel shows for its peer (a revision's `origin`): stable for one
/// replicator of the peer's, whatever connection it comes on.
public enum CBLPeerID {
    /// Shown when the peer sent something else before any checkpoint request.
    public static let unknown = "couchbase-lite"

    /// The peer id a checkpoint `client` names: a ferry replicator's `pull:<folder id>` or
    /// `push:<folder id>` gives that folder id; anything else (Couchbase Lite's
    /// `cp-<base64 of a SHA-1>`, a function of its database and replication) gives `cbl-` and
    /// 32 hex digits of the client's SHA-256.
    public static func from(checkpointClient client: String) -> String {
        ferryFolder(inCheckpointClient: client) ?? "cbl-" + BlobDigest.of(Array(client.utf8)).hex.prefix(32)
    }

    /// The folder id a ferry replicator's checkpoint `client` names (`pull:<folder id>` or
    /// `push:<folder id>`); nil for any other client (Couchbase Lite's).
    public static func ferryFolder(inCheckpointClient client: String) -> String? {
        for prefix in [FerryCheckpointClient.pullPrefix, FerryCheckpointClient.pushPrefix] where client.hasPrefix(prefix) {
            let id = String(client.dropFirst(prefix.count).prefix { $0 != ":" })
            if isValid(id) { return id }
        }
        return nil
    }

    /// The peer id of the listener at `url`, for the active side (a Couchbase Lite listener
    /// has no id it tells): `cbl-` and 32 hex digits of the URL's SHA-256.
    public static func from(url: String) -> String {
        "cbl-" + BlobDigest.of(Array(url.utf8)).hex.prefix(32)
    }

    /// ferry's rule for peer ids (docs/protocol.md, `hello`): 1 to 64 letters, digits, `-`,
    /// `_`, `.`, and not `local`.
    public static func isValid(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id != "local"
            && id.utf8.allSatisfy { b in
                (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x2D || b == 0x5F || b == 0x2E
            }
    }
}
