import Foundation

/// The thread `SharedStore` runs on: its serial executor. The store blocks by design — it
/// makes batches durable (`syncfs`, `fsync`), waits for a file an editor is still writing,
/// reads and writes files — and a blocking call on one of Swift's cooperative threads (two on
/// a 2-core machine) stalls every session, timer and heartbeat that shares them. On a thread
/// of its own, the store's waits hold up nothing but the store.
final class StoreThread: SerialExecutor, @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    /// Starts the thread.
    init(name: String = "ferry-store") {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    /// Queues a job of the store's actor.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// This executor, as an actor names it.
    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Lets the thread run the jobs queued and end (the store is gone: none can follow).
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        let executor = asUnownedSerialExecutor()
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
