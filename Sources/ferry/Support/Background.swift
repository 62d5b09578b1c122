import Dispatch
import Synchronization

/// Work started on another thread at once, its result waited for later: a command that reads
/// two independent things (the log, the folder's files) uses both cores.
final class Background<T: Sendable>: Sendable {
    private let result = Mutex<Result<T, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    /// Starts `work` on a global queue.
    init(_ work: @escaping @Sendable () throws -> T) {
        DispatchQueue.global().async { [self] in
            let outcome = Result { try work() }
            result.withLock { $0 = outcome }
            done.signal()
        }
    }

    /// Waits for the work and returns its result (or throws its error).
    func value() throws -> T {
        done.wait()
        done.signal()  // a second call returns at once
        return try result.withLock { $0! }.get()
    }
}
