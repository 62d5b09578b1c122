import Foundation
import Testing
import FerryTesting

/// A full disk loses nothing: the agent reports it, the log and objects stay consistent, and
/// the edit is recorded once there is room again. Needs root (to mount a small tmpfs).
@Suite(.serialized) struct FullDiskTests {
    /// True when this process may mount a tmpfs (root, and a sandbox that allows it): probed
    /// once by mounting and unmounting one.
    static let canMount: Bool = {
        guard getuid() == 0 else { return false }
        let probe = TemporaryDirectory()
        guard let r = try? FerryProcess.shell("mount -t tmpfs -o size=64k ferry-probe \(probe.path) && umount \(probe.path)") else { return false }
        return r.status == 0
    }()

    @Test(.enabled(if: canMount, "skipped: mounting a 3 MiB tmpfs needs root and a sandbox that allows mount"))
    func aFullDiskLosesNothing() async throws {
        try await endToEnd {
            guard let disk = try SmallDisk(size: "3m") else { return }
            let mnt = disk.path
            let dir = mnt + "/inv"
            #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
            let agent = try RunningAgent(folder: dir)
            let before = RevisionLogReader.lines(dir).count
            // Fill the disk (outside the folder), then save an edit in place.
            _ = try FerryProcess.shell("dd if=/dev/zero of=\(mnt)/filler bs=4k 2>/dev/null; true")
            let edit = try FerryProcess.shell("python3 -c \"p='samplelist.json'; t=open(p).read().replace('\\\"Inventory\\\"', '\\\"Full\\\"', 1); open(p, 'w').write(t)\"", in: dir)
            #expect(edit.status == 0, "\(edit.stderr)")
            let deadline = Date().addingTimeInterval(3)
            while !agent.log().contains("No space left") && Date() < deadline { usleep(20_000) }
            #expect(agent.log().contains("No space left on device"), "\(agent.log())")
            #expect(RevisionLogReader.lines(dir).count == before)
            let tornCheck = try FerryProcess.shell("tail -c 1 .ferry/revs.log | od -An -c", in: dir)
            #expect(tornCheck.stdout.contains("\\n"))
            // Room again: the edit is recorded without another save (the agent tries again,
            // as no event says room was freed), then the next save too, and the folder verifies.
            _ = try FerryProcess.shell("rm -f \(mnt)/filler")
            let retried = RevisionLogReader.wait(dir, count: before + 1, timeout: 20)
            #expect(retried.count == before + 1, "\(agent.log())")
            #expect(try FerryProcess.ferry(["show", "samplelist.json"], in: dir).stdout.contains("\"Full\""))
            _ = try FerryProcess.shell("python3 -c \"p='samplelist.json'; t=open(p).read().replace('\\\"Full\\\"', '\\\"Room\\\"', 1); open(p, 'w').write(t)\"", in: dir)
            let after = RevisionLogReader.wait(dir, count: before + 2, timeout: 3)
            #expect(after.count == before + 2)
            agent.stop()
            let verify = try FerryProcess.ferry(["verify"], in: dir)
            #expect(verify.status == 0, "\(verify.stdout)")
            #expect(try FileSystemCheck.emptyTemp(dir))
        }
    }
}

extension FullDiskTests {
    /// The disk fills just as the first small body's pack is started: the scan fails and says
    /// so, and once there is room the next scan records the document (the pack created and
    /// left empty by the failed write used to refuse every small body for good).
    @Test(.enabled(if: canMount, "skipped: mounting a tmpfs needs root and a sandbox that allows mount"))
    func aPackStartedOnAFullDiskIsStartedAgainOnceThereIsRoom() throws {
        guard let disk = try SmallDisk(size: "1m") else { return }
        let mnt = disk.path
        let dir = mnt + "/f"
        #expect(try FerryProcess.ferry(["init", dir]).status == 0)
        _ = try FerryProcess.shell(#"printf '{"a": 1}\n' > f/x.json && dd if=/dev/zero of=filler bs=4k 2>/dev/null; true"#, in: mnt)
        let full = try FerryProcess.ferry(["scan"], in: dir)
        #expect(full.status != 0 && full.stderr.contains("No space left on device"), "\(full.stderr)")
        _ = try FerryProcess.shell("rm -f filler", in: mnt)
        let roomy = try FerryProcess.ferry(["scan"], in: dir)
        #expect(roomy.status == 0, "\(roomy.stderr)")
        #expect(RevisionLogReader.lines(dir).map(\.doc) == ["x.json"])
        #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
    }

    /// Issue 17: the receiver's disk fills during continuous replication; once room is back,
    /// every document arrives within 10 s, with no reconnection needed and nothing damaged.
    @Test(.enabled(if: canMount, "skipped: mounting a tmpfs needs root and a sandbox that allows mount"))
    func continuousReplicationResumesOnceTheDiskHasRoomAgain() async throws {
        try await endToEnd {
            guard let disk = try SmallDisk(size: "8m") else { return }
            let tmp = disk.directory
            let a = tmp.appending("a"), mnt = disk.path
            // 300 documents of 4 KB: 2.4 MB on the receiver (each body as an object and a file).
            let make = try FerryProcess.shell(#"mkdir -p a && cd a && for i in $(seq 1 300); do printf '{"n": %d, "pad": "%s"}\n' $i "$(head -c 2000 /dev/zero | tr '\0' x)$(printf %04d $i)" > doc$i.json; done"#,
                                              in: tmp.path)
            #expect(make.status == 0, "\(make.stderr)")
            #expect(try FerryProcess.ferry(["init", a, "--name", "inv"]).status == 0)
            let b = mnt + "/b"
            #expect(try FerryProcess.ferry(["init", b, "--name", "inv"]).status == 0)
            // Leave about 300 KB free: room for a few dozen documents.
            let fill = try FerryProcess.shell("free=$(df --output=avail -B1 . | tail -1); dd if=/dev/zero of=filler bs=4096 count=$(( (free - 300000) / 4096 )) 2>/dev/null; df -k .",
                                              in: mnt)
            #expect(fill.status == 0, "\(fill.stderr)")
            let listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off"])
            let url = try #require(listener.url)
            let receiver = try RunningAgent(folder: b, arguments: ["--no-listen", "--peer", url, "--max-attempt-wait", "0.5"])
            #expect(eventually(20) { receiver.log().contains("No space left") || listener.log().contains("No space left") },
                    "\(receiver.log().suffix(2000))")
            // The receiver's status says why, though its connection stays up.
            #expect(eventually(10) { (receiver.replication()?["last_error"] as? String)?.contains("No space left") == true },
                    "\(receiver.replication() ?? [:])")
            let arrivedWhileFull = FolderComparison.files(b).count
            #expect(arrivedWhileFull < 300)
            _ = try FerryProcess.shell("rm -f filler", in: mnt)
            let roomAgain = Date()
            #expect(eventually(10) { FolderComparison.differences(a, b).isEmpty },
                    "\(FolderComparison.differences(a, b).prefix(5)) after \(Date().timeIntervalSince(roomAgain)) s; \(receiver.log().suffix(1500))")
            let took = Date().timeIntervalSince(roomAgain)
            // Stored again: the error is no longer the status's last word.
            #expect(eventually(5) { receiver.replication().map { $0["last_error"] is NSNull } == true }, "\(receiver.replication() ?? [:])")
            receiver.stop()
            listener.stop()
            #expect(took < 10)
            let verify = try FerryProcess.ferry(["verify"], in: b)
            #expect(verify.status == 0, "\(verify.stdout)")
            #expect(try FileSystemCheck.emptyTemp(b))
        }
    }
}

extension FullDiskTests {
    /// A folder bind-mounted inside itself: ferry's own log, lock and objects are never
    /// documents, and the scan and the watcher end (issue 17).
    @Test(.enabled(if: canMount, "skipped: bind-mounting needs root and a sandbox that allows mount"))
    func aFolderMountedInsideItselfIsNotADocumentTree() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("inv")
            #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
            try FileManager.default.createDirectory(atPath: dir + "/loop", withIntermediateDirectories: true)
            guard try FerryProcess.shell("mount --bind \(dir) \(dir)/loop").status == 0 else {
                Issue.record("bind mount failed although running as root")
                return
            }
            defer { _ = try? FerryProcess.shell("umount -l \(dir)/loop") }
            let agent = try RunningAgent(folder: dir)
            try "{\"v\": 1}\n".write(toFile: dir + "/new.json", atomically: false, encoding: .utf8)
            #expect(eventually(10) { RevisionLogReader.lines(dir).count == 2 })
            let scan = try FerryProcess.ferry(["status"], in: dir)
            #expect(scan.status == 0, "\(scan.stderr)")
            #expect(scan.stdout.contains("not synced: loop"), "\(scan.stdout)")
            agent.stop()
            let docs = Set(RevisionLogReader.lines(dir).map(\.doc))
            #expect(docs == ["samplelist.json", "new.json"], "\(docs)")
        }
    }
}

enum FileSystemCheck {
    /// True when `.ferry/tmp` holds no leftovers.
    static func emptyTemp(_ dir: String) throws -> Bool {
        try FileManager.default.contentsOfDirectory(atPath: dir + "/.ferry/tmp").isEmpty
    }
}

/// A tmpfs of a few megabytes mounted in a temporary directory (`path`), unmounted when it
/// goes; `directory` is the temporary directory, for folders beside it.
final class SmallDisk {
    let directory = TemporaryDirectory()
    let path: String

    /// Mounts it; nil (with the test's issue recorded) when mounting fails.
    init?(size: String) throws {
        path = directory.appending("small")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard try FerryProcess.shell("mount -t tmpfs -o size=\(size) ferry-test \(path)").status == 0 else {
            Issue.record("mount failed although running as root")
            return nil
        }
    }

    deinit { _ = try? FerryProcess.shell("umount -l \(path)") }
}
