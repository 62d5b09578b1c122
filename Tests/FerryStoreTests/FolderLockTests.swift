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
            for _ in 0..<50_000_000 {
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

    /// `holder` probes with a shared lock held for an instant: a process taking the lock in
    /// that instant (an agent starting while `ferry status` looks) must not be refused, even
    /// when a killed holder left a live process's pid in the file (`afterAKill`: pid 1, before
    /// each take), and `holder` never names anyone but the holder (or that pid, until the
    /// holder has written its own) while the lock is taken and let go.
    @Test(arguments: [false, true]) func probingTheHolderNeverMakesTakingTheLockFail(afterAKill: Bool) throws {
        let dir = TemporaryDirectory()
        let lockPath = dir.path + "/lock"
        final class Seen: @unchecked Sendable {
            let lock = NSLock()
            var stop = false, probes = 0, wrong: [Int32] = []
        }
        let seen = Seen()
        let prober = Thread {
            for _ in 0..<10_000_000 {
                if seen.lock.withLock({ seen.stop }) { break }
                let pid = FolderLock.holder(path: lockPath)
                usleep(20)  // still far more often than `ferry status` in a loop
                seen.lock.withLock {
                    seen.probes += 1
                    if let pid, pid != getpid(), !(afterAKill && pid == 1) { seen.wrong.append(pid) }
                }
            }
        }
        prober.start()
        // At least 2,000 takes while the prober has looked 2,000 times (bounded: 30 s).
        let deadline = Date().addingTimeInterval(30)
        var attempts = 0
        var refusals: [String] = []
        while attempts < 2_000 || seen.lock.withLock({ seen.probes }) < 2_000, Date() < deadline, !prober.isFinished {
            attempts += 1
            if afterAKill { try Data("1\n".utf8).write(to: URL(fileURLWithPath: lockPath)) }
            do {
                let lock = try FolderLock(path: lockPath)
                withExtendedLifetime(lock) {}
            } catch {
                refusals.append("\(error)")
            }
        }
        seen.lock.withLock { seen.stop = true }
        while !prober.isFinished { usleep(1_000) }
        let (probes, wrong) = seen.lock.withLock { (seen.probes, seen.wrong) }
        #expect(refusals.count == 0, "\(refusals.count) of \(attempts) refused, first: \(refusals.prefix(1))")
        #expect(wrong.count == 0, "holder named \(wrong.count) others, first: \(wrong.prefix(3))")
        #expect(attempts >= 2_000 && probes >= 2_000, "\(attempts) attempts, \(probes) probes")
        #expect(FolderLock.holder(path: lockPath) == nil)
    }
}
