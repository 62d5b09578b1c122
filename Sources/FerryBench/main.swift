// ferry-bench: the figures issue 2 asks for, on this machine, with real fsyncs.
//
//   swift build -c release && .build/release/ferry-bench [--files N] [--revisions N]
//
// Each measured step runs as its own child process (the real `ferry` binary, or this binary
// in a child mode) so that its wall time and peak RSS (wait4's ru_maxrss) are its own.
import FerryCore
import FerryStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Wall time and peak RSS of one child process.
struct ChildRun {
    var seconds: Double
    var peakRSSKiB: Int
    var status: Int32
    var output: String
}

/// Runs `program args` and waits with wait4 to collect its own rusage.
func measure(_ program: String, _ args: [String]) throws -> ChildRun {
    let outPath = NSTemporaryDirectory() + "/ferry-bench-out-\(getpid())"
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    let argv = ([program] + args).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    var pid: pid_t = 0
    let start = DispatchTime.now().uptimeNanoseconds
    let rc = posix_spawn(&pid, program, &actions, nil, argv, environ)
    posix_spawn_file_actions_destroy(&actions)
    guard rc == 0 else { throw CocoaError(.executableNotLoadable) }
    var status: Int32 = 0
    var usage = rusage()
    wait4(pid, &status, 0, &usage)
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    let output = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    unlink(outPath)
    return ChildRun(seconds: seconds, peakRSSKiB: Int(usage.ru_maxrss), status: (status >> 8) & 0xFF, output: output)
}

func mib(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }

let arguments = CommandLine.arguments
let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? arguments[0]

// Child mode: open a folder (rebuilding the index from its log) and print the time taken.
if arguments.count == 3 && arguments[1] == "--open-child" {
    let start = DispatchTime.now().uptimeNanoseconds
    let store = try FolderStore.open(at: arguments[2], writable: true)
    let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
    print(String(format: "%.1f %d %d", ms, store.index.revisionCount, store.index.trees.count))
    exit(0)
}

func option(_ name: String, _ fallback: Int) -> Int {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) else { return fallback }
    return v
}
let fileCount = option("--files", 10_000)
let revisionCount = option("--revisions", 100_000)
let editCount = option("--edits", 100)
let startupFiles = option("--startup-files", 100_000)
let ferry = (selfPath as NSString).deletingLastPathComponent + "/ferry"
guard FileManager.default.isExecutableFile(atPath: ferry) else {
    print("ferry-bench: \(ferry) not found; build it first (swift build -c release)")
    exit(1)
}
let work = NSTemporaryDirectory() + "/ferry-bench-\(getpid())"
try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
defer { if !arguments.contains("--keep") { try? FileManager.default.removeItem(atPath: work) } }

print("ferry-bench — \(ProcessInfo.processInfo.processorCount) cores, work dir \(work)")

// 1. `ferry init` of N × 1 KiB JSON files (durable: objects and log fsynced before it exits).
let source = work + "/init"
try FileManager.default.createDirectory(atPath: source + "/docs", withIntermediateDirectories: true)
for i in 0..<fileCount {
    let filler = String(repeating: "x", count: 1024 - 80)
    let text = "{\"id\": \(i), \"name\": \"document \(i)\", \"tags\": [\"bench\"], \"filler\": \"\(filler)\"}\n"
    try Data(text.utf8).write(to: URL(fileURLWithPath: "\(source)/docs/\(i / 1000)-\(i).json"))
}
let sync = try measure("/bin/sync", [])
_ = sync
let initRun = try measure(ferry, ["init", source])
guard initRun.status == 0 else { print("init failed: \(initRun.output)"); exit(1) }
print(String(format: "init %d x 1 KiB JSON files:   %.2f s  = %.0f files/s   (goal >= 5000/s)   peak RSS %@",
             fileCount, initRun.seconds, Double(fileCount) / initRun.seconds, mib(initRun.peakRSSKiB)))

// 2. Open a folder whose log holds M revisions (1,000 documents × M/1,000 edits each).
let big = work + "/big"
do {
    let store = try FolderStore.create(at: big, name: "big")
    let docs = max(1, revisionCount / 100)
    let bodies = try (0..<2).map { n -> (BlobDigest, Int) in
        let bytes = JSONValue.object(["n": .int(n), "text": .string(String(repeating: "y", count: 200))]).canonicalBytes
        return (try store.objects.write(bytes), bytes.count)
    }
    try store.batch(flushEvery: 20_000) {
        for r in 0..<revisionCount {
            let doc = try DocumentID("d\(r % docs).json")
            let (object, size) = bodies[(r / docs) % 2]
            try store.recordLocal(doc, object: object, size: size)
        }
    }
}
let logBytes = (try? FileManager.default.attributesOfItem(atPath: big + "/.ferry/revs.log")[.size] as? Int) ?? 0
var openRuns: [ChildRun] = []
for _ in 0..<3 { openRuns.append(try measure(selfPath, ["--open-child", big])) }
let best = openRuns.min { $0.output < $1.output }!
let parts = best.output.split(separator: " ")
print(String(format: "open a %d-revision log (%.1f MiB): %@ ms to rebuild the index (goal < 500 ms), %.2f s process total   peak RSS %@",
             revisionCount, Double(logBytes) / 1_048_576, String(parts.first ?? "?"), best.seconds, mib(best.peakRSSKiB)))

// 3. Edit-to-revision latency: from the rename of a saved file (sed -i's pattern) until the
// agent has made the revision durable (it logs "recorded revision" after the log's fdatasync).
func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p + 0.5))]
}

/// A `ferry serve --no-listen` child whose stderr lines are read as they come.
final class AgentChild {
    let process = Process()
    let pipe = Pipe()
    var buffer = Data()

    init(folder: String) throws {
        process.executableURL = URL(fileURLWithPath: ferry)
        process.arguments = ["serve", "--no-listen", "-C", folder]
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    /// Blocks until a line containing `text` arrives; returns when it did.
    func waitFor(_ text: String) -> UInt64? {
        let needle = Data(text.utf8)
        while true {
            if let r = buffer.range(of: needle) {
                if let nl = buffer[r.upperBound...].firstIndex(of: 0x0A) { buffer.removeSubrange(..<(nl + 1)) } else { buffer.removeAll() }
                return DispatchTime.now().uptimeNanoseconds
            }
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer += chunk
        }
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

let latencyDir = work + "/latency"
_ = try measure(ferry, ["init", "--sample", latencyDir])
let latencyAgent = try AgentChild(folder: latencyDir)
_ = latencyAgent.waitFor("watching")
var latencies: [Double] = []
for i in 0..<editCount {
    let text = "{\"edit\": \(i), \"items\": [\"a\", \"b\"]}\n"
    let temp = latencyDir + "/.bench.tmp"
    try Data(text.utf8).write(to: URL(fileURLWithPath: temp))
    let t0 = DispatchTime.now().uptimeNanoseconds
    rename(temp, latencyDir + "/edited.json")
    guard let t1 = latencyAgent.waitFor("recorded revision") else { break }
    latencies.append(Double(t1 - t0) / 1e6)
    usleep(5_000)
}
latencyAgent.stop()
if !latencies.isEmpty {
    print(String(format: "edit -> durable revision, %d edits: p50 %.2f ms, p99 %.2f ms   (goal p50 <= 3 ms, p99 <= 20 ms)",
                 latencies.count, percentile(latencies, 0.5), percentile(latencies, 0.99)))
}

// 4. Startup of a folder of N files with nothing changed (stat cache: nothing is re-read).
if startupFiles > 0 {
    let startup = work + "/startup"
    for d in 0..<max(1, startupFiles / 1000) {
        let dir = "\(startup)/d\(d)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for i in 0..<min(1000, startupFiles) {
            try Data("{\"d\": \(d), \"i\": \(i)}\n".utf8).write(to: URL(fileURLWithPath: "\(dir)/f\(i).json"))
        }
    }
    usleep(2_500_000)  // let every file age past the stat cache's racy-clean window
    let initStartup = try measure(ferry, ["init", startup])
    var starts: [Double] = []
    for _ in 0..<3 {
        let t0 = DispatchTime.now().uptimeNanoseconds
        let agent = try AgentChild(folder: startup)
        guard let t1 = agent.waitFor("watching") else { break }
        starts.append(Double(t1 - t0) / 1e9)
        agent.stop()
    }
    print(String(format: "startup of a %d-file folder, nothing changed: %.2f s (best of %d; goal < 1 s; its init took %.1f s)",
                 startupFiles, starts.min() ?? -1, starts.count, initStartup.seconds))
}
