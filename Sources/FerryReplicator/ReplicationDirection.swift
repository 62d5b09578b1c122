/// Which ways a replication moves revisions.
public enum ReplicationDirection: String, Sendable, CaseIterable {
    /// From this folder to the peer.
    case push
    /// From the peer to this folder.
    case pull
    /// Both.
    case both

    /// True when revisions flow out.
    public var pushes: Bool { self != .pull }
    /// True when revisions flow in.
    public var pulls: Bool { self != .push }
}
