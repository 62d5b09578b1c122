#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import Synchronization

/// The folder's single writer as the agent's services share it: the watcher's indexer, every
/// connection of the listener and every replicator reach the one `FolderStore` through this
/// actor, one at a time (GRDB's rule: open a database file only once). It tells subscribers
/// when the log grew, which is what continuous replication waits on, and applies revisions
/// from peers in groups, so that many arriving at once share one round of fsyncs. It runs on a
/// thread of its own (`StoreThread`), where blocking is allowed.
public actor SharedStore {
    private let store: FolderStore
    /// The folder's identity (immutable).
    public nonisolated let info: FolderInfo
    /// The folder's paths (immutable).
    public nonisolated let layout: FolderLayout
    /// The SHA-1 names Couchbase Lite peers give this folder's blobs, one table for every session.
    public nonisolated let blobAliases: BlobAliasFile
    private var subscribers: [Int: AsyncStream<Int>.Continuation] = [:]
    private var nextSubscriber = 0
    private var publishedSequence: Int
    /// Writes received bodies' files beside the store (see `prepare`).
    private nonisolated let fileWorker: FileWorker
    /// Where the store runs: a `StoreThread` of its own (its calls block: `syncfs`, `fsync`,
    /// so they run off the cooperative pool), or the executor it was given.
    private nonisolated let executor: any SerialExecutor

    /// Blobs fetched by sessions, verified, waiting for the next `applyRemote`'s batch.
    private nonisolated let fetchedBlobs = FetchedBlobs()

    /// The folder's counts and problems as of the last operation (`summary`).
    private nonisolated let summaryBox: Mutex<FolderSummary>

    /// `.ferryignore` as last read for a session (`ignores`).
    private nonisolated let ignoreRules = Mutex(IgnoreFileCache())

    /// The store's own thread, or the executor it was given.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Shares `store`, which must be open for writing; nothing else may use it afterwards. It
    /// runs on a thread of its own unless given an `executor` (the simulation's, whose thread
    /// runs everything in turn).
    public init(_ store: sending FolderStore, executor: (any SerialExecutor)? = nil) {
        self.executor = executor ?? StoreThread()
        precondition(store.isWritable, "a shared store is the folder's writer")
        self.info = store.info
        self.layout = store.layout
        self.blobAliases = BlobAliasFile(layout: store.layout)
        self.publishedSequence = store.index.lastSeq
        self.fileWorker = store.fileWorker
        self.summaryBox = Mutex(FolderSummary(store))
        self.store = store
    }

    /// What `ferry status` shows of the folder, as of the last operation: read by the agent's
    /// control socket at any time, without waiting for the store's turn.
    public nonisolated var summary: FolderSummary { summaryBox.withLock { $0 } }

    deinit { (executor as? StoreThread)?.stop() }

    /// Runs `body` with the store, alone; then tells subscribers if the log grew.
    public func perform<T: Sendable>(_ body: @Sendable (FolderStore) throws -> T) rethrows -> T {
        defer { publish() }
        return try body(store)
    }

    /// The highest sequence in the log.
    public var lastSequence: Int { store.index.lastSeq }

    /// A stream of the log's highest sequence: the current one at once, then each time it
    /// grows (only the newest value is kept for a slow reader). Ends when the stream is dropped.
    public func sequenceUpdates() -> AsyncStream<Int> {
        let (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = nextSubscriber
        nextSubscriber += 1
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.unsubscribe(id) }
        }
        continuation.yield(store.index.lastSeq)
        return stream
    }

    private func unsubscribe(_ id: Int) { subscribers[id] = nil }

    /// Ends every subscriber's stream (the agent is stopping).
    public func finishSubscribers() {
        for (_, c) in subscribers { c.finish() }
        subscribers.removeAll()
    }

    private func publish() {
        summaryBox.withLock { $0 = FolderSummary(store) }
        let last = store.index.lastSeq
        guard last > publishedSequence else { return }
        publishedSequence = last
        for (_, c) in subscribers { c.yield(last) }
    }

    /// True when the folder ignores `doc` (the built-in rules and `.ferryignore`, read again
    /// when it changed): a session writes nothing for it beside the document. The store checks
    /// again when it takes the revision.
    public nonisolated func ignores(_ doc: DocumentID) -> Bool {
        ignoreRules.withLock { $0.current(layout) }.isIgnored(doc.rawValue, isDirectory: false)
    }

    /// True when the blob `digest` is stored, or fetched and waiting for the next batch: a
    /// revision naming it needs nothing more fetched.
    public nonisolated func hasBlob(_ digest: BlobDigest) -> Bool {
        fetchedBlobs.contains(digest) || FileSystem.exists(ObjectStore.path(for: digest, in: layout.objectsDirectory))
    }

    /// Verifies a blob a session fetched (`ObjectStore.beginWrite`) and keeps it for the next
    /// `applyRemote`, whose batch makes it durable and installs it; a blob whose bytes do not
    /// hash to its name is removed and fails here.
    public nonisolated func keepFetched(_ blob: PendingObject) throws(StoreError) {
        let temp = try blob.finishVerified()
        fetchedBlobs.add(blob.expected, temp: temp)
    }

    /// Applies revisions received from a peer as one batch: one `syncfs` for all their bodies,
    /// blobs and files, then their log lines. Each revision succeeds or fails on its own; if the
    /// batch itself cannot be made durable (a full disk), all fail and nothing is recorded.
    /// Their bodies' files were written as they arrived (`prepare`); the ones still being
    /// written are waited for first. A document that comes several times has its file written
    /// once, for the last. Conflicts wait for `resolvePendingConflicts` (the end of the pass),
    /// so that a peer's history is merged once it is all here, not branch by branch.
    public func applyRemote(_ revisions: [RemoteRevision]) -> [Result<[LogEntry], StoreError>] {
        defer { publish() }
        if let last = revisions.lazy.compactMap({ $0.jsonBody?.ticket }).max() { fileWorker.wait(through: last) }
        var lastOfDocument: [DocumentID: Int] = [:]
        for (i, remote) in revisions.enumerated() { lastOfDocument[remote.incoming.doc] = i }
        var results: [Result<[LogEntry], StoreError>] = []
        // Every blob fetched so far, among them all those these revisions name: installed by
        // the batch, or removed with it if it fails; listed as here until then.
        let fetched = fetchedBlobs.all()
        defer { fetchedBlobs.remove(fetched) }
        do {
            try store.batch {
                // A group looks up each directory above its documents once (until a flush).
                store.directoriesFoundInBatch = []
                for (digest, temp) in fetched { try store.objects.adopt(temp: temp, as: digest) }
                for (i, remote) in revisions.enumerated() {
                    do {
                        var incoming = remote.incoming
                        var preparedFile: PreparedFile?
                        if let body = remote.jsonBody {
                            if let refusal = body.refusal { throw FolderStore.rejection(incoming, refusal) }
                            if let error = body.error { throw error }
                            // Here when it was checked; gone only if the batch that took it failed.
                            if let missing = body.blobs.first(where: { !store.objects.hasFile($0) }) {
                                throw StoreError(.io, "blob \(missing) named by \(incoming.doc)@\(incoming.rev) was not stored")
                            }
                            if let bytes = body.packable {
                                try store.objects.pack(bytes, digest: body.digest)
                                body.packable = nil
                            } else {
                                guard let objectTemp = body.objectTemp else { throw StoreError(.io, "the body of \(incoming.doc) was not written") }
                                try store.objects.adopt(temp: objectTemp, as: body.digest)
                                body.objectTemp = nil
                            }
                            incoming.object = body.digest
                            preparedFile = body.documentTemp.map { PreparedFile(temp: $0, known: body.documentText) }
                        } else if let temp = remote.fileTemp {
                            preparedFile = PreparedFile(temp: temp, known: nil)
                        }
                        results.append(.success(try store.applyRemote(incoming, parsedBody: nil, bodyChecked: remote.jsonBody != nil, preparedFile: preparedFile,
                                                                      settleFile: lastOfDocument[incoming.doc] == i, resolve: false)))
                    } catch {
                        if let body = remote.jsonBody {
                            // Whatever the job wrote and the store did not take.
                            body.objectTemp.map { _ = unlink($0) }
                            body.documentTemp.map { store.dropUnlessPending($0, of: remote.incoming.doc) }
                        }
                        remote.fileTemp.map { store.dropUnlessPending($0, of: remote.incoming.doc) }
                        results.append(.failure((error as? StoreError) ?? StoreError(.io, "\(error)")))
                    }
                }
            }
        } catch {
            let failure = (error as? StoreError) ?? StoreError(.io, "\(error)")
            return revisions.map { _ in .failure(failure) }
        }
        return results
    }

    /// Resolves the conflicts a peer's pass left open (it has caught up, or its connection
    /// ended) and writes their files; `docs`: only those documents' (`FolderStore`).
    public func resolvePendingConflicts(of docs: Set<DocumentID>? = nil) {
        defer { publish() }
        guard docs.map({ !store.unresolved.isDisjoint(with: $0) }) ?? !store.unresolved.isEmpty else { return }
        do { _ = try store.batch { try store.resolvePendingConflicts(of: docs) } } catch {
            // Left open: the next pass that announces revisions, a save or a start resolves them.
            store.logger.error("could not resolve conflicts", metadata: ["error": "\(error)"])
        }
    }

    /// Checks a received JSON body and starts writing its files on the folder's file worker
    /// (the object's bytes, and the document's pretty-printed temp file); returns at once.
    /// Called by a session as each revision arrives, on its own thread, so that files are
    /// created while the store is busy with earlier revisions. `value` is checked here (a JSON
    /// object, within bounds, every blob it names stored) and not kept: the files are written
    /// from `canonical`, its canonical bytes. `references` are its `blobReferences()` as the
    /// caller found them (nil when one is malformed). `doc` is the document it is a body of.
    public nonisolated func prepare(_ value: JSONValue, canonical: [UInt8], references: [BlobReference]?, for doc: DocumentID) -> ReceivedBody {
        prepare(canonical: canonical, references: references, for: doc) {
            FolderStore.jsonBodyRefusal(value, canonicalCount: canonical.count, references: references, isStored: hasBlob)
        }
    }

    /// `prepare` for a body received as canonical bytes and checked to be (`CanonicalJSONCheck`):
    /// what the check found stands in for the value.
    public nonisolated func prepare(checked canonical: [UInt8], facts: CanonicalJSONFacts, for doc: DocumentID) -> ReceivedBody {
        prepare(canonical: canonical, references: facts.blobReferences, for: doc) {
            FolderStore.jsonBodyRefusal(isObject: true, canonicalCount: canonical.count, prettySize: { _ in facts.prettySize },
                                        references: facts.blobReferences, isStored: hasBlob)
        }
    }

    private nonisolated func prepare(canonical: [UInt8], references: [BlobReference]?, for doc: DocumentID,
                                     refusal: () -> String?) -> ReceivedBody {
        let layout = self.layout
        // No temp file where the document cannot go (a symbolic link or a file above it): the
        // store holds such a document back (`FolderStore.heldBack`).
        let document = layout.placementProblem(of: doc.rawValue) == nil ? layout.path(of: doc.rawValue) : nil
        let digest = BlobDigest.of(canonical)
        // The blobs it names are checked here, and remembered with a large body's file
        // (`KnownFileText`).
        if let refusal = refusal() {
            return ReceivedBody(digest: digest, size: canonical.count, ticket: 0, blobs: [], refusal: refusal)  // nothing to wait for
        }
        let blobs = references?.map(\.digest) ?? []
        let remembered = canonical.count >= KnownFileText.minimumSize ? blobs : nil
        var body: ReceivedBody?
        fileWorker.submit(queueLimit: Self.preparedBodiesQueued) { ticket in
            let received = ReceivedBody(digest: digest, size: canonical.count, ticket: ticket, blobs: blobs)
            body = received
            return { received.write(canonical: canonical, blobs: remembered, document: document, layout: layout) }
        }
        return body!
    }

    /// Asks the kernel to start reading objects into memory (`POSIX_FADV_WILLNEED`), on the
    /// file worker, and returns at once: a sender announcing a batch of changes calls it so
    /// that the bodies it will send are being read while the peer answers. Objects written
    /// long ago may no longer be cached (this machine's page cache is trimmed within
    /// minutes), and reading 1,000 of them one after another from disk stalled the pipeline.
    public nonisolated func prefetch(_ revisions: [RecordedRevision]) {
        let bodies = revisions.compactMap { r in r.object.map { (digest: $0, pack: r.pack, size: r.size) } }
        guard !bodies.isEmpty else { return }
        let directory = layout.objectsDirectory, packs = layout.packsDirectory
        fileWorker.submit { _ in
            {
                // Packed bodies' lines, by pack: neighbouring lines (a batch's bodies were mostly
                // appended together) are asked for as one range.
                var lines: [UInt32: [(start: UInt64, end: UInt64)]] = [:]
                for body in bodies {
                    if let pack = body.pack {
                        lines[pack.pack, default: []].append((pack.offset, pack.offset + UInt64(body.size) + 1))
                        continue
                    }
                    let fd = open(ObjectStore.path(for: body.digest, in: directory), O_RDONLY | O_CLOEXEC)
                    guard fd >= 0 else { continue }
                    _ = posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED)
                    close(fd)
                }
                for (pack, ranges) in lines {
                    let fd = open(BodyPacks.path(of: pack, in: packs), O_RDONLY | O_CLOEXEC)
                    guard fd >= 0 else { continue }
                    defer { close(fd) }
                    for range in Self.mergedRanges(ranges) {
                        _ = posix_fadvise(fd, off_t(range.start), off_t(range.end - range.start), POSIX_FADV_WILLNEED)
                    }
                }
            }
        }
    }

    /// `ranges` sorted and merged where less than `prefetchGap` bytes apart.
    static func mergedRanges(_ ranges: [(start: UInt64, end: UInt64)]) -> [(start: UInt64, end: UInt64)] {
        var merged: [(start: UInt64, end: UInt64)] = []
        for range in ranges.sorted(by: { $0.start < $1.start }) {
            if let last = merged.last, range.start <= last.end + prefetchGap {
                merged[merged.count - 1].end = max(last.end, range.end)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    /// Packed lines closer than this are read ahead as one range (reading the gap costs less
    /// than another request).
    static let prefetchGap: UInt64 = 64 << 10

    /// Most received bodies waiting for the file worker; beyond it the receiving session writes
    /// the oldest itself (each holds its canonical bytes until written).
    static let preparedBodiesQueued = 256

    /// Removes a prepared body's files when its revision will never reach the store (the
    /// connection closed first); waits for the job writing them.
    public nonisolated func discard(_ body: ReceivedBody) {
        fileWorker.wait(through: body.ticket)
        body.removeFiles()
    }

    /// Saves the stat cache (the agent does this now and then and when it stops).
    public func saveStatCache() throws(StoreError) {
        try store.saveStatCache()
    }
}

/// A revision from a peer as the replicator hands it over: its blobs are stored or fetched
/// (`SharedStore.keepFetched`); a
/// JSON body was checked and its files are being written by the file worker
/// (`SharedStore.prepare`), so the store neither reads nor parses it back.
public struct RemoteRevision: Sendable {
    /// The revision (for a JSON document, `object` is filled in from `jsonBody`).
    public var incoming: IncomingRevision
    /// A JSON body's files.
    public var jsonBody: ReceivedBody?
    /// A file document's temp file beside it, written as its blob arrived
    /// (`PendingObject.copyBeside`): renamed into place instead of a copy of the object.
    public var fileTemp: String?

    /// A revision and its JSON body's files, if it has one, or its file's temp file.
    public init(incoming: IncomingRevision, jsonBody: ReceivedBody?, fileTemp: String? = nil) {
        self.incoming = incoming
        self.jsonBody = jsonBody
        self.fileTemp = fileTemp
    }

    /// Removes the files written for it (it will not be stored).
    public func discardFiles(in shared: SharedStore) {
        jsonBody.map(shared.discard)
        fileTemp.map { _ = unlink($0) }
    }
}

/// A folder's counts and the files it cannot record, as `ferry status` shows them.
public struct FolderSummary: Sendable {
    /// Documents with a live current revision.
    public var documents: Int
    /// Revisions in the log.
    public var revisions: Int
    /// The log's highest sequence.
    public var lastSequence: Int
    /// Files that cannot be recorded now, with why.
    public var unreadable: [DocumentID: String]
    /// Documents whose file cannot be written, with why.
    public var heldBack: [DocumentID: String]

    /// The summary of `store` now (the dictionaries are shared, not copied).
    init(_ store: FolderStore) {
        documents = store.index.liveDocumentCount
        revisions = store.index.revisionCount
        lastSequence = store.index.lastSeq
        unreadable = store.unreadable
        heldBack = store.heldBack
    }
}
