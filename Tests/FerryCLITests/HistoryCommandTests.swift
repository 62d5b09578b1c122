import Foundation
import Testing
import FerryTesting

/// Getting old bodies back, end to end with the built binary: revisions named by generation
/// or prefix, `restore` with and without an agent, `diff` and `log -p` on the inventory sample.
@Suite struct HistoryCommandTests {
    /// A sample folder whose list's first value went from 20 to 25 (recorded by `ferry scan`).
    func editedSample(_ tmp: TemporaryDirectory) throws -> String {
        let dir = tmp.appending("inv")
        #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
        let sed = try FerryProcess.shell(#"sed -i '0,/"value": 20/s//"value": 25/' samplelist.json"#, in: dir)
        #expect(sed.status == 0, "\(sed.stderr)")
        #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
        return dir
    }

    /// The revision ids of `doc`, oldest first.
    func revisions(_ doc: String, in dir: String) throws -> [String] {
        let r = try FerryProcess.shell("jq -r 'select(.doc == \"\(doc)\") | .rev' .ferry/revs.log", in: dir)
        return r.stdout.split(separator: "\n").map(String.init)
    }

    /// `.list[0].value` of a body printed by `ferry show` or read from the file.
    func firstValue(_ json: String) -> Int? {
        let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        return ((object?["list"] as? [[String: Any]])?.first?["value"] as? Int)
    }

    @Test func showTakesAGenerationADigestPrefixAndACountBack() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = try editedSample(tmp)
            let revs = try revisions("samplelist.json", in: dir)
            #expect(revs.count == 2)
            let first = try FerryProcess.ferry(["show", "samplelist.json@1"], in: dir)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(firstValue(first.stdout) == 20)
            #expect(firstValue(try FerryProcess.ferry(["show", "samplelist.json@2"], in: dir).stdout) == 25)
            #expect(firstValue(try FerryProcess.ferry(["show", "samplelist.json@-1"], in: dir).stdout) == 20)
            let digest = revs[0].split(separator: "-")[1]
            let byDigest = try FerryProcess.ferry(["show", "samplelist.json@\(digest.prefix(6))"], in: dir)
            #expect(byDigest.status == 0 && byDigest.stdout == first.stdout, "\(byDigest.stderr)")
            let byIdPrefix = try FerryProcess.ferry(["show", "samplelist.json@1-\(digest.prefix(4))"], in: dir)
            #expect(byIdPrefix.stdout == first.stdout)
            // Unknown revisions say so, naming the document (not "no document samplelist.json@3").
            let unknown = try FerryProcess.ferry(["show", "samplelist.json@3"], in: dir)
            #expect(unknown.status == 1 && unknown.stderr.contains("samplelist.json has no revision 3"), "\(unknown.stderr)")
            let missing = try FerryProcess.ferry(["show", "samplelist.json@-5"], in: dir)
            #expect(missing.status == 1 && missing.stderr.contains("has no revision -5"), "\(missing.stderr)")
        }
    }

    @Test func anAmbiguousPrefixListsTheCandidates() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", dir]).status == 0)
            // Edit until two digests start with the same letter (a prefix of digits only would
            // be read as a generation); 6 in 16 digests do, so 60 edits are plenty.
            var shared: (prefix: Character, revs: [String])?
            for i in 0..<60 where shared == nil {
                try tmp.write("f/n.json", "{\"n\": \(i)}")
                #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
                let byFirst = Dictionary(grouping: try revisions("n.json", in: dir)) { $0.split(separator: "-")[1].first! }
                shared = byFirst.first { $0.value.count > 1 && "abcdef".contains($0.key) }.map { ($0.key, $0.value) }
            }
            let (prefix, revs) = try #require(shared)
            let r = try FerryProcess.ferry(["show", "n.json@\(prefix)"], in: dir)
            #expect(r.status == 1)
            #expect(r.stderr.contains("ambiguous"), "\(r.stderr)")
            for rev in revs { #expect(r.stderr.contains(rev), "\(r.stderr) lacks \(rev)") }
            #expect(try FerryProcess.ferry(["diff", "n.json", String(prefix)], in: dir).status == 1)
        }
    }

    @Test func restoreWithoutAnAgentRecordsTheOldBodyAsANewRevision() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = try editedSample(tmp)
            let revs = try revisions("samplelist.json", in: dir)
            let r = try FerryProcess.ferry(["restore", "samplelist.json@1"], in: dir)
            #expect(r.status == 0, "\(r.stderr)")
            let after = try revisions("samplelist.json", in: dir)
            #expect(after.count == 3 && after[2].hasPrefix("3-"), "\(after)")
            #expect(r.stdout == "restored samplelist.json to \(revs[0]) (new revision \(after[2]))\n", "\(r.stdout)")
            // The file holds the old body, pretty, byte for byte what `show` prints of it.
            let old = try FerryProcess.ferry(["show", "samplelist.json@\(revs[0])"], in: dir).stdout
            #expect(try tmp.read("inv/samplelist.json") == old)
            #expect(firstValue(old) == 20)
            let log = try FerryProcess.ferry(["log", "samplelist.json"], in: dir)
            #expect(log.stdout.split(separator: "\n").count == 3 && log.stdout.hasPrefix("3\t"), "\(log.stdout)")
            #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
            #expect(try FerryProcess.ferry(["status"], in: dir).stdout.contains("pending:   none"))
            // Nothing to record when the file already holds that body.
            let again = try FerryProcess.ferry(["restore", "samplelist.json@1"], in: dir)
            #expect(again.status == 0 && again.stdout.contains("already holds"), "\(again.stdout)")
            #expect(try revisions("samplelist.json", in: dir).count == 3)
            // A revision must be named.
            #expect(try FerryProcess.ferry(["restore", "samplelist.json"], in: dir).status == 2)
        }
    }

    @Test func restoreRecreatesADeletedDocumentAndRefusesADeletion() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", dir]).status == 0)
            try FileManager.default.createDirectory(atPath: dir + "/notes", withIntermediateDirectories: true)
            try tmp.write("f/notes/today.json", "{\"todo\": [\"milk\"]}")
            let bytes = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 * 7) })
            try bytes.write(to: URL(fileURLWithPath: dir + "/notes/photo.bin"))
            #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
            _ = try FerryProcess.shell("rm -r notes", in: dir)
            #expect(try FerryProcess.ferry(["scan"], in: dir).stdout.contains("deleted notes/today.json"))
            let refused = try FerryProcess.ferry(["restore", "notes/today.json@2"], in: dir)
            #expect(refused.status == 1 && refused.stderr.contains("is a deletion"), "\(refused.stderr)")
            #expect(refused.stderr.split(separator: "\n").count == 1)
            let r = try FerryProcess.ferry(["restore", "notes/today.json@1"], in: dir)
            #expect(r.status == 0 && r.stdout.hasPrefix("restored notes/today.json to 1-"), "\(r.stdout)\(r.stderr)")
            #expect(try tmp.read("f/notes/today.json") == "{\n  \"todo\": [\n    \"milk\"\n  ]\n}\n")
            // A file document comes back byte for byte.
            #expect(try FerryProcess.ferry(["restore", "notes/photo.bin@-1"], in: dir).status == 0)
            #expect(FileManager.default.contents(atPath: dir + "/notes/photo.bin") == bytes)
            let log = try FerryProcess.ferry(["log", "notes/today.json", "-p"], in: dir).stdout
            #expect(log.contains("    recreated") && log.contains("    deleted") && log.contains("    created"), "\(log)")
            // Each line says what its revision did: the restore made the document again.
            let whats = try FerryProcess.shell("\(FerryProcess.ferryExecutable) log notes/today.json | cut -f5 | cut -d' ' -f1 | paste -sd,", in: dir).stdout
            #expect(whats == "recreated,deleted,created\n", "\(whats)")
            #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
            #expect(try FerryProcess.ferry(["status"], in: dir).stdout.contains("pending:   none"))
        }
    }

    @Test func restoreWithAnAgentWritesTheFileAndTheAgentRecordsIt() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = try editedSample(tmp)
            let revs = try revisions("samplelist.json", in: dir)
            let agent = try RunningAgent(folder: dir)
            let r = try FerryProcess.ferry(["restore", "samplelist.json@1"], in: dir)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout == "wrote samplelist.json from \(revs[0]); the agent records it\n", "\(r.stdout)")
            #expect(eventually(10) { (try? revisions("samplelist.json", in: dir).count) == 3 }, "\(agent.log())")
            #expect(firstValue(try tmp.read("inv/samplelist.json")) == 20)
            let log = try FerryProcess.ferry(["log", "samplelist.json", "-p", "-c", "1"], in: dir)
            #expect(log.stdout.contains("    list[0].value: 25 → 20"), "\(log.stdout)")
            agent.stop()
            #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
            #expect(try FileSystemCheck.emptyTemp(dir))
        }
    }

    @Test func diffPrintsJSONChangesAndAFileSummary() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = try editedSample(tmp)
            // No revision: the current one against its parent (nothing unrecorded on disk).
            let d = try FerryProcess.ferry(["diff", "samplelist.json"], in: dir)
            #expect(d.status == 0 && d.stdout == "list[0].value: 20 → 25\n", "\(d.stdout)\(d.stderr)")
            // Unrecorded edits: the current revision against the file.
            _ = try FerryProcess.shell(#"sed -i 's/"Inventory"/"Stock"/' samplelist.json"#, in: dir)
            let disk = try FerryProcess.ferry(["diff", "samplelist.json"], in: dir)
            #expect(disk.stdout == "name: \"Inventory\" → \"Stock\"\n", "\(disk.stdout)")
            // One revision against the current one; two against each other; --json.
            #expect(try FerryProcess.ferry(["diff", "samplelist.json", "1"], in: dir).stdout == "list[0].value: 20 → 25\n")
            #expect(try FerryProcess.ferry(["diff", "samplelist.json", "2", "1"], in: dir).stdout == "list[0].value: 25 → 20\n")
            #expect(try FerryProcess.ferry(["diff", "samplelist.json", "-1"], in: dir).stdout == "list[0].value: 20 → 25\n")
            #expect(try FerryProcess.ferry(["diff", "samplelist.json", "--no-such-flag"], in: dir).status == 2)
            let json = try FerryProcess.ferry(["diff", "samplelist.json", "1", "2", "--json"], in: dir)
            let changes = try #require(try JSONSerialization.jsonObject(with: json.stdoutData) as? [[String: Any]])
            #expect(changes.count == 1)
            #expect(changes.first?["path"] as? String == "list[0].value" && changes.first?["op"] as? String == "changed")
            #expect(changes.first?["old"] as? Int == 20 && changes.first?["new"] as? Int == 25)
            // Added and removed members, a key that is no identifier.
            _ = try FerryProcess.shell(#"jq '. + {"a key": [1]} | del(.type)' samplelist.json > x && mv x samplelist.json"#, in: dir)
            #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
            let members = try FerryProcess.ferry(["diff", "samplelist.json"], in: dir).stdout
            #expect(members == "[\"a key\"]: + [1]\nname: \"Inventory\" → \"Stock\"\ntype: - \"list\"\n", "\(members)")
            // A file document: sizes and SHA-256.
            try tmp.write("inv/notes.txt", "hello")
            #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
            try tmp.write("inv/notes.txt", "hello world")
            let file = try FerryProcess.ferry(["diff", "notes.txt"], in: dir)
            let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
            let helloWorld = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
            #expect(file.stdout == "sizes 5 → 11 bytes, sha256 \(hello) → \(helloWorld)\n", "\(file.stdout)\(file.stderr)")
        }
    }

    @Test func logPatchShowsEachRevisionsChange() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = try editedSample(tmp)
            let log = try FerryProcess.ferry(["log", "samplelist.json", "-p"], in: dir)
            #expect(log.status == 0, "\(log.stderr)")
            let lines = log.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 4, "\(log.stdout)")
            #expect(lines[0].hasPrefix("2\t") && lines[1] == "    list[0].value: 20 → 25", "\(log.stdout)")
            #expect(lines[2].hasPrefix("1\t") && lines[3] == "    created", "\(log.stdout)")
            let json = try FerryProcess.ferry(["log", "samplelist.json", "--patch", "--json"], in: dir)
            let entries = try #require(try JSONSerialization.jsonObject(with: json.stdoutData) as? [[String: Any]])
            let changes = try #require(entries.first?["changes"] as? [[String: Any]])
            #expect(changes.count == 1 && changes[0]["path"] as? String == "list[0].value" && changes[0]["new"] as? Int == 25)
            // Without -p, log is as it was.
            let plain = try FerryProcess.ferry(["log", "--json"], in: dir)
            #expect(!plain.stdout.contains("\"changes\""))
        }
    }
}
