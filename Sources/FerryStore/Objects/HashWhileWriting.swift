import Dispatch
import FerryCore

extension BlobHasher {
    /// Pieces from this size on are hashed on one thread while they are written on another: a
    /// large blob's parts (`PeerSession.blobChunkSize`) and the chunks of a file imported here.
    /// Smaller ones are blobs of their own, several fetched at once, which keep both cores busy
    /// already.
    static let sideBySideBytes = 256 << 10

    /// Hashes `piece` while `write` stores it: at once, on two threads (`SideBySide`), for a large piece
    /// (hashing a large blob takes about as long as writing it, and the thread that does both
    /// one after the other is the slowest stage of its transfer); one after the other for a
    /// small one, where handing work to another thread costs more than it saves.
    mutating func update(_ piece: UnsafeRawBufferPointer, whileWriting write: () throws(StoreError) -> Void) throws(StoreError) {
        guard piece.count >= Self.sideBySideBytes else {
            update(piece)
            try write()
            return
        }
        var written: Result<Void, StoreError> = .success(())
        SideBySide.run({ written = Result(catching: write) }, { self.update(piece) })
        try written.get()
    }
}

/// Two pieces of work run at once, on two threads where Dispatch has a worker free (the
/// calling thread runs both, one after the other, when it has not); `run` returns when both
/// are done. The closures need not be `Sendable`: neither outlives the call, and they share
/// nothing but what both only read.
enum SideBySide {
    /// Runs `first` and `second`, at once where it can, and returns when both are done.
    static func run(_ first: () -> Void, _ second: () -> Void) {
        withoutActuallyEscaping(first) { first in
            withoutActuallyEscaping(second) { second in
                let work = UncheckedWork(first: first, second: second)
                DispatchQueue.concurrentPerform(iterations: 2) { i in i == 0 ? work.first() : work.second() }
            }
        }
    }

    /// The two closures, handed to Dispatch's threads: unchecked, because `run` waits for both
    /// before its caller's state can change.
    private struct UncheckedWork: @unchecked Sendable {
        /// The first piece of work.
        let first: () -> Void
        /// The second.
        let second: () -> Void
    }
}
