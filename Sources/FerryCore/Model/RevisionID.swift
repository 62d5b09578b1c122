import Crypto

/// A revision id `<generation>-<digest>`; the digest is a pure function of the parent, the
/// deleted flag and the body, so the same edit made on two machines gets the same id.
public struct RevisionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// 1 for a first revision, parent's generation + 1 otherwise.
    public let generation: Int
    /// The digest, packed (see `PackedHex`).
    public let packed: PackedHex

    /// 32 lowercase hex digits (the first 128 bits of a SHA-256) for ids ferry makes.
    public var digest: String { packed.text }

    /// Why a string is not a revision id.
    public struct InvalidError: Error, Sendable, CustomStringConvertible {
        /// The rejected text.
        public let text: String
        /// "invalid revision id …".
        public var description: String { "invalid revision id \(String(reflecting: text)): expected <generation>-<hex>" }
    }

    /// Parses `N-hex` (N ≥ 1; 1 to 64 lowercase hex digits, so that ids of other
    /// implementations with other digest lengths are still accepted).
    public init(_ text: String) throws(InvalidError) {
        let utf8 = text.utf8
        guard let dash = utf8.firstIndex(of: UInt8(ascii: "-")),
              utf8[utf8.startIndex..<dash].allSatisfy({ (0x30...0x39).contains($0) }),  // no sign, no spaces: "+1" is not a generation
              let gen = Int(Substring(text[..<dash])), gen >= 1, gen < Self.generationLimit
        else { throw InvalidError(text: text) }
        guard let packed = PackedHex(text[text.index(after: dash)...].utf8) else { throw InvalidError(text: text) }
        self.generation = gen
        self.packed = packed
    }

    /// Generations stay below this (40 bits: an index packs them so): an id read from text
    /// beyond it is invalid, and a store refuses to record a revision beyond it.
    public static let generationLimit = 1 << 40

    /// The highest generation a peer's revision may have: far below what an id can hold
    /// (2^40 − 1), so that local edits and merges on top of it always make ids ferry reads back.
    public static let maxReceivedGeneration = 1 << 32

    /// An id from its parts (as an index that keeps them apart gives them back).
    public init(generation: Int, packed: PackedHex) {
        self.generation = generation
        self.packed = packed
    }

    /// The id of the revision with this parent, deleted flag and body digest; a merge also
    /// names the leaf it merged (`merged`, its second parent).
    ///
    /// Hashed text: `ferry-rev-1\0<parent or empty>\0<0|1>\0<body digest hex or empty>`, and
    /// for a merge `\0<merged rev id>` after it (so ids of plain revisions are unchanged).
    public static func compute(parent: RevisionID?, deleted: Bool, body: BlobDigest?, merged: RevisionID? = nil) -> RevisionID {
        var sha = SHA256()
        var text = "ferry-rev-1\u{0}"
        text += parent?.description ?? ""
        text += "\u{0}"
        text += deleted ? "1" : "0"
        text += "\u{0}"
        text += body?.hex ?? ""  // the digest's hex text, not its packing
        if let merged { text += "\u{0}" + merged.description }
        sha.update(data: Array(text.utf8))
        return RevisionID(generation: (parent?.generation ?? 0) + 1, packed: PackedHex(bytes: sha.finalize(), limit: 16))
    }

    /// The deletion that closes `loser`'s branch once `merge` took it in (a conflict's
    /// resolution). It names the merge, so it is never the same revision as a deletion someone
    /// made of `loser` (that one stands for the document; this one only for the branch).
    ///
    /// Hashed text: `ferry-rev-1\0<loser>\01\0\0closed-by <merge>`.
    public static func closing(_ loser: RevisionID, mergedInto merge: RevisionID) -> RevisionID {
        closingDeletion(of: loser, why: "closed-by \(merge.description)")
    }

    /// The deletion that closes `loser`'s branch because another live branch holds the very
    /// same body (twins: merges of the same edits made in other orders by other peers). No
    /// merge is made, and the id names none, so every peer that closes `loser` so makes the
    /// same revision.
    ///
    /// Hashed text: `ferry-rev-1\0<loser>\01\0\0closed-as-twin`.
    public static func closingTwin(_ loser: RevisionID) -> RevisionID {
        closingDeletion(of: loser, why: "closed-as-twin")
    }

    /// A deletion of `loser` that closes its branch, `why` said where a body's digest would be.
    private static func closingDeletion(of loser: RevisionID, why: String) -> RevisionID {
        var sha = SHA256()
        sha.update(data: Array("ferry-rev-1\u{0}\(loser.description)\u{0}1\u{0}\u{0}\(why)".utf8))
        return RevisionID(generation: loser.generation + 1, packed: PackedHex(bytes: sha.finalize(), limit: 16))
    }

    /// `generation-digest`.
    public var description: String { "\(generation)-\(digest)" }

    /// Appends `description`'s bytes to `out` (no String made).
    public func appendText(to out: inout [UInt8]) {
        out += String(generation).utf8
        out.append(UInt8(ascii: "-"))
        packed.appendText(to: &out)
    }


    /// Higher generation first decides; then the digest's text. ("The greater rev id".)
    public static func < (lhs: RevisionID, rhs: RevisionID) -> Bool {
        if lhs.generation != rhs.generation { return lhs.generation < rhs.generation }
        return lhs.packed < rhs.packed
    }
}
