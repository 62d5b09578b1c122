import FerryCore

/// The revisions a session asked its peer for and has not received yet. A pull has caught up
/// only once they are all here: Couchbase Lite says it has (an empty `changes`) as soon as
/// its last batch of changes is answered, before it sends that batch's revisions, so a
/// checkpoint saved then would skip revisions that never arrived.
struct AwaitedRevisions {
    private var keys: Set<Key> = []
    /// The peer said it has caught up while revisions were still awaited: the caught-up is
    /// taken once they have all arrived.
    var caughtUpPending = false
    /// Revisions were proposed (`proposeChanges`) since conflicts were last resolved: once
    /// they are here, what they opened is merged.
    var proposed = false
    /// Most revisions a peer may leave unsent: ferry keeps three batches of 500 in flight, and
    /// Couchbase Lite fewer.
    static let capacity = 100_000

    private struct Key: Hashable {
        let doc: DocumentID
        let rev: RevisionID
    }

    /// Notes that `rev` of `doc` was asked for; false when the peer already left `capacity`
    /// revisions unsent.
    mutating func expect(_ doc: DocumentID, _ rev: RevisionID) -> Bool {
        guard keys.count < Self.capacity else { return false }
        keys.insert(Key(doc: doc, rev: rev))
        return true
    }

    /// Notes that `rev` of `doc` arrived (stored or refused) or the peer said it cannot send it.
    mutating func arrived(_ doc: DocumentID, _ rev: RevisionID) {
        keys.remove(Key(doc: doc, rev: rev))
    }

    /// True when nothing asked for is still on its way.
    var isEmpty: Bool { keys.isEmpty }
}
