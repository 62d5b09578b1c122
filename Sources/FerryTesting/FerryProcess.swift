import Foundation

/// Runs the built `ferry` binary (or any program) the way a user would, and captures its output.
public enum FerryProcess {
    /// What a run produced.
    public struct Result: Sendable {
        /// Exit status.
        public var status: Int32
        /// Standard output.
        public var stdout: String
        /// Standard error.
        public var stderr: String
        /// Raw standard output.
        public var stdoutData: Data
    }

    /// The `ferry` binary beside the running test bundle (`.build/<config>/ferry`).
    public static var ferryExecutable: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = (exe as NSString).deletingLastPathComponent
        if dir.hasSuffix(".xctest") { dir = (dir as NSString).deletingLastPathComponent }
        return dir + "/ferry"
    }

    /// Runs `ferry ARGS…` in `directory`.
    @discardableResult
    public static func ferry(_ arguments: [String], in directory: String? = nil, environment: [String: String] = [:], stdin: Data? = nil) throws -> Result {
        try run(ferryExecutable, arguments, in: directory, environment: environment, stdin: stdin)
    }

    /// Runs a shell command line with `bash -c` in `directory`.
    @discardableResult
    public static func shell(_ command: String, in directory: String? = nil, environment: [String: String] = [:]) throws -> Result {
        try run("/bin/bash", ["-c", command], in: directory, environment: environment)
    }

    /// Runs `program ARGS…`, waiting at most `timeout` seconds (then it is killed).
    public static func run(_ program: String, _ arguments: [String], in directory: String? = nil,
                           environment: [String: String] = [:], stdin: Data? = nil, timeout: TimeInterval = 120) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        var env = ProcessInfo.processInfo.environment
        env["FERRY_SAMPLES"] = env["FERRY_SAMPLES"] ?? samplesDirectory
        for (k, v) in environment { env[k] = v }
        process.environment = env
        let outPipe = Pipe(), errPipe = Pipe(), inPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = inPipe
        try process.run()
        if let stdin { inPipe.fileHandleForWriting.write(stdin) }
        try? inPipe.fileHandleForWriting.close()
        // Drain both pipes while the process runs so a chatty child never blocks.
        nonisolated(unsafe) var out = Data()
        nonisolated(unsafe) var err = Data()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async { out = outPipe.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter()
        DispatchQueue.global().async { err = errPipe.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(2_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        group.wait()
        return Result(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
                      stderr: String(decoding: err, as: UTF8.self), stdoutData: out)
    }

    /// The project's `samples/` directory, found above the test binary.
    public static var samplesDirectory: String {
        var dir = (ferryExecutable as NSString).deletingLastPathComponent
        while dir != "/" && !dir.isEmpty {
            if FileManager.default.fileExists(atPath: dir + "/samples/samplelist.json") { return dir + "/samples" }
            dir = (dir as NSString).deletingLastPathComponent
        }
        return "samples"
    }
}
