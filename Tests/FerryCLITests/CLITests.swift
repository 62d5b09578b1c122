import Foundation
import Testing
import FerryTesting

/// End-to-end: the built `ferry` binary, driven the way a user drives it, checked with the
/// shell tools the format promises to work with (`sha256sum`, `jq`).
@Suite struct CLITests {
    @Test func initSampleGivesAVerifiableFolder() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("inventory")
            let r = try FerryProcess.ferry(["init", "--sample", dir])
            #expect(r.status == 0, "\(r.stderr)")
            // sha256sum of every object prints its own path.
            let sums = try FerryProcess.shell("cd .ferry/objects && find . -type f | sed 's|^./||' | while read f; do h=$(sha256sum \"$f\" | cut -d' ' -f1); [ \"${f%%/*}${f#*/}\" = \"$h\" ] || echo \"BAD $f\"; done; find . -type f | wc -l", in: dir)
            #expect(!sums.stdout.contains("BAD"), "\(sums.stdout)")
            #expect((Int(sums.stdout.split(separator: "\n").last ?? "0") ?? 0) > 40)
            // Every log line parses with jq, and carries the promised fields.
            let jq = try FerryProcess.shell("jq -e -c 'select(.seq and .doc and .rev and has(\"parent\") and has(\"deleted\") and .kind and .object and .size and .origin and .time)' .ferry/revs.log | wc -l", in: dir)
            #expect(jq.status == 0 && jq.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(jq.stdout)\(jq.stderr)")
            #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
            // The image blob of the first item names an object that exists.
            let digest = try FerryProcess.shell("ferry() { \"\(FerryProcess.ferryExecutable)\" \"$@\"; }; ferry show samplelist.json | jq -r '.list[0].image.digest'", in: dir)
            let hex = digest.stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "sha256-", with: "")
            #expect(hex.count == 64)
            #expect(FileManager.default.fileExists(atPath: "\(dir)/.ferry/objects/\(hex.prefix(2))/\(hex.dropFirst(2))"))
            // Every item has an image; items without their own picture share the default one.
            let images = try FerryProcess.shell("jq -r '.list[] | .image.digest' samplelist.json | sort -u | wc -l; jq '.list | length' samplelist.json", in: dir)
            let counts = images.stdout.split(separator: "\n").compactMap { Int($0) }
            #expect(counts.count == 2 && counts[0] == counts[1] - 2, "\(images.stdout)")
            // folder.json has the promised fields.
            let folder = try FerryProcess.shell("jq -e '.id and .name == \"inventory\" and .created and .format == 2' .ferry/folder.json", in: dir)
            #expect(folder.status == 0)
        }
    }

    /// A skipped name holding a newline or an escape prints as one quoted line, never raw.
    @Test func aNameWithAControlCharacterPrintsOnOneLine() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try Data("{}".utf8).write(to: URL(fileURLWithPath: dir + "/bad\nname.json"))
            try Data("{}".utf8).write(to: URL(fileURLWithPath: dir + "/bell\u{1B}[31m.json"))
            for args in [["init", dir], ["-C", dir, "status"]] {
                let r = try FerryProcess.ferry(args)
                #expect(r.status == 0, "\(r.stderr)")
                let lines = r.stdout.split(separator: "\n").filter { $0.contains("not synced") }
                #expect(lines.count == 2 && lines.contains { $0.contains(#"not synced: "bad\nname.json": "#) }
                        && lines.contains { $0.contains(#"not synced: "bell\u001b[31m.json": "#) }, "\(args[0]): \(r.stdout)")
                #expect(!r.stdout.unicodeScalars.contains("\u{1B}"), "\(args[0])")
            }
        }
    }

    /// `verify` says what kind of change a file not recorded yet is, as `status` does.
    @Test func verifyNamesEachUnrecordedChangeForWhatItIs() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try tmp.write("f/kept.json", #"{"v": 1}"#)
            try tmp.write("f/gone.json", #"{"v": 1}"#)
            #expect(try FerryProcess.ferry(["init", dir]).status == 0)
            try tmp.write("f/kept.json", #"{"v": 2}"#)
            try tmp.write("f/new.json", #"{"v": 1}"#)
            try FileManager.default.removeItem(atPath: dir + "/gone.json")
            let r = try FerryProcess.ferry(["verify"], in: dir)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout.contains("pending: new.json is a new file (not recorded yet)")
                    && r.stdout.contains("pending: kept.json differs from its current revision (not recorded yet)")
                    && r.stdout.contains("pending: gone.json is gone (its deletion not recorded yet)"), "\(r.stdout)")
        }
    }

    @Test func aFlippedByteIsNamedByVerify() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
            let victim = try FerryProcess.shell("find .ferry/objects -type f | sort | head -1", in: dir).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            _ = try FerryProcess.shell("chmod u+w \(victim) && printf 'Z' | dd of=\(victim) bs=1 seek=5 conv=notrunc 2>/dev/null", in: dir)
            let r = try FerryProcess.ferry(["verify"], in: dir)
            #expect(r.status != 0)
            #expect(r.stdout.contains(String(victim.dropFirst(".ferry/".count))), "\(r.stdout)")
        }
    }

    @Test func aTornLogLineLeavesEveryEarlierRevisionReadable() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
            for v in [11, 12, 13] {
                _ = try FerryProcess.shell("sed -i '0,/\"value\": [0-9]*/s//\"value\": \(v)/' samplelist.json", in: dir)
                #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
            }
            let full = try FerryProcess.ferry(["log", "--json"], in: dir)
            _ = try FerryProcess.shell("printf '{\"seq\": 5, \"doc\": \"samplel' >> .ferry/revs.log", in: dir)
            let after = try FerryProcess.ferry(["log", "--json"], in: dir)
            #expect(after.status == 0)
            #expect(after.stdout == full.stdout)
            #expect(try FerryProcess.ferry(["log"], in: dir).stdout.split(separator: "\n").count == 4)
            #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
            // The next writer repairs the tail, and the log goes on.
            _ = try FerryProcess.shell("sed -i 's/\"value\": 13/\"value\": 14/' samplelist.json", in: dir)
            #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
            let lines = try FerryProcess.shell("jq -c .seq .ferry/revs.log | tr '\\n' ' '", in: dir)
            #expect(lines.status == 0 && lines.stdout == "1 2 3 4 5 ", "\(lines.stdout) \(lines.stderr)")
            // Old bodies stay readable by revision.
            let first = try FerryProcess.shell("jq -r 'select(.seq == 1) | .rev' .ferry/revs.log", in: dir).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try FerryProcess.ferry(["show", "samplelist.json@\(first)"], in: dir).status == 0)
        }
    }

    @Test func exitCodesFollowTheSpec() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let notFolder = tmp.appending("plain")
            try FileManager.default.createDirectory(atPath: notFolder, withIntermediateDirectories: true)
            let r1 = try FerryProcess.ferry(["log"], in: notFolder)
            #expect(r1.status == 4 && r1.stderr.contains("not"), "\(r1.stderr)")
            #expect(try FerryProcess.ferry(["status"], in: notFolder).status == 4)
            #expect(try FerryProcess.ferry(["frobnicate"], in: notFolder).status == 2)
            #expect(try FerryProcess.ferry(["log", "--no-such-flag"], in: notFolder).status == 2)
            #expect(try FerryProcess.ferry(["--help"]).status == 0)
            #expect(try FerryProcess.ferry(["init", "--help"]).status == 0)
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", dir]).status == 0)
            #expect(try FerryProcess.ferry(["init", dir]).status == 1)
            // A second writer is refused with exit 4 while another process holds the lock.
            let locked = try FerryProcess.shell("flock -x .ferry/lock -c '\"\(FerryProcess.ferryExecutable)\" scan; echo \"exit=$?\"'", in: dir)
            #expect(locked.stdout.contains("exit=4"), "\(locked.stdout) \(locked.stderr)")
            #expect(locked.stderr.contains("in use"))
            #expect(try FerryProcess.ferry(["show", "nothing.json"], in: dir).status == 1)
        }
    }

    @Test func dashCFindsTheFolderAndSubdirectoriesFindTheirAncestor() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
            let viaC = try FerryProcess.ferry(["-C", dir, "status", "--json"])
            #expect(viaC.status == 0)
            try FileManager.default.createDirectory(atPath: dir + "/notes/deep", withIntermediateDirectories: true)
            let nested = try FerryProcess.ferry(["status", "--json"], in: dir + "/notes/deep")
            #expect(nested.status == 0 && nested.stdout == viaC.stdout)
        }
    }

    @Test func statusListsUnreadableFilesWithLineAndColumnAndPendingChanges() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
            try tmp.write("f/broken.json", "{\"type\": ")
            try tmp.write("f/new.json", "{\"a\": 1}")
            _ = try FerryProcess.shell("sed -i 's/\"Inventory\"/\"Stock\"/' samplelist.json", in: dir)
            let s = try FerryProcess.ferry(["status"], in: dir)
            #expect(s.stdout.contains("broken.json: line 1, column 10"), "\(s.stdout)")
            #expect(s.stdout.contains("added new.json") && s.stdout.contains("modified samplelist.json"), "\(s.stdout)")
            let scan = try FerryProcess.ferry(["scan"], in: dir)
            #expect(scan.stdout.contains("not recorded: broken.json: line 1, column 10"))
            #expect(try FerryProcess.ferry(["log", "broken.json"], in: dir).stdout.isEmpty)
        }
    }

    @Test func conflictsAndCompactCommandsWork() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            #expect(try FerryProcess.ferry(["init", "--sample", dir]).status == 0)
            for v in 0..<25 {
                _ = try FerryProcess.shell("sed -i '0,/\"value\": [0-9]*/s//\"value\": \(100 + v)/' samplelist.json", in: dir)
                #expect(try FerryProcess.ferry(["scan"], in: dir).status == 0)
            }
            let c = try FerryProcess.ferry(["compact", "--json"], in: dir)
            #expect(c.status == 0 && c.stdout.contains("\"revisions_compacted\": 5"), "\(c.stdout)")
            #expect(try FerryProcess.ferry(["verify"], in: dir).status == 0)
            #expect(try FerryProcess.ferry(["conflicts"], in: dir).stdout.contains("No conflicts"))
            #expect(try FerryProcess.shell("jq -s 'length' .ferry/revs.log", in: dir).stdout.hasPrefix("26"))
        }
    }
}

@Suite struct UsersCommandTests {
    @Test func hashPasswordPrintsALineThatVerifiesAndNeverTakesThePasswordAsAnArgument() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            try tmp.write("pw", "correct horse\n")
            let r = try FerryProcess.ferry(["users", "hash-password", "--name", "carol", "--password-file", tmp.appending("pw"), "--rounds", "210000"])
            #expect(r.status == 0, "\(r.stderr)")
            let line = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: String])
            #expect(line["name"] == "carol")
            #expect(line["password_hash"]?.hasPrefix("pbkdf2-sha256$210000$") == true)
            let viaEnv = try FerryProcess.ferry(["users", "hash-password", "--name", "dave", "--rounds", "210000"], environment: ["FERRY_PASSWORD": "x"])
            #expect(viaEnv.status == 0 && viaEnv.stdout.contains("\"dave\""))
            #expect(try FerryProcess.ferry(["users", "hash-password", "--name", "x", "--password", "oops"]).status == 2)
            #expect(try FerryProcess.ferry(["users", "hash-password", "--name", "x", "--rounds", "5"]).status == 2)
        }
    }
}

/// Ctrl-C in a real terminal (a pty, as a user's shell gives): an interrupted sync says so and
/// exits 130 instead of claiming it is up to date; a second Ctrl-C does not wait for the stop.
@Suite struct InterruptTests {
    /// Runs `ferry sync` against a port nothing listens on (it retries, offline) in a pty,
    /// types Ctrl-C `presses` times once it is retrying; prints the exit status and the output.
    func interruptedSync(presses: Int) throws -> (status: Int, output: String, seconds: Double) {
        let tmp = TemporaryDirectory()
        let dir = tmp.appending("inv")
        #expect(try FerryProcess.ferry(["init", dir]).status == 0)
        let script = """
            import os, pty, socket, sys, time
            s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
            pid, fd = pty.fork()
            if pid == 0:
                os.chdir(sys.argv[2])
                os.execv(sys.argv[1], [sys.argv[1], "sync", "ws://127.0.0.1:%d/inv" % port, "--max-attempt-wait", "30"])
            out = b""; deadline = time.time() + 20
            while b"offline" not in out and time.time() < deadline:
                try: out += os.read(fd, 4096)
                except OSError: break
            start = time.time()
            for _ in range(int(sys.argv[3])): os.write(fd, b"\\x03"); time.sleep(0.02)
            while time.time() < deadline + 10:
                try:
                    chunk = os.read(fd, 4096)
                    if not chunk: break
                    out += chunk
                except OSError: break
            _, status = os.waitpid(pid, 0)
            print(os.waitstatus_to_exitcode(status), "%.2f" % (time.time() - start))
            print(out.decode(errors="replace"))
            """
        let r = try FerryProcess.shell("python3 -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))' '\(FerryProcess.ferryExecutable)' '\(dir)' \(presses)")
        let first = r.stdout.split(separator: "\n").first.map(String.init) ?? ""
        let fields = first.split(separator: " ")
        return (Int(fields.first ?? "") ?? -1, r.stdout, Double(fields.last ?? "") ?? -1)
    }

    @Test func ctrlCDuringASyncSaysInterruptedAndExits130() async throws {
        try await endToEnd {
            let once = try interruptedSync(presses: 1)
            #expect(once.status == 130, "\(once.output)")
            #expect(once.output.contains("interrupted") && !once.output.contains("up to date"), "\(once.output)")
            let twice = try interruptedSync(presses: 2)
            #expect(twice.status == 130 && twice.seconds < 2, "\(twice.output)")
        }
    }
}

/// Passwords typed on a terminal are asked for and never echoed.
@Suite struct PasswordPromptTests {
    @Test func hashPasswordOnATerminalPromptsWithEchoOff() async throws {
        try await endToEnd {
            let script = """
                import os, pty, sys, time
                pid, fd = pty.fork()
                if pid == 0:
                    os.execv(sys.argv[1], [sys.argv[1], "users", "hash-password", "--name", "bob"])
                out = b""; deadline = time.time() + 10
                while b"password for bob:" not in out and time.time() < deadline:
                    out += os.read(fd, 1024)
                os.write(fd, b"s3cret-typed\\n")
                while time.time() < deadline:
                    try:
                        chunk = os.read(fd, 4096)
                        if not chunk: break
                        out += chunk
                    except OSError: break
                _, status = os.waitpid(pid, 0)
                print(os.waitstatus_to_exitcode(status))
                print(out.decode(errors="replace"))
                """
            let r = try FerryProcess.shell("python3 -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))' '\(FerryProcess.ferryExecutable)'")
            #expect(r.stdout.hasPrefix("0\n"), "\(r.stdout)")
            #expect(r.stdout.contains("password for bob:") && r.stdout.contains("\"password_hash\":\"pbkdf2"), "\(r.stdout)")
            #expect(!r.stdout.contains("s3cret-typed"), "the password was echoed: \(r.stdout)")
        }
    }
}

@Suite struct StatusStatCacheTests {
    /// `ferry status` beside no agent reads only the files whose fingerprints changed since they
    /// were recorded (the stat cache the writer left), as a scan does.
    @Test func statusReadsOnlyChangedFiles() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let dir = tmp.appending("f")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try "{\"a\": 1}\n".write(toFile: dir + "/old.json", atomically: false, encoding: .utf8)
            try "{\"b\": 1}\n".write(toFile: dir + "/edited.json", atomically: false, encoding: .utf8)
            // Files written within 2 s of the cache's save are "racily clean" and always read.
            sleep(3)
            #expect(try FerryProcess.ferry(["init", dir]).status == 0)
            try "{\"b\": 2}\n".write(toFile: dir + "/edited.json", atomically: false, encoding: .utf8)
            let trace = tmp.appending("trace")
            let r = try FerryProcess.run("/usr/bin/strace", ["-f", "-e", "trace=openat", "-o", trace, FerryProcess.ferryExecutable, "status"], in: dir)
            #expect(r.status == 0 && r.stdout.contains("modified edited.json"), "\(r.stdout) \(r.stderr)")
            let opened = try String(contentsOfFile: trace, encoding: .utf8)
            #expect(opened.contains("/edited.json\"") && !opened.contains("/old.json\""), "\(opened)")
        }
    }
}
