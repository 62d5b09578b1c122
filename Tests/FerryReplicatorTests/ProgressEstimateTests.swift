import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// The progress bar's numbers: the announced total from the start, a growing total when
/// none was announced, and a fraction that never moves backwards.
@Suite struct ProgressEstimateTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func anAnnouncedTotalIsShownFromTheStart() {
        var e = ProgressEstimate()
        e.update(announced: 1_000, wanted: 0, done: 0)
        #expect((e.done, e.total, e.fraction) == (0, 1_000, 0))
        e.update(announced: 1_000, wanted: 500, done: 250)
        #expect((e.done, e.total, e.fraction) == (250, 1_000, 0.25))
        e.update(announced: 1_000, wanted: 1_000, done: 1_000)
        #expect((e.done, e.total, e.fraction) == (1_000, 1_000, 1))
    }

    @Test func withoutAnAnnouncementTheTotalGrowsAndTheFractionHolds() {
        var e = ProgressEstimate()
        e.update(announced: 0, wanted: 500, done: 450)
        #expect(e.total == 500 && e.fraction == 0.9)
        // The next batch doubles what is wanted: the total grows, the bar stays where it was.
        e.update(announced: 0, wanted: 1_000, done: 460)
        #expect(e.total == 1_000 && e.fraction == 0.9)
        e.update(announced: 0, wanted: 1_000, done: 950)
        #expect(e.fraction == 0.95)
        // Done past wanted (counts read between two updates) never shows more than all.
        e.update(announced: 0, wanted: 1_000, done: 1_010)
        #expect(e.total == 1_010 && e.fraction == 1)
    }

    @Test func theTotalIsTheLargestOfAnnouncedWantedAndDone() {
        var e = ProgressEstimate()
        e.update(announced: 10, wanted: 30, done: 5)
        #expect(e.total == 30)
        e.update(announced: 40, wanted: 30, done: 5)
        #expect(e.total == 40)
        e.update(announced: 40, wanted: 30, done: 45)
        #expect(e.total == 45)
    }

    @Test func caughtUpIsFullAndTheNextBurstStartsABarOfItsOwn() {
        var e = ProgressEstimate()
        e.update(announced: 0, wanted: 0, done: 0)
        #expect(e.fraction == 0)
        e.update(announced: 0, wanted: 0, done: 0, caughtUp: true)
        #expect(e.fraction == 1)
        e.update(announced: 0, wanted: 10, done: 0)
        #expect(e.fraction == 0 && e.total == 10)
        e.update(announced: 0, wanted: 10, done: 5)
        #expect(e.fraction == 0.5)
    }

    @Test func skippedRevisionsCountAsDone() {
        var stats = ReplicationStats()
        stats.revisionsOffered = 100
        stats.revisionsSkipped = 60
        stats.revisionsWanted = 40
        stats.revisionsReceived = 40
        let e = ProgressEstimate.of(stats)
        #expect((e.done, e.total, e.fraction) == (100, 100, 1))
    }

    /// A ferry-1 pull: the passive side counts its changes on `subChanges`, so the puller has
    /// the whole total as soon as its subscription is answered.
    @Test func aPullLearnsThePeersCountOnSubChanges() async throws {
        let tmp = TemporaryDirectory()
        let source = tmp.appending("inventory"), target = tmp.appending("copy")
        _ = try FerryProcess.shell("mkdir -p \(source) && for i in $(seq 1 40); do echo \"{\\\"n\\\": $i}\" > \(source)/doc$i.json; done")
        #expect(try FerryProcess.ferry(["init", source, "--name", "inventory"]).status == 0)
        let sourceShared = SharedStore(try FolderStore.open(at: source, writable: true))
        let targetShared = SharedStore(try FolderStore.create(at: target, name: "inventory"))
        let (active, passive) = LoopbackTransport.pair()
        let stats = try await loopbackPull(active: active, passive: passive, from: sourceShared, into: targetShared, logger: logger)
        #expect(stats.revisionsOffered == 40 && stats.revisionsReceived == 40 && stats.revisionsSkipped == 0, "\(stats)")
        #expect(stats.pullSubscribed && stats.receivingChanges)
        #expect(ProgressEstimate.of(stats).total == 40)
        // Again from the checkpoint: nothing offered, nothing to do.
        let (active2, passive2) = LoopbackTransport.pair()
        let again = try await loopbackPull(active: active2, passive: passive2, from: sourceShared, into: targetShared, logger: logger)
        #expect(again.revisionsOffered == 0 && again.revisionsReceived == 0, "\(again)")
    }
}
