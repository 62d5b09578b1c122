import FerryCore
import FerryProtocol
import FerryStore

/// What a dry pull found about two folders' histories: whether they share any revision, and
/// which documents this folder holds that the peer has with a history of its own.
struct RelatednessProbe {
    /// Some revision is known on both sides: the folders are related, whatever else differs.
    var shareHistory = false
    /// Live documents here whose peer revision and its history are all unknown here.
    var unrelatedDocuments: [DocumentID] = []

    /// What a peer's announced revision says about one document here.
    enum Verdict: Sendable {
        /// Not here, or deleted here: nothing of this folder's would be merged.
        case absent
        /// This folder knows the revision.
        case known
        /// Live here, the revision unknown: its history decides.
        case unknown
    }

    /// The refusal when the folders share nothing and documents would be merged, else nil.
    func refusal(peer url: String) -> String? {
        guard !shareHistory, !unrelatedDocuments.isEmpty else { return nil }
        let names = unrelatedDocuments.prefix(3).map(\.rawValue).joined(separator: ", ")
        let more = unrelatedDocuments.count > 3 ? " and \(unrelatedDocuments.count - 3) more" : ""
        return """
            \(url) serves a folder unrelated to this one: no revision in common, and \(unrelatedDocuments.count) \
            document(s) at the same paths with histories of their own (\(names)\(more)); syncing would merge them. \
            Nothing was sent or changed; if that is what you want, run again with --allow-unrelated
            """
    }
}

/// The first sync with a peer: refused when its database is not this folder's (a ferry
/// listener's is its folder's name), or when the two folders share no history and both hold
/// documents at the same paths (git refuses unrelated histories the same way). Decided by a
/// dry pull before anything moves: the peer announces its revisions; those of documents
/// live here and unknown here are asked for, to see their histories, and dropped.
extension PeerSession {
    /// Runs the dry pull if this is the first sync with the peer (no checkpoint on either
    /// side) and this folder holds live documents; throws a permanent error if the peer
    /// serves another database (`database`) or the folders are unrelated. A channel that serves
    /// one subscription per connection (Couchbase Lite's) is not probed: the subscription is
    /// the replication's.
    func refuseIfUnrelated(peer url: String, database: String, docIDs: [DocumentID]?) async throws {
        guard channel.resubscribes else { return }
        let pulled = try await readCheckpoint(checkpointClient(FerryCheckpointClient.pullPrefix, docIDs: docIDs)).checkpoint.remote
        let pushed = try await readCheckpoint(checkpointClient(FerryCheckpointClient.pushPrefix, docIDs: docIDs)).checkpoint.local
        guard pulled == 0, pushed == 0 else { return }
        let hasLiveDocuments = await shared.perform { store in store.index.trees.values.contains { $0.current?.deleted == false } }
        guard hasLiveDocuments else { return }
        // A ferry listener serves its folder's name (SPEC §4): another name with no history in
        // common is another database, reached by a typo or a wrong port, whatever paths the
        // two hold. (With history in common it is a copy named otherwise: not refused.)
        let otherName = database != shared.info.name

        relatedness = RelatednessProbe()
        defer { relatedness = nil }
        let (caughtUp, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
        caughtUpWaiter = continuation
        let answer = try await request(.subChanges(since: 0, continuous: false, docIDs: docIDs))
        if case let .error(status, message) = answer {
            throw ReplicationError("the peer refused subChanges (\(status)): \(message)", kind: .permanent)
        }
        var finished = false
        for await _ in caughtUp {
            finished = true
            break
        }
        guard finished, let probe = relatedness else { throw ReplicationError(endReason) }
        if otherName && !probe.shareHistory {
            throw ReplicationError("""
                \(url) serves database \(String(reflecting: database)), and this folder is database \(String(reflecting: shared.info.name)) \
                with no revision in common: syncing would merge the two. Nothing was sent or changed; if that is what you want, \
                run again with --allow-unrelated
                """, kind: .permanent)
        }
        if let refusal = probe.refusal(peer: url) { throw ReplicationError(refusal, kind: .permanent) }
    }

    /// Answers a `changes` batch during the dry pull: known revisions prove the folders
    /// related; unknown ones of documents live here are asked for with their whole history.
    func answerProbeChanges(_ handle: RequestHandle, _ entries: [ChangeEntry]) async {
        guard !entries.isEmpty else {
            await respond(handle, .changes([], maxHistory: nil))
            caughtUpWaiter?.yield(0)
            return
        }
        let asked = entries.map { ($0.doc, $0.rev) }
        let verdicts: [RelatednessProbe.Verdict] = await shared.perform { store in
            asked.map { doc, rev in
                guard let tree = store.index[doc] else { return .absent }
                if tree.contains(rev) { return .known }
                return tree.current?.deleted == false ? .unknown : .absent
            }
        }
        if verdicts.contains(where: { if case .known = $0 { true } else { false } }) { relatedness?.shareHistory = true }
        let proven = relatedness?.shareHistory ?? true
        let answers: [ChangeAnswer] = verdicts.map { verdict in
            if case .unknown = verdict, !proven { return .wanted(knownAncestors: []) }
            return .notWanted
        }
        await respond(handle, .changes(answers, maxHistory: nil))
    }

    /// A revision asked for by the dry pull: its history is compared, its body dropped.
    func probeRevision(_ handle: RequestHandle, doc: DocumentID, rev: RevisionID, history: [RevisionID]) async {
        let lineage = [rev] + history
        let shared = await self.shared.perform { store in store.index[doc].map { tree in lineage.contains(where: tree.contains) } }
        if shared == true {
            relatedness?.shareHistory = true
        } else if shared == false {
            relatedness?.unrelatedDocuments.append(doc)
        }
        await respond(handle, .ok)
    }
}
