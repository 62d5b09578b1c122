import FerryProtocol

/// One direction's checkpoint while a replication runs continuously: what is saved on both
/// sides, what the replication has reached since, and when the next save is due. A save
/// waits for the progress to pause for `quiet`, and for at most `longest` after the first
/// progress not saved, so that a burst of edits costs one save on each side instead of one per
/// edit, and the save comes after the edits have gone out, not among them (as Couchbase
/// Lite's checkpointer waits before it saves). A checkpoint that lags costs only a resend of
/// announcements the peer answers "have it" to.
struct DeferredCheckpoint {
    /// How long the progress must pause before it is saved.
    static let quiet: Duration = .seconds(1)
    /// Longest a progress waits to be saved while the replication keeps moving.
    static let longest: Duration = .seconds(5)

    /// The peer copy's revision, for the next save.
    var peerRev: String?
    /// What both sides hold.
    private(set) var saved: Checkpoint
    /// What the replication has reached.
    private(set) var reached: Checkpoint
    /// When the oldest progress not saved was reached.
    private var firstUnsaved: ContinuousClock.Instant?
    /// True while a save is on its way (its end arms the next one if need be).
    private(set) var saving = false
    /// The wait for the next save.
    var timer: Task<Void, Never>?

    /// The checkpoint read when the replication started, with its peer copy's revision.
    init(peerRev: String?, saved: Checkpoint) {
        self.peerRev = peerRev
        self.saved = saved
        self.reached = saved
    }

    /// Takes the progress `change` makes at `now`; returns when the save is due, or nil when
    /// none is to be armed (nothing new, or a save on its way, whose end looks again).
    mutating func advance(at now: ContinuousClock.Instant, _ change: (inout Checkpoint) -> Void) -> ContinuousClock.Instant? {
        change(&reached)
        guard reached != saved else { return nil }
        let first = firstUnsaved ?? now
        firstUnsaved = first
        guard !saving else { return nil }
        return min(now + Self.quiet, first + Self.longest)
    }

    /// Starts a save: returns what to save, or nil when it is not needed or one is on its way.
    mutating func beginSave() -> Checkpoint? {
        guard !saving, reached != saved else { return nil }
        saving = true
        timer = nil
        firstUnsaved = nil
        return reached
    }

    /// Ends the save of `checkpoint` (with the peer copy's new revision, or nil if it failed);
    /// returns true when progress made meanwhile waits to be saved.
    mutating func endSave(of checkpoint: Checkpoint, peerRev rev: String??) -> Bool {
        saving = false
        if let rev {
            peerRev = rev
            saved = checkpoint
        }
        return reached != saved
    }
}
