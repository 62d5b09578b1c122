import ArgumentParser
import Dispatch
import FerryAgent
import FerryCore
import FerryDiscovery
import FerryProtocol
import FerryReplicator
import FerryStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `ferry sync URL`: one replication with one listener.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Replicate with one listener: once (exit 0 when both sides are up to date) or --continuous.",
        discussion: """
            Records the folder's unrecorded changes first. Shows a progress bar on a terminal, plain lines otherwise \
            (every 2 s and on each change of activity; FERRY_PROGRESS_INTERVAL=SECONDS changes the 2 s), then a summary; \
            -q prints nothing but errors, -v adds the log's info lines (FERRY_LOG=LEVEL overrides both for the log). \
            Exit codes: 0 up to date, 1 failure, 3 authentication refused, 4 folder locked (an agent runs there: give it --peer).
            """)

    @Argument(help: ArgumentHelp("The listener, ws[s]://HOST:PORT/DB, or the name of a saved peer (`ferry peer add`); with --discover, the DNS-SD name of the peer to pick (optional).", valueName: "url|name"))
    var target: String?

    @Flag(help: "Find the listener over DNS-SD: a peer serving this folder's database (the one named, if given), its advertised fingerprint pinned on first use.")
    var discover = false

    @Option(help: ArgumentHelp("DNS-SD service type to browse with --discover.", valueName: "type"))
    var serviceType = "_cblistservicesync._tcp"

    @Flag(help: "Which way revisions move (default: both).")
    var direction: Direction = .both

    @Flag(help: "Keep replicating (and retrying for ever) until interrupted.")
    var continuous = false

    @OptionGroup(title: "Client") var client: ClientOptions

    @OptionGroup var folder: FolderOptions
    @OptionGroup var quiet: QuietOption
    @OptionGroup var output: OutputOptions

    enum Direction: String, EnumerableFlag {
        case push, pull, both
    }

    func validate() throws {
        if !discover && target == nil { throw ValidationError("give the listener's URL or a saved peer's name, or --discover") }
        if quiet.quiet && folder.verbose { throw ValidationError("--quiet and --verbose: choose one") }
    }

    func run() async throws {
        let root = try folder.resolveRoot()
        let way = ReplicationDirection(rawValue: direction.rawValue)!
        let given = discover ? nil : try client.endpoint(naming: target!, layout: FolderLayout(root: root), direction: way)
        if let pid = FolderLock.holder(path: FolderLayout(root: root).lockFile) {
            throw StoreError(.locked, "an agent (pid \(pid)) is serving \(root); give it --peer \(given?.url.description ?? "URL") instead of running sync beside it")
        }
        // The lock first: discovery writes `.ferry/known-peers.json`, and only the folder's
        // one writer writes anything in `.ferry/`.
        let store = try FolderStore.open(at: root, writable: true, logger: folder.makeLogger(quiet: quiet.quiet))
        let peer: PeerEndpoint
        if let given { peer = given } else { peer = try await discoverPeer(info: store.info, layout: store.layout, direction: way) }
        _ = try store.batch { try store.scanAndRecord() }
        store.beginSession()
        let shared = SharedStore(store)
        var logger = folder.makeLogger(label: "ferry.sync", quiet: quiet.quiet)
        logger[metadataKey: "peer"] = "\(peer.url)"
        let replicator = peer.makeReplicator(shared: shared, continuous: continuous, logger: logger)
        let progress = ProgressReporter(replicator: replicator, url: peer.url.description, json: output.json, quiet: quiet.quiet)

        let work = Task { try await replicator.run() }
        let interruption = Interruption()
        // The first signal stops the replication (what is recorded stays recorded); a second
        // one does not wait for that. A continuous sync stopped while idle (caught up both
        // ways, its push not refused, no error) has nothing left to do: that is its normal end.
        let continuous = continuous
        let signals = onTerminationSignals {
            let status = replicator.status
            let caughtUp = continuous && status.activity == .idle && status.current.pushRefused == nil && status.lastError == nil
            if interruption.signal(caughtUp: caughtUp) > 1 { _exit(Interruption.exitCode) }
            work.cancel()
        }
        defer { signals.forEach { $0.cancel() } }
        let display = Task { await progress.show() }
        let result = await work.result
        display.cancel()
        await display.value
        try await shared.saveStatCache()
        if interruption.happened, !interruption.cameCaughtUp || (try? result.get()) == nil {
            // A cancelled replication can end as if it were done: it is not, unless it was
            // caught up when the signal came.
            progress.clearLine()
            throw CLIError("interrupted: the sync with \(peer.url) did not finish; run it again to go on", exitCode: Interruption.exitCode)
        }
        switch result {
        case .success(let totals):
            progress.finish(totals, conflicts: await shared.perform { $0.conflictsClosed })
        case .failure(let error):
            progress.clearLine()
            let kind = (error as? ClassifiedFailure)?.failureKind ?? .transient
            throw CLIError("sync with \(peer.url) failed: \(error)", exitCode: kind == .authentication ? 3 : 1)
        }
    }
}

extension SyncCommand {
    /// The peer `--discover` finds: the first service of this database (named `target`, if
    /// given), with its fingerprint pinned on first use and checked ever after.
    func discoverPeer(info: FolderInfo, layout: FolderLayout, direction: ReplicationDirection) async throws -> PeerEndpoint {
        let finder = PeerFinder(discovery: DNSSDDiscovery(), serviceType: serviceType, layout: layout,
                                database: info.name, folderID: info.id)
        let template = try client.endpoint("ws://discovered:1/x", direction: direction)
        let candidates: [PeerFinder.Candidate]
        do { candidates = try await finder.find(timeout: .seconds(3), name: target, template: template) } catch {
            throw CLIError("--discover: \(error)")
        }
        for c in candidates {
            if let endpoint = c.endpoint {
                if let note = c.note, !quiet.quiet { FileHandleOutput.stderr("ferry: \(c.service.name): \(note)") }
                return endpoint
            }
            FileHandleOutput.stderr("ferry: warning: \(c.service.name): \(c.note ?? "not usable")")
        }
        let what = target.map { "a peer named \(String(reflecting: $0)) serving" } ?? "a peer serving"
        throw CLIError(candidates.isEmpty ? "--discover: found no \(what) database \"\(info.name)\" (\(serviceType))"
                                          : "--discover: no trustworthy peer found", exitCode: candidates.isEmpty ? 1 : 3)
    }
}

/// Shows a replication's progress: a redrawn bar on a terminal, a line per change of
/// activity (and every `FERRY_PROGRESS_INTERVAL` seconds, 2 by default) otherwise; nothing
/// with `--quiet`. The numbers come from `ProgressEstimate`, so they never move backwards.
struct ProgressReporter: Sendable {
    let replicator: Replicator
    let url: String
    let json: Bool
    let quiet: Bool
    let isTerminal = isatty(2) == 1

    /// How often a plain (non-terminal) progress line may repeat while the activity stays.
    static var plainInterval: Duration {
        let seconds = ProcessInfo.processInfo.environment["FERRY_PROGRESS_INTERVAL"].flatMap(Double.init) ?? 2
        return .milliseconds(Int(max(seconds, 0) * 1000))
    }

    func show() async {
        guard !quiet else { return }
        let interval = Self.plainInterval
        let direction = replicator.configuration.direction
        var estimate = ProgressEstimate()
        var lastLine = ""
        var lastActivity = ReplicationActivity.stopped
        var lastPrinted = ContinuousClock.now
        var busySince: ContinuousClock.Instant?
        while !Task.isCancelled {
            let s = replicator.status
            let line: String
            switch s.activity {
            case .offline:
                busySince = nil
                line = "offline: \(s.lastError ?? "unreachable"); retrying in \(String(format: "%.1f", s.retryInSeconds ?? 0)) s"
            case .busy, .idle:
                // Until each direction knows its total (a pull's comes with the answer to
                // subChanges, a push's from this folder), a line would show a total about to
                // jump; wait for it, a second at most (a peer may never send one).
                let since = busySince ?? .now
                busySince = since
                let counted = (!direction.pulls || s.current.pullSubscribed) && (!direction.pushes || s.current.sendingChanges)
                guard counted || s.activity == .idle || ContinuousClock.now - since >= .seconds(1) else { line = lastLine; break }
                estimate.update(s.totals, caughtUp: s.activity == .idle)
                let (done, total) = (estimate.done, estimate.total)
                line = isTerminal ? "\(s.activity.rawValue) \(bar(estimate.fraction)) \(done)/\(total) revisions"
                                  : "\(s.activity.rawValue): \(done)/\(total) revisions"
            default:
                busySince = nil
                line = s.activity.rawValue
            }
            if isTerminal, line != lastLine {
                FileHandleOutput.stderrRaw("\r\u{1B}[K" + line)
                lastLine = line
            } else if !isTerminal, !json, line != lastLine,
                      s.activity != lastActivity || ContinuousClock.now - lastPrinted >= interval {
                // Plain lines for logs: on each change of activity, and progress every interval.
                FileHandleOutput.stderr(line)
                (lastLine, lastActivity, lastPrinted) = (line, s.activity, .now)
            }
            let poll: Duration = isTerminal ? .milliseconds(100) : min(.milliseconds(250), max(interval, .milliseconds(20)))
            try? await Task.sleep(for: poll)
        }
    }

    func bar(_ fraction: Double) -> String {
        let width = 30
        let filled = min(width, max(0, Int(fraction * Double(width))))
        return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "]"
    }

    func clearLine() {
        if isTerminal { FileHandleOutput.stderrRaw("\r\u{1B}[K") }
    }

    func finish(_ totals: ReplicationStats, conflicts: ConflictTally) {
        clearLine()
        if quiet { return }
        if json {
            printJSON(["url": .string(url), "revisions_received": .int(totals.revisionsReceived), "revisions_sent": .int(totals.revisionsSent),
                       "blobs_received": .int(totals.blobsReceived), "revisions_failed": .int(totals.revisionsFailed),
                       "bytes_sent": .int(totals.bytesSent), "bytes_received": .int(totals.bytesReceived),
                       "conflicts_resolved": .int(conflicts.count),
                       "conflicts": .array(conflicts.closed.map { c in
                           var o: [String: JSONValue] = ["doc": .string(c.doc.rawValue), "winner": .string(c.winner.description),
                                                         "loser": .string(c.loser.description), "resolution": .string(c.resolution.rawValue)]
                           if let peer = c.mergedBy { o["merged_by"] = .string(peer) }
                           return .object(o)
                       })])
        } else {
            print("up to date with \(url): received \(totals.revisionsReceived), sent \(totals.revisionsSent) revisions, \(totals.blobsReceived) blobs"
                  + (totals.revisionsFailed > 0 ? ", \(totals.revisionsFailed) failed" : "")
                  + " (\(totals.bytesSent) bytes sent, \(totals.bytesReceived) received)")
            if conflicts.count > 0 {
                let named = conflicts.closed.prefix(5).map { "\($0.doc) (\($0.resolution == .merged ? "merged" : "winner's body kept"))" }
                let more = conflicts.count > named.count ? " and \(conflicts.count - named.count) more" : ""
                print("\(conflicts.count) conflict\(conflicts.count == 1 ? "" : "s") resolved: \(named.joined(separator: ", "))\(more); `ferry conflicts` tells what each side lost")
            }
        }
    }
}
