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
    func aFullDiskLosesNothing() throws {
        let tmp = TemporaryDirectory()
        let mnt = tmp.appending("small")
        try FileManager.default.createDirectory(atPath: mnt, withIntermediateDirectories: true)
        guard try FerryProcess.shell("mount -t tmpfs -o size=3m ferry-test \(mnt)").status == 0 else {
            Issue.record("mount failed although running as root")
            return
        }
        defer { _ = try? FerryProcess.shell("umount -l \(mnt)") }
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
        // Room again: the next save is recorded, and the folder verifies.
        _ = try FerryProcess.shell("rm -f \(mnt)/filler")
        _ = try FerryProcess.shell("python3 -c \"p='samplelist.json'; t=open(p).read().replace('\\\"Full\\\"', '\\\"Room\\\"', 1); open(p, 'w').write(t)\"", in: dir)
        let after = RevisionLogReader.wait(dir, count: before + 1, timeout: 3)
        #expect(after.count == before + 1)
        agent.stop()
        let verify = try FerryProcess.ferry(["verify"], in: dir)
        #expect(verify.status == 0, "\(verify.stdout)")
        #expect(try FileSystemCheck.emptyTemp(dir))
    }
}

enum FileSystemCheck {
    /// True when `.ferry/tmp` holds no leftovers.
    static func emptyTemp(_ dir: String) throws -> Bool {
        try FileManager.default.contentsOfDirectory(atPath: dir + "/.ferry/tmp").isEmpty
    }
}
