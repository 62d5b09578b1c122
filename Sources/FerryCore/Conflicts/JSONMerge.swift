/// SPEC §2's three-way merge of JSON values against their common ancestor (or ancestors).
///
/// Objects merge member by member, recursively. Arrays merge as diff3 merges lines: each side
/// is matched against the base by a longest common subsequence, runs both sides left alone
/// are stable, and the hunks between them are taken from whichever side changed them. Hunks
/// both sides changed are merged element by element (`resolveHunk`): every insertion of either
/// side is kept (runs both sides inserted at one place in an order of their own), a removal
/// by either side stands, and an element both sides changed in place merges recursively.
/// Where both sides changed one value differently the greater value stands (`clash`), and a
/// change beats a removal; `winner` (chosen by callers with the winner rule) decides only
/// what no value settles (two different scalars both kept in place of one element, an
/// oversized hunk). So the result depends only on the values, never on who computes it, nor
/// on which branch tips a criss-cross merge happens to compare.
public enum JSONMerge {
    /// Above this many base × side elements the array matcher stops looking for moves inside
    /// the differing middle (after trimming the common prefix and suffix) and treats it as one
    /// replaced hunk, which bounds the quadratic LCS.
    public static let lcsCellLimit = 4_000_000

    /// Decides a clash at a member path (object keys from the top) between the winner's value
    /// `a` and the loser's `b` (nil: absent): true for `a`, false for `b`, nil when it cannot
    /// tell (then `clash` decides by value).
    public typealias ClashDecider = (_ path: [String], _ a: JSONValue?, _ b: JSONValue?) -> Bool?

    /// Merges `winner` and `loser`, both descended from `base` (nil: no common ancestor body).
    public static func merge(base: JSONValue?, winner: JSONValue, loser: JSONValue) -> JSONValue {
        Merger(decide: nil).value(.exactly(base), winner, loser, path: [])
    }

    /// Merges `winner` and `loser` against a merge base that may hold alternatives where
    /// earlier merges resolved the same clash differently (`MergeBase`): a side that holds
    /// one of them has not changed that place. Where both sides changed a member, `decide`
    /// is asked first (the store answers from history: a side that had seen the other's
    /// value and replaced it wins).
    public static func merge(base: MergeBase, winner: JSONValue, loser: JSONValue, decide: ClashDecider? = nil) -> JSONValue {
        Merger(decide: decide).value(base, winner, loser, path: [])
    }

    /// One merge's recursion, carrying the member path for the decider.
    struct Merger {
        let decide: ClashDecider?

        func value(_ base: MergeBase, _ a: JSONValue, _ b: JSONValue, path: [String]) -> JSONValue {
            if a == b { return a }
            if let unchanged = base.unchangedSide(a, b) { return unchanged ? b : a }
            switch (a, b) {
            case let (.object(am), .object(bm)):
                return .object(objects(base, am, bm, path: path))
            case let (.array(aa), .array(ba)):
                return .array(mergeArrays(base.array, aa, ba))
            default:
                if let first = decide?(path, a, b) { return first ? a : b }
                return clash(a, b)
            }
        }

        func objects(_ base: MergeBase, _ a: [String: JSONValue], _ b: [String: JSONValue], path: [String]) -> [String: JSONValue] {
            var result: [String: JSONValue] = [:]
            var keys = Set(a.keys)
            keys.formUnion(b.keys)
            for key in keys {
                if let v = member(base.member(key), a[key], b[key], path: path + [key]) { result[key] = v }
            }
            return result
        }

        /// One member, absent (nil) on a side or in the base or not: a side that left it as
        /// the base had it gives way to the other (so an addition and a removal are both
        /// kept); where one side changed it and the other removed it, the change stands (as a
        /// live revision beats a deletion) unless the remover had seen it; otherwise the
        /// values merge.
        func member(_ base: MergeBase, _ a: JSONValue?, _ b: JSONValue?, path: [String]) -> JSONValue? {
            if a == b { return a }
            if let unchanged = base.unchangedSide(a, b) { return unchanged ? b : a }
            guard let a, let b else {
                if let first = decide?(path, a, b) { return first ? a : b }
                return a ?? b
            }
            return value(base, a, b, path: path)
        }
    }

    /// Both sides changed one value differently and history cannot tell which saw the other:
    /// the greater value (by canonical JSON bytes) stands. Not the winning branch's: criss-cross
    /// merges compare different branch tips, and a clash between the same two edits must
    /// come out the same in every merge, or a later merge takes one outcome for a change and
    /// drops a real edit made after it.
    static func clash(_ a: JSONValue, _ b: JSONValue) -> JSONValue {
        b.canonicalBytes.lexicographicallyPrecedes(a.canonicalBytes) ? a : b
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
        return keepingCounts(result, o, a, b)
    }

    /// Corrects what matching by position cannot see: an element one side moved (removed
    /// from one place and put at another) while the other side removed it. Each value appears
    /// in the result as often as a three-way merge of counts says: the base's count plus what
    /// each side added or took away (`winner + loser - base`; for a value the base lacks,
    /// the larger of the two sides' counts, as both inserting the same value is one
    /// insertion). Surplus copies are removed from the end, so the winner's places stay.
    static func keepingCounts(_ result: [JSONValue], _ o: [JSONValue], _ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        func counts(_ values: [JSONValue]) -> [[UInt8]: Int] {
            var c: [[UInt8]: Int] = [:]
            for v in values { c[v.canonicalBytes, default: 0] += 1 }
            return c
        }
        let keys = result.map(\.canonicalBytes)
        var surplus: [[UInt8]: Int] = [:]
        let (inBase, inA, inB) = (counts(o), counts(a), counts(b))
        for (key, have) in counts(result) {
            let base = inBase[key] ?? 0, x = inA[key] ?? 0, y = inB[key] ?? 0
            guard base + x + y > 0 else { continue }  // made by the merge itself (an element merged in place)
            let want = base > 0 ? max(0, x + y - base) : max(x, y)
            if have > want { surplus[key] = have - want }
        }
        guard !surplus.isEmpty else { return result }
        var kept: [JSONValue] = []
        for index in result.indices.reversed() {
            if let extra = surplus[keys[index]], extra > 0 {
                surplus[keys[index]] = extra - 1
                continue
            }
            kept.append(result[index])
        }
        return kept.reversed()
    }

    /// A stretch both sides changed. Element by element when it can be matched: every
    /// element either side inserted is kept (`bothInserted` orders two runs at one
    /// place), a base element stays only if both kept it, and an element both sides replaced
    /// one for one at the same place is merged recursively (an element changed in place on
    /// both sides). Stretches too large to match fall back to the winner's hunk as a whole.
    static func resolveHunk(_ o: [JSONValue], _ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        if a == o { return b }
        if b == o { return a }
        if a == b { return a }
        if o.count == a.count && a.count == b.count {
            return (0..<o.count).flatMap { inPlace(o[$0], a[$0], b[$0]) }
        }
        if o.isEmpty {
            return bothInserted(a, b)
        }
        guard o.count * max(a.count, b.count) <= lcsCellLimit else { return a }
        let keptA = SequenceMatcher.match(o, a), keptB = SequenceMatcher.match(o, b)
        let insertedA = insertions(a, keptA, base: o.count), insertedB = insertions(b, keptB, base: o.count)
        var result: [JSONValue] = []
        var k = 0
        while k <= o.count {
            let ia = insertedA[k], ib = insertedB[k]
            if k < o.count {
                // Both replaced the same run of base elements one for one: merge them pairwise.
                var run = 0
                while k + run < o.count, keptA[k + run] == nil, keptB[k + run] == nil { run += 1 }
                if run > 0, ia.count == run, ib.count == run,
                   (k + run == o.count || (keptA[k + run] != nil && keptB[k + run] != nil)) {
                    result += (0..<run).flatMap { inPlace(o[k + $0], ia[$0], ib[$0]) }
                    k += run
                    result += bothInserted(insertedA[k], insertedB[k])
                    if k < o.count { result.append(o[k]) }
                    k += 1
                    continue
                }
            }
            result += bothInserted(ia, ib)
            if k < o.count, keptA[k] != nil, keptB[k] != nil { result.append(o[k]) }
            k += 1
        }
        return result
    }

    /// What both sides inserted at one place: both runs, each element once, the run whose
    /// canonical JSON sorts first first. Not the winner's first: merges of the same two
    /// insertions with different winners would order them differently, and a later merge
    /// would take the other order for elements moved.
    static func bothInserted(_ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        if a.isEmpty { return b }
        if b.isEmpty { return a }
        let (first, second) = JSONValue.array(b).canonicalBytes.lexicographicallyPrecedes(JSONValue.array(a).canonicalBytes) ? (b, a) : (a, b)
        return first + second.filter { e in !first.contains(e) }
    }

    /// One element both sides may have replaced: an object or array changed in place on both
    /// sides merges recursively (fields of the same item); two different scalars are two
    /// new values, both kept (the winner's first).
    static func inPlace(_ o: JSONValue, _ a: JSONValue, _ b: JSONValue) -> [JSONValue] {
        if a == o { return [b] }
        if b == o || a == b { return [a] }
        switch (o, a, b) {
        case (.object, .object, .object), (.array, .array, .array):
            return [Merger(decide: nil).value(.exactly(o), a, b, path: [])]
        default:
            return [a, b]
        }
    }

    /// The elements `side` inserted, by place: `[k]` holds those that came after base element
    /// `k - 1` (the last one the side kept before them) and before the next one it kept.
    static func insertions(_ side: [JSONValue], _ kept: [Int?], base count: Int) -> [[JSONValue]] {
        var byPlace = [[JSONValue]](repeating: [], count: count + 1)
        var baseOf = [Int?](repeating: nil, count: side.count)
        for (i, j) in kept.enumerated() { if let j { baseOf[j] = i } }
        var last = -1
        for (j, element) in side.enumerated() {
            if let i = baseOf[j] { last = i } else { byPlace[last + 1].append(element) }
        }
        return byPlace
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
