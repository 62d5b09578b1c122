/// One line of `revs.log`: one revision of one document.
public struct LogEntry: Sendable, Equatable {
    /// Local sequence number, strictly increasing along the log.
    public var seq: Int
    /// The document.
    public var doc: DocumentID
    /// This revision.
    public var rev: RevisionID
    /// The parent revision; nil for a first revision.
    public var parent: RevisionID?
    /// A merge's second parent: the losing leaf whose changes it took in (nil otherwise).
    /// Merge bases are found over parent and merged edges both.
    public var merged: RevisionID?
    /// True for a deletion (tombstone).
    public var deleted: Bool
    /// JSON or file document.
    public var kind: DocumentKind
    /// The body's object; nil for a deletion.
    public var object: BlobDigest?
    /// The body's size in bytes (0 for a deletion).
    public var size: Int
    /// Where a small JSON body is kept (`"pack"` and `"offset"`), when it is in a pack rather
    /// than in a file of its own under `objects/`. Local, like `seq`: peers keep their own.
    public var pack: PackLocation? = nil
    /// `"local"` (`localOrigin`) or the id of the peer it came from.
    public var origin: String
    /// The origin of revisions made in this folder.
    public static let localOrigin = "local"
    /// Who made the edit: the folder name and host where it was made (`inventory@laptop`),
    /// carried along by every peer; nil when unknown (older logs, Couchbase Lite peers).
    public var author: String?
    /// When it was recorded here, RFC 3339 UTC.
    public var time: String
    /// Older ancestors (grandparent first) this folder did not know before, carried with a
    /// remote revision so that the tree keeps the full history even without their bodies.
    public var ancestors: [RevisionID]
    /// Set on the two revisions that record a conflict resolution.
    public var conflict: ConflictRecord?
    /// True when `compact` dropped this (non-leaf) revision's body; `object` is then nil.
    public var compacted: Bool = false

    /// A log entry.
    public init(seq: Int, doc: DocumentID, rev: RevisionID, parent: RevisionID?, deleted: Bool, kind: DocumentKind,
                object: BlobDigest?, size: Int, origin: String, time: String, ancestors: [RevisionID] = [],
                conflict: ConflictRecord? = nil, merged: RevisionID? = nil, author: String? = nil) {
        self.seq = seq
        self.doc = doc
        self.rev = rev
        self.parent = parent
        self.merged = merged
        self.deleted = deleted
        self.kind = kind
        self.object = object
        self.size = size
        self.origin = origin
        self.time = time
        self.ancestors = ancestors
        self.conflict = conflict
        self.author = author
    }

    /// Longest author name kept, in bytes.
    public static let maxAuthorBytes = 128

    /// Why `text` cannot be an author name, or nil: bounded, no control characters (it is
    /// printed in `ferry log`'s columns).
    public static func authorProblem(_ text: String) -> String? {
        if text.isEmpty || text.utf8.count > maxAuthorBytes { return "an author name has 1 to \(maxAuthorBytes) bytes" }
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { return "an author name has no control characters" }
        return nil
    }
}

/// How a conflict between two open branches was closed.
public struct ConflictRecord: Sendable, Equatable, Hashable {
    /// The leaf that won by the winner rule.
    public var winner: RevisionID
    /// The leaf that lost; its branch is closed by a deletion.
    public var loser: RevisionID
    /// What was done.
    public var resolution: Resolution

    /// A record.
    public init(winner: RevisionID, loser: RevisionID, resolution: Resolution) {
        self.winner = winner
        self.loser = loser
        self.resolution = resolution
    }

    /// The ways a conflict is closed.
    public enum Resolution: String, Sendable, Hashable {
        /// JSON bodies were merged three-way into a new revision on the winning branch.
        case merged
        /// The winner's body stands unchanged (file documents, a deletion, or nothing to merge).
        case winner
    }
}

extension LogEntry {
    /// Sequences stay below this (2^53): the integers `jq`, and any JSON reader that reads
    /// numbers as doubles, reads exactly. A line beyond it is damaged; a store records none.
    public static let seqLimit = 1 << 53

    /// Why a revision with these parts cannot be a line of the log, or nil. The one rule
    /// every revision meets, whoever made it: the log reader applies it to every line, and a
    /// peer's revision is refused with it before it is acknowledged, so that what was
    /// accepted is readable for ever.
    public static func shapeProblem(rev: RevisionID, parent: RevisionID?, merged: RevisionID?, ancestors: [RevisionID],
                                    deleted: Bool, hasObject: Bool) -> String? {
        if rev.generation != (parent?.generation ?? 0) + 1 {
            return parent == nil ? "a revision of generation \(rev.generation) needs its parent" : "generation does not follow its parent"
        }
        if let merged, merged.generation >= rev.generation || parent == nil { return "a merged revision must be older than the merge" }
        var expected = (parent?.generation ?? 0) - 1
        for ancestor in ancestors {
            if ancestor.generation != expected { return "its ancestors do not descend one generation at a time" }
            expected -= 1
        }
        if deleted && hasObject { return "a deletion carries no body" }
        if !deleted && !hasObject { return "a live revision needs an object" }
        return nil
    }

    /// This entry's `shapeProblem`.
    public var shapeProblem: String? {
        Self.shapeProblem(rev: rev, parent: parent, merged: merged, ancestors: ancestors, deleted: deleted, hasObject: object != nil || compacted)
    }
}

/// A malformed log line.
public struct LogEntryDecodingError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let message: String
    /// The message.
    public var description: String { message }
}

extension LogEntry {
    /// The JSON line (without the newline), keys in a fixed, readable order.
    public func encodedLine() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(300)
        func key(_ k: StaticString, first: Bool = false) {
            if !first { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: k.utf8Start, count: k.utf8CodeUnitCount))
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        func string(_ s: String) { JSONWriter.writeString(s, into: &out) }
        out.append(UInt8(ascii: "{"))
        key("seq", first: true); out += Array(String(seq).utf8)
        key("doc"); string(doc.rawValue)
        key("rev"); string(rev.description)
        key("parent"); if let parent { string(parent.description) } else { out += Array("null".utf8) }
        if let merged { key("merged"); string(merged.description) }
        key("deleted"); out += Array((deleted ? "true" : "false").utf8)
        key("kind"); string(kind.rawValue)
        if let object { key("object"); string(object.description) }
        key("size"); out += Array(String(size).utf8)
        if let pack {
            key("pack"); out += Array(String(pack.pack).utf8)
            key("offset"); out += Array(String(pack.offset).utf8)
        }
        key("origin"); string(origin)
        if let author { key("author"); string(author) }
        key("time"); string(time)
        if !ancestors.isEmpty {
            key("ancestors")
            out.append(UInt8(ascii: "["))
            for (i, a) in ancestors.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                string(a.description)
            }
            out.append(UInt8(ascii: "]"))
        }
        if compacted { key("compacted"); out += Array("true".utf8) }
        if let conflict {
            key("conflict")
            out.append(UInt8(ascii: "{"))
            key("winner", first: true); string(conflict.winner.description)
            key("loser"); string(conflict.loser.description)
            key("resolution"); string(conflict.resolution.rawValue)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Decodes and validates a parsed log line.
    public init(json: JSONValue) throws(LogEntryDecodingError) {
        guard case let .object(o) = json else { throw LogEntryDecodingError(message: "log line is not an object") }
        var f = RawFields()
        f.seq = o["seq"]?.intValue
        f.doc = o["doc"]?.stringValue
        f.rev = o["rev"]?.stringValue
        switch o["parent"] {
        case .string(let p)?: f.parent = p
        case .null?, nil: break
        default: f.parentInvalid = true
        }
        if let m = o["merged"] {
            guard let t = m.stringValue else { throw LogEntryDecodingError(message: "invalid merged") }
            f.merged = t
        }
        f.deleted = o["deleted"]?.boolValue
        f.kind = o["kind"]?.stringValue
        f.object = o["object"]?.stringValue
        f.size = o["size"]?.intValue
        if o["pack"] != nil || o["offset"] != nil {
            guard let pack = o["pack"]?.intValue, let offset = o["offset"]?.intValue else { throw LogEntryDecodingError(message: "invalid pack") }
            f.pack = (pack, offset)
        }
        f.origin = o["origin"]?.stringValue
        if let a = o["author"] {
            guard let t = a.stringValue else { throw LogEntryDecodingError(message: "invalid author") }
            f.author = t
        }
        f.time = o["time"]?.stringValue
        f.compacted = o["compacted"]?.boolValue ?? false
        if let a = o["ancestors"] {
            f.ancestors = []
            for x in a.arrayValue ?? [.null] {
                guard let t = x.stringValue else { throw LogEntryDecodingError(message: "invalid ancestors") }
                f.ancestors.append(t)
            }
        }
        if let c = o["conflict"] {
            guard let w = c["winner"]?.stringValue, let l = c["loser"]?.stringValue, let r = c["resolution"]?.stringValue else {
                throw LogEntryDecodingError(message: "invalid conflict")
            }
            f.conflict = (w, l, r)
        }
        try self.init(f)
    }

    /// A log line's fields as text, before validation; filled by either decoder.
    struct RawFields {
        var seq: Int?
        var doc: String?
        var rev: String?
        var parent: String?
        var parentInvalid = false
        var merged: String?
        var deleted: Bool?
        var kind: String?
        var object: String?
        var size: Int?
        var pack: (Int, Int)?
        var origin: String?
        var author: String?
        var time: String?
        var compacted = false
        var ancestors: [String] = []
        var conflict: (String, String, String)?
    }

    /// Validates raw fields: ids, digests, and that the generation follows the parent.
    init(_ f: RawFields) throws(LogEntryDecodingError) {
        func fail(_ m: String) -> LogEntryDecodingError { LogEntryDecodingError(message: m) }
        guard let seq = f.seq, seq > 0, seq < LogEntry.seqLimit else { throw fail("missing or invalid seq") }
        guard let docText = f.doc else { throw fail("missing doc") }
        guard let revText = f.rev else { throw fail("missing rev") }
        guard let deleted = f.deleted else { throw fail("missing deleted") }
        guard let kindText = f.kind, let kind = DocumentKind(rawValue: kindText) else { throw fail("missing or invalid kind") }
        if f.parentInvalid { throw fail("invalid parent") }
        do {
            self.doc = try DocumentID(docText)
            self.rev = try RevisionID(revText)
            self.parent = try f.parent.map { t throws in try RevisionID(t) }
            self.merged = try f.merged.map { t throws in try RevisionID(t) }
            self.object = try f.object.map { t throws in try BlobDigest(t) }
            self.ancestors = try f.ancestors.map { t throws in try RevisionID(t) }
            if let (w, l, r) = f.conflict {
                guard let res = ConflictRecord.Resolution(rawValue: r) else { throw fail("invalid conflict resolution") }
                self.conflict = ConflictRecord(winner: try RevisionID(w), loser: try RevisionID(l), resolution: res)
            } else {
                self.conflict = nil
            }
        } catch let e as LogEntryDecodingError {
            throw e
        } catch {
            throw fail("\(error)")
        }
        self.compacted = f.compacted
        self.seq = seq
        self.deleted = deleted
        self.kind = kind
        self.size = f.size ?? 0
        if let (number, offset) = f.pack {
            guard number > 0, number <= Int(PackLocation.maxPack), offset >= 0,
                  let location = PackLocation(pack: UInt32(number), offset: UInt64(offset)) else { throw fail("invalid pack") }
            guard object != nil, kind == .json else { throw fail("only a JSON body is packed") }
            self.pack = location
        }
        self.origin = f.origin ?? "local"
        if let author = f.author, LogEntry.authorProblem(author) != nil { throw fail("invalid author") }
        self.author = f.author
        self.time = f.time ?? ""
        if let why = LogEntry.shapeProblem(rev: rev, parent: parent, merged: merged, ancestors: ancestors, deleted: deleted,
                                           hasObject: object != nil || compacted) {
            throw fail(why)
        }
    }
}
