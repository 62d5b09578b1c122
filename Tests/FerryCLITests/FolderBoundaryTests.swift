import Foundation
import Testing
import FerryCore
import FerryStore
import FerryTesting

/// Issue 17, end to end, as an unprivileged user in its home folder: what a peer has never
/// reaches outside the folder through a symbolic link, and a file and a directory of the same
/// name on two peers are both kept, with no deletion anybody made.
@Suite(.serialized) struct FolderBoundaryTests {
    /// Every entry of `folder`'s log.
    static func entries(_ folder: String) throws -> [LogEntry] {
        try FolderStore.open(at: folder, writable: false).readLogEntries()
    }

    /// `ferry verify` passes in every folder.
    static func verified(_ sandbox: UserSandbox, _ folders: [String]) throws -> Bool {
        try folders.allSatisfy { try sandbox.ferry(["verify"], in: $0).status == 0 }
    }

    @Test func aPeersDocumentsUnderASymlinkedDirectoryAreHeldBackNotWrittenThroughIt() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let (a, b, outside) = (sandbox.path("a"), sandbox.path("b"), sandbox.path("outside"))
            for folder in [a, b] { #expect(try sandbox.ferry(["init", folder, "--name", "shared"], in: sandbox.root).status == 0) }
            // z.bin is a blob: a's side fetches it, and writes no copy of it through the link.
            try sandbox.shell(#"mkdir -p shared && printf '{"from": "b"}\n' > shared/x.json && printf '{"only": "b"}\n' > shared/y.json && head -c 300000 /dev/urandom > shared/z.bin"#, in: b)
            #expect(try sandbox.shell("mkdir -p outside && printf '{\"secret\": 1}\\n' > outside/x.json && ln -sfn \(outside) a/shared", in: sandbox.root).status == 0)
            let before = try sandbox.shell("ls -la outside; sha256sum outside/*; stat -c '%n %y' outside", in: sandbox.root).stdout
            let listener = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let url = try #require(listener.url)
            let sync = try sandbox.ferry(["sync", url], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")

            // Nothing outside the folder changed, b's files are b's, and a's own files under the
            // link were never read as documents (nothing of `outside` travelled to b).
            #expect(try sandbox.shell("ls -la outside; sha256sum outside/*; stat -c '%n %y' outside", in: sandbox.root).stdout == before)
            #expect(FileManager.default.contents(atPath: b + "/shared/x.json") == Data(#"{"from": "b"}"#.utf8 + [0x0A]))
            #expect(try Self.entries(b).allSatisfy { $0.origin == "local" }, "b received something from a")
            // a holds both documents' revisions back and says so.
            #expect(try Set(Self.entries(a).map(\.doc.rawValue)) == ["shared/x.json", "shared/y.json", "shared/z.bin"])
            let conflicts = try sandbox.ferry(["conflicts"], in: a)
            #expect(conflicts.stdout.contains("HELD BACK\tshared/x.json\tshared is a symbolic link"), "\(conflicts.stdout)")
            #expect(try sandbox.ferry(["status"], in: a).stdout.contains("held back: shared/y.json"))
            #expect(try Self.verified(sandbox, [a, b]))

            // The link goes; the documents come in.
            #expect(try sandbox.shell("rm shared", in: a).status == 0)
            #expect(eventually(10) { (try? JSONParser.parse(Array(FileManager.default.contents(atPath: a + "/shared/y.json") ?? Data()))) == ["only": "b"] })
            #expect(eventually(10) { (try? JSONParser.parse(Array(FileManager.default.contents(atPath: a + "/shared/x.json") ?? Data()))) == ["from": "b"] })
            #expect(eventually(10) { FileManager.default.contents(atPath: a + "/shared/z.bin") == FileManager.default.contents(atPath: b + "/shared/z.bin") })
            #expect(try sandbox.shell("ls -la outside; sha256sum outside/*; stat -c '%n %y' outside", in: sandbox.root).stdout == before)
            #expect(listener.stop() == 0)
            #expect(try Self.verified(sandbox, [a, b]))
        }
    }

    @Test func aFileAndADirectoryOfTheSameNameAreBothKeptAndNothingIsDeleted() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let (a, b) = (sandbox.path("a"), sandbox.path("b"))
            for folder in [a, b] { #expect(try sandbox.ferry(["init", folder, "--name", "shared"], in: sandbox.root).status == 0) }
            try sandbox.shell("printf 'a plain file\\n' > clash", in: a)
            try sandbox.shell(#"mkdir clash && printf '{"inner": 1}\n' > clash/inner.json"#, in: b)
            let listener = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let url = try #require(listener.url)
            for round in 1...2 {
                let started = Date()
                let sync = try sandbox.ferry(["sync", url], in: b)
                #expect(sync.status == 0, "round \(round): \(sync.stderr)")
                #expect(Date().timeIntervalSince(started) < 30, "round \(round) took \(Date().timeIntervalSince(started)) s")
            }
            #expect(FileManager.default.contents(atPath: a + "/clash") == Data("a plain file\n".utf8))
            #expect(FileManager.default.contents(atPath: b + "/clash/inner.json") == Data(#"{"inner": 1}"#.utf8 + [0x0A]))
            for folder in [a, b] {
                let entries = try Self.entries(folder)
                #expect(entries.filter(\.deleted).isEmpty, "\(folder): a deletion nobody made: \(entries.filter(\.deleted))")
                #expect(Set(entries.map(\.doc.rawValue)) == ["clash", "clash/inner.json"], "\(folder): \(entries.map(\.doc))")
                let conflicts = try sandbox.ferry(["conflicts"], in: folder)
                #expect(conflicts.stdout.contains("HELD BACK"), "\(folder): \(conflicts.stdout)")
            }
            #expect(listener.stop() == 0)
            #expect(try Self.verified(sandbox, [a, b]))
        }
    }

    @Test func anUnreadableFileIsReportedNotFatalAndRecordedOnceReadable() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let a = sandbox.path("a")
            #expect(try sandbox.ferry(["init", a], in: sandbox.root).status == 0)
            try sandbox.shell(#"printf '{"v": 1}\n' > open.json && printf '{"v": "hidden"}\n' > secret.json && printf 'bytes\n' > secret.bin && chmod 000 secret.json secret.bin"#, in: a)
            let status = try sandbox.ferry(["status"], in: a)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("unreadable: secret.json: permission denied"), "\(status.stdout)")
            #expect(status.stdout.contains("unreadable: secret.bin: permission denied"), "\(status.stdout)")
            let verify = try sandbox.ferry(["verify"], in: a)
            #expect(!verify.stderr.contains("Permission denied"), "\(verify.stderr)")
            let agent = try sandbox.agent(folder: a)
            #expect(eventually(10) { RevisionLogReader.lines(a).count == 1 })
            try sandbox.shell("chmod 644 secret.json secret.bin", in: a)
            #expect(eventually(10) { Set(RevisionLogReader.lines(a).map(\.doc)) == ["open.json", "secret.json", "secret.bin"] },
                    "\(agent.log().suffix(1500))")
            #expect(agent.stop() == 0)
            #expect(try sandbox.ferry(["verify"], in: a).status == 0)
        }
    }

    /// A directory the user made read-only takes no peer's revision, and costs no retry: the
    /// revisions are recorded and listed as held back; once the directory is writable again
    /// the files are written (and removed) without another sync.
    @Test func aReadOnlyDirectoryHoldsItsDocumentsBackUntilItIsWritable() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let (a, b) = (sandbox.path("a"), sandbox.path("b"))
            for folder in [a, b] { #expect(try sandbox.ferry(["init", folder, "--name", "shared"], in: sandbox.root).status == 0) }
            try sandbox.shell(#"mkdir notes && printf '{"v": 1}\n' > notes/old.json && printf '{"v": "gone"}\n' > notes/gone.json"#, in: b)
            let listener = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let url = try #require(listener.url)
            #expect(try sandbox.ferry(["sync", url], in: b).status == 0)
            #expect(try sandbox.shell("chmod 555 notes", in: a).status == 0)
            let before = try sandbox.shell("ls -la notes; sha256sum notes/*", in: a).stdout
            try sandbox.shell(#"printf '{"v": 2}\n' > notes/old.json && rm notes/gone.json && printf '{"v": "new"}\n' > notes/new.json && mkdir notes/deep && printf '{"v": "deep"}\n' > notes/deep/x.json"#, in: b)

            let started = Date()
            let sync = try sandbox.ferry(["sync", url], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(Date().timeIntervalSince(started) < 20, "refused writes were retried: \(Date().timeIntervalSince(started)) s")
            #expect(try sandbox.shell("ls -la notes; sha256sum notes/*", in: a).stdout == before)
            let status = try sandbox.ferry(["status"], in: a).stdout
            for doc in ["notes/old.json", "notes/gone.json", "notes/new.json", "notes/deep/x.json"] {
                #expect(status.contains("held back: \(doc): notes/ cannot be written here (permission denied)")
                        || status.contains("held back: \(doc): notes/deep/ cannot be written here (permission denied)"), "\(doc): \(status)")
            }
            // Recorded all the same: a's history has b's four revisions.
            let (received, sent) = (try Self.entries(a).filter { $0.origin != "local" }.count, try Self.entries(b).count)
            #expect(received == sent)

            // Beside no agent, `status` tells the same (the files are not the user's changes),
            // and an agent started again still writes them once it can.
            #expect(listener.stop() == 0)
            let alone = try sandbox.ferry(["status"], in: a).stdout
            for doc in ["notes/old.json", "notes/gone.json", "notes/new.json"] {
                #expect(alone.contains("held back: \(doc): notes/ cannot be written here (permission denied)"), "\(doc): \(alone)")
            }
            #expect(alone.contains("held back: notes/deep/x.json: "), "\(alone)")
            #expect(!alone.contains("modified") && !alone.contains("added") && !alone.contains("deleted"), "\(alone)")
            let again = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            #expect(eventually(10) { (try? sandbox.ferry(["status"], in: a).stdout.contains("held back: notes/new.json")) == true })

            #expect(try sandbox.shell("chmod 755 notes", in: a).status == 0)
            let read = { (path: String) in (try? JSONParser.parse(Array(FileManager.default.contents(atPath: a + "/" + path) ?? Data()))) }
            #expect(eventually(10) { read("notes/old.json") == ["v": 2] && read("notes/new.json") == ["v": "new"] && read("notes/deep/x.json") == ["v": "deep"] },
                    "\(again.log().suffix(1500))")
            #expect(eventually(10) { !FileManager.default.fileExists(atPath: a + "/notes/gone.json") })
            #expect(eventually(10) { (try? sandbox.ferry(["status"], in: a).stdout.contains("held back")) == false })
            let own = try Self.entries(a).filter { $0.origin == "local" }
            #expect(own.isEmpty, "a recorded something of its own: \(own)")
            #expect(again.stop() == 0)
            #expect(try Self.verified(sandbox, [a, b]))
        }
    }

    /// A directory on a filesystem mounted read-only holds its documents back; remounted
    /// read-write, which sends no inotify event, they are written all the same (the agent
    /// tries again every few seconds). Root mounts; the agents run as the unprivileged user.
    @Test(.enabled(if: FullDiskTests.canMount, "skipped: bind-mounting needs root and a sandbox that allows mount"))
    func aDirectoryRemountedWritableGetsItsHeldBackDocumentsWithoutAnEvent() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let (a, b) = (sandbox.path("a"), sandbox.path("b"))
            for folder in [a, b] { #expect(try sandbox.ferry(["init", folder, "--name", "shared"], in: sandbox.root).status == 0) }
            try sandbox.shell(#"mkdir notes && printf '{"v": 1}\n' > notes/old.json"#, in: b)
            let listener = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let url = try #require(listener.url)
            #expect(try sandbox.ferry(["sync", url], in: b).status == 0)
            let notes = a + "/notes"
            let mounted = try FerryProcess.shell("mount --bind \(notes) \(notes) && mount -o remount,bind,ro \(notes)")
            #expect(mounted.status == 0, "\(mounted.stderr)")
            defer { _ = try? FerryProcess.shell("umount \(notes)") }
            try sandbox.shell(#"printf '{"v": 2}\n' > notes/old.json"#, in: b)
            #expect(try sandbox.ferry(["sync", url], in: b).status == 0)
            #expect(try sandbox.ferry(["status"], in: a).stdout.contains("held back: notes/old.json: notes/ cannot be written here"))

            #expect(try FerryProcess.shell("mount -o remount,bind,rw \(notes)").status == 0)
            let read = { (try? JSONParser.parse(Array(FileManager.default.contents(atPath: notes + "/old.json") ?? Data()))) }
            #expect(eventually(15) { read() == ["v": 2] }, "\(listener.log().suffix(1500))")
            #expect(listener.stop() == 0)
            #expect(try Self.verified(sandbox, [a, b]))
        }
    }

    @Test func aFerryFolderInsideAnotherKeepsItsStateToItself() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let (outer, inner) = (sandbox.path("outer"), sandbox.path("outer/inner"))
            #expect(try sandbox.ferry(["init", inner], in: sandbox.root).status == 0)
            try sandbox.shell(#"printf '{"v": 1}\n' > doc.json"#, in: inner)
            #expect(try sandbox.ferry(["scan"], in: inner).status == 0)
            #expect(try sandbox.ferry(["init", outer], in: sandbox.root).status == 0)
            let docs = Set(RevisionLogReader.lines(outer).map(\.doc))
            #expect(docs == ["inner/doc.json"], "\(docs)")
            #expect(try sandbox.ferry(["status"], in: outer).stdout.contains("not synced: inner/.ferry"))
        }
    }

    /// A 256 MiB file with 8 KiB of data stays sparse: its object and the peer's copy take
    /// about what its data takes, not 256 MiB each.
    @Test func aSparseFileStaysSparseInTheObjectsAndOnThePeer() async throws {
        try await endToEnd {
            let sandbox = try UserSandbox()
            let (a, b) = (sandbox.path("a"), sandbox.path("b"))
            for folder in [a, b] { #expect(try sandbox.ferry(["init", folder, "--name", "shared"], in: sandbox.root).status == 0) }
            try sandbox.shell("truncate -s 256M disk.img && printf 'head' | dd of=disk.img conv=notrunc status=none && printf 'middle' | dd of=disk.img bs=1M seek=100 conv=notrunc status=none", in: a)
            #expect(try sandbox.ferry(["scan"], in: a).status == 0)
            let listener = try sandbox.agent(folder: a, arguments: ["--tls", "off", "--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let sync = try sandbox.ferry(["sync", try #require(listener.url), "--pull"], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(listener.stop() == 0)
            let same = try sandbox.shell("cmp a/disk.img b/disk.img && sha256sum a/disk.img | cut -c1-64", in: sandbox.root)
            #expect(same.status == 0, "\(same.stdout) \(same.stderr)")
            let digest = same.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let object = ".ferry/objects/\(digest.prefix(2))/\(digest.dropFirst(2))"
            let usage = try sandbox.shell("du -k --apparent-size b/disk.img | cut -f1; du -k b/disk.img a/\(object) b/\(object) | cut -f1", in: sandbox.root)
            let kib = usage.stdout.split(separator: "\n").compactMap { Int($0) }
            #expect(kib.count == 4 && kib[0] == 256 * 1024, "\(usage.stdout) \(usage.stderr)")
            #expect(kib.dropFirst().allSatisfy { $0 < 1024 }, "disk use in KiB (file, a's object, b's object): \(kib.dropFirst())")
        }
    }
}
