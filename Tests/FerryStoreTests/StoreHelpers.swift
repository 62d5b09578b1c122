import FerryCore
@testable import FerryStore
import FerryTesting
import Glibc

/// A folder for one test, removed afterwards.
final class TestFolder {
    let dir = TemporaryDirectory()
    var store: FolderStore

    init(name: String = "test") throws {
        store = try FolderStore.create(at: dir.path, name: name)
    }

    var root: String { dir.path }

    func doc(_ id: String) throws -> DocumentID { try DocumentID(id) }

    /// Closes and reopens the store (as a restart does).
    func reopen() throws {
        store = try FolderStore.open(at: dir.path, writable: false)  // releases nothing; drop first
    }
}

/// A revision made outside any store, for feeding stores in chosen orders.
struct Made {
    let doc: DocumentID
    let rev: RevisionID
    let history: [RevisionID]
    let body: JSONValue?

    /// Writes the body into `store` and applies the revision as a peer's (`resolve: false`: a
    /// conflict it makes is left for the end of the pass, as a session does).
    func apply(to store: FolderStore, origin: String = "peer", resolve: Bool = true) throws -> [LogEntry] {
        var object: BlobDigest?
        var size = 0
        if let body {
            let bytes = body.canonicalBytes
            object = try store.objects.writeBody(bytes)
            size = bytes.count
        }
        return try store.applyRemote(IncomingRevision(doc: doc, rev: rev, history: history, deleted: body == nil,
                                                      object: object, size: size, origin: origin), resolve: resolve)
    }

    /// A child revision of this one.
    func child(_ body: JSONValue?) -> Made {
        let digest = body.map { BlobDigest.of($0.canonicalBytes) }
        return Made(doc: doc, rev: RevisionID.compute(parent: rev, deleted: body == nil, body: digest),
                    history: [rev] + history, body: body)
    }

    /// A peer's child of `parent`, a revision `store` has, with the history it has of it.
    static func child(of parent: RevisionID, doc: DocumentID, in store: FolderStore, _ body: JSONValue) -> Made {
        Made(doc: doc, rev: RevisionID.compute(parent: parent, deleted: false, body: BlobDigest.of(body.canonicalBytes)),
             history: store.index[doc]!.history(of: parent), body: body)
    }

    /// A first revision.
    static func root(_ doc: DocumentID, _ body: JSONValue) -> Made {
        Made(doc: doc, rev: RevisionID.compute(parent: nil, deleted: false, body: BlobDigest.of(body.canonicalBytes)), history: [], body: body)
    }
}

func fileMode(_ path: String) -> mode_t {
    var st = stat()
    lstat(path, &st)
    return st.st_mode & 0o777
}
