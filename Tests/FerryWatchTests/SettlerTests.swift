import Testing
import FerryWatch

@Suite struct SettlerTests {
    /// Every path exists unless listed.
    static func existsUnless(_ gone: Set<String>) -> (String) -> Bool { { !gone.contains($0) } }

    @Test func completedWritesSettleAfterTheWindowAndBurstsCoalesce() {
        var s = Settler(window: 1_000, openWindow: 100_000)
        s.note("a.json", .modified, now: 0)
        s.note("a.json", .modified, now: 10)
        #expect(s.takeDue(now: 5_000, exists: Self.existsUnless([])).isEmpty)   // still open: waits for the long window
        s.note("a.json", .completed, now: 6_000)        // closed: short window from now
        #expect(s.nextDeadline == 7_000)
        #expect(s.takeDue(now: 6_500, exists: Self.existsUnless([])).isEmpty)
        #expect(s.takeDue(now: 7_000, exists: Self.existsUnless([])).present == ["a.json"])
        #expect(s.pendingCount == 0)
    }

    @Test func aFileLeftOpenSettlesAfterTheOpenWindow() {
        var s = Settler(window: 1_000, openWindow: 100_000)
        s.note("log.txt", .modified, now: 0)
        #expect(s.takeDue(now: 99_999, exists: Self.existsUnless([])).isEmpty)
        #expect(s.takeDue(now: 100_000, exists: Self.existsUnless([])).present == ["log.txt"])
    }

    /// vim's save: rename away, write a new file, close it. One edit, never a deletion.
    @Test func aSaveByRenameIsAnEditNotADeletion() {
        var s = Settler(window: 1_000, openWindow: 100_000, absenceWindow: 500_000)
        s.note("f.json", .removed, now: 0)              // MOVED_FROM f.json -> f.json~
        #expect(s.takeDue(now: 200_000, exists: Self.existsUnless(["f.json"])).isEmpty)
        s.note("f.json", .modified, now: 200_000)       // CREATE f.json
        s.note("f.json", .completed, now: 200_100)      // CLOSE_WRITE f.json
        let due = s.takeDue(now: 201_100, exists: Self.existsUnless([]))
        #expect(due.present == ["f.json"] && due.gone.isEmpty)
        #expect(s.pendingCount == 0)
    }

    @Test func aPathThatStaysAwayIsGoneAfterTheAbsenceWindowOnly() {
        var s = Settler(window: 1_000, openWindow: 100_000, absenceWindow: 500_000)
        s.note("f.json", .removed, now: 0)
        #expect(s.nextDeadline == 500_000)
        #expect(s.takeDue(now: 499_999, exists: Self.existsUnless(["f.json"])).isEmpty)
        #expect(s.takeDue(now: 500_000, exists: Self.existsUnless(["f.json"])).gone == ["f.json"])
        // A write that settles and is then found missing (removed before the event was read)
        // waits a whole absence window from when it was found missing.
        s.note("g.json", .completed, now: 1_000_000)
        #expect(s.takeDue(now: 1_001_000, exists: Self.existsUnless(["g.json"])).isEmpty)
        #expect(s.nextDeadline == 1_501_000)
        s.note("g.json", .removed, now: 1_100_000)      // the DELETE, read late: the clock does not restart
        #expect(s.takeDue(now: 1_501_000, exists: Self.existsUnless(["g.json"])).gone == ["g.json"])
    }

    @Test func aRemovedDirectoryIsLookedAtAgainAfterTheAbsenceWindow() {
        var s = Settler(window: 1_000, openWindow: 100_000, absenceWindow: 500_000)
        s.noteDirectoryRemoved("photos", now: 0)
        #expect(s.takeDue(now: 499_999, exists: Self.existsUnless([])).isEmpty)
        #expect(s.takeDue(now: 500_000, exists: Self.existsUnless([])).directoriesGone == ["photos"])
        #expect(s.pendingCount == 0)
    }
}
