#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// A JSON body received from a peer, checked and written to disk by the folder's file worker
/// as soon as it arrives (`SharedStore.prepare`): its canonical bytes to a temp file for the object, and
/// its pretty-printed form to a temp file beside the document. Neither is durable nor at its
/// final name: the store waits for the job, adopts the object into its batch, and renames the
/// document's temp file into place if the revision becomes the document's current one (it
/// removes the file otherwise).
///
/// Unchecked `Sendable`: the job writes `objectTemp`, `documentTemp` and `error` before its
/// ticket counts as done, and the store reads them only after waiting for that ticket (the
/// worker's lock orders the two).
public final class ReceivedBody: @unchecked Sendable {
    /// The digest of the canonical bytes: the object's name.
    public let digest: BlobDigest
    /// Their count.
    public let size: Int
    /// The worker's ticket for the job writing the files.
    let ticket: UInt64
    /// The object's temp file (nil until written, or if writing failed; nil for a small body).
    var objectTemp: String?
    /// A small body's canonical bytes, packed by the store's batch (`BodyPacks`) instead of
    /// written to a file of its own.
    var packable: [UInt8]?
    /// The document's temp file (in the document's directory).
    var documentTemp: String?
    /// What it holds, when it is large enough to remember (`KnownFileText`).
    var documentText: KnownFileText?
    /// Why the files could not be written (a full disk); the revision then fails.
    var error: StoreError?
    /// The blobs it names, checked again when the store takes it.
    let blobs: [BlobDigest]
    /// Why the body itself is refused (not a JSON object, or it names a blob not here); no
    /// files are written for it.
    let refusal: String?

    init(digest: BlobDigest, size: Int, ticket: UInt64, blobs: [BlobDigest], refusal: String? = nil) {
        self.digest = digest
        self.size = size
        self.ticket = ticket
        self.blobs = blobs
        self.refusal = refusal
    }

    /// Writes the files (on the worker): the object's bytes, then the document's
    /// pretty-printed temp file (none when `document` is nil: it cannot be placed).
    func write(canonical: [UInt8], blobs: [BlobDigest]?, document: String?, layout: FolderLayout) {
        do {
            if canonical.count < BodyPacks.packedBelow {
                packable = canonical
            } else {
                // Written even if the object is stored already: renaming over it at commit is
                // harmless (same name, same bytes), and cheaper than a lookup for every body.
                let object = ObjectStore.newTempPath(in: layout.tempDirectory)
                try FileSystem.createFile(object, canonical, mode: 0o444)
                objectTemp = object
            }
            guard let document else { return }
            let file = FolderScanner.temporaryPath(beside: document)
            // From the canonical bytes (ours: made by the serializer or checked against it):
            // the same text as `value.prettyBytes` without walking the tree again.
            let pretty = canonical.withUnsafeBufferPointer { JSONValue.prettyBytes(fromCanonical: $0) }
            do {
                try FileSystem.createFile(file, pretty, mode: FileSystem.modeForTemp(replacing: document))
            } catch where FolderStore.isRefusedPermission(error) {
                // A directory made read-only: not this revision's failure. The store writes the
                // file itself, and holds the document back if it cannot.
                return
            }
            documentTemp = file
            documentText = KnownFileText.of(pretty, object: digest, size: canonical.count) { blobs }
        } catch {
            self.error = error
        }
    }

    /// Removes whatever the job wrote (the revision was not stored).
    func removeFiles() {
        if let objectTemp { unlink(objectTemp) }
        if let documentTemp { unlink(documentTemp) }
        objectTemp = nil
        documentTemp = nil
        packable = nil
    }
}
