/// A JSON value that keeps every value exactly as written (numbers keep their decimal digits).
///
/// Strings compare by their UTF-8 bytes, not by Swift's canonical equivalence, so that two
/// documents which differ only in Unicode normalization are different documents, as they are
/// on disk.
public enum JSONValue: Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, kept as an exact decimal.
    case number(JSONNumber)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; member order is not significant (canonical output sorts keys).
    case object([String: JSONValue])
}

extension JSONValue: Equatable {
    /// Structural equality; strings and keys compare by UTF-8 bytes.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a.utf8.elementsEqual(b.utf8)
        case let (.array(a), .array(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0 == $1 }
        case let (.object(a), .object(b)):
            guard a.count == b.count else { return false }
            for (key, value) in a {
                guard let other = b[key], other == value else { return false }
            }
            return true
        default: return false
        }
    }
}

extension JSONValue {
    /// The members when this is an object.
    public var objectValue: [String: JSONValue]? {
        if case let .object(o) = self { return o }
        return nil
    }
    /// The elements when this is an array.
    public var arrayValue: [JSONValue]? {
        if case let .array(a) = self { return a }
        return nil
    }
    /// The string when this is a string.
    public var stringValue: String? {
        if case let .string(s) = self { return s }
        return nil
    }
    /// The value as a 64-bit integer when it is an integral number in range.
    public var intValue: Int? {
        if case let .number(n) = self { return n.intValue }
        return nil
    }
    /// The Boolean when this is `true` or `false`.
    public var boolValue: Bool? {
        if case let .bool(b) = self { return b }
        return nil
    }
    /// Member lookup; nil when this is not an object or the key is absent.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }
    /// A number value from an integer.
    public static func int(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
    /// A Boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An array literal.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object literal; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { $1 }))
    }
    /// `null`.
    public init(nilLiteral: ()) { self = .null }
}
