import FerryCore

/// A revision received from a peer, its body (if any) already stored in `objects`.
public struct IncomingRevision: Sendable, Equatable {
    /// The document.
    public var doc: DocumentID
    /// The revision.
    public var rev: RevisionID
    /// Its ancestors, parent first (as far as the sender knows or chose to send).
    public var history: [RevisionID]
    /// For a merge, the leaf it took in (its second parent).
    public var merged: RevisionID?
    /// True for a deletion.
    public var deleted: Bool
    /// The body's object, already written and verified (nil for deletions).
    public var object: BlobDigest?
    /// Body size.
    public var size: Int
    /// The peer it came from.
    public var origin: String
    /// Who made it, as the peer says (`LogEntry.author`).
    public var author: String?

    /// An incoming revision.
    public init(doc: DocumentID, rev: RevisionID, history: [RevisionID], deleted: Bool, object: BlobDigest?, size: Int, origin: String,
                merged: RevisionID? = nil, author: String? = nil) {
        self.author = author
        self.doc = doc
        self.rev = rev
        self.history = history
        self.merged = merged
        self.deleted = deleted
        self.object = object
        self.size = size
        self.origin = origin
    }
}

extension FolderStore {
    /// Adds a peer's revision (with the history it came with) and closes any conflict it
    /// opens, per SPEC §2. Returns every entry recorded: the revision itself, and the merged
    /// revision and the deletion that close the conflict. A revision already known is a no-op.
    /// `parsedBody`: as in `applyRemote`. `bodyChecked`: the caller made sure the body is a
    /// JSON object whose blobs are here and whose canonical bytes are the object
    /// (`SharedStore.prepare` does). `resolve: false` leaves a conflict open in `unresolved`
    /// until `resolvePendingConflicts` (the end of the peer's pass).
    @discardableResult
    public func insertRemote(_ incoming: IncomingRevision, parsedBody: JSONValue? = nil, bodyChecked: Bool = false,
                             resolve: Bool = true) throws(StoreError) -> [LogEntry] {
        let doc = incoming.doc
        let tree = index[doc] ?? RevisionTree()
        if let known = tree.nodes[incoming.rev], known.seq != 0 { return [] }
        try validate(incoming, parsedBody: parsedBody, bodyChecked: bodyChecked)
        // Ancestors the tree lacks, up to and including the first one it knows (so the new
        // branch is linked to the known tree).
        var ancestors: [RevisionID] = []
        if let parent = incoming.history.first, !tree.contains(parent) {
            for r in incoming.history.dropFirst() {
                ancestors.append(r)
                if tree.contains(r) { break }
            }
        }
        let entry = LogEntry(seq: nextSeq, doc: doc, rev: incoming.rev, parent: incoming.history.first,
                             deleted: incoming.deleted, kind: doc.kind, object: incoming.object, size: incoming.size,
                             origin: incoming.origin, time: Timestamp.now(), ancestors: ancestors,
                             merged: incoming.history.isEmpty ? nil : incoming.merged, author: incoming.author)
        pinFileBase(doc)
        try commit([entry])
        if let loser = entry.merged, let winner = entry.parent, !entry.deleted {
            // Branches that both arrived in this session, with their merge, were never a
            // conflict here (a pull of a merge made elsewhere): only history.
            if [winner, loser].contains(where: { tree.isLeaf($0) && wasHereBeforeSession($0, in: tree) }) {
                conflictsClosed.note(ConflictTally.Closed(doc: doc, winner: winner, loser: loser, resolution: .merged, mergedBy: incoming.origin))
            }
            logger.info("a conflict merged by the peer arrived", metadata: ["doc": "\(doc)", "winner": "\(winner)", "loser": "\(loser)",
                                                                          "merge": "\(entry.rev)"])
        }
        guard resolve else {
            if let tree = index[doc], tree.hasConflict || Self.deletionBesideLive(tree) { unresolved.insert(doc) }
            return [entry]
        }
        return [entry] + (try resolveConflicts(doc))
    }

    /// Why a peer's revision is refused, as one sentence naming it.
    static func rejection(_ r: IncomingRevision, _ why: String) -> StoreError {
        StoreError(.invalidInput, "rejected \(r.doc)@\(r.rev) from \(r.origin): \(why)")
    }

    private func validate(_ r: IncomingRevision, parsedBody: JSONValue?, bodyChecked: Bool) throws(StoreError) {
        func reject(_ why: String) -> StoreError { Self.rejection(r, why) }
        // The log reader's own rule: what is acknowledged is readable for ever.
        if let why = LogEntry.shapeProblem(rev: r.rev, parent: r.history.first, merged: r.merged, ancestors: Array(r.history.dropFirst()),
                                           deleted: r.deleted, hasObject: r.object != nil) {
            throw reject(why)
        }
        if r.rev.generation > RevisionID.maxReceivedGeneration {
            throw reject("generation \(r.rev.generation) is beyond the \(RevisionID.maxReceivedGeneration) a peer may send")
        }
        if r.origin == LogEntry.localOrigin { throw reject("a peer cannot pose as this folder") }
        if let why = Self.nameRefusal(r.doc) { throw reject(why) }
        if let why = idMismatch(r) { throw reject(why) }
        if r.deleted { return }
        guard let object = r.object else { throw reject("a live revision needs a body") }
        if bodyChecked { return }
        // A parsed body was written just now by the caller, from that very value.
        guard parsedBody != nil || objects.contains(object) else { throw reject("its body \(object) is not stored") }
        if r.doc.kind == .json {
            let value: JSONValue
            if let parsedBody {
                value = parsedBody  // its canonical bytes are the object: canonical by construction
            } else {
                let bytes = try objects.read(object)
                guard let parsed = try? JSONParser.parse(bytes) else { throw reject("the body of a .json document must be a JSON object") }
                guard parsed.canonicalBytes == bytes else { throw reject("the body is not canonical JSON") }
                value = parsed
            }
            if let why = Self.jsonBodyRefusal(value, canonicalCount: r.size, references: try? value.blobReferences(), isStored: objects.hasFile) {
                throw reject(why)
            }
        }
    }

    /// Why `value` cannot be the body of a `.json` document, or nil: it must be a JSON object
    /// whose file (pretty-printed) ferry can read back (`jsonSizeRefusal`), and every blob it
    /// references (`references`, its `blobReferences()`; nil when one is malformed, which is
    /// not refused here) must already be stored (`isStored`).
    static func jsonBodyRefusal(_ value: JSONValue, canonicalCount: Int, references: [BlobReference]?, isStored: (BlobDigest) -> Bool) -> String? {
        var isObject = false
        if case .object = value { isObject = true }
        return jsonBodyRefusal(isObject: isObject, canonicalCount: canonicalCount, prettySize: { value.prettySize(canonicalCount: canonicalCount, limit: $0) },
                               references: references, isStored: isStored)
    }

    /// `jsonBodyRefusal` of a body known by what it is rather than by its value: an object or
    /// not, its canonical length, its pretty-printed length (counted up to a limit).
    static func jsonBodyRefusal(isObject: Bool, canonicalCount: Int, prettySize: (_ limit: Int) -> Int, references: [BlobReference]?,
                                isStored: (BlobDigest) -> Bool) -> String? {
        guard isObject else { return "the body of a .json document must be a JSON object" }
        if let why = jsonSizeRefusal(canonicalCount: canonicalCount, prettySize: prettySize) { return why }
        for ref in references ?? [] where !isStored(ref.digest) {
            return "it references blob \(ref.digest), which has not arrived"
        }
        return nil
    }

    /// Why a ferry-made revision id (32 hex digits) does not belong to what came with it, or
    /// nil: a live revision's id is the hash of its parent, body and merged branch, a deletion's
    /// that of its parent (or, closing a merged branch, of the merge this folder holds). A peer
    /// that sends one id with two bodies to two folders is refused by both instead of leaving
    /// them apart for ever. Ids of other implementations (issue 11) are not checked here.
    func idMismatch(_ r: IncomingRevision) -> String? {
        guard r.rev.digest.utf8.count == 32 else { return nil }
        let parent = r.history.first
        if r.deleted {
            if RevisionID.compute(parent: parent, deleted: true, body: nil) == r.rev { return nil }
            if let parent, index[r.doc]?.isClosing(r.rev, of: parent) == true { return nil }
            return "its id is not that of a deletion of \(parent?.description ?? "nothing")"
        }
        guard let object = r.object, RevisionID.compute(parent: parent, deleted: false, body: object, merged: r.merged) == r.rev else {
            return "its id does not match its parent and body (an id is their hash)"
        }
        return nil
    }

    /// True when `rev` was recorded here before this session began (`beginSession`).
    private func wasHereBeforeSession(_ rev: RevisionID, in tree: RevisionTree) -> Bool {
        (tree.nodes[rev]?.seq ?? .max) <= sessionStartSeq
    }

    /// Why no peer may send a document of this name, or nil: local configuration
    /// (`.ferryignore`), ferry's temp files and editor droppings are never recorded by any
    /// folder (`IgnoreRules.builtIn`), so they are never taken from a peer either.
    public static func nameRefusal(_ doc: DocumentID) -> String? {
        guard IgnoreRules.builtInOnly.isIgnored(doc.rawValue, isDirectory: false) else { return nil }
        if doc.rawValue == ".ferryignore" { return "ferry never syncs .ferryignore: it is each folder's own configuration" }
        return "ferry never syncs this name (a built-in ignore rule: docs/security.md)"
    }

    /// Why a JSON body is too large to be a document, or nil: its file, pretty-printed as
    /// ferry writes it (`prettySize`, counted up to a limit), must stay within
    /// `maxJSONDocumentBytes`, the most ferry reads back (indentation grows with depth, so
    /// this is checked before anything is written).
    static func jsonSizeRefusal(canonicalCount: Int, prettySize: (_ limit: Int) -> Int) -> String? {
        let limit = maxJSONDocumentBytes
        guard canonicalCount <= limit, prettySize(limit) <= limit else {
            return "its file would be larger than \(limit >> 20) MiB; JSON documents must be smaller"
        }
        return nil
    }

    /// Closes every open conflict of `doc` (more than one live leaf), pairwise, best leaves
    /// first, the Couchbase Lite way: a merge revision on the winning branch and a deletion
    /// that closes the losing one. The merge is always recorded, even when its body is the
    /// winner's, because it names the loser as its second parent: later merges with
    /// descendants of the loser find their base through it (`RevisionTree.mergeBase`). Every
    /// step is a pure function of the tree and the bodies, so every peer computes the same
    /// revisions, with the same ids, and they do not ping-pong.
    func resolveConflicts(_ doc: DocumentID) throws(StoreError) -> [LogEntry] {
        unresolved.remove(doc)
        var made = try closeBranchesADeletionSaw(doc)
        for _ in 0..<64 {
            guard let tree = index[doc], tree.hasConflict else { break }
            let live = tree.liveLeaves
            let winner = live[0], loser = live[1]
            var resolution = ConflictRecord.Resolution.winner
            var body: (object: BlobDigest, size: Int)
            guard let winnerObject = winner.object, loser.hasBody else {
                logger.warning("conflict left open: a branch's body is not here", metadata: ["doc": "\(doc)"])
                break
            }
            body = (winnerObject, winner.size)
            // A merge of the loser that arrived before the deletion closing it: only close it.
            let alreadyMerged = tree.mergedParent(of: winner.rev) == loser.rev || tree.ancestry(of: winner.rev).contains(loser.rev)
            if !alreadyMerged && winnerObject == loser.object {
                made.append(try closeTwin(loser, of: winner, doc))
                continue
            }
            if doc.kind == .file && !alreadyMerged, let loserObject = loser.object, loserObject != winnerObject {
                // Whole bytes, three-way, as one JSON value is merged: the side that changed
                // them since the merge base(s) stands; when both did, or each holds another
                // base's bytes (criss-cross merges whose bases differ: the clash they record),
                // the side whose history had seen the other's bytes and replaced them, else the
                // greater digest, the same in every merge (`ClashHistory`, `JSONMerge.clash`).
                let bases = Set(tree.mergeBases(winner.rev, loser.rev).compactMap { tree.nodes[$0]?.object })
                let (winnerKept, loserKept) = (bases.contains(winnerObject), bases.contains(loserObject))
                let history = ClashHistory(store: self, doc: doc, tree: tree, winner: winner.rev, loser: loser.rev)
                let loserStands = winnerKept != loserKept ? winnerKept
                    : !(history.decide([], ClashHistory.fileValue(winnerObject), ClashHistory.fileValue(loserObject))
                        ?? (winnerObject.hex > loserObject.hex))
                if loserStands {
                    body = (loserObject, loser.size)
                    resolution = .merged
                }
            }
            if doc.kind == .json && !alreadyMerged {
                let w = try jsonBody(of: winner, doc: doc)
                let l = try jsonBody(of: loser, doc: doc)
                let (ours, theirs) = Self.sharingClosedTwins(tree, tree.ancestry(of: winner.rev), tree.ancestry(of: loser.rev))
                let base = try mergeBase(doc, tree, ours, theirs)
                let history = ClashHistory(store: self, doc: doc, tree: tree, winner: winner.rev, loser: loser.rev)
                let merged = JSONMerge.merge(base: base, winner: w, loser: l, decide: history.decide)
                if merged != w {
                    let bytes = merged.canonicalBytes
                    body = (try objects.writeBody(bytes), bytes.count)
                    resolution = .merged
                }
            }
            var mergeRev = tree.merge(of: loser.rev, below: winner.rev) ?? winner.rev
            if alreadyMerged, let merge = tree.nodes[mergeRev], let parent = merge.parent.flatMap({ tree.nodes[$0] }),
               merge.object != parent.object {
                // The peer that sent the merge took in values of the loser: say so here too.
                resolution = .merged
            }
            let record = ConflictRecord(winner: winner.rev, loser: loser.rev, resolution: resolution)
            var entries: [LogEntry] = []
            let time = Timestamp.now()
            if !alreadyMerged {
                mergeRev = RevisionID.compute(parent: winner.rev, deleted: false, body: body.object, merged: loser.rev)
                entries.append(LogEntry(seq: nextSeq, doc: doc, rev: mergeRev, parent: winner.rev, deleted: false, kind: doc.kind,
                                        object: body.object, size: body.size, origin: "local", time: time, conflict: record,
                                        merged: loser.rev, author: author))
            }
            let closing = RevisionID.closing(loser.rev, mergedInto: mergeRev)
            entries.append(LogEntry(seq: nextSeq + entries.count, doc: doc, rev: closing, parent: loser.rev, deleted: true,
                                    kind: doc.kind, object: nil, size: 0, origin: "local", time: time, conflict: record, author: author))
            pinFileBase(doc)
            try commit(entries)
            // Closing a branch a peer's merge took in, when neither side was here before this
            // session, ends a conflict made and merged elsewhere: not one of this folder's.
            if !alreadyMerged || wasHereBeforeSession(loser.rev, in: tree) || winner.parent.map({ wasHereBeforeSession($0, in: tree) }) == true {
                conflictsClosed.note(ConflictTally.Closed(doc: doc, winner: winner.rev, loser: loser.rev, resolution: resolution, mergedBy: nil))
            }
            logger.info("resolved conflict", metadata: ["doc": "\(doc)", "winner": "\(winner.rev)", "loser": "\(loser.rev)",
                                                        "resolution": "\(resolution.rawValue)"])
            made += entries
        }
        return made
    }

    /// Closes `loser`, a live branch whose body is the very one `winner` holds, with no merge
    /// (`RevisionID.closingTwin`). Such twins are what peers leave that merged the same edits
    /// in other orders; a merge of them would be one more revision with that body, which the
    /// peers holding other twins would merge again, without end (a ring of agents never
    /// settled: `docs/format.md`, Twins). Not a conflict anyone needs told of: nothing differs.
    private func closeTwin(_ loser: RevisionNode, of winner: RevisionNode, _ doc: DocumentID) throws(StoreError) -> LogEntry {
        let entry = LogEntry(seq: nextSeq, doc: doc, rev: RevisionID.closingTwin(loser.rev), parent: loser.rev, deleted: true,
                             kind: doc.kind, object: nil, size: 0, origin: "local", time: Timestamp.now(), author: author)
        try commit([entry])
        logger.info("closed a branch holding the current revision's body", metadata: ["doc": "\(doc)", "branch": "\(loser.rev)", "current": "\(winner.rev)"])
        return entry
    }

    /// True when a live merge leaf stands beside a deletion someone made (not one closing a branch a
    /// merge or a twin took in): a live branch that only merges what that deletion had seen is
    /// to be closed even with no second live leaf (`closeBranchesADeletionSaw`). A twin of the
    /// branch the deletion was made on, closed elsewhere before the deletion arrived, is such
    /// a branch (simulation seed 7119).
    static func deletionBesideLive(_ tree: RevisionTree) -> Bool {
        let leaves = tree.leafNodes
        // Only a merge can be closed so (`closeBranchesADeletionSaw`): a deletion that lost to
        // an edit stays a leaf for good, and must not make every later revision a resolving.
        guard leaves.count > 1, leaves.contains(where: { !$0.deleted && tree.mergedParent(of: $0.rev) != nil }) else { return false }
        return leaves.contains { $0.deleted && !tree.closesMergedBranch($0) }
    }

    /// Closes every live branch that only merges what a deletion had already seen: behind its
    /// merges, every edit it carries is in the deletion's history. Two peers that merged the
    /// same edits in different orders, merged once more elsewhere, must not bring back a
    /// document someone deleted after seeing all of them; a live edit the deletion had not
    /// seen still beats it (SPEC §2's winner rule).
    func closeBranchesADeletionSaw(_ doc: DocumentID) throws(StoreError) -> [LogEntry] {
        guard let tree = index[doc], case let leaves = tree.leafNodes, leaves.count > 1 else { return [] }
        // Deletions someone made, not those that close a branch a merge took in.
        let deletions = WinnerRule.ranked(leaves.filter { $0.deleted && !tree.closesMergedBranch($0) }, by: { ($0.rev, $0.deleted) })
        guard !deletions.isEmpty else { return [] }
        var entries: [LogEntry] = []
        for live in WinnerRule.ranked(leaves.filter { !$0.deleted }, by: { ($0.rev, $0.deleted) }) {
            guard let edits = tree.editsBehindMerges(of: live.rev), let newest = edits.map(\.generation).max() else { continue }
            for deletion in deletions where deletion.rev.generation > newest {
                guard edits.isSubset(of: tree.ancestry(of: deletion.rev)) else { continue }
                let closing = RevisionID.compute(parent: live.rev, deleted: true, body: nil)
                entries.append(LogEntry(seq: nextSeq + entries.count, doc: doc, rev: closing, parent: live.rev, deleted: true,
                                        kind: doc.kind, object: nil, size: 0, origin: "local", time: Timestamp.now(),
                                        conflict: ConflictRecord(winner: deletion.rev, loser: live.rev, resolution: .winner), author: author))
                break
            }
        }
        guard !entries.isEmpty else { return [] }
        pinFileBase(doc)
        try commit(entries)
        logger.info("a deletion closed branches that only merged what it had seen", metadata: ["doc": "\(doc)", "closed": "\(entries.count)"])
        return entries
    }

    /// Two ancestries, each with the closed twins (`RevisionID.closingTwin`) the other holds
    /// whose very body it holds too: a twin was closed with no merge naming it, yet its content
    /// is in the survivor's history, so an edit made on top of the closed twin merges against
    /// that content, as it would against the merge the closing stands in for (against an
    /// older common ancestor, its removal of a value the twins set would lose to that value).
    static func sharingClosedTwins(_ tree: RevisionTree, _ a: Set<RevisionID>, _ b: Set<RevisionID>) -> (Set<RevisionID>, Set<RevisionID>) {
        func closedTwins(_ side: Set<RevisionID>) -> [RevisionNode] {
            side.compactMap { rev in tree.nodes[RevisionID.closingTwin(rev)] != nil ? tree.nodes[rev] : nil }.filter(\.hasBody)
        }
        /// `side` with those of `twins` whose body one of its revisions holds.
        func adding(_ twins: [RevisionNode], to side: Set<RevisionID>) -> Set<RevisionID> {
            guard !twins.isEmpty else { return side }
            let held = Set(side.compactMap { tree.nodes[$0]?.object })
            return side.union(twins.filter { held.contains($0.object!) }.map(\.rev))
        }
        return (adding(closedTwins(b), to: a), adding(closedTwins(a), to: b))
    }

    /// What two branches, given their ancestries, are merged against: their merge base's
    /// body; when they have several (after criss-cross merges), those merged with each other
    /// first against their own merge base, recursively, as git's recursive strategy does,
    /// keeping as alternatives the places they changed differently (`MergeBase`).
    func mergeBase(_ doc: DocumentID, _ tree: RevisionTree, _ a: Set<RevisionID>, _ b: Set<RevisionID>,
                   depth: Int = 0) throws(StoreError) -> MergeBase {
        let bases = tree.maximal(a.intersection(b))
        func body(_ rev: RevisionID) throws(StoreError) -> MergeBase {
            guard let node = tree.nodes[rev], node.hasBody, !node.deleted else { return .none }
            return .exactly(try jsonBody(of: node, doc: doc))
        }
        guard let first = bases.first else { return .none }
        var merged = try body(first)
        guard bases.count > 1, depth < 8 else { return merged }
        var ancestry = tree.ancestry(of: first)
        for next in bases.dropFirst() {
            let nextAncestry = tree.ancestry(of: next)
            let ancestor = try mergeBase(doc, tree, ancestry, nextAncestry, depth: depth + 1)
            merged = MergeBase.combine(ancestor: ancestor, merged, try body(next))
            ancestry.formUnion(nextAncestry)
        }
        return merged
    }

    /// Resolves the conflicts left open by `insertRemote(resolve: false)` (a peer's pass has
    /// ended) and writes each document's file: first any unrecorded save, as a child of what
    /// the file held, then the merge. Returns every entry recorded. `docs`: only those
    /// documents' (a Couchbase Lite client's proposals are in; other peers' passes go on).
    public func resolvePendingConflicts(of docs: Set<DocumentID>? = nil) throws(StoreError) -> [LogEntry] {
        var made: [LogEntry] = []
        let chosen = docs.map { unresolved.intersection($0) } ?? unresolved
        for doc in chosen.sorted() {
            let whenMissing: MissingFile = deletionsAwaitWatcher ? .wait : .recordDeletion
            let (outcome, fingerprint) = try ingestBeforeWriting(doc, whenMissing: whenMissing)
            if case .recorded(let e) = outcome { made.append(e) }
            if case .deleted(let e?) = outcome { made.append(e) }
            made += try resolveConflicts(doc)
            switch outcome {
            case .notRegular: try holdBackOrWrite(doc)
            case .unreadable, .changing, .missing: continue
            default: _ = try materialize(doc, expecting: fingerprint, knownBody: nil, preparedFile: nil, lookedJustNow: fingerprint == nil)
            }
        }
        unresolved.subtract(chosen)
        if objects.batch == nil { try saveFileBasesIfChanged() }
        return made
    }
}
