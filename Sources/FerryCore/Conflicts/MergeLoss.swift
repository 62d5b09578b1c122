/// What one side of a merge set (changed from the merge base) that the merge's result does
/// not hold: the story `ferry conflicts` tells of a closed conflict.
///
/// Arrays are aligned as `JSONMerge` aligns them, by a longest common subsequence of whole
/// elements, so an element that moved because another was inserted or removed before it is
/// followed to where it is now, not compared with whatever took its index. An element the
/// side changed in place (a base element replaced one for one) is compared member by member
/// with its counterpart in the result; one the side inserted must be in the result whole; one
/// it removed is lost where the other side changed it and the result holds that change.
public enum MergeLoss {
    /// One value a side lost.
    public struct Value: Sendable, Equatable {
        /// Where: in the side's body; for an element the side removed, where the result still
        /// has it.
        public var path: [JSONPathComponent]
        /// What the side had there (nil: it had removed it).
        public var had: JSONValue?
        /// What the result holds there (nil: nothing).
        public var kept: JSONValue?
    }

    /// The values `side` changed from `base` that `result`, its merge with `other`, does not
    /// hold, in document order.
    public static func lost(base: JSONValue, side: JSONValue, other: JSONValue, result: JSONValue) -> [Value] {
        var out: [Value] = []
        var path: [JSONPathComponent] = []
        walk(base, side, other, result, &path, &out)
        return out
    }

    private static func walk(_ base: JSONValue?, _ side: JSONValue?, _ other: JSONValue?, _ result: JSONValue?,
                             _ path: inout [JSONPathComponent], _ out: inout [Value]) {
        if base == side || side == result { return }
        switch (base, side, result) {
        case let (.object(b)?, .object(s)?, .object(r)?):
            let o = other?.objectValue
            for key in JSONWriter.sortedKeys(b.merging(s) { x, _ in x }) {
                path.append(.key(key))
                walk(b[key], s[key], o?[key], r[key], &path, &out)
                path.removeLast()
            }
        case let (.array(b)?, .array(s)?, .array(r)?):
            arrays(b, s, other?.arrayValue ?? [], r, &path, &out)
        default:
            out.append(Value(path: path, had: side, kept: result))
        }
    }

    private static func arrays(_ base: [JSONValue], _ side: [JSONValue], _ other: [JSONValue], _ result: [JSONValue],
                               _ path: inout [JSONPathComponent], _ out: inout [Value]) {
        let sideOfBase = SequenceMatcher.match(base, side)
        let resultOfSide = SequenceMatcher.match(side, result)
        let otherOfBase = SequenceMatcher.match(base, other)
        /// Where the other side has base element `i`, as it was or changed in its place.
        func inOther(_ i: Int) -> Int? { otherOfBase[i] ?? counterpart(of: i, otherOfBase, resultCount: other.count) }
        var removed: [Int] = []
        // The stretches between elements base and side share: replaced one for one, or else
        // removals and insertions.
        var (b, s) = (0, 0)
        for (nextBase, nextSide) in anchors(sideOfBase, sideCount: side.count) {
            let baseRun = nextBase - b, sideRun = nextSide - s
            for t in 0..<sideRun {
                let j = s + t
                guard resultOfSide[j] == nil else { continue }  // in the result as the side has it
                let counterpart = counterpart(of: j, resultOfSide, resultCount: result.count).map { result[$0] }
                path.append(.index(j))
                if baseRun == sideRun, let counterpart {
                    walk(base[b + t], side[j], inOther(b + t).map { other[$0] }, counterpart, &path, &out)
                } else {
                    out.append(Value(path: path, had: side[j], kept: nil))
                }
                path.removeLast()
            }
            if baseRun != sideRun { removed += b..<nextBase }
            (b, s) = (nextBase + 1, nextSide + 1)
        }
        guard !removed.isEmpty else { return }
        // A removal is lost where the other side kept the element, changed in its place (a
        // change beats a removal), and the result holds that.
        let resultOfOther = SequenceMatcher.match(other, result)
        for i in removed {
            guard let there = inOther(i), other[there] != base[i], let k = resultOfOther[there] else { continue }
            path.append(.index(k))
            out.append(Value(path: path, had: nil, kept: result[k]))
            path.removeLast()
        }
    }

    /// The pairs of indices (base, side) the matcher matched, in order, then (base count, side
    /// count) to close the last stretch.
    private static func anchors(_ sideOfBase: [Int?], sideCount: Int) -> [(Int, Int)] {
        sideOfBase.enumerated().compactMap { i, j in j.map { (i, $0) } } + [(sideOfBase.count, sideCount)]
    }

    /// The index in the result of the element that stands where element `j` (of the side, or
    /// of the base) stood: the same offset into the stretch between the elements around it
    /// that the result kept (`resultOfSide`: where each is in the result), when that stretch
    /// is as long in both. Nil otherwise.
    private static func counterpart(of j: Int, _ resultOfSide: [Int?], resultCount: Int) -> Int? {
        var before = j - 1
        while before >= 0, resultOfSide[before] == nil { before -= 1 }
        var after = j + 1
        while after < resultOfSide.count, resultOfSide[after] == nil { after += 1 }
        let resultStart = before >= 0 ? resultOfSide[before]! + 1 : 0
        let resultEnd = after < resultOfSide.count ? resultOfSide[after]! : resultCount
        guard resultEnd - resultStart == after - before - 1 else { return nil }
        return resultStart + (j - before - 1)
    }
}
