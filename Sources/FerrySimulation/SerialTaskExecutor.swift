import Foundation

/// Runs every job of a task tree on one thread, in the order the jobs were enqueued.
///
/// A simulation runs under it as its task executor preference
/// (`withTaskExecutorPreference`): the replication sessions, the shared store's actor and
/// every child task then take turns on this one thread, so the same seed interleaves them
/// the same way every time (FoundationDB's deterministic simulation, with the real code).
/// Blocking calls (file I/O, the store waiting for its file worker) simply block the turn.
/// An actor with an executor of its own (the shared store has a thread) escapes a task
/// executor preference: such an actor is given `serialExecutor`, whose jobs take turns here.
public final class SerialTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Jobs in turn order; an actor's jobs carry the actor's executor.
    private var jobs: [(job: UnownedJob, actor: UnownedSerialExecutor?)] = []
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
        enqueue(UnownedJob(job), actor: nil)
    }

    fileprivate func enqueue(_ job: UnownedJob, actor: UnownedSerialExecutor?) {
        condition.lock()
        jobs.append((job, actor))
        condition.signal()
        condition.unlock()
    }

    /// A serial executor whose jobs take their turns on this thread, for an actor that
    /// would otherwise run on an executor of its own.
    public var serialExecutor: any SerialExecutor { TurnTakingSerialExecutor(turns: self) }

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
            let (job, actor) = jobs[head]
            head += 1
            if head > 1024 && head * 2 > jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            condition.unlock()
            if let actor {
                job.runSynchronously(isolatedTo: actor, taskExecutor: asUnownedTaskExecutor())
            } else {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }
}

/// An actor's serial executor whose jobs take turns on a `SerialTaskExecutor`'s thread.
private final class TurnTakingSerialExecutor: SerialExecutor {
    let turns: SerialTaskExecutor

    init(turns: SerialTaskExecutor) { self.turns = turns }

    func enqueue(_ job: consuming ExecutorJob) {
        turns.enqueue(UnownedJob(job), actor: asUnownedSerialExecutor())
    }
}
