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
    /// Revisions asked for (by either side) in this session: the progress total.
    public var revisionsWanted = 0
    /// True once the pull has caught up with the peer (since its last new change).
    public var pullCaughtUp = false
    /// True once the push has caught up with this folder (since its last new change).
    public var pushCaughtUp = false
    /// Message bytes sent and received (WebSocket payloads, without framing or TLS).
    public var bytesSent = 0, bytesReceived = 0

    /// Revisions done (received, sent or failed): the progress count.
    public var revisionsDone: Int { revisionsReceived + revisionsSent + revisionsFailed }

    /// Nothing done yet.
    public init() {}
}
