import FerryProtocol
import Testing
@testable import FerryReplicator

/// When a continuous replication saves its checkpoint: after a pause in its progress, at
/// the latest `longest` after the first progress not saved, never two saves at once.
@Suite struct DeferredCheckpointTests {
    let start = ContinuousClock.now

    @Test func aSaveWaitsForAPauseButNoLongerThanTheLongestWait() {
        var checkpoint = DeferredCheckpoint(peerRev: "3", saved: Checkpoint(local: 5, remote: 2))
        #expect(checkpoint.advance(at: start) { $0.local = 5 } == nil, "nothing new")
        #expect(checkpoint.advance(at: start) { $0.local = 6 } == start + DeferredCheckpoint.quiet)
        // Each progress pushes the save back, up to the longest wait after the first.
        let later = start + .milliseconds(700)
        #expect(checkpoint.advance(at: later) { $0.remote = 4 } == later + DeferredCheckpoint.quiet)
        let last = start + DeferredCheckpoint.longest - .milliseconds(100)
        #expect(checkpoint.advance(at: last) { $0.local = 9 } == start + DeferredCheckpoint.longest)
        #expect(checkpoint.beginSave() == Checkpoint(local: 9, remote: 4))
        #expect(checkpoint.endSave(of: Checkpoint(local: 9, remote: 4), peerRev: .some("4")) == false, "all saved")
        #expect(checkpoint.peerRev == "4" && checkpoint.saved == Checkpoint(local: 9, remote: 4))
        #expect(checkpoint.beginSave() == nil, "nothing to save")
    }

    @Test func progressDuringASaveWaitsForItsEndAndAFailedSaveIsTriedAgain() {
        var checkpoint = DeferredCheckpoint(peerRev: nil, saved: Checkpoint(local: 0, remote: 0))
        _ = checkpoint.advance(at: start) { $0.remote = 1 }
        let saving = checkpoint.beginSave()
        #expect(saving == Checkpoint(local: 0, remote: 1))
        #expect(checkpoint.beginSave() == nil, "one save at a time")
        let during = start + .milliseconds(10)
        #expect(checkpoint.advance(at: during) { $0.remote = 2 } == nil, "armed when the save ends")
        #expect(checkpoint.endSave(of: Checkpoint(local: 0, remote: 1), peerRev: .some("1")) == true, "progress is waiting")
        // The end of the save arms the next one.
        let end = start + .milliseconds(20)
        #expect(checkpoint.advance(at: end) { _ in } == end + DeferredCheckpoint.quiet)
        #expect(checkpoint.beginSave() == Checkpoint(local: 0, remote: 2))
        // A failed save keeps the peer copy's revision and what is saved.
        #expect(checkpoint.endSave(of: Checkpoint(local: 0, remote: 2), peerRev: nil) == true)
        #expect(checkpoint.peerRev == "1" && checkpoint.saved == Checkpoint(local: 0, remote: 1))
    }
}
