import FerryCore

/// The folder's single writer as the agent's services share it: the watcher's indexer, every
/// connection of the listener and every replicator reach the one `FolderStore` through this
/// actor, one at a time (GRDB's rule: open a database file only once). It tells subscribers
/// when the log grew, which is what continuous replication waits on, and applies revisions
/// from peers in groups, so that many arriving at once share one round of fsyncs.
public actor SharedStore {
    private let store: FolderStore
    /// The folder's identity (immutable).
    public nonisolated let info: FolderInfo
    /// The folder's paths (immutable).
    public nonisolated let layout: FolderLayout
    private var subscribers: [Int: AsyncStream<Int>.Continuation] = [:]
    private var nextSubscriber = 0
    private var publishedSequence: Int

    /// Shares `store`, which must be open for writing; nothing else may use it afterwards.
    public init(_ store: sending FolderStore) {
        precondition(store.isWritable, "a shared store is the folder's writer")
        self.info = store.info
        self.layout = store.layout
        self.publishedSequence = store.index.lastSeq
        self.store = store
    }

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
        let last = store.index.lastSeq
        guard last > publishedSequence else { return }
        publishedSequence = last
        for (_, c) in subscribers { c.yield(last) }
    }

    /// Applies revisions received from a peer as one batch: one `syncfs` for all their bodies
    /// and files, then their log lines. Each revision succeeds or fails on its own; if the
    /// batch itself cannot be made durable (a full disk), all fail and nothing is recorded.
    public func applyRemote(_ revisions: [RemoteRevision]) -> [Result<[LogEntry], StoreError>] {
        defer { publish() }
        var results: [Result<[LogEntry], StoreError>] = []
        do {
            try store.batch {
                for remote in revisions {
                    do {
                        var incoming = remote.incoming
                        if let body = remote.jsonBody { incoming.object = try store.objects.write(body) }
                        results.append(.success(try store.applyRemote(incoming, parsedBody: remote.jsonBody == nil ? nil : remote.parsedBody)))
                    } catch {
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

    /// Saves the stat cache (the agent does this now and then and when it stops).
    public func saveStatCache() throws(StoreError) {
        try store.saveStatCache()
    }
}

/// A revision from a peer as the replicator hands it over: its blobs are already stored; a
/// JSON body comes as its canonical bytes, written by the store inside its batch, and as
/// the value they encode (so the store neither reads nor parses them back).
public struct RemoteRevision: Sendable {
    /// The revision (for a JSON document, `object` is filled in from `jsonBody`).
    public var incoming: IncomingRevision
    /// The canonical bytes of a JSON body.
    public var jsonBody: [UInt8]?
    /// The value `jsonBody` encodes, if the caller has it.
    public var parsedBody: JSONValue?

    /// A revision and its JSON body (bytes, and the value they encode), if it has one.
    public init(incoming: IncomingRevision, jsonBody: [UInt8]?, parsedBody: JSONValue? = nil) {
        self.incoming = incoming
        self.jsonBody = jsonBody
        self.parsedBody = parsedBody
    }
}
