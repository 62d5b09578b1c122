import Foundation

/// A thread of its own that runs file-system jobs in the order they were queued, beside the
/// folder's writer. Revisions arriving from a peer get their files written here as they
/// arrive (`SharedStore.prepare`), while the writer is busy with earlier ones — making a batch
/// durable (`syncfs`) or renaming its files into place — so that both cores create files and
/// the disk's waits overlap with work. On ext4, creating a file (inode, directory entry, page)
/// is most of the receiver's time in an initial sync.
///
/// A blocking thread, not a task: file-system calls block, and a task blocking one of the two
/// cooperative threads would stall the sessions that share them.
final class FileWorker: @unchecked Sendable {
    /// A job; it reports its own outcome (see `ReceivedBody`).
    typealias Job = @Sendable () -> Void

    // Everything below is guarded by `condition`.
    private let condition = NSCondition()
    /// Jobs not yet started, `jobs[next...]`, in ticket order.
    private var jobs: [(ticket: UInt64, job: Job)] = []
    private var next = 0
    /// Tickets of the jobs running now (on the worker, or on a thread that waits).
    private var running: [UInt64] = []
    private var lastTicket: UInt64 = 0
    private var stopping = false
    /// A job to run before the queued ones (`run(_:beside:)`), and whether it has run.
    private var urgent: Job?
    private var urgentDone = true

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "ferry-files"
        thread.start()
    }

    /// Queues the job `make` builds from its ticket (tickets grow by one per job; `make` runs
    /// at once, with the queue locked). While more than `queueLimit` jobs wait, the caller
    /// runs the oldest ones itself: what the queued jobs hold (a body's bytes) stays bounded
    /// when jobs come faster than the worker runs them, and no thread waits.
    func submit(queueLimit: Int = .max, _ make: (_ ticket: UInt64) -> Job) {
        condition.lock()
        defer { condition.unlock() }
        lastTicket += 1
        jobs.append((lastTicket, make(lastTicket)))
        condition.broadcast()
        while jobs.count - next > queueLimit {
            perform(takeJob())
        }
    }

    /// Returns once every job up to `ticket` has run. Rather than sit idle, the calling thread
    /// runs queued jobs itself (oldest first) beside the worker, so jobs must not depend on
    /// one another.
    func wait(through ticket: UInt64) {
        condition.lock()
        defer { condition.unlock() }
        while !isDone(through: ticket) {
            if next < jobs.count && jobs[next].ticket <= ticket {
                perform(takeJob())
            } else {
                condition.wait()
            }
        }
    }

    /// Runs `job` on the worker, ahead of the queue, while the calling thread runs `body`;
    /// returns when both are done (if the worker has not started `job` by then, the caller
    /// runs it). For a commit: the worker renames objects while the caller renames documents.
    func run(_ job: @escaping Job, beside body: () -> Void) {
        condition.lock()
        urgent = job
        urgentDone = false
        condition.broadcast()
        condition.unlock()
        body()
        condition.lock()
        defer { condition.unlock() }
        if let job = urgent {
            urgent = nil
            condition.unlock()
            job()
            condition.lock()
            return
        }
        while !urgentDone { condition.wait() }
    }

    /// Lets the thread finish the jobs queued and end.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        condition.lock()
        while true {
            if let job = urgent {
                urgent = nil
                condition.unlock()
                job()
                condition.lock()
                urgentDone = true
                condition.broadcast()
            } else if next < jobs.count {
                perform(takeJob())
            } else if stopping {
                break
            } else {
                condition.wait()
            }
        }
        condition.unlock()
    }

    /// True when no job up to `ticket` is queued or running (called with the lock held).
    private func isDone(through ticket: UInt64) -> Bool {
        (next == jobs.count || jobs[next].ticket > ticket) && !running.contains { $0 <= ticket }
    }

    /// The oldest queued job, now counted as running (called with the lock held).
    private func takeJob() -> (ticket: UInt64, job: Job) {
        let taken = jobs[next]
        next += 1
        if next == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            next = 0
        }
        running.append(taken.ticket)
        return taken
    }

    /// Runs a job without the lock, then counts it done (called with the lock held).
    private func perform(_ taken: (ticket: UInt64, job: Job)) {
        condition.unlock()
        taken.job()
        condition.lock()
        running.removeAll { $0 == taken.ticket }
        condition.broadcast()
    }
}
