import FerryCore
@testable import FerryStore
import Testing

/// `DOC@REV` resolution, the one every command uses: ids and prefixes of them, digest
/// prefixes, generations on the current line, counts back; ambiguity named with candidates.
@Suite struct RevisionSelectorTests {
    let doc = try! DocumentID("notes.json")

    /// A tree of `count` revisions in a line, each a child of the one before.
    func line(_ count: Int, from parent: RevisionID? = nil, salt: String = "") -> [RevisionNode] {
        var nodes: [RevisionNode] = []
        var previous = parent
        for i in 0..<count {
            let body = BlobDigest.of(Array("\(salt)body \(i)".utf8))
            let rev = RevisionID.compute(parent: previous, deleted: false, body: body)
            nodes.append(RevisionNode(rev: rev, parent: previous, deleted: false, object: body, size: 10, seq: nodes.count + 1, origin: "local"))
            previous = rev
        }
        return nodes
    }

    func tree(_ nodes: [RevisionNode]) -> RevisionTree {
        var t = RevisionTree()
        for n in nodes { t.insert(n) }
        return t
    }

    func resolve(_ text: String, in t: RevisionTree) throws(RevisionSelector.Failure) -> RevisionID { try RevisionSelector(text).resolve(in: t, doc: doc).rev }

    @Test func fullIdsPrefixesOfThemAndDigestPrefixes() throws {
        let nodes = line(4)
        let t = tree(nodes)
        for n in nodes {
            #expect(try resolve(n.rev.description, in: t) == n.rev)
            #expect(try resolve("\(n.rev.generation)-\(n.rev.digest.prefix(6))", in: t) == n.rev)
            #expect(try resolve(String(n.rev.digest.prefix(12)), in: t) == n.rev)
            #expect(try resolve(String(n.rev.digest.prefix(12)).uppercased(), in: t) == n.rev)
        }
    }

    @Test func generationsAndCountsBackFollowTheCurrentLine() throws {
        let nodes = line(5)
        let t = tree(nodes)
        #expect(try resolve("1", in: t) == nodes[0].rev)
        #expect(try resolve("3", in: t) == nodes[2].rev)
        #expect(try resolve("5", in: t) == nodes[4].rev)
        #expect(try resolve("-0", in: t) == nodes[4].rev)
        #expect(try resolve("-1", in: t) == nodes[3].rev)
        #expect(try resolve("-4", in: t) == nodes[0].rev)
        #expect(throws: RevisionSelector.Failure.self) { try resolve("6", in: t) }
        #expect(throws: RevisionSelector.Failure.self) { try resolve("-5", in: t) }
    }

    @Test func aGenerationPicksTheCurrentBranchWhenTwoBranchesHaveOne() throws {
        let trunk = line(2)
        let a = line(2, from: trunk[1].rev, salt: "a")
        let b = line(1, from: trunk[1].rev, salt: "b")
        let t = tree(trunk + a + b)
        // a's branch is longer, so it is current: generation 3 is a's.
        #expect(t.current?.rev == a[1].rev)
        #expect(try resolve("3", in: t) == a[0].rev)
        #expect(try resolve("2", in: t) == trunk[1].rev)
        // b's only revision is still reachable by its digest.
        #expect(try resolve(String(b[0].rev.digest.prefix(10)), in: t) == b[0].rev)
    }

    @Test func anAmbiguousPrefixListsItsCandidatesAndAnUnknownOneSaysSo() throws {
        // Sixty revisions: some two digests share their first hex digit, a letter (text of
        // digits only is a generation, not a digest prefix).
        let nodes = line(60)
        let t = tree(nodes)
        let byFirst = Dictionary(grouping: nodes, by: { $0.rev.digest.prefix(1) })
        let (shared, group) = try #require(byFirst.first { $0.value.count > 1 && "abcdef".contains($0.key) })
        do {
            _ = try resolve(String(shared), in: t)
            Issue.record("an ambiguous prefix resolved")
        } catch {
            #expect(error.kind == .ambiguous)
            #expect(Set(error.candidates) == Set(group.map(\.rev)))
            #expect(error.candidates == error.candidates.sorted(by: >))
            #expect(error.message.contains("ambiguous") && error.message.contains(group[0].rev.description))
        }
        // "3-" is a prefix of exactly one id text on a line.
        #expect(try resolve("3-", in: t) == nodes[2].rev)
        let missing = nodes.map(\.rev.digest).contains { $0.hasPrefix("ffffff") } ? "eeeeee" : "ffffff"
        do {
            _ = try resolve(missing, in: t)
            Issue.record("an unknown prefix resolved")
        } catch {
            #expect(error.kind == .unknown)
            #expect(error.message == "notes.json has no revision \(missing)")
        }
    }

    @Test func invalidTextIsRefusedWithTheForms() {
        for bad in ["", "xyz", "-", "-x", "3-xyz", "-3-ab", "a b", "0", "3-ab-c"] {
            #expect(throws: RevisionSelector.Failure.self, "\(bad)") { try RevisionSelector(bad) }
        }
        #expect((try? RevisionSelector("2"))?.form == .generation(2))
        #expect((try? RevisionSelector("1234"))?.form == .generation(1234))
        #expect((try? RevisionSelector("1a2b"))?.form == .digestPrefix("1a2b"))
        #expect((try? RevisionSelector("3-1A2b"))?.form == .idPrefix("3-1a2b"))
        #expect((try? RevisionSelector("-2"))?.form == .back(2))
    }

    @Test func splittingDocAtRevKeepsAtSignsThatArePartOfAName() {
        let known: Set<String> = ["a.json", "me@home.json", "x@2"]
        let isDoc = { (s: String) in known.contains(s) }
        #expect(RevisionSelector.split("a.json@2", isDocument: isDoc) == ("a.json", "2"))
        #expect(RevisionSelector.split("a.json", isDocument: isDoc) == ("a.json", nil))
        #expect(RevisionSelector.split("me@home.json", isDocument: isDoc) == ("me@home.json", nil))
        #expect(RevisionSelector.split("me@home.json@1a2b", isDocument: isDoc) == ("me@home.json", "1a2b"))
        #expect(RevisionSelector.split("x@2", isDocument: isDoc) == ("x@2", nil))
        // After a known name, a bad selector is still a selector (its error names it).
        #expect(RevisionSelector.split("a.json@zz", isDocument: isDoc) == ("a.json", "zz"))
        // An unknown name with a good selector splits (the error names the document).
        #expect(RevisionSelector.split("nope.json@2", isDocument: isDoc) == ("nope.json", "2"))
        #expect(RevisionSelector.split("nope@where", isDocument: isDoc) == ("nope@where", nil))
    }
}
