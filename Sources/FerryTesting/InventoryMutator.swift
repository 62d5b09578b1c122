import FerryCore

/// Random inventory documents and random edits of them, the shape users actually sync
/// (`{"type": "list", "list": [{"key": …, "value": …}, …]}` plus loose members).
public struct InventoryMutator {
    /// The randomness.
    public var rng: SeededGenerator

    /// A mutator seeded with `seed`.
    public init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

    /// A random inventory list of `count` items.
    public mutating func makeList(count: Int) -> JSONValue {
        let items: [JSONValue] = (0..<count).map { i in
            ["key": .string("item-\(i)"), "value": .int(Int.random(in: 0...99, using: &rng))]
        }
        return ["type": "list", "name": "Inventory", "list": .array(items)]
    }

    /// One to three random edits: change a value, insert an item, remove an item, add or
    /// change or remove a top-level member, add a nested member to an item.
    public mutating func edit(_ doc: JSONValue) -> JSONValue {
        guard case .object(var o) = doc else { return doc }
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            var items = o["list"]?.arrayValue ?? []
            switch Int.random(in: 0..<7, using: &rng) {
            case 0 where !items.isEmpty, 1 where !items.isEmpty:
                let i = Int.random(in: 0..<items.count, using: &rng)
                if case .object(var item) = items[i] {
                    item["value"] = .int(Int.random(in: 100...999, using: &rng))
                    items[i] = .object(item)
                }
            case 2:
                let i = Int.random(in: 0...items.count, using: &rng)
                items.insert(["key": .string("new-\(rng.next() % 10_000)"), "value": .int(1)], at: i)
            case 3 where !items.isEmpty:
                items.remove(at: Int.random(in: 0..<items.count, using: &rng))
            case 4:
                o["note-\(rng.next() % 5)"] = .string("n\(rng.next() % 1000)")
            case 5 where !items.isEmpty:
                let i = Int.random(in: 0..<items.count, using: &rng)
                if case .object(var item) = items[i] {
                    item["tag-\(rng.next() % 3)"] = .bool(rng.next() % 2 == 0)
                    items[i] = .object(item)
                }
            default:
                o["name"] = .string("Inventory \(rng.next() % 100)")
            }
            o["list"] = .array(items)
        }
        return .object(o)
    }
}
