/// What two branches are merged against: usually one revision's body; after criss-cross
/// merges (peers that each merged the other's branch) the bases' bodies merged with each
/// other first, as git's recursive strategy does. Where those bases changed the same place
/// differently, neither value can count as the original: the place holds any of them, and a
/// branch that holds one of them has not changed it.
public indirect enum MergeBase: Sendable, Equatable {
    /// Exactly this value (nil: the place is absent).
    case exactly(JSONValue?)
    /// An object whose members are merge bases of their own (some hold alternatives).
    case members([String: MergeBase])
    /// Any of these values (nil: absent): the bases disagree here.
    case anyOf([JSONValue?])

    /// No base at all: the branches share no history.
    public static let none = MergeBase.exactly(nil)

    /// True when `value` is what this base holds (or one of the values it may hold).
    public func holds(_ value: JSONValue?) -> Bool {
        switch self {
        case .exactly(let v): return v == value
        case .anyOf(let vs): return vs.contains { $0 == value }
        case .members(let ms):
            guard case .object(let o)? = value else { return false }
            for key in Set(o.keys).union(ms.keys) where !(ms[key] ?? .exactly(nil)).holds(o[key]) { return false }
            return true
        }
    }

    /// Which of two different values left this place as the base had it: true for `a`,
    /// false for `b`, nil for neither or both. Both, when each holds another of the bases'
    /// alternatives: that is the clash the alternatives record, and it must be settled by
    /// its values again (as it was where the alternatives came from), not by which side
    /// happens to be asked first, or two merges of the same branches would differ and a later
    /// edit of that place would lose to the other outcome. Two objects under an object base
    /// with alternatives inside (`members`) are never settled whole (nil): one may hold an
    /// alternative at one member and a change at another, and only their members can tell.
    /// (Alternatives of whole values, `anyOf`, are compared whole: an exact match is plain.)
    public func unchangedSide(_ a: JSONValue?, _ b: JSONValue?) -> Bool? {
        if hasAlternativesInside, case .object? = a, case .object? = b { return nil }
        switch (holds(a), holds(b)) {
        case (true, false): return true
        case (false, true): return false
        default: return nil
        }
    }

    /// The base of one member of an object.
    public func member(_ key: String) -> MergeBase {
        switch self {
        case .exactly(let v): return .exactly(v?.objectValue?[key])
        case .members(let ms): return ms[key] ?? .exactly(nil)
        case .anyOf(let vs): return Self.alternatives(vs.map { $0?.objectValue?[key] })
        }
    }

    /// The array to match both sides against, for an array merge (alternatives' first array).
    public var array: [JSONValue] {
        switch self {
        case .exactly(let v): return v?.arrayValue ?? []
        case .members: return []
        case .anyOf(let vs): return vs.lazy.compactMap { $0?.arrayValue }.first ?? []
        }
    }

    /// One concrete value for each alternative this base stands for.
    var values: [JSONValue?] {
        switch self {
        case .exactly(let v): return [v]
        case .anyOf(let vs): return vs
        case .members(let ms):
            var o: [String: JSONValue] = [:]
            for (k, m) in ms { if let v = m.values.first ?? nil { o[k] = v } }
            return [.object(o)]
        }
    }

    static func alternatives(_ values: [JSONValue?]) -> MergeBase {
        var distinct: [JSONValue?] = []
        for v in values where !distinct.contains(where: { $0 == v }) { distinct.append(v) }
        return distinct.count == 1 ? .exactly(distinct[0]) : .anyOf(distinct)
    }

    /// Two merge bases `x` and `y` merged against their own common `ancestor`: where only one
    /// changed a place, its value; where both changed it differently, either value.
    public static func combine(ancestor: MergeBase, _ x: MergeBase, _ y: MergeBase) -> MergeBase {
        if x == y { return x }
        // A base that kept the ancestor's value gives way to the other, unless both kept one
        // of its alternatives (the clash they record: both stay possible). Objects under an
        // object ancestor with alternatives inside are combined member by member (see
        // `unchangedSide`).
        if !(x.isObject && y.isObject && ancestor.hasAlternativesInside) {
            let xKept = x.single.map { ancestor.holds($0) } ?? false, yKept = y.single.map { ancestor.holds($0) } ?? false
            if xKept != yKept { return xKept ? y : x }
        }
        if x.isObject && y.isObject {
            var keys = Set<String>()
            for side in [x, y] {
                switch side {
                case .exactly(let v): keys.formUnion(v?.objectValue?.keys ?? [:].keys)
                case .members(let ms): keys.formUnion(ms.keys)
                case .anyOf: break
                }
            }
            var ms: [String: MergeBase] = [:]
            for key in keys {
                let m = combine(ancestor: ancestor.member(key), x.member(key), y.member(key))
                if m != .exactly(nil) { ms[key] = m }
            }
            return .members(ms)
        }
        if case .exactly(.array(let xa)?) = x, case .exactly(.array(let ya)?) = y {
            // Lists are merged as lists: alternatives would lose which elements each base kept.
            return .exactly(.array(JSONMerge.mergeArrays(ancestor.array, xa, ya)))
        }
        return alternatives(x.values + y.values)
    }

    /// The one value this base holds, if it is not a set of alternatives.
    var single: JSONValue?? {
        switch self {
        case .exactly(let v): return .some(v)
        default: return nil
        }
    }

    /// True for an object base (`members`) some place inside which holds alternatives.
    var hasAlternativesInside: Bool {
        guard case .members(let ms) = self else { return false }
        return ms.values.contains { if case .anyOf = $0 { true } else { $0.hasAlternativesInside } }
    }

    var isObject: Bool {
        switch self {
        case .exactly(let v): if case .object? = v { return true } else { return false }
        case .members: return true
        case .anyOf: return false
        }
    }
}
