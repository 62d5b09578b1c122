import Foundation
import Logging
import Synchronization
import Testing
import FerryCore
import FerryProtocol
@testable import FerryReplicator
import FerryStore
import FerryTesting

/// When a continuous replication saves its checkpoint: after a pause in its progress, at
/// the latest `longest` after the first progress not saved, never two saves at once, and
/// progress made while a save is on its way is saved after it.
@Suite struct DeferredCheckpointTests {
    /// The instant the timing tests count from.
    let start = ContinuousClock.now
    /// Sessions log nothing.
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Each progress pushes the save back by `quiet`, but not past `longest` after the first.
    @Test func aSaveWaitsForAPauseButNoLongerThanTheLongestWait() {
        var checkpoint = DeferredCheckpoint(peerRev: "3", saved: Checkpoint(local: 5, remote: 2))
        #expect(checkpoint.advance(at: start) { $0.local = 5 } == nil, "nothing new")
        #expect(checkpoint.advance(at: start) { $0.local = 6 } == start + DeferredCheckpoint.quiet)
        let later = start + .milliseconds(700)
        #expect(checkpoint.advance(at: later) { $0.remote = 4 } == later + DeferredCheckpoint.quiet)
        let last = start + DeferredCheckpoint.longest - .milliseconds(100)
        #expect(checkpoint.advance(at: last) { $0.local = 9 } == start + DeferredCheckpoint.longest)
        #expect(checkpoint.beginSave() == Checkpoint(local: 9, remote: 4))
        #expect(checkpoint.endSave(of: Checkpoint(local: 9, remote: 4), peerRev: .some("4")) == false, "all saved")
        #expect(checkpoint.peerRev == "4" && checkpoint.saved == Checkpoint(local: 9, remote: 4))
        #expect(checkpoint.beginSave() == nil, "nothing to save")
    }

    /// A save is not armed while one is on its way; its end says progress waits; a failed
    /// save keeps what was saved before.
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
        #expect(checkpoint.endSave(of: Checkpoint(local: 0, remote: 2), peerRev: nil) == true)
        #expect(checkpoint.peerRev == "1" && checkpoint.saved == Checkpoint(local: 0, remote: 1))
    }

    /// The active end of a loopback connection that holds its first `setCheckpoint` for a
    /// second before it leaves (a peer slow to save), and says when it began holding it.
    final class SlowFirstCheckpoint: MessageTransport, @unchecked Sendable {
        let inner: LoopbackTransport
        let holding = Mutex(false)
        let began: AsyncStream<Void>.Continuation
        init(_ inner: LoopbackTransport, began: AsyncStream<Void>.Continuation) {
            self.inner = inner
            self.began = began
        }
        var inbound: TransportInbox { inner.inbound }
        func enqueue(_ message: TransportMessage) -> TransportWrite {
            guard case .text(let bytes) = message, case .object(let frame)? = try? JSONParser.parse(bytes),
                  frame["type"] == "setCheckpoint", holding.withLock({ first in defer { first = true }; return !first })
            else { return inner.enqueue(message) }
            began.yield()
            let inner = self.inner
            let sent = Task {
                try await Task.sleep(for: .seconds(1))
                try await inner.enqueue(message).sent()
            }
            return TransportWrite { try await sent.value }
        }
        func close(code: UInt16, reason: String) async { await inner.close(code: code, reason: reason) }
        var closeDescription: String? { inner.closeDescription }
    }

    /// A revision pulled while the checkpoint before it is being saved is saved once that
    /// save is answered (it used to wait for the next edit).
    @Test func progressMadeWhileASaveIsOnItsWayIsSavedAfterIt() async throws {
        let tmp = TemporaryDirectory()
        let here = SharedStore(try FolderStore.create(at: tmp.appending("here"), name: "db"))
        let there = SharedStore(try FolderStore.create(at: tmp.appending("there"), name: "db"))
        _ = try await there.perform { s in try s.batch { try s.recordLocalJSON(DocumentID("a.json"), ["n": .int(1)]) } }
        let (began, beganSink) = AsyncStream<Void>.makeStream()
        let (activeEnd, passiveEnd) = LoopbackTransport.pair()
        let replication = ContinuousLoopback(active: SlowFirstCheckpoint(activeEnd, began: beganSink), passive: passiveEnd,
                                             here: here, there: there, direction: .pull, logger: logger)
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            await activeEnd.close(code: 4000, reason: "test timed out")
        }
        // The pull's checkpoint as `there` keeps it.
        let pullClient = "pull:" + here.info.id
        func remoteSaved() async -> Int? { await there.perform { s in CheckpointStore(layout: s.layout).get(pullClient)?.remote } }

        // The first sync's save is held; meanwhile a second revision is pulled.
        var waiting = began.makeAsyncIterator()
        _ = await waiting.next()
        let second = try await there.perform { s in try s.batch { try s.recordLocalJSON(DocumentID("b.json"), ["n": .int(2)]) } }
        let secondSequence = try #require(second).seq
        var saved: Int?
        for _ in 0..<600 {
            saved = await remoteSaved()
            if saved == secondSequence { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(saved == secondSequence, "the checkpoint stayed at \(String(describing: saved)), not \(secondSequence)")
        #expect(await here.perform { s in s.index.trees[try! DocumentID("b.json")] != nil })

        watchdog.cancel()
        await replication.stop()
    }
}
