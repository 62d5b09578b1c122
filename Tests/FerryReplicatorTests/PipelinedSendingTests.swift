import Foundation
import Logging
import Synchronization
import Testing
import FerryCore
import FerryProtocol
@testable import FerryReplicator
import FerryStore
import FerryTesting

/// How a sender paces a pass of several `changes` batches: the next batch is announced before
/// this one's revisions go out (the receiver answers it while it stores them), revisions leave
/// in bursts without waiting for each write, and no more than `batchesUnanswered` batches'
/// revisions are unanswered at any time.
@Suite struct PipelinedSendingTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The text frames both ends of a connection sent, in the order they were queued.
    final class FrameLog: Sendable {
        let frames = Mutex<[(side: String, type: String, number: Int)]>([])
    }

    /// One end of a loopback connection that notes, in a log both ends share, the frames it
    /// sends, before they leave: a frame noted by the receiving side was sent after everything
    /// it had read.
    static func noting(_ end: LoopbackTransport, side: String, in log: FrameLog) -> DeltaSyncTests.TamperingTransport {
        DeltaSyncTests.TamperingTransport(end) { bytes in
            if case .object(let frame)? = try? JSONParser.parse(bytes), case .string(let type)? = frame["type"] {
                let number = frame["n"]?.intValue ?? frame["re"]?.intValue ?? 0
                log.frames.withLock { $0.append((side, type, number)) }
            }
            return bytes
        }
    }

    /// What a ferry sender may have unanswered at once (three batches of revisions, two
    /// `changes`, a `subChanges`, a checkpoint request, every blob fetch) stays within what a
    /// receiver admits: a window raised past it would get the sender's connection closed.
    @Test func theSendersWindowFitsTheReceiversRequestBudget() {
        let most = PeerSession.batchesUnanswered * PeerSession.changesBatchSize + 2 + 1 + 1 + RequestBudget.maxFetches
        #expect(most < RequestBudget.maxRequests, "a sender may have \(most) requests unanswered; a receiver admits \(RequestBudget.maxRequests)")
    }

    @Test func batchesOverlapAndAtMostTheWindowIsUnanswered() async throws {
        let tmp = TemporaryDirectory()
        let source = SharedStore(try FolderStore.create(at: tmp.appending("source"), name: "many"))
        let target = SharedStore(try FolderStore.create(at: tmp.appending("target"), name: "many"))
        let count = 4 * PeerSession.changesBatchSize + 123
        try await source.perform { store in
            try store.batch {
                for i in 0..<count { try store.recordLocalJSON(try DocumentID("d\(i / 1000)/\(i).json"), ["n": .int(i)]) }
            }
        }
        let log = FrameLog()
        let (active, passive) = LoopbackTransport.pair(jitter: .microseconds(300))
        let stats = try await loopbackPull(active: Self.noting(active, side: "puller", in: log),
                                           passive: Self.noting(passive, side: "sender", in: log),
                                           from: source, into: target, logger: logger)
        #expect(stats.revisionsReceived == count, "\(stats)")
        let frames = log.frames.withLock { $0 }

        // The sender's revisions in the order sent; each batch is whole (every revision wanted).
        let revs = frames.filter { $0.side == "sender" && $0.type == "rev" }.map(\.number)
        #expect(revs.count == count)
        let batchOf = Dictionary(uniqueKeysWithValues: revs.enumerated().map { ($1, $0 / PeerSession.changesBatchSize) })
        let announcements = frames.enumerated().filter { $1.side == "sender" && $1.type == "changes" }.map(\.offset)
        let batches = (count + PeerSession.changesBatchSize - 1) / PeerSession.changesBatchSize
        #expect(announcements.count >= batches)
        var answered = Set<Int>()
        var unansweredBatches = Set<Int>()
        var sentOfBatch: [Int: Int] = [:], answeredOfBatch: [Int: Int] = [:]
        for (position, frame) in frames.enumerated() {
            if frame.side == "sender", frame.type == "rev", let batch = batchOf[frame.number] {
                if sentOfBatch[batch, default: 0] == 0, batch + 1 < batches {
                    // Announced ahead: the next batch's `changes` left before this batch's first `rev`.
                    #expect(announcements[batch + 1] < position, "batch \(batch + 1) was announced after batch \(batch)'s revisions")
                }
                sentOfBatch[batch, default: 0] += 1
                unansweredBatches.insert(batch)
                #expect(unansweredBatches.count <= PeerSession.batchesUnanswered,
                        "revisions of batches \(unansweredBatches.sorted()) unanswered at once")
            } else if frame.side == "puller", frame.type == "response", let batch = batchOf[frame.number], answered.insert(frame.number).inserted {
                answeredOfBatch[batch, default: 0] += 1
                if answeredOfBatch[batch] == sentOfBatch[batch] { unansweredBatches.remove(batch) }
            }
        }
        #expect(answered.count == count)

        let copy = try FolderStore.open(at: tmp.appending("target"), writable: false)
        #expect(copy.index.trees.count == count)
        #expect(try copy.verify().isClean)
        #expect(FileManager.default.fileExists(atPath: tmp.appending("target") + "/d2/2100.json"))
    }

    /// A burst of frames queued but not yet written is waited for once the bytes queued pass
    /// `WritesInFlight.maxBytes`: a sender holds a bounded amount of unsent revisions.
    @Test func queuedBytesAreBounded() async throws {
        /// Writes that finish when the test releases them.
        final class Gate: @unchecked Sendable {
            let lock = NSLock()
            var released = Set<Int>()
            var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
            var added = 0
            func write(_ n: Int) -> TransportWrite {
                TransportWrite { [self] in
                    await withCheckedContinuation { c in
                        let now = lock.withLock { () -> Bool in
                            if released.contains(n) { return true }
                            waiters[n] = c
                            return false
                        }
                        if now { c.resume() }
                    }
                }
            }
            func release(_ n: Int) {
                lock.withLock { () -> CheckedContinuation<Void, Never>? in
                    released.insert(n)
                    return waiters.removeValue(forKey: n)
                }?.resume()
            }
            var count: Int { lock.withLock { added } }
        }
        let gate = Gate()
        let burst = WritesInFlight.maxBytes / 4
        let sender = Task {
            var inFlight = WritesInFlight()
            for n in 0..<8 {
                try await inFlight.add(gate.write(n), bytes: burst)
                gate.lock.withLock { gate.added = n + 1 }
            }
            try await inFlight.finish()
        }
        // Four bursts fit; the fifth waits until the first is written.
        for _ in 0..<200 where gate.count < 4 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(gate.count == 4)
        gate.release(0)
        for _ in 0..<200 where gate.count < 5 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(gate.count == 5)
        for n in 1..<8 { gate.release(n) }
        try await sender.value
        #expect(gate.count == 8)
    }
}
