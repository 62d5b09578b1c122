/// Deltas between two JSON values: what delta sync sends instead of a whole document when the
/// receiver already has an older revision of it (docs/protocol.md, "Delta format").
///
/// A delta is itself JSON, read against a base value:
/// - an object: the base must be an object; each key says what happens to that property —
///   `[]` removes it, anything else is the delta of its value (a missing property takes a
///   replacement form);
/// - `[v]`: the value becomes `v`;
/// - `[n, {"i": d, …}]`: the base must be an array; it becomes `n` long (cut or extended) and
///   element `i` becomes its base element with delta `d` (new elements take `[v]` or a scalar);
/// - a string, number, boolean or null: the value becomes that scalar.
///
/// Couchbase Lite's JSON deltas have the same object, `[]` and `[v]` forms; the array form is
/// ferry's, so that a one-field edit of one item in a long list stays a few bytes.
public enum JSONDelta {
    /// Why a delta cannot be applied to a base.
    public struct ApplyError: Error, Sendable, CustomStringConvertible {
        /// One sentence.
        public let description: String
    }

    /// The delta that turns `base` into `target` (for two equal values: an empty object when
    /// both are objects).
    public static func make(from base: JSONValue, to target: JSONValue) -> JSONValue {
        switch (base, target) {
        case let (.object(old), .object(new)):
            var delta: [String: JSONValue] = [:]
            for key in old.keys where new[key] == nil { delta[key] = .array([]) }
            for (key, value) in new {
                guard let previous = old[key] else {
                    delta[key] = replacement(value)
                    continue
                }
                if previous != value { delta[key] = make(from: previous, to: value) }
            }
            return .object(delta)
        case let (.array(old), .array(new)):
            var patches: [String: JSONValue] = [:]
            for (i, value) in new.enumerated() {
                if i >= old.count {
                    patches[String(i)] = replacement(value)
                } else if old[i] != value {
                    patches[String(i)] = make(from: old[i], to: value)
                }
            }
            let patch = JSONValue.array([.int(new.count), .object(patches)])
            // An insertion near the front changes every later element: then the whole array is
            // the shorter way to say it.
            let whole = JSONValue.array([target])
            return patch.canonicalBytes.count < whole.canonicalBytes.count ? patch : whole
        default:
            return replacement(target)
        }
    }

    /// The value `delta` makes of `base`.
    public static func apply(_ delta: JSONValue, to base: JSONValue) throws(ApplyError) -> JSONValue {
        switch delta {
        case .object(let changes):
            guard case .object(var object) = base else { throw ApplyError(description: "a delta for an object applied to a non-object") }
            for (key, change) in changes {
                if case .array(let a) = change, a.isEmpty {
                    object[key] = nil
                } else if let current = object[key] {
                    object[key] = try apply(change, to: current)
                } else {
                    object[key] = try replaced(change, what: "new property \(String(reflecting: key))")
                }
            }
            return .object(object)
        case .array(let form):
            switch form.count {
            case 1: return form[0]
            case 2: return try applyToArray(form, base)
            default: throw ApplyError(description: "a delta array of \(form.count) elements (expected [v] or [n, {…}])")
            }
        default:
            return delta
        }
    }

    /// `[n, {"i": d}]` against an array.
    private static func applyToArray(_ form: [JSONValue], _ base: JSONValue) throws(ApplyError) -> JSONValue {
        guard case .array(let old) = base else { throw ApplyError(description: "a delta for an array applied to a non-array") }
        guard let length = form[0].intValue, length >= 0, case .object(let patches) = form[1] else {
            throw ApplyError(description: "an array delta needs a length and an object of element deltas")
        }
        // Every new element must be given, so a hostile length cannot make a huge array.
        guard length <= old.count + patches.count else {
            throw ApplyError(description: "an array delta of length \(length) gives too few elements")
        }
        var new = Array(old.prefix(length))
        var added: [Int: JSONValue] = [:]
        for (key, change) in patches {
            guard let i = Int(key), i >= 0, i < length, String(i) == key else {
                throw ApplyError(description: "array delta index \(String(reflecting: key)) is not in 0..<\(length)")
            }
            if i < new.count {
                new[i] = try apply(change, to: new[i])
            } else {
                added[i] = try replaced(change, what: "new element \(i)")
            }
        }
        for i in new.count..<length {
            guard let value = added[i] else { throw ApplyError(description: "array delta leaves element \(i) undefined") }
            new.append(value)
        }
        return .array(new)
    }

    /// How a delta says "this value, whatever was there".
    private static func replacement(_ value: JSONValue) -> JSONValue {
        switch value {
        case .array, .object: .array([value])
        default: value
        }
    }

    /// The value a replacement form gives (where there is nothing to apply a delta to).
    private static func replaced(_ change: JSONValue, what: String) throws(ApplyError) -> JSONValue {
        switch change {
        case .array(let a) where a.count == 1: return a[0]
        case .array, .object: throw ApplyError(description: "\(what) needs a value ([v] or a scalar), not a delta")
        default: return change
        }
    }
}
