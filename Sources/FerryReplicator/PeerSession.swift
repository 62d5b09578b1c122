import FerryCore
import FerryProtocol
import FerryStore
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Why a replication ended early.
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    /// One sentence.
    public let message: String
    /// The sentence.
    public var description: String { message }
}

/// What a session did.
public struct ReplicationStats: Sendable, Equatable {
    /// Revisions received and stored.
    public var revisionsReceived = 0
    /// Revisions sent.
    public var revisionsSent = 0
    /// Blobs fetched from the peer.
    public var blobsReceived = 0

    /// Nothing done yet.
    public init() {}
}

/// One replication connection, either side. It owns the folder's store while it runs, reads
/// the transport in one loop (responses and blob chunks are routed to whoever waits for
/// them), and serves the peer's requests in child tasks, so a request that itself waits for
/// the peer (a `rev` that needs `getAttachment`) never blocks the loop.
///
/// Implemented today: the passive side (checkpoints, `subChanges` → `changes` + `rev`,
/// `getAttachment`, refusing pushes when read-only) and the active side's one-shot pull and
/// push. Continuous mode, `proposeChanges`, retries and progress reporting are issue 4's
/// remaining work.
public actor PeerSession {
    let transport: MessageTransport
    let store: FolderStore
    let logger: Logger
    var machine: ConnectionStateMachine
    var responders: [Int: AsyncStream<Response>.Continuation] = [:]
    var chunkSinks: [Int: AsyncStream<BlobChunk>.Continuation] = [:]
    var openedWaiter: AsyncStream<Bool>.Continuation?
    var caughtUpWaiter: AsyncStream<Int>.Continuation?
    var highestSequenceReceived = 0
    var closed = false
    /// When true (a `--read-only` listener), the peer may pull but every push is refused.
    let readOnly: Bool
    /// What this session did so far.
    public private(set) var stats = ReplicationStats()

    /// A session over `transport` for the folder `store` (opened for writing; the session
    /// owns it). The active side names the `remoteDatabase` it wants (its URL's path); the
    /// passive side serves its own folder's database name.
    public init(transport: MessageTransport, store: sending FolderStore, role: ConnectionStateMachine.Role,
                remoteDatabase: String? = nil, readOnly: Bool = false, logger: Logger) {
        self.transport = transport
        self.logger = logger
        self.readOnly = readOnly
        let database = role == .active ? (remoteDatabase ?? store.info.name) : store.info.name
        self.machine = ConnectionStateMachine(role: role, localPeer: store.info.id, database: database)
        self.store = store
    }

    // MARK: The loop

    /// Reads the connection until it closes, serving requests; returns when it has closed.
    public func run() async {
        await withDiscardingTaskGroup { group in
            for await message in transport.inbound {
                let action: ConnectionStateMachine.Action
                switch message {
                case .text(let bytes): action = machine.receiveText(bytes)
                case .binary(let bytes): action = machine.receiveBinary(bytes)
                }
                switch action {
                case .none: break
                case .send(let frame): try? await transport.send(text: FrameCodec.encode(frame))
                case .opened: openedWaiter?.yield(true); openedWaiter?.finish()
                case let .request(number, noReply, request):
                    group.addTask { await self.serve(number: number, noReply: noReply, request) }
                case let .response(to, _, response):
                    responders.removeValue(forKey: to).map { $0.yield(response); $0.finish() }
                case .chunk(let chunk):
                    let n = Int(chunk.requestNumber)
                    chunkSinks[n]?.yield(chunk)
                    if chunk.isLast { chunkSinks.removeValue(forKey: n)?.finish() }
                case let .close(code, reason, after):
                    if let after { try? await transport.send(text: FrameCodec.encode(after)) }
                    logger.warning("closing connection", metadata: ["code": "\(code)", "reason": "\(reason)"])
                    await transport.close(code: code, reason: reason)
                }
            }
            finishAll()
        }
    }

    private func finishAll() {
        closed = true
        for (_, r) in responders { r.finish() }
        responders.removeAll()
        for (_, c) in chunkSinks { c.finish() }
        chunkSinks.removeAll()
        openedWaiter?.finish()
        caughtUpWaiter?.finish()
    }

    /// Sends a request and waits for its response.
    func request(_ request: Request) async throws -> Response {
        try await requestWithChunks(request).response
    }

    /// Sends a request and waits for its response; for `getAttachment`, also returns the
    /// stream its blob chunks arrive on (registered before asking: they may follow at once).
    func requestWithChunks(_ request: Request) async throws -> (response: Response, chunks: AsyncStream<BlobChunk>?) {
        guard !closed else { throw ReplicationError(message: "the connection is closed") }
        let frame = machine.send(request)
        guard case let .request(number, _, _) = frame else { throw ReplicationError(message: "internal: not a request") }
        let (stream, continuation) = AsyncStream<Response>.makeStream()
        responders[number] = continuation
        var chunks: AsyncStream<BlobChunk>?
        if case .getAttachment = request {
            let (stream, sink) = AsyncStream<BlobChunk>.makeStream()
            chunkSinks[number] = sink
            chunks = stream
        }
        try await transport.send(text: FrameCodec.encode(frame))
        for await response in stream { return (response, chunks) }
        throw ReplicationError(message: "the connection closed before \(request.typeName) was answered")
    }

    func respond(_ number: Int, _ response: Response) async {
        try? await transport.send(text: FrameCodec.encode(.response(to: number, response)))
    }

    // MARK: Serving the peer's requests

    func serve(number: Int, noReply: Bool, _ request: Request) async {
        switch request {
        case .getCheckpoint(let client):
            if let c = CheckpointStore(layout: store.layout).get(client) {
                await respond(number, .checkpoint(rev: String(c.rev), checkpoint: Checkpoint(local: c.local, remote: c.remote)))
            } else {
                await respond(number, .error(status: 404, message: "no checkpoint \(client)"))
            }
        case let .setCheckpoint(client, rev, checkpoint):
            do {
                let saved = try CheckpointStore(layout: store.layout).set(client, expectedRev: rev.flatMap { Int($0) },
                                                                          local: checkpoint.local, remote: checkpoint.remote)
                await respond(number, .checkpointSaved(rev: String(saved.rev)))
            } catch {
                await respond(number, .error(status: 409, message: "\(error)"))
            }
        case let .subChanges(since, _, docIDs):
            await respond(number, .ok)
            do { try await sendChanges(since: since, docIDs: docIDs.map(Set.init)) } catch {
                logger.warning("sending changes stopped", metadata: ["error": "\(error)"])
            }
        case .changes(let entries):
            if readOnly {
                await respond(number, .error(status: 403, message: "this listener is read-only: peers may pull, not push"))
                return
            }
            if entries.isEmpty {
                await respond(number, .changes([], maxHistory: nil))
                caughtUpWaiter?.yield(highestSequenceReceived)
                return
            }
            let answers: [ChangeAnswer] = entries.map { e in
                store.knownAncestors(of: e.rev, doc: e.doc).map { .wanted(knownAncestors: $0) } ?? .notWanted
            }
            await respond(number, .changes(answers, maxHistory: nil))
        case let .rev(doc, rev, history, sequence, body):
            if readOnly {
                if !noReply { await respond(number, .error(status: 403, message: "this listener is read-only: peers may pull, not push")) }
                return
            }
            do {
                try await receive(doc: doc, rev: rev, history: history, body: body)
                highestSequenceReceived = max(highestSequenceReceived, sequence)
                stats.revisionsReceived += 1
                if !noReply { await respond(number, .ok) }
            } catch {
                logger.warning("revision refused", metadata: ["doc": "\(doc)", "rev": "\(rev)", "error": "\(error)"])
                if !noReply { await respond(number, .error(status: 400, message: "\(error)")) }
            }
        case .getAttachment(let digest):
            await sendBlob(digest, number: number)
        case .hello, .proposeChanges, .norev:
            if !noReply { await respond(number, .error(status: 501, message: "\(request.typeName) is not supported yet")) }
        }
    }

    /// Announces every current revision after `since` in batches and sends the wanted ones;
    /// returns the last sequence announced (the push checkpoint).
    @discardableResult
    func sendChanges(since: Int, docIDs: Set<DocumentID>?) async throws -> Int {
        var cursor = since
        while true {
            let batch = store.changes(since: cursor, limit: 200, docIDs: docIDs)
            let entries = batch.map { ChangeEntry(sequence: $0.seq, doc: $0.doc, rev: $0.rev, deleted: $0.deleted, bodySize: $0.size) }
            let answer = try await request(.changes(entries))
            if case let .error(status, message) = answer {
                throw ReplicationError(message: "the peer refused the push (\(status)): \(message)")
            }
            guard case .changes(let answers, _) = answer else {
                throw ReplicationError(message: "peer did not answer changes")
            }
            if batch.isEmpty { return cursor }
            for (i, change) in batch.enumerated() where i < answers.count {
                guard case .wanted(let known) = answers[i] else { continue }
                guard let node = store.index[change.doc]?.nodes[change.rev] else { continue }
                let history = store.historyToSend(change.rev, doc: change.doc, knownByPeer: known)
                let body: RevisionBody
                if node.deleted {
                    body = .deleted
                } else if change.doc.kind == .json {
                    body = .json(try store.jsonBody(of: node, doc: change.doc))
                } else {
                    body = .blob(BlobReference(digest: node.object!, length: node.size, contentType: nil))
                }
                let response = try await request(.rev(doc: change.doc, rev: change.rev, history: history, sequence: change.seq, body: body))
                if case .error(let status, let message) = response {
                    logger.warning("peer refused a revision", metadata: ["doc": "\(change.doc)", "status": "\(status)", "error": "\(message)"])
                } else {
                    stats.revisionsSent += 1
                }
            }
            cursor = batch.last!.seq
        }
    }

    /// Streams an object to the peer as chunks of the `getAttachment` request `number`.
    func sendBlob(_ digest: BlobDigest, number: Int) async {
        guard store.objects.contains(digest), let fd = try? store.objects.open(digest) else {
            await respond(number, .error(status: 404, message: "no blob \(digest)"))
            return
        }
        defer { Glibc.close(fd) }
        var st = stat()
        fstat(fd, &st)
        var remaining = Int(st.st_size)
        await respond(number, .attachment(length: remaining))
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        // Objects are immutable, so their size says which chunk is the last (an empty blob
        // is one empty last chunk).
        repeat {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, min($0.count, max(remaining, 1))) }
            guard n >= 0 else { return }
            remaining = n == 0 ? 0 : remaining - n
            let chunk = BlobChunk(requestNumber: UInt32(number), isLast: remaining == 0, bytes: Array(buffer[0..<n]))
            do { try await transport.send(binary: chunk.encoded()) } catch { return }
        } while remaining > 0
    }

    /// Stores a revision from the peer: its missing blobs first (verified as they arrive),
    /// then the body, then the revision itself (which resolves conflicts and writes the file).
    func receive(doc: DocumentID, rev: RevisionID, history: [RevisionID], body: RevisionBody) async throws {
        var object: BlobDigest?
        var size = 0
        switch body {
        case .deleted:
            break
        case .json(let value):
            for ref in try value.blobReferences() where !store.objects.contains(ref.digest) { try await fetchBlob(ref.digest) }
            let bytes = value.canonicalBytes
            object = try store.objects.write(bytes)
            size = bytes.count
        case .blob(let ref):
            if !store.objects.contains(ref.digest) { try await fetchBlob(ref.digest) }
            object = ref.digest
            size = ref.length
        }
        try store.applyRemote(IncomingRevision(doc: doc, rev: rev, history: history, deleted: object == nil, object: object,
                                               size: size, origin: machine.remotePeer ?? "peer"))
    }

    func fetchBlob(_ digest: BlobDigest) async throws {
        let (response, stream) = try await requestWithChunks(.getAttachment(digest: digest))
        guard case .attachment = response, let chunks = stream else { throw ReplicationError(message: "peer has no blob \(digest)") }
        let writer = try store.objects.beginWrite(expected: digest)
        var complete = false
        for await chunk in chunks {
            try writer.append(chunk.bytes)
            if chunk.isLast { complete = true; break }
        }
        guard complete else { writer.abandon(); throw ReplicationError(message: "connection closed while receiving \(digest)") }
        try writer.finish()
        stats.blobsReceived += 1
    }

    // MARK: The active side

    /// Opens the session (hello) — call after `run()` has started in another task.
    public func open() async throws {
        let (stream, continuation) = AsyncStream<Bool>.makeStream()
        openedWaiter = continuation
        guard let hello = machine.start() else { throw ReplicationError(message: "only the active side opens") }
        try await transport.send(text: FrameCodec.encode(hello))
        for await _ in stream { return }
        throw ReplicationError(message: "the peer closed the connection during hello")
    }

    /// Pulls everything the peer has that this folder lacks, once; keeps checkpoints on both
    /// sides so that the next pull starts where this one ended. Returns what it did.
    public func pullOnce() async throws -> ReplicationStats {
        let client = "pull:" + store.info.id
        let (peerRev, saved) = try await readCheckpoint(client)
        let since = saved.remote
        let (caughtUp, continuation) = AsyncStream<Int>.makeStream()
        caughtUpWaiter = continuation
        guard case .ok = try await request(.subChanges(since: since, continuous: false, docIDs: nil)) else {
            throw ReplicationError(message: "the peer refused subChanges")
        }
        var reached: Int?
        for await seq in caughtUp { reached = seq; break }
        guard let reached else { throw ReplicationError(message: "the connection closed before the pull caught up") }
        try await saveCheckpoint(client, peerRev: peerRev, Checkpoint(local: 0, remote: max(since, reached)))
        return stats
    }

    /// Pushes everything this folder has that the peer lacks, once, resuming from the push
    /// checkpoint kept on both sides. A read-only peer refuses with a `ReplicationError`.
    public func pushOnce() async throws -> ReplicationStats {
        let client = "push:" + store.info.id
        let (peerRev, saved) = try await readCheckpoint(client)
        let last = try await sendChanges(since: saved.local, docIDs: nil)
        try await saveCheckpoint(client, peerRev: peerRev, Checkpoint(local: last, remote: 0))
        return stats
    }

    /// The checkpoint of `client` as both sides agree: the lower of the peer's copy and this
    /// folder's (zero when either has none), and the peer copy's revision for the next save.
    func readCheckpoint(_ client: String) async throws -> (peerRev: String?, checkpoint: Checkpoint) {
        guard case let .checkpoint(rev, theirs) = try await request(.getCheckpoint(client: client)) else {
            return (nil, Checkpoint(local: 0, remote: 0))
        }
        let ours = CheckpointStore(layout: store.layout).get(client)
        return (rev, Checkpoint(local: min(theirs.local, ours?.local ?? 0), remote: min(theirs.remote, ours?.remote ?? 0)))
    }

    /// Saves `checkpoint` for `client` on the peer and in this folder.
    func saveCheckpoint(_ client: String, peerRev: String?, _ checkpoint: Checkpoint) async throws {
        _ = try await request(.setCheckpoint(client: client, rev: peerRev, checkpoint: checkpoint))
        let local = CheckpointStore(layout: store.layout)
        _ = try? local.set(client, expectedRev: local.get(client)?.rev, local: checkpoint.local, remote: checkpoint.remote)
    }

    /// Closes the connection normally.
    public func close() async {
        await transport.close(code: 1000, reason: "done")
    }
}
