#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import Synchronization

/// The folder's `BlobDigestAliases`: Couchbase Lite's SHA-1 names of its objects, kept in
/// `.ferry/blob-aliases` as JSON lines `{"sha1":"sha1-…","sha256":"sha256-…"}` that `jq`
/// reads. A line is appended when a blob first crosses to or from a Couchbase Lite peer; the
/// SHA-1 of an object nobody asked about yet is computed from the object, read in chunks. The
/// file is a cache: a lost or torn line costs one more hash of the object, or one more fetch
/// of the blob from the peer, never a wrong body (both names of a line come from hashing the
/// same bytes, and bytes fetched by either name are checked against it).
public final class BlobAliasFile: BlobDigestAliases {
    private let path: String
    private let objectsDirectory: String
    private let table: Mutex<BlobDigestAliasTable>

    /// The aliases of the folder laid out as `layout`, read once from its file.
    public init(layout: FolderLayout) {
        path = layout.blobAliasesFile
        objectsDirectory = layout.objectsDirectory
        var table = BlobDigestAliasTable()
        if let bytes = try? FileSystem.readFile(path) {
            for line in bytes.split(separator: 0x0A) {
                guard case .object(let fields)? = try? JSONParser.parse(Array(line)),
                      let sha1 = fields["sha1"]?.stringValue.flatMap({ try? CBLBlobDigest($0) }),
                      let sha256 = fields["sha256"]?.stringValue.flatMap({ try? BlobDigest($0) })
                else { continue }
                table.insert(sha1: sha1, sha256: sha256)
            }
        }
        self.table = Mutex(table)
    }

    /// ferry's name for the blob Couchbase Lite calls `sha1`, if known. (The object need not be
    /// here yet: a channel records both names of a blob it fetched before the session stores
    /// it, and whatever is fetched by its SHA-256 name is checked against that name.)
    public func sha256(for sha1: CBLBlobDigest) -> BlobDigest? {
        table.withLock { $0.toSHA256[sha1] }
    }

    /// Couchbase Lite's name for the object `sha256`: known, or computed from the object (which
    /// must hash to `sha256` as it is read: a damaged object gets no alias).
    public func sha1(for sha256: BlobDigest) -> CBLBlobDigest? {
        if let known = table.withLock({ $0.toSHA1[sha256] }) { return known }
        let path = ObjectStore.path(for: sha256, in: objectsDirectory)
        guard let fd = try? FileSystem.open(path, O_RDONLY | O_CLOEXEC) else { return nil }
        defer { close(fd) }
        var sha1 = CBLBlobDigest.Hasher()
        var check = BlobHasher()
        do {
            try FileSystem.forEachChunk(of: fd, path: path) { chunk in
                sha1.update(chunk)
                check.update(chunk)
            }
        } catch { return nil }
        guard check.finalize() == sha256 else { return nil }
        let digest = sha1.finalize()
        record(sha1: digest, sha256: sha256)
        return digest
    }

    /// Records both names of one blob, in memory and as a line of the file.
    public func record(sha1: CBLBlobDigest, sha256: BlobDigest) {
        guard table.withLock({ $0.insert(sha1: sha1, sha256: sha256) }) else { return }
        let line = JSONValue.object(["sha1": .string(sha1.description), "sha256": .string(sha256.description)]).canonicalBytes + [0x0A]
        // One write with O_APPEND: lines never interleave, and a crash tears at most the last.
        guard let fd = try? FileSystem.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC) else { return }
        defer { close(fd) }
        try? FileSystem.writeAll(fd, line, path: path)
    }
}
