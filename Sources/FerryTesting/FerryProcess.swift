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

    /// Runs `program ARGS…`, waiting at most `timeout` seconds (then it is stopped). Output is
    /// read until the program ends and, bounded, until whatever it left running lets go of it.
    public static func run(_ program: String, _ arguments: [String], in directory: String? = nil,
                           environment: [String: String] = [:], stdin: Data? = nil, timeout: TimeInterval = 120) throws -> Result {
        var env = ProcessInfo.processInfo.environment
        env["FERRY_SAMPLES"] = env["FERRY_SAMPLES"] ?? samplesDirectory
        for (k, v) in environment { env[k] = v }
        let outPipe = Pipe(), errPipe = Pipe(), inPipe = Pipe()
        let child = try ChildProcess(program, arguments, in: directory, environment: env,
                                     stdin: inPipe.fileHandleForReading.fileDescriptor,
                                     stdout: outPipe.fileHandleForWriting.fileDescriptor,
                                     stderr: errPipe.fileHandleForWriting.fileDescriptor)
        // The child has its own copies; ours must close for its output to end.
        try? outPipe.fileHandleForWriting.close()
        try? errPipe.fileHandleForWriting.close()
        try? inPipe.fileHandleForReading.close()
        // Drain both pipes while the process runs so a chatty child never blocks. Each reader
        // has a thread of its own: on the shared dispatch queues, busy with other tests' work
        // that waits, a reader could start only after the command had ended, and its output
        // was reported empty.
        nonisolated(unsafe) var out = Data()
        nonisolated(unsafe) var err = Data()
        let group = DispatchGroup()
        group.enter()
        Thread.detachNewThread { out = outPipe.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter()
        Thread.detachNewThread { err = errPipe.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        if let stdin { inPipe.fileHandleForWriting.write(stdin) }
        try? inPipe.fileHandleForWriting.close()
        if !child.wait(timeout: timeout) { child.stop(grace: 5) }
        let status = child.exitStatus ?? -1
        // A background process the command started may keep its output open: do not wait for
        // it past a few seconds (the outputs are then reported empty).
        guard group.wait(timeout: .now() + 5) == .success else {
            return Result(status: status, stdout: "", stderr: "(output still held open by a process the command left running)", stdoutData: Data())
        }
        return Result(status: status, stdout: String(decoding: out, as: UTF8.self),
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
