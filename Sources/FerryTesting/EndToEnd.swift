import Foundation
import Synchronization

/// Runs an end-to-end test's body, which waits synchronously (for child processes, files, a
/// log line), on a thread of its own instead of one of Swift's cooperative threads (two on a
/// 2-core machine): blocked there, it would starve every in-process test running beside it.
/// The body stays in the test's task (its `#expect`s are the test's); at most
/// `EndToEnd.width` bodies run at once, because each drives processes that need the CPU.
public func endToEnd<T, Failure: Error>(_ body: () throws(Failure) -> T) async throws(Failure) -> T {
    await EndToEnd.slots.acquire()
    let thread = BodyThread()
    defer {
        thread.stop()
        Task { await EndToEnd.slots.release() }
    }
    return try await withTaskExecutorPreference(thread) { () async throws(Failure) -> T in
        try await BodyThread.run(body)
    }
}

/// How many end-to-end bodies run at once.
public enum EndToEnd {
    /// `FERRY_E2E_WIDTH`, 2 by default: the machine this was tuned on has two cores, and each
    /// body keeps a `ferry` process or two busy.
    public static let width = max(1, Int(ProcessInfo.processInfo.environment["FERRY_E2E_WIDTH"] ?? "") ?? 2)

    static let slots = Slots(width)

    /// Whether the caller runs on one of the threads bodies run on (what the harness's own
    /// test checks: a body on a cooperative thread would starve the in-process tests).
    public static var isOnABodyThread: Bool {
        BodyThread.running.withLock { $0.contains(pthread_self()) }
    }

    /// A counting semaphore whose waiters are resumed in arrival order.
    actor Slots {
        private var free: Int
        private var waiters: [CheckedContinuation<Void, Never>] = []

        init(_ count: Int) { free = count }

        func acquire() async {
            if free > 0 {
                free -= 1
                return
            }
            await withCheckedContinuation { waiters.append($0) }
        }

        func release() {
            if waiters.isEmpty {
                free += 1
            } else {
                waiters.removeFirst().resume()
            }
        }
    }
}

/// One thread running the jobs of the task that prefers it (`withTaskExecutorPreference`).
final class BodyThread: TaskExecutor, @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    /// The threads of the bodies running now.
    static let running = Mutex(Set<pthread_t>())

    init() {
        let thread = Thread { [self] in loop() }
        thread.name = "ferry-test-body"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Lets the thread run what is queued and end.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    /// Calls `body` on the task's preferred executor: the preference only steers where the
    /// task is next enqueued, and calling a function does not enqueue it, so it yields first.
    static func run<T, Failure: Error>(_ body: () throws(Failure) -> T) async throws(Failure) -> T {
        await Task.yield()
        return try body()
    }

    private func loop() {
        _ = BodyThread.running.withLock { $0.insert(pthread_self()) }
        defer { _ = BodyThread.running.withLock { $0.remove(pthread_self()) } }
        let executor = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            swap(&batch, &jobs)
            condition.unlock()
            for job in batch { job.runSynchronously(on: executor) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
