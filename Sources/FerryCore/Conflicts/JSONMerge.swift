/// SPEC §2's three-way merge of JSON values against their common ancestor.
///
/// Objects merge member by member, recursively. Arrays merge as diff3 merges lines: each side
/// is matched against the base by a longest common subsequence, runs both sides left alone
/// are stable, and the hunks between them are taken from whichever side changed them. Hunks
/// both sides changed are merged element by element when both kept the hunk's length (an
/// element changed in place on both sides), concatenated when both only inserted at the same
/// place (both insertions kept, the winner's first), and otherwise the winner's hunk stands.
/// Every decision that cannot keep both sides picks `winner`, which callers choose with the
/// winner rule; so the result depends only on the three values, never on who computes it.
public enum JSONMerge {
    /// Above this many base × side elements the array matcher stops looking for moves inside
    /// the differing middle (after trimming the common prefix and suffix) and treats it as one
    /// replaced hunk, which bounds the quadratic LCS.
    public static let lcsCellLimit = 4_000_000

    /// Merges `winner` and `loser`, both descended from `base` (nil: no common ancestor body).
    public static func merge(base: JSONValue?, winner: JSONValue, loser: JSONValue) -> JSONValue {
        mergeValue(base, winner, loser)
    }

    static func mergeValue(_ o: JSONValue?, _ a: JSONValue, _ b: JSONValue) -> JSONValue {
        if a == b { return a }
        if let o {
            if a == o { return b }
            if b == o { return a }
        }
        switch (o, a, b) {
        case let (.object(om)?, .object(am), .object(bm)):
            return .object(mergeObjects(om, am, bm))
        case let (nil, .object(am), .object(bm)):
            return .object(mergeObjects([:], am, bm))
        case let (.array(oa)?, .array(aa), .array(ba)):
            return .array(mergeArrays(oa, aa, ba))
        case let (nil, .array(aa), .array(ba)):
            return .array(mergeArrays([], aa, ba))
        default:
            return a
        }
    }

    static func mergeObjects(_ o: [String: JSONValue], _ a: [String: JSONValue], _ b: [String: JSONValue]) -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        var keys = Set(a.keys)
        keys.formUnion(b.keys)
        for key in keys {
            let ov = o[key]
            switch (a[key], b[key]) {
            case let (av?, bv?):
                result[key] = mergeValue(ov, av, bv)
            case let (av?, nil):
                // Added by the winner, or kept by it while the loser removed it: removal wins
                // only when the winner left the member untouched.
                if ov == nil || ov! != av { result[key] = av }
            case let (nil, bv?):
                // Added by the loser: keep. Changed by the loser but removed by the winner: the
                // winner's removal stands. Untouched by the loser, removed by the winner: gone.
                if ov == nil { result[key] = bv }
            case (nil, nil):
                break
            }
        }
        return result
    }

    static func mergeArrays(_ o: [JSONValue], _ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        let matchA = SequenceMatcher.match(o, a)
        let matchB = SequenceMatcher.match(o, b)
        var result: [JSONValue] = []
        var i = 0, j = 0, k = 0
        while true {
            var t = 0
            while i + t < o.count, matchA[i + t] == j + t, matchB[i + t] == k + t { t += 1 }
            if t > 0 {
                result += o[i..<(i + t)]
                i += t; j += t; k += t
                continue
            }
            var s = i
            while s < o.count, matchA[s] == nil || matchB[s] == nil { s += 1 }
            let (ae, be) = s < o.count ? (matchA[s]!, matchB[s]!) : (a.count, b.count)
            if s == i && ae == j && be == k { break }  // only reachable at the very end
            result += resolveHunk(Array(o[i..<s]), Array(a[j..<ae]), Array(b[k..<be]))
            i = s; j = ae; k = be
        }
        return result
    }

    static func resolveHunk(_ o: [JSONValue], _ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        if a == o { return b }
        if b == o { return a }
        if a == b { return a }
        if o.count == a.count && a.count == b.count {
            return (0..<o.count).map { mergeValue(o[$0], a[$0], b[$0]) }
        }
        if o.isEmpty {
            return a + b.filter { e in !a.contains(e) }
        }
        return a
    }
}

/// Longest-common-subsequence matching of two arrays of JSON values.
enum SequenceMatcher {
    /// For each element of `base`, the index of the element of `side` it is matched with.
    static func match(_ base: [JSONValue], _ side: [JSONValue]) -> [Int?] {
        var result = [Int?](repeating: nil, count: base.count)
        var prefix = 0
        while prefix < base.count, prefix < side.count, base[prefix] == side[prefix] {
            result[prefix] = prefix
            prefix += 1
        }
        var suffix = 0
        while suffix < base.count - prefix, suffix < side.count - prefix,
              base[base.count - 1 - suffix] == side[side.count - 1 - suffix] {
            result[base.count - 1 - suffix] = side.count - 1 - suffix
            suffix += 1
        }
        let n = base.count - prefix - suffix
        let m = side.count - prefix - suffix
        guard n > 0, m > 0, n * m <= JSONMerge.lcsCellLimit else { return result }
        // Hash once so the quadratic table compares integers, then confirm equality.
        let hb = base[prefix..<(prefix + n)].map { $0.canonicalBytes.hashValue }
        let hs = side[prefix..<(prefix + m)].map { $0.canonicalBytes.hashValue }
        func equal(_ x: Int, _ y: Int) -> Bool { hb[x] == hs[y] && base[prefix + x] == side[prefix + y] }
        // table[x][y] = LCS length of base[x...] and side[y...] (suffix form, walked forward).
        var table = [Int32](repeating: 0, count: (n + 1) * (m + 1))
        let w = m + 1
        for x in stride(from: n - 1, through: 0, by: -1) {
            for y in stride(from: m - 1, through: 0, by: -1) {
                table[x * w + y] = equal(x, y) ? table[(x + 1) * w + y + 1] + 1 : max(table[(x + 1) * w + y], table[x * w + y + 1])
            }
        }
        var x = 0, y = 0
        while x < n, y < m {
            if equal(x, y) {
                result[prefix + x] = prefix + y
                x += 1; y += 1
            } else if table[(x + 1) * w + y] >= table[x * w + y + 1] {
                x += 1
            } else {
                y += 1
            }
        }
        return result
    }
}
