import FerryProtocol

/// Why a replication ended early, and whether trying again may help.
public struct ReplicationError: Error, Sendable, CustomStringConvertible, ClassifiedFailure {
    /// One sentence.
    public let message: String
    /// Retry or stop (SPEC §4).
    public let failureKind: FailureKind

    /// True when the peer refuses every push (403: a read-only listener; 409 to a proposal:
    /// a Couchbase Lite that takes no push at all); its pull may go on.
    public let refusesPush: Bool

    /// True when trying again at once would likely meet the same failure (revisions the peer
    /// sent that could not be stored: a full disk): the attempt counts against the one-shot
    /// limit, and the wait before the next grows, even if the session moved something.
    public let repeats: Bool

    /// An error; transient unless said otherwise; `repeats` as above.
    public init(_ message: String, kind: FailureKind = .transient, repeats: Bool = false) {
        self.message = message
        self.failureKind = kind
        self.refusesPush = false
        self.repeats = repeats
    }

    /// The peer refused this side's push for good (`status` 403, or 409 for a whole
    /// `proposeChanges`): permanent for a push alone, since retrying would be refused the same
    /// way. (A 409 for a whole `changes` only means the peer takes proposals: `propose`.)
    public static func pushRefused(status: Int, _ message: String) -> ReplicationError {
        ReplicationError(message: "the peer refused the push (\(status)): \(message)")
    }

    /// The peer answered a whole `changes` or `proposeChanges` with `status`: for good on 403
    /// or 409 (`pushRefused`), a failure that may pass otherwise.
    static func pushAnswered(status: Int, _ message: String) -> ReplicationError {
        status == 403 || status == 409 ? .pushRefused(status: status, message) : ReplicationError("the peer refused the push (\(status)): \(message)")
    }

    private init(message: String) {
        self.message = message
        self.failureKind = .permanent
        self.refusesPush = true
        self.repeats = false
    }

    /// The sentence.
    public var description: String { message }
}
