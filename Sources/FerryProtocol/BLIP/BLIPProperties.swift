/// One property of a BLIP message: a UTF-8 key and value, neither containing NUL.
public struct BLIPProperty: Sendable, Hashable {
    /// The key (`Profile`, `Error-Code`, `id`, …).
    public var key: String
    /// The value; numbers and booleans travel as decimal or `true`/`false` text.
    public var value: String

    /// A property.
    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
}

/// A message's properties in wire order. Order is kept (a peer may repeat a key; the first
/// counts, as in LiteCore's lookup) so a message re-encodes to the same bytes.
public struct BLIPProperties: Sendable, Hashable, ExpressibleByDictionaryLiteral, Sequence {
    /// The properties, in order.
    public var entries: [BLIPProperty]

    /// Properties from a list.
    public init(_ entries: [BLIPProperty] = []) { self.entries = entries }

    /// Properties written as a literal, in the literal's order.
    public init(dictionaryLiteral elements: (String, String)...) {
        entries = elements.map { BLIPProperty($0.0, $0.1) }
    }

    /// The first value for `key`; setting replaces it in place or appends it, nil removes every one.
    public subscript(key: String) -> String? {
        get { entries.first { $0.key == key }?.value }
        set {
            guard let newValue else { entries.removeAll { $0.key == key }; return }
            if let i = entries.firstIndex(where: { $0.key == key }) { entries[i].value = newValue } else { entries.append(BLIPProperty(key, newValue)) }
        }
    }

    /// True when there are none.
    public var isEmpty: Bool { entries.isEmpty }

    /// Iterates in wire order.
    public func makeIterator() -> IndexingIterator<[BLIPProperty]> { entries.makeIterator() }

    /// The property block without its length prefix: key NUL value NUL, for each property.
    public func encoded(limits: BLIPLimits = BLIPLimits()) throws(BLIPError) -> [UInt8] {
        var out: [UInt8] = []
        for p in entries {
            for s in [p.key, p.value] {
                let utf8 = Array(s.utf8)
                if utf8.contains(0) { throw BLIPError(.unencodable, "a property key or value contains NUL") }
                out += utf8
                out.append(0)
            }
        }
        if out.count > limits.maxPropertiesBytes { throw BLIPError(.tooLarge, "properties of \(out.count) bytes, over \(limits.maxPropertiesBytes)") }
        return out
    }

    /// Parses a property block (without its length prefix). Refuses a non-empty block that does
    /// not end in NUL, an odd number of strings (a key without its value) and invalid UTF-8.
    public static func decode(_ block: ArraySlice<UInt8>, limits: BLIPLimits = BLIPLimits()) throws(BLIPError) -> BLIPProperties {
        if block.count > limits.maxPropertiesBytes { throw BLIPError(.tooLarge, "properties of \(block.count) bytes, over \(limits.maxPropertiesBytes)") }
        guard !block.isEmpty else { return BLIPProperties() }
        guard block.last == 0 else { throw BLIPError(.badProperties, "the property block does not end with NUL") }
        var strings: [String] = []
        var start = block.startIndex
        for i in block.indices where block[i] == 0 {
            guard let s = String(validating: block[start..<i], as: UTF8.self) else {
                throw BLIPError(.badProperties, "a property is not UTF-8")
            }
            strings.append(s)
            start = i + 1
        }
        guard strings.count % 2 == 0 else { throw BLIPError(.badProperties, "a property key without a value (an odd number of strings)") }
        var entries: [BLIPProperty] = []
        entries.reserveCapacity(strings.count / 2)
        for i in stride(from: 0, to: strings.count, by: 2) { entries.append(BLIPProperty(strings[i], strings[i + 1])) }
        return BLIPProperties(entries)
    }
}
