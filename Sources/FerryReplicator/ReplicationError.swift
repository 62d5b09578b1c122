import FerryProtocol

/// Why a replication ended early, and whether trying again may help.
public struct ReplicationError: Error, Sendable, CustomStringConvertible, ClassifiedFailure {
    /// One sentence.
    public let message: String
    /// Retry or stop (SPEC §4).
    public let failureKind: FailureKind

    /// An error; transient unless said otherwise.
    public init(_ message: String, kind: FailureKind = .transient) {
        self.message = message
        self.failureKind = kind
    }

    /// The sentence.
    public var description: String { message }
}
