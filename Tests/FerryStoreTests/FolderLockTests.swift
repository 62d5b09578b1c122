import Foundation
import Testing
@testable import FerryStore
import FerryTesting

/// The folder lock, refused, closes its file once and touches no other: a second close (or a
/// truncate through the closed descriptor) would hit whatever file another thread opened
/// under that number meanwhile, as a test's revision log once did (`EBADF` on its append).
@Suite struct FolderLockTests {
    @Test func aRefusedLockClosesItsFileOnceAndLeavesOtherThreadsFilesAlone() throws {
        let dir = TemporaryDirectory()
        let lockPath = dir.path + "/lock", scratch = dir.path + "/scratch"
        let held = try FolderLock(path: lockPath)
        try Data(repeating: 0x61, count: 4096).write(to: URL(fileURLWithPath: scratch))
        // Another thread opens, checks and closes a file of its own, over and over: each
        // refused lock frees a descriptor number that thread is likely to take next.
        final class Shared: @unchecked Sendable {
            let lock = NSLock()
            var stop = false, problems: [String] = [], rounds = 0
        }
        let state = Shared()
        let opener = Thread {
            for _ in 0..<2_000_000 {
                if state.lock.withLock({ state.stop }) { break }
                // Read-write, so that a truncate through a stray descriptor would take effect.
                let fd = open(scratch, O_RDWR | O_CLOEXEC)
                guard fd >= 0 else { state.lock.withLock { state.problems.append("open: errno \(errno)") }; break }
                var st = stat()
                var byte: UInt8 = 0
                if fstat(fd, &st) != 0 || st.st_size != 4096 || pread(fd, &byte, 1, 0) != 1 {
                    state.lock.withLock { state.problems.append("descriptor \(fd): size \(st.st_size), errno \(errno)") }
                }
                if close(fd) != 0 { state.lock.withLock { state.problems.append("close \(fd): errno \(errno)") } }
                state.lock.withLock { state.rounds += 1 }
            }
        }
        opener.start()
        // At least 3,000 refusals while the other thread works 1,000 rounds (bounded: 30 s).
        let deadline = Date().addingTimeInterval(30)
        var refused = 0
        while refused < 3_000 || state.lock.withLock({ state.rounds }) < 1_000, Date() < deadline, !opener.isFinished {
            #expect(throws: StoreError.self) { _ = try FolderLock(path: lockPath) }
            refused += 1
        }
        state.lock.withLock { state.stop = true }
        while !opener.isFinished { usleep(1_000) }
        let (problems, rounds) = state.lock.withLock { (state.problems, state.rounds) }
        #expect(problems.count == 0, "\(problems.count) problems, first: \(problems.prefix(3))")
        #expect(rounds >= 1_000 && refused >= 3_000, "\(rounds) rounds, \(refused) refusals")
        #expect(try Data(contentsOf: URL(fileURLWithPath: scratch)).count == 4096)
        // The holder's pid is still in the lock file, for the next refusal's message.
        #expect(FolderLock.holder(path: lockPath) == getpid())
        #expect(String(decoding: try Data(contentsOf: URL(fileURLWithPath: lockPath)), as: UTF8.self) == "\(getpid())\n")
        withExtendedLifetime(held) {}
    }
}
