import FerryCore
import FerryProtocol
import FerryStore

/// A revision from the peer, ready for the store: its blobs are already here; a JSON body
/// travels as bytes so the store writes it inside its batch.
struct ReceivedRevision {
    var revision: RemoteRevision
    var then: AfterStoring
    /// Its request's size on the wire when it counts in `RequestBudget`'s store queue (0 when
    /// a serving task holds it and counts it as a request).
    var size = 0
}

/// What happens once a received revision is stored or refused.
enum AfterStoring {
    /// A task waits for the result (it fetched blobs or expanded a delta first).
    case resume(CheckedContinuation<Result<[LogEntry], StoreError>, Never>)
    /// Nobody waits: the drain answers the peer's request itself. Most revisions go this way,
    /// so that 1,000 revisions in flight are 1,000 inbox entries, not 1,000 suspended tasks.
    case answer(RequestHandle)
}
