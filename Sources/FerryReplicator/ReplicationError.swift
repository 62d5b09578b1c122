import FerryProtocol

/// Why a replication ended early, and whether trying again may help.
public struct ReplicationError: Error, Sendable, CustomStringConvertible, ClassifiedFailure {
    /// One sentence.
    public let message: String
    /// Retry or stop (SPEC §4).
    public let failureKind: FailureKind

    /// True when the peer refuses every push (403: a read-only listener); its pull may go on.
    public let refusesPush: Bool

    /// An error; transient unless said otherwise.
    public init(_ message: String, kind: FailureKind = .transient) {
        self.message = message
        self.failureKind = kind
        self.refusesPush = false
    }

    /// The peer refused this side's push for good (403): permanent for a push alone.
    public static func pushRefused(_ message: String) -> ReplicationError {
        ReplicationError(message: "the peer refused the push (403): \(message)")
    }

    private init(message: String) {
        self.message = message
        self.failureKind = .permanent
        self.refusesPush = true
    }

    /// The sentence.
    public var description: String { message }
}
