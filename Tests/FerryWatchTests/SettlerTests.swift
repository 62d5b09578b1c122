import Testing
import FerryWatch

@Suite struct SettlerTests {
    @Test func completedWritesSettleAfterTheWindowAndBurstsCoalesce() {
        var s = Settler(window: 1_000, openWindow: 100_000)
        s.note("a.json", .modified, now: 0)
        s.note("a.json", .modified, now: 10)
        #expect(s.takeDue(now: 5_000).isEmpty)          // still open: waits for the long window
        s.note("a.json", .completed, now: 6_000)        // closed: short window from now
        #expect(s.nextDeadline == 7_000)
        #expect(s.takeDue(now: 6_500).isEmpty)
        #expect(s.takeDue(now: 7_000) == ["a.json"])
        #expect(s.pendingCount == 0)
    }

    @Test func aFileLeftOpenSettlesAfterTheOpenWindow() {
        var s = Settler(window: 1_000, openWindow: 100_000)
        s.note("log.txt", .modified, now: 0)
        #expect(s.takeDue(now: 99_999).isEmpty)
        #expect(s.takeDue(now: 100_000) == ["log.txt"])
    }
}
