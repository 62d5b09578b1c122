import FerryCore

/// Keeps the revisions of each document in the order they arrived on their way to the store:
/// a revision that waits (for blobs, for a delta's base) holds back the later revisions of its
/// document, so a document's history is stored parent first and a merge finds its base here.
struct ArrivalOrder {
    private var issued: [DocumentID: Int] = [:]
    private var admitted: [DocumentID: Int] = [:]
    private var waiters: [DocumentID: [Int: CheckedContinuation<Void, Never>]] = [:]
    private var released = false

    /// True when no revision of `doc` is on its way: the next one may go straight in.
    func isClear(_ doc: DocumentID) -> Bool { issued[doc] == nil }

    /// The place in line of the next revision of `doc`.
    mutating func take(_ doc: DocumentID) -> Int {
        let ticket = issued[doc, default: 0]
        issued[doc] = ticket + 1
        return ticket
    }

    /// True when `ticket` is the next to go in (or the line was released).
    func isTurn(_ doc: DocumentID, _ ticket: Int) -> Bool { released || admitted[doc, default: 0] == ticket }

    /// Parks the holder of `ticket` until its turn.
    mutating func park(_ doc: DocumentID, _ ticket: Int, _ waiter: CheckedContinuation<Void, Never>) {
        if isTurn(doc, ticket) { waiter.resume() } else { waiters[doc, default: [:]][ticket] = waiter }
    }

    /// The holder of the current turn of `doc` is done: the next one goes.
    mutating func next(_ doc: DocumentID) {
        let following = admitted[doc, default: 0] + 1
        if following >= issued[doc, default: 0] {
            issued[doc] = nil
            admitted[doc] = nil
            waiters[doc] = nil
            return
        }
        admitted[doc] = following
        waiters[doc]?.removeValue(forKey: following)?.resume()
    }

    /// Lets every waiter go (the connection closed).
    mutating func releaseAll() {
        released = true
        for (_, w) in waiters { for (_, c) in w { c.resume() } }
        waiters.removeAll()
    }
}
