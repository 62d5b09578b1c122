import FerryTesting
import Foundation
import Synchronization
import Testing

/// The harness the end-to-end tests run in: a body that blocks must not hold one of Swift's
/// cooperative threads, and what it expects must still count for its test.
@Suite struct EndToEndHarnessTests {
    @Test func aBodyRunsOnAThreadOfItsOwnAndItsFailuresAreItsTests() async throws {
        #expect(!EndToEnd.isOnABodyThread)
        #expect(await endToEnd { EndToEnd.isOnABodyThread })
        await withKnownIssue("an expectation that fails inside the body is recorded for this test") {
            await endToEnd { #expect(Bool(false)) }
        }
    }

    @Test func noMoreBodiesRunAtOnceThanTheWidth() async throws {
        let gauge = Gauge()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<(EndToEnd.width * 3) {
                group.addTask {
                    await endToEnd {
                        gauge.enter()
                        usleep(50_000)
                        gauge.leave()
                    }
                }
            }
        }
        // Other tests' bodies may hold slots meanwhile: no more than the width, at least one.
        #expect((1...EndToEnd.width).contains(gauge.most))
    }
}

/// How many bodies run now, and the most that ran at once.
private final class Gauge: Sendable {
    private let counts = Mutex((now: 0, most: 0))

    func enter() { counts.withLock { $0.now += 1; $0.most = max($0.most, $0.now) } }
    func leave() { counts.withLock { $0.now -= 1 } }
    var most: Int { counts.withLock { $0.most } }

    /// A command's output is read even while the shared dispatch queues are full of work
    /// that waits (other tests' blocking reads): the readers have threads of their own.
    @Test func aCommandsOutputIsReadWhileTheSharedQueuesAreBusy() throws {
        let release = DispatchSemaphore(value: 0)
        let blocked = 400
        for _ in 0..<blocked { DispatchQueue.global().async { release.wait() } }
        defer { for _ in 0..<blocked { release.signal() } }
        let start = Date()
        let echo = try FerryProcess.shell("echo out; echo err >&2")
        #expect(echo.stdout == "out\n" && echo.stderr == "err\n", "\(echo.stdout) \(echo.stderr)")
        #expect(Date().timeIntervalSince(start) < 3)
    }
}
