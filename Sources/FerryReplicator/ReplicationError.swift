import FerryProtocol

/// Why a replication ended early, and whether trying again may help.
public struct ReplicationError: Error, Sendable, CustomStringConvertible, ClassifiedFailure {
    /// One sentence.
    public let message: String
    /// Retry or stop (SPEC §4).
    public let failureKind: FailureKind

    /// True when the peer refuses every push (403: a read-only listener; 409: a Couchbase Lite
    /// that takes only `proposeChanges`); its pull may go on.
    public let refusesPush: Bool

    /// An error; transient unless said otherwise.
    public init(_ message: String, kind: FailureKind = .transient) {
        self.message = message
        self.failureKind = kind
        self.refusesPush = false
    }

    /// The peer refused this side's push for good (`status` 403 or 409): permanent for a push
    /// alone. A 409 for the whole `changes` message comes from a Couchbase Lite (or Sync
    /// Gateway) that refuses conflicts and takes pushes only as `proposeChanges`, which
    /// ferry's active side does not send: retrying would be refused the same way.
    public static func pushRefused(status: Int, _ message: String) -> ReplicationError {
        let why = status == 409 ? "; it takes only proposeChanges, which ferry does not send yet (docs/interop.md)" : ""
        return ReplicationError(message: "the peer refused the push (\(status)): \(message)\(why)")
    }

    private init(message: String) {
        self.message = message
        self.failureKind = .permanent
        self.refusesPush = true
    }

    /// The sentence.
    public var description: String { message }
}
