/// One step of a path into a JSON value: an object member or an array element.
public enum JSONPathComponent: Hashable, Sendable {
    /// An object member, by key.
    case key(String)
    /// An array element, by index (0-based).
    case index(Int)
}

/// One difference between two JSON values, at one path.
public struct JSONChange: Sendable, Equatable {
    /// What happened at `path`.
    public enum Operation: String, Sendable {
        /// A value replaced by another (of the same or another type).
        case changed
        /// A member or element only the newer value has.
        case added
        /// A member or element only the older value has.
        case removed
    }

    /// Where, from the root.
    public var path: [JSONPathComponent]
    /// What happened.
    public var operation: Operation
    /// The older value (nil when added).
    public var old: JSONValue?
    /// The newer value (nil when removed).
    public var new: JSONValue?

    /// A change.
    public init(path: [JSONPathComponent], operation: Operation, old: JSONValue?, new: JSONValue?) {
        self.path = path
        self.operation = operation
        self.old = old
        self.new = new
    }

    /// `path: old → new`, `path: + value` or `path: - value`, values excerpted (`JSONDiff.excerpt`).
    public var line: String {
        let at = JSONDiff.render(path)
        switch operation {
        case .changed: return "\(at): \(JSONDiff.excerpt(old ?? .null)) → \(JSONDiff.excerpt(new ?? .null))"
        case .added: return "\(at): + \(JSONDiff.excerpt(new ?? .null))"
        case .removed: return "\(at): - \(JSONDiff.excerpt(old ?? .null))"
        }
    }

    /// `{"path", "op", "old", "new"}` with whole values (not excerpts): scripts want them exact.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["path": .string(JSONDiff.render(path)), "op": .string(operation.rawValue)]
        if let old { o["old"] = old }
        if let new { o["new"] = new }
        return .object(o)
    }
}

/// A JSON-aware diff: what changed between two bodies, one entry per changed value, in a
/// fixed order (object members by key as canonical JSON sorts them, array elements by index),
/// so that the same two bodies always print the same lines on every machine.
///
/// Arrays are compared index by index, with trailing additions or removals. That is blunt for
/// an insertion at the front, but it is predictable and the paths it prints (`list[3]`) are
/// the ones `jq` reads back; a subsequence match would name elements by positions that exist
/// in neither body.
public enum JSONDiff {
    /// The changes that turn `old` into `new`; empty when they are equal.
    public static func changes(from old: JSONValue, to new: JSONValue) -> [JSONChange] {
        var out: [JSONChange] = []
        var path: [JSONPathComponent] = []
        walk(old, new, &path, &out)
        return out
    }

    private static func walk(_ old: JSONValue, _ new: JSONValue, _ path: inout [JSONPathComponent], _ out: inout [JSONChange]) {
        switch (old, new) {
        case let (.object(a), .object(b)):
            let keys = JSONWriter.sortedKeys(a.merging(b) { x, _ in x })
            for key in keys {
                path.append(.key(key))
                switch (a[key], b[key]) {
                case let (x?, y?): walk(x, y, &path, &out)
                case let (x?, nil): out.append(JSONChange(path: path, operation: .removed, old: x, new: nil))
                case let (nil, y?): out.append(JSONChange(path: path, operation: .added, old: nil, new: y))
                case (nil, nil): break
                }
                path.removeLast()
            }
        case let (.array(a), .array(b)):
            for i in 0..<max(a.count, b.count) {
                path.append(.index(i))
                if i < a.count && i < b.count {
                    walk(a[i], b[i], &path, &out)
                } else if i < a.count {
                    out.append(JSONChange(path: path, operation: .removed, old: a[i], new: nil))
                } else {
                    out.append(JSONChange(path: path, operation: .added, old: nil, new: b[i]))
                }
                path.removeLast()
            }
        default:
            if old != new { out.append(JSONChange(path: path, operation: .changed, old: old, new: new)) }
        }
    }

    /// `list[0].value`; a key that is not an identifier as `["a key"]`; the root as `$`.
    /// The notation is jq's and JavaScript's, so a path can be pasted into either.
    public static func render(_ path: [JSONPathComponent]) -> String {
        guard !path.isEmpty else { return "$" }
        var out = ""
        for component in path {
            switch component {
            case .index(let i):
                out += "[\(i)]"
            case .key(let k) where isIdentifier(k):
                if !out.isEmpty { out += "." }
                out += k
            case .key(let k):
                out += "[" + JSONValue.string(k).canonicalString + "]"
            }
        }
        return out
    }

    /// ASCII letters, digits and `_`, not starting with a digit: what needs no brackets in
    /// jq's `.a.b` (which takes nothing wider).
    static func isIdentifier(_ key: String) -> Bool {
        guard let first = key.utf8.first, !(0x30...0x39).contains(first) else { return false }
        return key.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }

    /// The value as compact (canonical) JSON, cut to `limit` characters with `…`, so that one
    /// change stays one line however large the value is.
    public static func excerpt(_ value: JSONValue, limit: Int = 80) -> String {
        let text = value.canonicalString
        guard text.count > limit else { return text }
        return String(text.prefix(max(1, limit - 1))) + "…"
    }
}
