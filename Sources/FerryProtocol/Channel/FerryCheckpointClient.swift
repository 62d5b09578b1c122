/// How a ferry replicator names its checkpoints on the peer (`getCheckpoint`'s `client`):
/// a prefix for the direction, its folder's id, and `:` and a key of its document filter when
/// it has one. A listener tells a ferry replicator by it (`CBLPeerID.ferryFolder`), and a
/// read-only one refuses a pusher's progress by it.
public enum FerryCheckpointClient {
    /// A puller's prefix.
    public static let pullPrefix = "pull:"
    /// A pusher's prefix.
    public static let pushPrefix = "push:"
}
