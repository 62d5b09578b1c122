import Foundation
import Synchronization

/// A `ferry serve` process running in the background for a test, stopped (SIGTERM, then
/// SIGKILL) when the value goes away. Its stderr goes to a file the test can read.
public final class RunningAgent: @unchecked Sendable {
    /// The process.
    public let process: ChildProcess
    /// The folder it serves.
    public let folder: String
    /// Where its log goes.
    public let logPath: String

    /// Its process id.
    public var pid: pid_t { process.pid }

    /// Starts `ferry serve ARGS` in `folder` and waits (bounded) until it watches. `launcher`
    /// is a command that execs the rest (such as `ip netns exec NS`), so the process is still
    /// the agent's and SIGTERM reaches it.
    public init(folder: String, arguments: [String] = ["--no-listen"], environment: [String: String] = [:],
                launcher: [String] = [], executable: String = FerryProcess.ferryExecutable, timeout: TimeInterval = 20) throws {
        self.folder = folder
        logPath = folder + "/../serve-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let command = launcher + [executable, "serve"] + arguments
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        defer { try? logHandle.close() }
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(null) }
        process = try ChildProcess(command[0], Array(command.dropFirst()), in: folder,
                                   environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                   stdin: null, stdout: logHandle.fileDescriptor, stderr: logHandle.fileDescriptor)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if self.log().contains("watching") { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        let log = self.log()
        exitExpected.withLock { $0 = true }
        process.stop(grace: 2)
        throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "ferry serve did not start: \(log)"])
    }

    /// The first listener URL the agent printed (`listening on URL`), if it listens.
    public var url: String? {
        log().split(separator: "\n").first { $0.hasPrefix("listening on ") }.map { String($0.dropFirst("listening on ".count)) }
    }

    /// `ferry status --json` of the agent's folder, parsed (nil if it fails).
    public func status() -> [String: Any]? {
        guard let r = try? FerryProcess.ferry(["status", "--json"], in: folder), r.status == 0 else { return nil }
        return try? JSONSerialization.jsonObject(with: r.stdoutData) as? [String: Any]
    }

    /// The first replication's entry in `status()`.
    public func replication() -> [String: Any]? {
        (status()?["replications"] as? [[String: Any]])?.first
    }

    /// The log so far.
    public func log() -> String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    /// Set by `kill9` and by a start that failed (its error carries the log): the exit status
    /// is then the test's doing or already told, not news.
    private let exitExpected = Mutex(false)

    /// Sends SIGKILL (as a crash would) and waits.
    public func kill9() {
        exitExpected.withLock { $0 = true }
        process.signal(SIGKILL)
        process.wait(timeout: 30)
    }

    /// Sends SIGTERM and waits (bounded: then SIGKILL); returns the exit status. One that is
    /// not 0, unless expected (`exitExpected`), prints the agent's log on stderr, so that a
    /// test run shows why it did not stop cleanly.
    @discardableResult
    public func stop() -> Int32 {
        let status = process.stop(grace: 10)
        // Nor when the test removed the folder first (an agent whose folder vanished exits 1).
        if status != 0, !exitExpected.withLock({ $0 }), FileManager.default.fileExists(atPath: folder) {
            FileHandle.standardError.write(Data("ferry serve in \(folder) exited with status \(status); its log:\n\(log().suffix(4000))\n".utf8))
            exitExpected.withLock { $0 = true }  // told once (`deinit` stops it again)
        }
        return status
    }

    deinit { stop() }
}

/// Reads a folder's `revs.log` as the tests need it.
public enum RevisionLogReader {
    /// `(doc, deleted)` of every line, in order.
    public static func lines(_ folder: String) -> [(doc: String, deleted: Bool)] {
        guard let data = FileManager.default.contents(atPath: folder + "/.ferry/revs.log") else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let doc = obj["doc"] as? String, let deleted = obj["deleted"] as? Bool else { return nil }
            return (doc, deleted)
        }
    }

    /// Waits (bounded by `timeout`) until the log has at least `count` lines; returns the lines.
    public static func wait(_ folder: String, count: Int, timeout: TimeInterval = 5) -> [(doc: String, deleted: Bool)] {
        let deadline = Date().addingTimeInterval(timeout)
        var current = lines(folder)
        while current.count < count && Date() < deadline {
            usleep(5_000)
            current = lines(folder)
        }
        return current
    }
}

/// Polls `condition` every 20 ms until it holds or `timeout` seconds pass; returns whether it held.
/// It blocks its thread: only for conditions that other processes make true. What this
/// process's own tasks make true is waited for with `awaitUntil`.
@discardableResult
public func eventually(_ timeout: TimeInterval = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// Polls `condition` every 20 ms until it holds or `timeout` seconds pass; returns whether it
/// held. Between polls it suspends instead of blocking: on a two-core machine the concurrency
/// pool has two threads, and two tests blocked in `eventually` at once left none for the
/// in-process listener session whose lock the condition was waiting for.
@discardableResult
public func awaitUntil(_ timeout: TimeInterval = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
