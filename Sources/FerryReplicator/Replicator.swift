import FerryCore
import FerryProtocol
import FerryStore
import Logging
import Synchronization

/// What a replication is doing now (SPEC §3, after Couchbase Lite's activity levels).
public enum ReplicationActivity: String, Sendable {
    /// Finished, or stopped by a permanent error.
    case stopped
    /// The peer cannot be reached; waiting to try again.
    case offline
    /// Dialing and saying hello.
    case connecting
    /// Connected and caught up both ways (continuous only).
    case idle
    /// Connected and moving revisions.
    case busy
}

/// A replication's state as `ferry status` and `ferry sync` show it.
public struct ReplicatorStatus: Sendable {
    /// What it is doing.
    public var activity: ReplicationActivity = .stopped
    /// Totals over every connection so far (the current one included).
    public var totals = ReplicationStats()
    /// The current connection's progress (done of wanted).
    public var current = ReplicationStats()
    /// Connections that completed `hello`.
    public var connections = 0
    /// The last error, in one sentence.
    public var lastError: String?
    /// Seconds until the next attempt, while offline.
    public var retryInSeconds: Double?

    /// A status.
    public init() {}
}

/// How one replication runs.
public struct ReplicatorConfiguration: Sendable {
    /// The peer's URL, for messages.
    public var url: String
    /// The database named by the URL.
    public var remoteDatabase: String
    /// Push, pull or both.
    public var direction: ReplicationDirection = .both
    /// Keep going (and retry for ever) instead of stopping once caught up.
    public var continuous = false
    /// One-shot replications give up after this many failed attempts in a row.
    public var maxAttempts = 10
    /// The longest wait between attempts.
    public var maxAttemptWait: Duration = .seconds(300)
    /// The first wait between attempts (doubling from there).
    public var firstAttemptWait: Duration = .milliseconds(500)
    /// Replicate only these documents (nil: all).
    public var docIDs: [DocumentID]?
    /// Offer delta sync (used when the listener has it on too).
    public var deltaSync = true
    /// Refuse the first sync with a folder that shares no history with this one and holds
    /// documents at the same paths (`--allow-unrelated` turns it off).
    public var refuseUnrelated = false
    /// How long the peer may take to answer the handshake, or, over Couchbase Lite's protocol
    /// (which has none), to answer at all (`PeerSession.handshakeLimit`).
    public var silenceLimit = PeerSession.handshakeLimit

    /// A configuration for the peer at `url` serving `remoteDatabase`.
    public init(url: String, remoteDatabase: String) {
        self.url = url
        self.remoteDatabase = remoteDatabase
    }
}

/// Opens a transport to the peer (the agent builds it from the URL, credentials and TLS
/// options; the replicator never sees the network library).
public typealias PeerConnector = @Sendable () async throws -> MessageTransport

/// The active peer: runs sessions with one listener, one-shot or continuously, retrying
/// transient failures with exponential backoff and stopping at once on permanent ones
/// (SPEC §4). Its status can be read from any thread at any time.
public final class Replicator: Sendable {
    /// How it runs.
    public let configuration: ReplicatorConfiguration
    let shared: SharedStore
    let connect: PeerConnector
    let logger: Logger
    let state = Mutex(ReplicatorStatus())
    /// Totals of the connections that have ended.
    let finished = Mutex(ReplicationStats())

    /// A replicator for the shared folder; nothing happens until `run()`.
    public init(configuration: ReplicatorConfiguration, shared: SharedStore, connect: @escaping PeerConnector, logger: Logger) {
        self.configuration = configuration
        self.shared = shared
        self.connect = connect
        self.logger = logger
    }

    /// The status now.
    public var status: ReplicatorStatus { state.withLock { $0 } }

    private func set(_ change: (inout ReplicatorStatus) -> Void) { state.withLock { change(&$0) } }

    /// Replicates until done (one-shot), a permanent error, too many failed attempts
    /// (one-shot), or cancellation. Returns the totals; throws the error that stopped it.
    @discardableResult
    public func run() async throws -> ReplicationStats {
        var failures = 0
        var rounds = 1
        while true {
            set { $0.activity = .connecting; $0.retryInSeconds = nil }
            var opened = false
            do {
                try Task.checkCancellation()
                let transport = try await connect()
                // A round per connection when the peer serves one subscription per connection.
                if try await runSession(on: transport, opened: { opened = true }), rounds < PeerSession.maxRounds {
                    rounds += 1
                    failures = 0
                    continue
                }
                set { $0.activity = .stopped; $0.lastError = nil }
                return status.totals
            } catch {
                if Task.isCancelled {
                    set { $0.activity = .stopped }
                    return status.totals
                }
                let kind = (error as? ClassifiedFailure)?.failureKind ?? .transient
                let message = "\(error)"
                // A session that moved something or caught up resets the count; one that only
                // said hello does not (a peer answering every revision with 503 must not make
                // a one-shot sync retry for ever, nor every 0.5 s).
                let current = status.current
                let repeats = (error as? ReplicationError)?.repeats ?? false
                if opened && !repeats && (current.revisionsReceived + current.revisionsSent > 0 || current.pullCaughtUp || current.pushCaughtUp) {
                    failures = 0
                }
                failures += 1
                let giveUp = kind != .transient || (!configuration.continuous && failures >= configuration.maxAttempts)
                set { $0.lastError = message }
                if giveUp {
                    set { $0.activity = .stopped }
                    // Whoever runs it reports the thrown error (the CLI's one line, the agent's error).
                    logger.debug("replication stopped", metadata: ["peer": "\(configuration.url)", "error": "\(message)"])
                    throw error
                }
                let wait = backoff(after: failures)
                logger.notice("peer unreachable; retrying", metadata: [
                    "peer": "\(configuration.url)", "error": "\(message)", "retryIn": "\(wait)",
                ])
                set { $0.activity = .offline; $0.retryInSeconds = Self.seconds(wait) }
                do { try await Task.sleep(for: wait) } catch {
                    set { $0.activity = .stopped; $0.retryInSeconds = nil }
                    return status.totals
                }
            }
        }
    }

    /// The wait before attempt `failures + 1`: doubling from the first wait, capped.
    func backoff(after failures: Int) -> Duration {
        var wait = configuration.firstAttemptWait
        for _ in 1..<max(failures, 1) where wait < configuration.maxAttemptWait { wait *= 2 }
        return min(wait, configuration.maxAttemptWait)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// One connection: hello, then the replication, while the session's loop reads the
    /// transport. Returns when a one-shot replication is done, true if it wants another round
    /// on a new connection; throws when the connection ends first (always, for a continuous one).
    private func runSession(on transport: MessageTransport, opened: () -> Void) async throws -> Bool {
        let session = PeerSession(transport: transport, shared: shared, role: .active,
                                  remoteDatabase: configuration.remoteDatabase, remoteURL: configuration.url,
                                  features: configuration.deltaSync ? [ProtocolFeature.delta] : [], logger: logger) { [weak self] stats in
            self?.progress(stats)
        }
        let configuration = self.configuration
        defer {
            finished.withLock {
                $0 = state.withLock { $0.totals }
                // What an ended connection offered and did not deliver is offered again by the
                // next one (from the checkpoint): count only what it did, so the total stays true.
                $0.revisionsOffered = $0.revisionsDone + $0.revisionsSkipped
                $0.revisionsWanted = $0.revisionsDone
            }
        }
        // The byte counts change with every message and are not reported as they go: take
        // them (and the rest) once more when the session ends, however it ends.
        do {
            // Couchbase Lite's protocol has no handshake for `open` to time: the session's
            // loop bounds the wait for the peer's first answer instead.
            let silenceLimit: Duration? = transport.wireFormat == .ferry1 ? nil : configuration.silenceLimit
            try await runSession(session, configuration, silenceLimit: silenceLimit, opened: opened)
        } catch {
            progress(await session.stats)
            throw error
        }
        progress(await session.stats)
        return await session.wantsAnotherRound
    }

    private func runSession(_ session: PeerSession, _ configuration: ReplicatorConfiguration, silenceLimit: Duration?,
                            opened: () -> Void) async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                await session.run(firstMessageWithin: silenceLimit)
                return false
            }
            do {
                try await session.open(within: configuration.silenceLimit)
            } catch {
                await session.close()
                throw error
            }
            opened()
            set { $0.connections += 1; $0.activity = .busy; $0.lastError = nil; $0.current = ReplicationStats() }
            logger.info("connected", metadata: ["peer": "\(configuration.url)"])
            group.addTask {
                try await session.replicate(configuration.direction, continuous: configuration.continuous, docIDs: configuration.docIDs,
                                            refusingUnrelated: configuration.refuseUnrelated ? (configuration.url, configuration.remoteDatabase) : nil)
                return true
            }
            do {
                if try await group.next() == true {
                    await session.close()  // one-shot: done
                    return
                }
                // The connection ended first: let the replication notice, and report its
                // error (it says more: a refused push) or why the connection ended.
                group.cancelAll()
                _ = try await group.next()
                throw ReplicationError(await session.endReason)
            } catch {
                group.cancelAll()
                await session.close()
                throw error
            }
        }
    }

    private func progress(_ stats: ReplicationStats) {
        let base = finished.withLock { $0 }
        let direction = configuration.direction
        set { s in
            // Said once it happens; a later error of the connection is not overwritten.
            if let refusal = stats.pushRefused, s.current.pushRefused == nil { s.lastError = refusal }
            // A revision this side could not store (a full disk) is sent again by the peer
            // without a reconnection: without this, the status would show nothing wrong.
            if let failure = stats.storeFailure, failure != s.current.storeFailure { s.lastError = failure }
            if stats.storeFailure == nil, let old = s.current.storeFailure, s.lastError == old { s.lastError = nil }  // stored again
            s.current = stats
            s.totals = base
            s.totals.revisionsReceived += stats.revisionsReceived
            s.totals.revisionsSent += stats.revisionsSent
            s.totals.blobsReceived += stats.blobsReceived
            s.totals.revisionsFailed += stats.revisionsFailed
            s.totals.revisionsWanted += stats.revisionsWanted
            s.totals.revisionsOffered += stats.revisionsOffered
            s.totals.revisionsSkipped += stats.revisionsSkipped
            s.totals.pullSubscribed = stats.pullSubscribed
            s.totals.sendingChanges = stats.sendingChanges
            s.totals.receivingChanges = stats.receivingChanges
            s.totals.bytesSent += stats.bytesSent
            s.totals.bytesReceived += stats.bytesReceived
            let caughtUp = (!direction.pulls || stats.pullCaughtUp) && (!direction.pushes || stats.pushCaughtUp || stats.pushRefused != nil)
            if s.activity == .busy || s.activity == .idle { s.activity = caughtUp ? .idle : .busy }
        }
    }
}
