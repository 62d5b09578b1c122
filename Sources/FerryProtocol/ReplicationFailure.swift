/// How a replication failure should be handled (SPEC §4): retried with backoff, or reported at
/// once — and, for the CLI, which exit code it earns.
public enum FailureKind: Sendable, Equatable {
    /// Refused, reset, timed out, the listener stopped, a 5xx: try again later.
    case transient
    /// Wrong or missing credentials, or a TLS trust failure (exit code 3).
    case authentication
    /// Anything else that retrying cannot fix: 403, 404, no common protocol version.
    case permanent
}

/// An error that says how it should be handled. The transport's errors and the replicator's
/// own conform, so the retry loop never needs to know which layer failed.
public protocol ClassifiedFailure: Error {
    /// Retry, or stop and report.
    var failureKind: FailureKind { get }
}
