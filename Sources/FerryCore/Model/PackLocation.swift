/// Where a small JSON body is kept: the number of its pack (`.ferry/packs/<number>.jsonl`,
/// JSON Lines of canonical bodies) and the byte offset of its line there; the body's length is
/// its revision's `size`. One word, so that a node holds it without growing by more.
public struct PackLocation: Sendable, Hashable, CustomStringConvertible {
    /// The pack's number (1 or more) in the high 24 bits, the offset in the low 40.
    public let raw: UInt64

    /// The highest pack number.
    public static let maxPack: UInt32 = (1 << 24) - 1
    /// Offsets stay below this (1 TiB; a pack is closed long before, `BodyPacks.limit`).
    public static let offsetLimit: UInt64 = 1 << 40

    /// The location of a line, or nil when the numbers are out of range.
    public init?(pack: UInt32, offset: UInt64) {
        guard pack >= 1, pack <= Self.maxPack, offset < Self.offsetLimit else { return nil }
        raw = UInt64(pack) << 40 | offset
    }

    /// A location from its word; nil for 0 (no pack).
    public init?(raw: UInt64) {
        guard raw >> 40 != 0 else { return nil }
        self.raw = raw
    }

    /// The pack's number.
    public var pack: UInt32 { UInt32(raw >> 40) }
    /// The line's byte offset in the pack.
    public var offset: UInt64 { raw & (Self.offsetLimit - 1) }

    /// `<pack>@<offset>`.
    public var description: String { "\(pack)@\(offset)" }
}
