import FerryCore

/// A revision's fields in 104 bytes, as the index keeps them (a `RevisionNode` is 160): the
/// ids' digests as integers, the generation and the body's size in 40 bits each, two flags in
/// a byte, origin and author as `NameTable` numbers, in this order so that the small fields
/// fill the digests' alignment gaps. Without its parent: a document's only revision has none
/// (its box is 120 bytes, a heap block of 128), and `Branches` links a history's by position.
struct PackedRevision {
    /// Sizes stay below this to be packed (1 TiB); `Branches` keeps a larger one aside.
    static let sizeLimit = 1 << 40

    private let digest: PackedHex
    private var flags: UInt8
    private let generationHigh: UInt8
    private var sizeHigh: UInt8
    /// `RevisionNode.originName`.
    private(set) var originName: NameTable.Name
    /// The body's digest, meaningful when `flags` says there is one.
    private var objectDigest: PackedHex
    /// `RevisionNode.authorName`.
    private(set) var authorName: NameTable.Name
    private let generationLow: UInt32
    private var sizeLow: UInt32
    /// Local sequence of its log line; 0 for history-only nodes.
    var seq: Int
    /// `RevisionNode.pack`'s word.
    var packWord: UInt64

    private static let deletedFlag: UInt8 = 1, objectFlag: UInt8 = 2

    /// True when `size` is packed as it is.
    static func fits(size: Int) -> Bool { size >= 0 && size < sizeLimit }

    /// `node`'s fields; its size is packed only when it `fits` (the caller keeps it otherwise).
    init(_ node: RevisionNode) {
        // Ids read from text are checked against it, and a store records none beyond it.
        precondition(node.rev.generation < RevisionID.generationLimit, "a revision's generation takes 40 bits")
        let generation = UInt64(node.rev.generation)
        let size = Self.fits(size: node.size) ? UInt64(node.size) : 0
        digest = node.rev.packed
        flags = (node.deleted ? Self.deletedFlag : 0) | (node.object != nil ? Self.objectFlag : 0)
        generationHigh = UInt8(truncatingIfNeeded: generation >> 32)
        sizeHigh = UInt8(truncatingIfNeeded: size >> 32)
        originName = node.originName
        objectDigest = node.object?.packed ?? node.rev.packed
        authorName = node.authorName
        generationLow = UInt32(truncatingIfNeeded: generation)
        sizeLow = UInt32(truncatingIfNeeded: size)
        seq = node.seq
        packWord = node.packWord
    }

    /// The revision.
    var rev: RevisionID {
        RevisionID(generation: Int(generationHigh) << 32 | Int(generationLow), packed: digest)
    }

    /// True for a deletion.
    var deleted: Bool { flags & Self.deletedFlag != 0 }

    /// The packed size (see `fits`).
    var size: Int { Int(sizeHigh) << 32 | Int(sizeLow) }

    /// The body's object.
    var object: BlobDigest? {
        get { flags & Self.objectFlag != 0 ? BlobDigest(packed: objectDigest) : nil }
        set {
            if let newValue {
                objectDigest = newValue.packed
                flags |= Self.objectFlag
            } else {
                flags &= ~Self.objectFlag
            }
        }
    }

    /// The node it stands for, with this parent and size.
    func node(parent: RevisionID?, size: Int? = nil) -> RevisionNode {
        RevisionNode(rev: rev, parent: parent, deleted: deleted, object: object, size: size ?? self.size, seq: seq,
                     originName: originName, authorName: authorName, packWord: packWord)
    }
}
