#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import Synchronization

/// Blobs fetched from peers and verified against their digests, waiting in temp files for the
/// store's next batch of received revisions (`SharedStore.applyRemote`), which takes them all
/// into its `syncfs` instead of each blob paying an fsync, a rename and a directory fsync of
/// its own. A revision naming one is queued only after the blob is here, so the batch that
/// takes the revision has taken the blob first (or an earlier batch installed it).
final class FetchedBlobs: Sendable {
    private let temps = Mutex<[BlobDigest: String]>([:])

    /// Keeps the verified temp file `temp` holding `digest`'s bytes (a second copy of the same
    /// blob, fetched by another revision meanwhile, is dropped).
    func add(_ digest: BlobDigest, temp: String) {
        let duplicate = temps.withLock { temps in
            if temps[digest] != nil { return true }
            temps[digest] = temp
            return false
        }
        if duplicate { unlink(temp) }
    }

    /// True when `digest` was fetched and awaits a batch.
    func contains(_ digest: BlobDigest) -> Bool {
        temps.withLock { $0[digest] != nil }
    }

    /// Every waiting blob, by digest. They stay listed (so `contains` holds) until `remove`:
    /// a batch that adopts them renames them only when it commits.
    func all() -> [BlobDigest: String] {
        temps.withLock { $0 }
    }

    /// Forgets blobs `all` listed, now installed by a batch or removed with it.
    func remove(_ taken: [BlobDigest: String]) {
        temps.withLock { temps in
            for (digest, temp) in taken where temps[digest] == temp { temps[digest] = nil }
        }
    }
}
