import FerryCore

/// The revisions a session asked its peer for and have not come yet. A pull has caught up only
/// once each has come (stored, or refused with its answer telling the peer, or given up with a
/// `norev`): Couchbase Lite says it has caught up (an empty `changes`) right after its last
/// batch of changes, before it sends that batch's revisions, so a checkpoint saved then would
/// skip revisions that never arrived. A revision that came but could not be stored for a
/// reason that may pass (5xx: a full disk here, a blob the peer could not read then) holds the
/// checkpoint below its sequence (`firstNotStored`): the next pull asks for it again.
struct AwaitedRevisions {
    /// Each awaited revision, with the sequence the peer announced it at (0: proposed).
    private var keys: [Key: Int] = [:]
    /// Revisions that came, or were given up, without being stored for a passing reason, with
    /// their sequences; one stored later (announced again, sent again) is taken off.
    private var notStored: [Key: Int] = [:]
    /// Why the last of them was not stored.
    private(set) var notStoredReason: String?
    /// How many of `keys` each document has.
    private var perDocument: [DocumentID: Int] = [:]
    /// The peer said it has caught up while revisions were still awaited (or a `changes` was
    /// still being answered): the caught-up is taken once they have all arrived.
    var caughtUpPending = false
    /// `changes` messages being answered: their wanted revisions are not expected yet.
    var answering = 0
    /// Documents a Couchbase Lite client proposed revisions of (`proposeChanges`): once none of
    /// their revisions is awaited, the conflicts they opened are merged (its pass never ends).
    private var proposed: Set<DocumentID> = []
    /// Most revisions a peer may leave unsent: ferry keeps three batches of 500 in flight, and
    /// Couchbase Lite fewer.
    static let capacity = 100_000

    private struct Key: Hashable {
        let doc: DocumentID
        let rev: RevisionID
    }

    /// Notes that `rev` of `doc` was asked for, announced at `sequence` (`proposed`: in answer
    /// to `proposeChanges`); false when the peer already left `capacity` revisions unsent.
    mutating func expect(_ doc: DocumentID, _ rev: RevisionID, sequence: Int, proposed: Bool = false) -> Bool {
        guard keys.count < Self.capacity else { return false }
        if keys.updateValue(sequence, forKey: Key(doc: doc, rev: rev)) == nil { perDocument[doc, default: 0] += 1 }
        if proposed { self.proposed.insert(doc) }
        return true
    }

    /// Notes that `rev` of `doc` arrived (stored or refused), that the peer said it cannot
    /// send it (`norev`), or that it is here already (announced again, not wanted).
    /// `notStored`: why it was not stored, for a reason that may pass (a 5xx), so that a later
    /// pull must ask for it again (nil: stored, refused for good, or here already).
    mutating func arrived(_ doc: DocumentID, _ rev: RevisionID, notStored why: String? = nil) {
        let key = Key(doc: doc, rev: rev)
        if let why {
            if let sequence = keys[key], sequence > 0 {
                notStored[key] = sequence
                notStoredReason = "\(doc): \(why)"
            }
        } else {
            notStored[key] = nil
        }
        guard keys.removeValue(forKey: key) != nil else { return }
        let left = (perDocument[doc] ?? 1) - 1
        perDocument[doc] = left > 0 ? left : nil
    }

    /// The proposed documents none of whose revisions is awaited any more, taken.
    mutating func takeSettledProposals() -> Set<DocumentID> {
        let settled = proposed.filter { perDocument[$0] == nil }
        proposed.subtract(settled)
        return settled
    }

    /// The lowest sequence of a revision that came without being stored (`notStored`): the pull's
    /// checkpoint stays below it.
    var firstNotStored: Int? { notStored.values.min() }

    /// How many revisions came without being stored (`notStored`) and have not been since.
    var notStoredCount: Int { notStored.count }

    /// True when nothing asked for is still on its way and no `changes` is being answered.
    var isSettled: Bool { keys.isEmpty && answering == 0 }
}
