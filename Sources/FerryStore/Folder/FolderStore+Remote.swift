import FerryCore

/// A revision received from a peer, its body (if any) already stored in `objects`.
public struct IncomingRevision: Sendable, Equatable {
    /// The document.
    public var doc: DocumentID
    /// The revision.
    public var rev: RevisionID
    /// Its ancestors, parent first (as far as the sender knows or chose to send).
    public var history: [RevisionID]
    /// True for a deletion.
    public var deleted: Bool
    /// The body's object, already written and verified (nil for deletions).
    public var object: BlobDigest?
    /// Body size.
    public var size: Int
    /// The peer it came from.
    public var origin: String

    /// An incoming revision.
    public init(doc: DocumentID, rev: RevisionID, history: [RevisionID], deleted: Bool, object: BlobDigest?, size: Int, origin: String) {
        self.doc = doc
        self.rev = rev
        self.history = history
        self.deleted = deleted
        self.object = object
        self.size = size
        self.origin = origin
    }
}

extension FolderStore {
    /// Adds a peer's revision (with the history it came with) and closes any conflict it
    /// opens, per SPEC §2. Returns every entry recorded: the revision itself, and the merged
    /// revision and/or the deletion that close the conflict. A revision already known is a no-op.
    /// `parsedBody`: as in `applyRemote`.
    @discardableResult
    /// `bodyChecked`: the caller made sure the body is a JSON object whose blobs are here and
    /// whose canonical bytes are the object (`SharedStore.prepare` does).
    public func insertRemote(_ incoming: IncomingRevision, parsedBody: JSONValue? = nil, bodyChecked: Bool = false) throws(StoreError) -> [LogEntry] {
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
                             origin: incoming.origin, time: Timestamp.now(), ancestors: ancestors)
        try commit([entry])
        return [entry] + (try resolveConflicts(doc))
    }

    /// Why a peer's revision is refused, as one sentence naming it.
    static func rejection(_ r: IncomingRevision, _ why: String) -> StoreError {
        StoreError(.invalidInput, "rejected \(r.doc)@\(r.rev) from \(r.origin): \(why)")
    }

    private func validate(_ r: IncomingRevision, parsedBody: JSONValue?, bodyChecked: Bool) throws(StoreError) {
        func reject(_ why: String) -> StoreError { Self.rejection(r, why) }
        var expected = r.rev.generation - 1
        for h in r.history {
            if h.generation != expected { throw reject("its history does not descend one generation at a time") }
            expected -= 1
        }
        if r.history.isEmpty && r.rev.generation != 1 && index[r.doc]?.contains(r.rev) != true {
            // A revision whose ancestry is unknown is still kept, as a root of its own branch.
            logger.debug("revision arrived without history", metadata: ["doc": "\(r.doc)", "rev": "\(r.rev)"])
        }
        if r.deleted {
            if r.object != nil { throw reject("a deletion carries no body") }
            return
        }
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
            if let why = Self.jsonBodyRefusal(value, isStored: objects.contains) { throw reject(why) }
        }
    }

    /// Why `value` cannot be the body of a `.json` document, or nil: it must be a JSON object,
    /// and every blob it references must already be stored (`isStored`).
    static func jsonBodyRefusal(_ value: JSONValue, isStored: (BlobDigest) -> Bool) -> String? {
        guard case .object = value else { return "the body of a .json document must be a JSON object" }
        for ref in (try? value.blobReferences()) ?? [] where !isStored(ref.digest) {
            return "it references blob \(ref.digest), which has not arrived"
        }
        return nil
    }

    /// Closes every open conflict of `doc` (more than one live leaf), pairwise, best leaves
    /// first: JSON bodies are merged three-way into a new revision on the winning branch, and
    /// the losing branch is closed by a deletion. Every step is a pure function of the tree and
    /// the bodies, so every peer computes the same revisions.
    func resolveConflicts(_ doc: DocumentID) throws(StoreError) -> [LogEntry] {
        var made: [LogEntry] = []
        for _ in 0..<64 {
            guard let tree = index[doc] else { break }
            let live = tree.liveLeaves
            guard live.count >= 2 else { break }
            let winner = live[0], loser = live[1]
            var resolution = ConflictRecord.Resolution.winner
            var mergedObject: (BlobDigest, Int)?
            if doc.kind == .json {
                guard winner.hasBody, loser.hasBody else {
                    logger.warning("conflict left open: a branch's body is not here", metadata: ["doc": "\(doc)"])
                    break
                }
                let w = try jsonBody(of: winner, doc: doc)
                let l = try jsonBody(of: loser, doc: doc)
                var base: JSONValue?
                if let b = tree.commonAncestor(winner.rev, loser.rev), let node = tree.nodes[b], node.hasBody {
                    base = try jsonBody(of: node, doc: doc)
                }
                let merged = JSONMerge.merge(base: base, winner: w, loser: l)
                if merged != w {
                    let bytes = merged.canonicalBytes
                    mergedObject = (try objects.write(bytes), bytes.count)
                    resolution = .merged
                }
            }
            let record = ConflictRecord(winner: winner.rev, loser: loser.rev, resolution: resolution)
            var entries: [LogEntry] = []
            let time = Timestamp.now()
            if let (object, size) = mergedObject {
                let rev = RevisionID.compute(parent: winner.rev, deleted: false, body: object)
                if !tree.contains(rev) {
                    entries.append(LogEntry(seq: nextSeq, doc: doc, rev: rev, parent: winner.rev, deleted: false, kind: doc.kind,
                                            object: object, size: size, origin: "local", time: time, conflict: record))
                }
            }
            let closing = RevisionID.compute(parent: loser.rev, deleted: true, body: nil)
            entries.append(LogEntry(seq: nextSeq + entries.count, doc: doc, rev: closing, parent: loser.rev, deleted: true,
                                    kind: doc.kind, object: nil, size: 0, origin: "local", time: time, conflict: record))
            try commit(entries)
            logger.info("resolved conflict", metadata: ["doc": "\(doc)", "winner": "\(winner.rev)", "loser": "\(loser.rev)",
                                                        "resolution": "\(resolution.rawValue)"])
            made += entries
        }
        return made
    }
}
