import Foundation

/// Runs every job of a task tree on one thread, in the order the jobs were enqueued.
///
/// A simulation runs under it as its task executor preference
/// (`withTaskExecutorPreference`): the replication sessions, the shared store's actor and
/// every child task then take turns on this one thread, so the same seed interleaves them
/// the same way every time (FoundationDB's deterministic simulation, with the real code).
/// Blocking calls (file I/O, the store waiting for its file worker) simply block the turn.
public final class SerialTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var head = 0
    private var stopping = false

    /// Starts the thread.
    public init(name: String = "ferry-sim") {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    /// Queues a job behind every job queued before it.
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once the jobs queued so far have run.
    public func shutdown() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while head == jobs.count && !stopping { condition.wait() }
            if head == jobs.count {
                condition.unlock()
                return
            }
            let job = jobs[head]
            head += 1
            if head > 1024 && head * 2 > jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
