import FerryCore
import FerryProtocol
import FerryStore
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Blobs both ways, a bounded window at a time.
extension PeerSession {
    /// Largest range asked per `getAttachment`: with two windows in flight per fetch, the
    /// bytes received and not yet written, and so memory, stay within two windows per blob
    /// fetched at once, however large the blob.
    static let blobWindow = 8 << 20
    /// Most bytes per part of a blob sent.
    static let blobChunkSize = 256 << 10

    // MARK: Blobs

    /// Streams `length` bytes (nil: to the end) of an object from `offset` to the peer, as
    /// parts answering the `getAttachment` request `handle`.
    func sendBlob(_ digest: BlobDigest, offset: Int, length: Int?, to handle: RequestHandle) async {
        await withCheckedContinuation { budget.takeBlobTurn($0) }
        defer { budget.endBlobTurn() }
        guard !closed else { return }
        guard let fd = try? objects.open(digest) else {
            await respond(handle, .error(status: 404, message: "no blob \(digest)"))
            return
        }
        defer { Glibc.close(fd) }
        var st = stat()
        fstat(fd, &st)
        let size = Int(st.st_size)
        let start = min(offset, size)
        var remaining = min(size - start, length ?? Int.max)
        var position = off_t(start)
        await respond(handle, .attachment(length: remaining))
        var buffer = [UInt8](repeating: 0, count: Self.blobChunkSize)
        // Objects are immutable, so the size says which part is the last (an empty range is
        // one empty last part).
        repeat {
            let want = min(buffer.count, remaining)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, position) }
            guard n >= 0, n > 0 || want == 0 else {
                await closeConnection(code: 1011, reason: "cannot read blob \(digest)")
                return
            }
            position += off_t(n)
            remaining -= n
            do { try await channel.sendBlobPart(to: handle, buffer[0..<n], isLast: remaining == 0).sent() } catch { return }
        } while remaining > 0
    }

    /// Fetches a blob a window at a time, verifying its digest as the bytes arrive; the store's
    /// next batch of received revisions installs it. Two windows are in flight: the next is
    /// asked as soon as this one's answer says it is full, so the peer streams on while this
    /// side hashes and writes (waiting for a window to drain before asking the next left the
    /// peer idle once per window). For Couchbase Lite the answer comes once the whole blob is
    /// in, so the next window is served from what arrived. At most `RequestBudget.maxFetches`
    /// fetches run at once: the revisions waiting for their blobs wait for a turn, not with
    /// bytes the peer already sent. `document`: the blob is that file document's content; its
    /// bytes are also written into a temp file beside it as they arrive (returned, for the
    /// store to rename into place), so that the file is not copied from the object afterwards.
    @discardableResult
    func fetchBlob(_ digest: BlobDigest, copyFor document: DocumentID? = nil) async throws -> String? {
        await withCheckedContinuation { budget.takeFetchTurn($0) }
        defer { budget.endFetchTurn() }
        let writer = try objects.beginWrite(expected: digest)
        // No temp file where the document cannot go (a symbolic link or a file above it), nor
        // where the folder ignores it (its directory would be made for nothing).
        if let document, shared.layout.placementProblem(of: document.rawValue) == nil, !shared.ignores(document) {
            writer.copyBeside(shared.layout.path(of: document.rawValue))
        }
        var complete = false
        defer { if !complete { writer.abandon() } }
        var asked = 0
        var window = try await send(.getAttachment(digest: digest, offset: 0, length: Self.blobWindow))
        while true {
            let answer = try await response(window.answer, to: "getAttachment")
            guard case .attachment(let length) = answer, let parts = window.blob else {
                throw ReplicationError("the peer has no blob \(digest)")
            }
            guard length <= Self.blobWindow else { throw ReplicationError("the peer sent more of \(digest) than asked", kind: .permanent) }
            asked += length
            // A full window may not be the last (a blob of whole windows ends with an empty one).
            let next = length == Self.blobWindow ? try await send(.getAttachment(digest: digest, offset: asked, length: Self.blobWindow)) : nil
            var received = 0
            var last = false
            for await part in parts {
                received += part.bytes.count
                guard received <= length else { throw ReplicationError("the peer sent more of \(digest) than it announced", kind: .permanent) }
                try writer.append(part.bytes)
                if part.isLast { last = true; break }
            }
            guard last, received == length else { throw ReplicationError("\(endReason) while receiving \(digest)") }
            guard let next else { break }
            window = next
        }
        try shared.keepFetched(writer)  // made durable with the batch that stores its revision
        complete = true
        update { $0.blobsReceived += 1 }
        return writer.documentTemp
    }
}
