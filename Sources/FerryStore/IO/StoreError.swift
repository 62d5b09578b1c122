#if canImport(Glibc)
import Glibc
#endif

/// An error from the folder store: a code the CLI maps to an exit status, one clear sentence,
/// and the underlying cause when there is one.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: Sendable, Equatable {
        /// No `.ferry/` folder here or above.
        case notInitialized
        /// Another process holds the folder's write lock.
        case locked
        /// `init` on a folder that already is one.
        case alreadyInitialized
        /// A file system call failed.
        case io
        /// The disk is full (ENOSPC/EDQUOT); nothing half-written was kept.
        case diskFull
        /// Stored data is damaged (a bad object, an unreadable log line).
        case corrupt
        /// A document, revision or object that does not exist.
        case notFound
        /// Input that is not acceptable (invalid JSON, invalid id, bad blob reference).
        case invalidInput
    }

    /// The kind of failure.
    public let code: Code
    /// One sentence for a person.
    public let message: String
    /// `errno` of the failed call, when there was one.
    public let errno: Int32?

    /// An error.
    public init(_ code: Code, _ message: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    /// An error for a failed system call on `path`, classifying a full disk.
    static func system(_ what: String, path: String, errno e: Int32 = Glibc.errno) -> StoreError {
        let reason = String(cString: strerror(e))
        if e == ENOSPC || e == EDQUOT {
            return StoreError(.diskFull, "\(what) \(path): \(reason); nothing was recorded", errno: e)
        }
        return StoreError(.io, "\(what) \(path): \(reason)", errno: e)
    }

    /// The message, with the cause.
    public var description: String { message }
}
