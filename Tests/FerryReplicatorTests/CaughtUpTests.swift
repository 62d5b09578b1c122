import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
@testable import FerryReplicator
import FerryStore
import FerryTesting

/// "Caught up" (an empty `changes`) is said once per stretch of announced revisions: a pass
/// that finds only revisions the connection itself delivered (which are not announced back)
/// says nothing, so an edit costs its receiver one message fewer, and its store no look.
@Suite struct CaughtUpTests {
    /// Sessions log nothing.
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Edits both ways, each followed by the echo pass on its receiver: counted `changes` frames.
    @Test func aPassThatAnnouncesNothingDoesNotSayCaughtUpAgain() async throws {
        let tmp = TemporaryDirectory()
        let here = SharedStore(try FolderStore.create(at: tmp.appending("here"), name: "db"))
        let there = SharedStore(try FolderStore.create(at: tmp.appending("there"), name: "db"))
        let log = PipelinedSendingTests.FrameLog()
        let (activeEnd, passiveEnd) = LoopbackTransport.pair()
        let replication = ContinuousLoopback(active: PipelinedSendingTests.noting(activeEnd, side: "here", in: log),
                                             passive: PipelinedSendingTests.noting(passiveEnd, side: "there", in: log),
                                             here: here, there: there, direction: .both, logger: logger)
        /// The `changes` frames `side` sent so far.
        func changes(from side: String) -> Int { log.frames.withLock { $0.filter { $0.side == side && $0.type == "changes" }.count } }
        /// Waits (bounded) until `condition` holds, then a little more for frames that should not come.
        func settle(_ condition: () async -> Bool) async throws -> Bool {
            for _ in 0..<400 where !(await condition()) { try await Task.sleep(for: .milliseconds(10)) }
            try await Task.sleep(for: .milliseconds(200))
            return await condition()
        }
        /// Whether `store` has recorded `doc`.
        func has(_ store: SharedStore, _ doc: String) async -> Bool {
            await store.perform { s in s.index.trees[try! DocumentID(doc)] != nil }
        }

        // Both passes of an empty folder end with one "caught up" each.
        #expect(try await settle { changes(from: "here") == 1 && changes(from: "there") == 1 })
        // An edit here: announced, then "caught up"; there it is recorded, and the pass it
        // wakes finds only the revision this connection delivered: nothing more is sent.
        _ = try await here.perform { s in try s.batch { try s.recordLocalJSON(DocumentID("a.json"), ["n": .int(1)]) } }
        #expect(try await settle { await has(there, "a.json") })
        #expect(changes(from: "here") == 3, "announcement and caught up")
        #expect(changes(from: "there") == 1, "the echo pass says nothing")
        // The same the other way.
        _ = try await there.perform { s in try s.batch { try s.recordLocalJSON(DocumentID("b.json"), ["n": .int(2)]) } }
        #expect(try await settle { await has(here, "b.json") })
        #expect(changes(from: "there") == 3 && changes(from: "here") == 3)
        // A new edit after an echo pass is announced and followed by "caught up" again.
        _ = try await here.perform { s in try s.batch { try s.recordLocalJSON(DocumentID("c.json"), ["n": .int(3)]) } }
        #expect(try await settle { await has(there, "c.json") })
        #expect(changes(from: "here") == 5 && changes(from: "there") == 3)

        await replication.stop()
    }
}
