import FerryCore

/// The revisions a connection delivered, so that they are not announced back to it; bounded
/// (when full it starts over: an echo then costs one `changes` entry the peer answers "have").
struct ReceivedHere {
    private var keys: Set<Key> = []
    /// Most revisions remembered: a pull of 100,000 documents must not hold a key for each
    /// (64 bytes, in a set twice their count) only to spare a `changes` entry per echo.
    static let capacity = 16_384

    private struct Key: Hashable {
        let doc: DocumentID
        let rev: RevisionID
    }

    /// Notes that the peer delivered `rev` of `doc`.
    mutating func insert(_ doc: DocumentID, _ rev: RevisionID) {
        if keys.count >= Self.capacity { keys.removeAll(keepingCapacity: true) }
        keys.insert(Key(doc: doc, rev: rev))
    }

    /// True (once) when the peer delivered `rev` of `doc`.
    mutating func take(_ doc: DocumentID, _ rev: RevisionID) -> Bool {
        keys.remove(Key(doc: doc, rev: rev)) != nil
    }
}
