// `ferry-bench --scale`: the figures of issue 21 (100,000 documents, 10,000 blobs, a 50,000-item
// list, 50 replicators, long histories, status), each beside its yardstick measured in the
// same run (see docs/performance.md).
import CFerrySystem
import FerryCore
import FerryStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Watches renames into one or many directories (how ferry writes a replicated file): one
/// inotify descriptor watching every directory.
final class ArrivalWatch {
    let fd: Int32

    init(_ directories: [String]) {
        fd = inotify_init1(Int32(IN_CLOEXEC))
        for d in directories { inotify_add_watch(fd, d, UInt32(IN_MOVED_TO)) }
    }

    /// Blocks until `name` was renamed into `count` of the directories (or `timeoutMs` passes
    /// without a rename); returns when the last one was, nil on a timeout.
    func waitForAll(_ name: String, count: Int, timeoutMs: Int32 = 10_000) -> UInt64? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var seen = Set<Int32>()  // the watches (directories) that saw it
        var arrived: UInt64 = 0
        while seen.count < count {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, timeoutMs) == 1 else { return nil }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return nil }
            arrived = DispatchTime.now().uptimeNanoseconds  // when the events were read, not parsed
            var offset = 0
            while offset + 16 <= n {
                let length = Int(buffer[offset + 12]) | Int(buffer[offset + 13]) << 8 | Int(buffer[offset + 14]) << 16 | Int(buffer[offset + 15]) << 24
                let nameBytes = buffer[(offset + 16)..<(offset + 16 + length)].prefix { $0 != 0 }
                let watch = Int32(bitPattern: UInt32(buffer[offset]) | UInt32(buffer[offset + 1]) << 8 | UInt32(buffer[offset + 2]) << 16 | UInt32(buffer[offset + 3]) << 24)
                if String(decoding: nameBytes, as: UTF8.self) == name { seen.insert(watch) }
                offset += 16 + length
            }
        }
        return arrived
    }

    /// Discards the renames seen so far (an initial sync's), so that the next wait counts only
    /// renames that happen after this call.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        for _ in 0..<1_000 where poll(&p, 1, 0) == 1 {
            guard buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 else { return }
        }
    }

    /// Blocks until `name` is renamed into `directory` holding the JSON body `expected`; returns
    /// when that rename was seen, nil after `timeoutMs` without a rename. A rename of another
    /// body (an earlier edit's arriving late) is not the one waited for.
    func waitForBody(_ name: String, in directory: String, equalTo expected: JSONValue, timeoutMs: Int32) -> UInt64? {
        for _ in 0..<20 {
            guard let arrived = waitForAll(name, count: 1, timeoutMs: timeoutMs) else { return nil }
            let bytes = FileManager.default.contents(atPath: directory + "/" + name).map(Array.init) ?? []
            if (try? JSONParser.parse(bytes)) == expected { return arrived }
        }
        return nil
    }

    deinit { close(fd) }
}

/// A `ferry serve` child whose output is thrown away (many of them run at once).
final class QuietAgent {
    let process = Process()

    init(folder: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: ferry)
        process.arguments = ["serve", "-C", folder, "-q"] + arguments
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    var peakRSSKiB: Int { highWaterRSS(process.processIdentifier) }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }  // a step that throws leaves no agent behind
}

/// Writes `count` × 1 KiB JSON documents under `folder`, 1,000 per directory.
func writeSmallDocuments(_ count: Int, into folder: String) throws {
    let filler = String(repeating: "x", count: 1024 - 80)
    for d in 0..<max(1, (count + 999) / 1000) {
        let dir = "\(folder)/d\(d)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for i in (d * 1000)..<min(count, (d + 1) * 1000) {
            let text = "{\"id\": \(i), \"name\": \"document \(i)\", \"tags\": [\"bench\"], \"filler\": \"\(filler)\"}\n"
            try Data(text.utf8).write(to: URL(fileURLWithPath: "\(dir)/\(i).json"))
        }
    }
}

/// Saves `text` as `name` in `folder` the way sed -i does (a temporary file renamed over it);
/// returns when the rename happened.
func saveByRename(_ text: Data, as name: String, in folder: String) throws -> UInt64 {
    let temp = folder + "/.bench-" + name + ".tmp"
    try text.write(to: URL(fileURLWithPath: temp))
    let t0 = DispatchTime.now().uptimeNanoseconds
    rename(temp, folder + "/" + name)
    return t0
}

/// p50 of the time from an edit's rename in `left` to the replicated file's rename in `right`,
/// with a listener on `left` and a continuous replicator in `right` (over wss://).
@MainActor func editToPeerLatency(left: String, right: String, edits: Int, name: String, body: (Int) -> Data) throws -> (p50: Double, p99: Double, rss: (Int, Int)) {
    let (listener, url) = try AgentChild.listener(left, tls: true)
    let replicator = try AgentChild(folder: right, arguments: ["--no-listen", "--peer", url, "--accept-self-signed"])
    _ = replicator.waitFor("connected")
    let watch = ArrivalWatch([right])
    // The document's first revision arrives with the initial sync: its rename is not an edit's.
    if FileManager.default.fileExists(atPath: left + "/" + name) {
        for _ in 0..<600 where !FileManager.default.fileExists(atPath: right + "/" + name) { usleep(50_000) }
    }
    var times: [Double] = []
    try settle()
    watch.drain()
    for i in 0..<edits {
        let expected = try JSONParser.parse(Array(body(i)))
        let t0 = try saveByRename(body(i), as: name, in: left)
        guard let t1 = watch.waitForBody(name, in: right, equalTo: expected, timeoutMs: 30_000) else { print("  edit \(i) did not arrive"); break }
        times.append(Double(t1 - t0) / 1e6)
        usleep(20_000)
    }
    let rss = (listener.peakRSSKiB, replicator.peakRSSKiB)
    replicator.stop()
    listener.stop()
    return (percentile(times, 0.5), percentile(times, 0.99), rss)
}

/// Pulls `source` into a new folder `target` over wss:// with `ferry sync --pull`.
@MainActor func initialSync(from source: String, into target: String) throws -> (run: ChildRun, listenerKiB: Int) {
    let (listener, url) = try AgentChild.listener(source, tls: true)
    _ = try measure(ferry, ["init", target])
    try settle(warming: source)
    let run = try measure(ferry, ["sync", url, "--pull", "-C", target, "--accept-self-signed", "-q"])
    guard run.status == 0 else { print("sync failed: \(run.output)"); exit(1) }
    let listenerKiB = listener.peakRSSKiB
    listener.stop()
    return (run, listenerKiB)
}

/// The scale figures; `small` and `large` are the bulk sync's two sizes.
@MainActor func runScaleFigures() throws {
    let small = option("--scale-small", 10_000), large = option("--scale-large", 100_000)
    let blobCount = option("--blobs", 10_000), listItems = option("--list-items", 50_000)
    let historySaves = option("--history", 20_000), fanOut = option("--replicators", 50)
    // --steps bulk,fanout,blobs,list,history (default: all; bulk includes S2 and S7, on its folders);
    // --syncthing-large adds Syncthing's sync of the large folder to bulk (nothing without bulk).
    let chosen = arguments.firstIndex(of: "--steps").map { i in Set((i + 1 < arguments.count ? arguments[i + 1] : "").split(separator: ",").map(String.init)) }
    func step(_ name: String) -> Bool { chosen?.contains(name) ?? true }
    print("scale figures: \(small) and \(large) documents, \(blobCount) blobs of 100 KB, a \(listItems)-item list, \(historySaves) saves of one document, \(fanOut) replicators")

    let edited = { (i: Int) in Data("{\"edit\": \(i), \"items\": [\"a\", \"b\"]}\n".utf8) }

    // S1. Bulk initial sync over wss://: the small and the large folder, and rsync of the large one.
    if step("bulk") {
        waitForQuietFilesystem()
        let smallSource = work + "/scale-small", largeSource = work + "/scale-large"
        try writeSmallDocuments(small, into: smallSource)
        try writeSmallDocuments(large, into: largeSource)
        _ = try measure(ferry, ["init", smallSource])
        let largeInit = try measure(ferry, ["init", largeSource])
        waitForQuietFilesystem()
        // The large pull's yardstick is the median of three small pulls, as in the main
        // figures: one pull's time varies with the kernel's file work (docs/performance.md).
        let (smallListener, smallURL) = try AgentChild.listener(smallSource, tls: true)
        let (smallRuns, _) = try pulls(from: smallURL, serving: smallSource, trust: ["--accept-self-signed"]) { work + "/scale-small-copy-\($0)" }
        smallListener.stop()
        let largeSync = try initialSync(from: largeSource, into: work + "/scale-large-copy")
        let largeRsync = try rsync(largeSource, work + "/scale-large-rsync", ["--exclude", ".ferry"], warming: true)
        print(String(format: "initial sync over wss:// of %d x 1 KiB documents: %@; of %d: %.2f s = %.1fx (goal <= 10x)   peak RSS listener %@, replicator %@ (goal <= 80 MB = 76.3 MiB)",
                     small, smallRuns.text, large, largeSync.run.seconds, largeSync.run.seconds / smallRuns.median,
                     mib(largeSync.listenerKiB), mib(largeSync.run.peakRSSKiB))
              + versusRsync(largeSync.run.seconds, largeRsync.seconds) + String(format: " (its init: %.1f s)", largeInit.seconds))
        try? FileManager.default.removeItem(atPath: work + "/scale-large-rsync")
        print(String(format: "initial sync of %d x 1 KiB documents: ferry %.2f s over wss:// (median)", small, smallRuns.median)
              + (try versusSyncthing(source: smallSource, target: work + "/scale-small-syncthing", files: small, ferrySeconds: smallRuns.median)))

        // S2. Edit → peer with the large folder on both sides, against the same with 100 documents.
        let hundred = work + "/scale-100", hundredCopy = work + "/scale-100-copy"
        try writeSmallDocuments(100, into: hundred)
        _ = try measure(ferry, ["init", hundred, "--name", "h"])
        _ = try measure(ferry, ["init", hundredCopy, "--name", "h"])
        let few = try editToPeerLatency(left: hundred, right: hundredCopy, edits: 50, name: "edited.json", body: edited)
        let many = try editToPeerLatency(left: largeSource, right: work + "/scale-large-copy", edits: 50, name: "edited.json", body: edited)
        print(String(format: "edit -> peer over wss://, %d documents in the folder: p50 %.2f ms, p99 %.2f ms; with 100 documents: p50 %.2f ms = %.2fx (goal <= 1.5x)   peak RSS %@ / %@",
                     large, many.p50, many.p99, few.p50, many.p50 / few.p50, mib(many.rss.0), mib(many.rss.1)))

        // S7. status on the large folder: beside no agent, and how soon a starting agent answers it.
        var offline: [Double] = []
        for _ in 0..<3 { offline.append(try measure(ferry, ["status", "-C", largeSource]).seconds) }
        // A starting agent answers through its control socket at once (which step it is at),
        // then with the folder's counts once it has read the log and walked the folder.
        let agentStart = DispatchTime.now().uptimeNanoseconds
        let agent = try QuietAgent(folder: largeSource, arguments: ["--no-listen"])
        var firstAnswer = Double.nan, fullAnswer = Double.nan
        // Its first act is to take the folder's lock: a status asked before that reads the
        // folder itself, and would time that instead.
        for _ in 0..<1_000 where FolderLock.holder(path: largeSource + "/.ferry/lock") == nil { usleep(1_000) }
        let locked = Double(DispatchTime.now().uptimeNanoseconds - agentStart) / 1e9
        for _ in 0..<600 {
            let run = try measure(ferry, ["status", "-C", largeSource, "--json"])
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - agentStart) / 1e9
            guard run.status == 0, run.output.contains("running (pid") else { continue }
            if firstAnswer.isNaN { firstAnswer = elapsed }
            if run.output.contains("\"documents\"") {
                fullAnswer = elapsed
                break
            }
        }
        var beside: [Double] = []
        for _ in 0..<3 { beside.append(try measure(ferry, ["status", "-C", largeSource]).seconds) }
        agent.stop()
        print(String(format: "ferry status of %d documents: %.2f s beside no agent (best of 3; goal <= 0.5 s), %.3f s beside a running agent; a starting agent held the lock after %.3f s and answered %.3f s after it started (goal <= 0.2 s), with the folder's counts after %.2f s",
                     large, offline.min() ?? .nan, beside.min() ?? .nan, locked, firstAnswer, fullAnswer))

        // Syncthing on the large folder, only when asked: its scan and sync of 100,000 files
        // take minutes, longer than the rest of the step.
        if arguments.contains("--syncthing-large") {
            waitForQuietFilesystem()
            // S2 added a document to the folder since ferry's sync: Syncthing syncs it too.
            let files = try regularFileCount(in: largeSource)
            print(String(format: "initial sync of %d x 1 KiB documents: ferry %.2f s over wss:// (above; Syncthing also has the edit step's document)", large, largeSync.run.seconds)
                  + (try versusSyncthing(source: largeSource, target: work + "/scale-large-syncthing", files: files, ferrySeconds: largeSync.run.seconds)))
        }
        for path in [largeSource, work + "/scale-large-copy", smallSource] + (0..<RepeatedRuns.count).map({ work + "/scale-small-copy-\($0)" }) {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    // S3. One edit to many replicators, each its own agent and folder, on one listener.
    if step("fanout") {
        // After the bulk step's mass deletions the disk is busy for minutes; fifty agents'
        // flushes would wait on it.
        waitForQuietFilesystem()
        let hub = work + "/scale-hub"
        _ = try measure(ferry, ["init", hub, "--name", "hub"])
        try Data("{\"edit\": -1}\n".utf8).write(to: URL(fileURLWithPath: hub + "/edited.json"))
        let (listener, url) = try AgentChild.listener(hub, tls: true)
        let spokes = (0..<fanOut).map { work + "/scale-spoke-\($0)" }
        for s in spokes { _ = try measure(ferry, ["init", s, "--name", "hub"]) }
        let watch = ArrivalWatch(spokes)
        let agents = try spokes.map { try QuietAgent(folder: $0, arguments: ["--no-listen", "--peer", url, "--accept-self-signed"]) }
        let ready = watch.waitForAll("edited.json", count: fanOut, timeoutMs: 60_000) != nil
        var lasts: [Double] = []
        if ready {
            sleep(1)
            for i in 0..<10 {
                let t0 = try saveByRename(edited(i), as: "edited.json", in: hub)
                guard let t1 = watch.waitForAll("edited.json", count: fanOut) else { print("  edit \(i) did not reach every replicator"); break }
                lasts.append(Double(t1 - t0) / 1e6)
                usleep(200_000)
            }
        }
        print(String(format: "one edit to %d replicators (each its own agent) over wss://: the last has it after p50 %.0f ms, max %.0f ms (goal <= 100 ms)   listener peak RSS %@",
                     fanOut, percentile(lasts, 0.5), lasts.max() ?? .nan, mib(listener.peakRSSKiB)))
        for a in agents { a.stop() }
        listener.stop()
        for s in spokes + [hub] { try? FileManager.default.removeItem(atPath: s) }
    }

    // S4. Many blobs: N × 100 KB random files, against rsync of the same files.
    if step("blobs") {
        waitForQuietFilesystem()
        let blobs = work + "/scale-blobs"
        try FileManager.default.createDirectory(atPath: blobs, withIntermediateDirectories: true)
        _ = try measure("/bin/sh", ["-c", "cd \(blobs) && for d in $(seq 0 \((blobCount - 1) / 1000)); do mkdir -p b$d; done && "
            + "head -c \(blobCount * 100_000) /dev/urandom | split -b 100000 -a 5 -d - part- && "
            + "i=0; for f in part-*; do mv \"$f\" \"b$((i / 1000))/$f.bin\"; i=$((i + 1)); done"])
        _ = try measure(ferry, ["init", blobs])
        let copy = try initialSync(from: blobs, into: work + "/scale-blobs-copy")
        let yard = try rsync(blobs, work + "/scale-blobs-rsync", ["--exclude", ".ferry"], warming: true)
        print(String(format: "initial sync over wss:// of %d x 100 KB files: %.2f s = %.0f MB/s   (goal <= 1.5x rsync)   peak RSS listener %@, replicator %@",
                     blobCount, copy.run.seconds, Double(blobCount) * 0.1 / copy.run.seconds, mib(copy.listenerKiB), mib(copy.run.peakRSSKiB))
              + versusRsync(copy.run.seconds, yard.seconds)
              + (try versusSyncthing(source: blobs, target: work + "/scale-blobs-syncthing", files: blobCount, ferrySeconds: copy.run.seconds)))
        for path in [blobs, work + "/scale-blobs-copy", work + "/scale-blobs-rsync"] { try? FileManager.default.removeItem(atPath: path) }
    }

    // S5. A one-field edit of a large list (the sample's shape: key, value, image), to a peer.
    if step("list") {
        // After the blob step's gigabytes are deleted, the filesystem is slow for minutes.
        waitForQuietFilesystem()
        let left = work + "/scale-list", right = work + "/scale-list-copy"
        _ = try measure(ferry, ["init", left, "--name", "list"])
        _ = try measure(ferry, ["init", right, "--name", "list"])
        func list(_ edit: Int) -> Data {
            var text = "{\n  \"list\": [\n"
            for i in 0..<listItems {
                text += "    {\"key\": \"item \(i)\", \"value\": \(i == listItems / 2 ? edit : i), \"image\": null}"
                text += i == listItems - 1 ? "\n" : ",\n"
            }
            return Data((text + "  ]\n}\n").utf8)
        }
        let bodies = (0..<21).map { list(-1 - $0) }
        try bodies[0].write(to: URL(fileURLWithPath: left + "/list.json"))
        let figures = try editToPeerLatency(left: left, right: right, edits: 20, name: "list.json") { bodies[$0 + 1] }
        print(String(format: "one-field edit of a %d-item list (%.1f MB) -> peer's disk over wss://: p50 %.0f ms, p99 %.0f ms   (goal p50 <= 100 ms)   peak RSS %@ / %@",
                     listItems, Double(bodies[0].count) / 1e6, figures.p50, figures.p99, mib(figures.rss.0), mib(figures.rss.1)))
        for path in [left, right] { try? FileManager.default.removeItem(atPath: path) }
    }

    // S6. Long histories: a document with many revisions, saved through the agent, against the
    // same save of a document with one; then `ferry compact` and the objects' size on disk.
    if step("history") {
        let folder = work + "/scale-history"
        _ = try measure(ferry, ["init", folder, "--name", "history"])
        var content = 0
        do {
            let store = try FolderStore.open(at: folder, writable: true)
            try store.batch(flushEvery: 5_000) {
                for i in 0..<historySaves {
                    let value = JSONValue.object(["count": .int(i), "note": .string("saved \(i) times")])
                    content += value.canonicalBytes.count
                    _ = try store.recordLocalJSON(try DocumentID("long.json"), value)
                }
            }
            let last = JSONValue.object(["count": .int(historySaves - 1), "note": .string("saved \(historySaves - 1) times")])
            try Data(last.canonicalBytes).write(to: URL(fileURLWithPath: folder + "/long.json"))
        }
        // The index's heap per revision beyond the first: the folder opened with its change
        // feed built, against a folder whose one document was saved once.
        let single = work + "/scale-history-one"
        _ = try measure(ferry, ["init", single, "--name", "one"])
        do {
            let store = try FolderStore.open(at: single, writable: true)
            _ = try store.recordLocalJSON(try DocumentID("long.json"), .object(["count": .int(0)]))
        }
        let heapOfLong = try indexHeapBytes(folder), heapOfOne = try indexHeapBytes(single)
        try? FileManager.default.removeItem(atPath: single)
        let agent = try AgentChild(folder: folder)
        _ = agent.waitFor("watching")
        func saves(_ name: String) throws -> Double {
            var times: [Double] = []
            for i in 0..<30 {
                let t0 = try saveByRename(Data("{\"count\": \(i), \"note\": \"edited\"}\n".utf8), as: name, in: folder)
                guard let t1 = agent.waitFor("recorded revision") else { break }
                times.append(Double(t1 - t0) / 1e6)
                usleep(5_000)
            }
            return percentile(times, 0.5)
        }
        let fresh = try saves("short.json"), long = try saves("long.json")
        agent.stop()
        // Bodies are objects (a file each) and packs (small JSON bodies, a line each).
        let stored = [folder + "/.ferry/objects", folder + "/.ferry/packs"]
        func storedKiB() throws -> Int {
            let du = try measure("/usr/bin/du", ["-sck"] + stored.filter { FileManager.default.fileExists(atPath: $0) }).output
            return Int(du.split(separator: "\n").last?.split(separator: "\t").first ?? "") ?? -1
        }
        let objectsBefore = try storedKiB()
        let compact = try measure(ferry, ["compact", "-C", folder])
        let objectsAfter = try storedKiB()
        print(String(format: "save -> durable revision of a document with %d revisions: p50 %.2f ms; of a new one: %.2f ms = %.2fx (goal <= 1.2x)",
                     historySaves, long, fresh, long / fresh))
        print(String(format: "index heap per revision beyond the first: %d bytes (goal <= 150), %.1f MiB for %d revisions of one document",
                     (heapOfLong - heapOfOne) / max(1, historySaves - 1), Double(heapOfLong) / 1_048_576, historySaves))
        print(String(format: "compact of %d revisions: %.2f s (goal <= 2 s); objects and packs on disk %d KiB before (%.2fx the bodies; goal <= 2x), %d KiB after, for %d KiB of bodies",
                     historySaves, compact.seconds, objectsBefore, Double(objectsBefore) / Double(max(1, content / 1024)), objectsAfter, content / 1024))
        try? FileManager.default.removeItem(atPath: folder)
    }
}

/// What opening `folder` and building its change feed leaves on the heap, in bytes (glibc's
/// count of bytes in use, so freed buffers do not count).
private func indexHeapBytes(_ folder: String) throws -> Int {
    let before = ferry_heap_in_use()
    let store = try FolderStore.open(at: folder, writable: false)
    _ = store.changeCount(since: 0)
    let after = ferry_heap_in_use()
    withExtendedLifetime(store) {}
    return Int(after) - Int(before)
}
