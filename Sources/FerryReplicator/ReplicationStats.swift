/// What a session did, and where it stands.
public struct ReplicationStats: Sendable, Equatable {
    /// Revisions received and stored.
    public var revisionsReceived = 0
    /// Revisions sent and accepted by the peer.
    public var revisionsSent = 0
    /// Blobs fetched from the peer.
    public var blobsReceived = 0
    /// Revisions the peer refused or that could not be stored.
    public var revisionsFailed = 0
    /// Revisions asked for (by either side) in this session: the progress total when no
    /// count was announced.
    public var revisionsWanted = 0
    /// Revisions the sending side said it has to offer before announcing them: the peer's
    /// count on `subChanges` for a pull, this folder's own for a push. Zero when the peer
    /// announces none (an older ferry, Couchbase Lite).
    public var revisionsOffered = 0
    /// Revisions announced that had nothing to move: already on the receiving side, or
    /// delivered by this very connection (never announced back). They count as done, so a
    /// bar measured against `revisionsOffered` ends full.
    public var revisionsSkipped = 0
    /// True once the pull's subscription was answered (with the peer's count, when it gives one).
    public var pullSubscribed = false
    /// True once this side has counted the changes it sends (its push, or a pull it serves).
    public var sendingChanges = false
    /// True once the peer has announced changes to this side (it pushes, or answers a pull).
    public var receivingChanges = false
    /// True once the pull has caught up with the peer (since its last new change).
    public var pullCaughtUp = false
    /// True once the push has caught up with this folder (since its last new change).
    public var pushCaughtUp = false
    /// Why the peer refuses this side's push (a read-only listener) while its pull goes on.
    public var pushRefused: String?
    /// Why this side could not store the latest of the peer's revisions it refused for want
    /// of room or another failure of its own (answered 5xx: the peer sends it again later);
    /// nil once one is stored again.
    public var storeFailure: String?
    /// Message bytes sent and received (WebSocket payloads, without framing or TLS).
    public var bytesSent = 0, bytesReceived = 0

    /// Revisions done (received, sent or failed): the progress count.
    public var revisionsDone: Int { revisionsReceived + revisionsSent + revisionsFailed }

    /// Nothing done yet.
    public init() {}
}
