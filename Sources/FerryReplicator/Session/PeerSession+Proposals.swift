import FerryCore
import FerryProtocol
import FerryStore
import Logging

/// Pushing to a peer that refuses conflicts (a Couchbase Lite listener, Sync Gateway): each
/// document's current revision is proposed on the revision the peer is believed to have
/// (`proposeChanges`), and sent only if the peer takes it.
extension PeerSession {
    /// Most proposals of one document per batch: on the revision's own parent, then on the
    /// peer's revision it names.
    static let proposalRounds = 2

    /// Proposes a batch of current revisions and sends those the peer takes, waiting for their
    /// answers. A conflict the peer reports is proposed again on the revision it names when
    /// this side's descends from it, and with no parent when it names none (LiteCore names ""
    /// for a document it does not have); otherwise it is that document's failure: the pull
    /// brings the peer's revision and it is merged here, and a merge that descends from it
    /// (the peer's branch won) is proposed in its turn. A proposal the peer could not look at
    /// (5xx) fails the pass, so its checkpoint stays and the next attempt proposes it again.
    func propose(_ batch: [RecordedRevision]) async throws {
        var proposals = await shared.perform { store in
            batch.map { Proposal(revision: $0, parent: store.proposedParent(of: $0.rev, doc: $0.doc)) }
        }
        for _ in 0..<Self.proposalRounds {
            guard !proposals.isEmpty else { return }
            let entries = proposals.map { ProposedChange(doc: $0.revision.doc, rev: $0.revision.rev, parent: $0.parent, bodySize: $0.revision.size) }
            let answer = try await request(.proposeChanges(entries))
            if case let .error(status, message) = answer { throw ReplicationError.pushAnswered(status: status, message) }
            guard case let .proposeChanges(answers, peerRevisions) = answer, answers.count == proposals.count else {
                throw ReplicationError("the peer answered proposeChanges with something else", kind: .permanent)
            }
            var wanted: [(RecordedRevision, [RevisionID])] = []
            var conflicts: [(proposal: Proposal, theirs: RevisionID?)] = []
            var unavailable: Proposal?
            for (i, (proposal, answer)) in zip(proposals, answers).enumerated() {
                switch answer {
                case .send: wanted.append((proposal.revision, proposal.parent.map { [$0] } ?? []))
                case .alreadyHave: update { $0.revisionsSkipped += 1 }
                case .forbidden: refused(proposal, "the peer refuses it (403)")
                case .conflict: conflicts.append((proposal, peerRevisions[i]))
                case .unavailable: unavailable = proposal
                }
            }
            let asked = conflicts.map { ($0.proposal.revision.doc, $0.proposal.revision.rev, $0.theirs) }
            let parents: [RevisionID?] = await shared.perform { store in
                asked.map { doc, rev, theirs in theirs.flatMap { store.proposalParent(for: rev, doc: doc, peerCurrent: $0) } }
            }
            proposals = []
            for ((proposal, theirs), parent) in zip(conflicts, parents) {
                if let parent, parent != proposal.parent {
                    proposals.append(Proposal(revision: proposal.revision, parent: parent))
                } else if theirs == nil, proposal.parent != nil {
                    proposals.append(Proposal(revision: proposal.revision, parent: nil))
                } else {
                    refused(proposal, "the peer has another revision of it (\(theirs.map { "\($0)" } ?? "not named")), which this one does not descend from; a peer that refuses conflicts takes only one that does")
                }
            }
            try await collectAnswers(try await sendRevisions(wanted))
            if let unavailable {
                throw ReplicationError("the peer could not take the proposal of \(unavailable.revision.doc) (5xx); proposing it again")
            }
        }
        for proposal in proposals { refused(proposal, "still refused after \(Self.proposalRounds) proposals") }
    }

    /// Counts and logs a proposal the peer did not take.
    private func refused(_ proposal: Proposal, _ why: String) {
        update { $0.revisionsFailed += 1 }
        logger.warning("a revision was not pushed", metadata: ["doc": "\(proposal.revision.doc)", "rev": "\(proposal.revision.rev)", "reason": "\(why)"])
    }
}

/// One document's proposal (`PeerSession.propose`): a revision, and the revision the peer is
/// believed to have as current.
struct Proposal {
    var revision: RecordedRevision
    var parent: RevisionID?
}

/// The peer refused a `changes` with 409: it takes pushes only as proposals. The pass starts
/// again, as proposals (`PeerSession.streamChanges`).
struct ProposalsRequired: Error {}
