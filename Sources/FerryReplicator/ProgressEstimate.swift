/// A progress bar's numbers, which never move backwards.
///
/// The total is the largest of what the sender announced it has to offer, what was asked for
/// so far and what is done: with an announcement (ferry-1's count on `subChanges`, a push's
/// own count) it is right from the first line; without one (Couchbase Lite, an older ferry)
/// it grows as `changes` batches are answered, as it always did. Either way the fraction shown
/// only grows while the replication is busy: a total that grows holds the bar where it was
/// rather than pulling it back. Once caught up the bar is full, and the next burst of changes
/// (a continuous replication) starts a bar of its own.
public struct ProgressEstimate: Sendable, Equatable {
    /// Revisions done (moved, failed, or announced with nothing to move).
    public private(set) var done = 0
    /// The total shown: max(announced, wanted, done).
    public private(set) var total = 0
    /// The bar's fill, 0…1; only grows while busy.
    public private(set) var fraction = 0.0
    private var caughtUp = false

    /// Nothing known yet.
    public init() {}

    /// Takes the latest counts; `caughtUp` when every direction has caught up.
    public mutating func update(announced: Int, wanted: Int, done: Int, caughtUp: Bool = false) {
        let total = max(announced, wanted, done)
        let measured = total == 0 ? 0 : min(1, Double(done) / Double(total))
        if caughtUp {
            fraction = 1
        } else if self.caughtUp {
            // New changes after a caught-up moment: a new bar, measured afresh.
            fraction = measured
        } else {
            fraction = max(fraction, measured)
        }
        self.caughtUp = caughtUp
        (self.done, self.total) = (done, total)
    }

    /// Takes a replication's counts: skipped revisions count as asked for and done, so an
    /// announced total is reached.
    public mutating func update(_ stats: ReplicationStats, caughtUp: Bool = false) {
        update(announced: stats.revisionsOffered, wanted: stats.revisionsWanted + stats.revisionsSkipped,
               done: stats.revisionsDone + stats.revisionsSkipped, caughtUp: caughtUp)
    }

    /// The estimate of `stats` alone (for a status snapshot, which has no history).
    public static func of(_ stats: ReplicationStats, caughtUp: Bool = false) -> ProgressEstimate {
        var estimate = ProgressEstimate()
        estimate.update(stats, caughtUp: caughtUp)
        return estimate
    }
}
