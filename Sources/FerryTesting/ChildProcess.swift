import CSpawn
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn` and reaped with `waitpid`, for tests.
///
/// Why not `Foundation.Process`: on Linux it learns that a child ended when a socket it
/// passes to the child closes, and every grandchild inherits that socket — so a script that
/// leaves a daemon running (`netns-pair.sh up` starts dbus-daemon and avahi-daemon) is never
/// seen to exit, and `waitUntilExit` waits for ever (swift-corelibs-foundation issue 4795).
/// It also passes on the test process's blocked signals, so such a daemon ignored SIGTERM.
/// Here the child gets only its three standard descriptors, an empty signal mask and default
/// signal dispositions, exactly like a program started from a shell.
public final class ChildProcess: @unchecked Sendable {
    /// The child's process id.
    public let pid: pid_t
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `program ARGS…` in `directory` with exactly `environment`, its standard input,
    /// output and error on the given descriptors (which stay the caller's to close).
    public init(_ program: String, _ arguments: [String], in directory: String? = nil, environment: [String: String],
                stdin: Int32, stdout: Int32, stderr: Int32) throws {
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid = pid_t()
        let result = cspawn(&pid, program, argv, envp, directory, stdin, stdout, stderr)
        guard result == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "cannot start \(program): \(String(cString: strerror(result)))"])
        }
        self.pid = pid
    }

    /// The exit status (128 + N when killed by signal N), reaping the child if it has ended;
    /// nil while it runs.
    public var exitStatus: Int32? {
        lock.withLock {
            if let status { return status }
            var raw: Int32 = 0
            let r = waitpid(pid, &raw, WNOHANG)
            if r == pid { status = Self.decode(raw) } else if r < 0 { status = -1 }
            return status
        }
    }

    /// True until the child has ended.
    public var isRunning: Bool { exitStatus == nil }

    /// Waits at most `timeout` seconds; true when the child has ended.
    @discardableResult
    public func wait(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning {
            if Date() >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    /// Sends `signal` (SIGTERM unless told) if the child still runs.
    public func signal(_ signal: Int32 = SIGTERM) {
        if isRunning { kill(pid, signal) }
    }

    /// Asks the child to end (SIGTERM), then kills it (SIGKILL) after `grace` seconds; reaps it.
    /// Returns its exit status.
    @discardableResult
    public func stop(grace: TimeInterval = 10) -> Int32 {
        signal(SIGTERM)
        if !wait(timeout: grace) {
            signal(SIGKILL)
            wait(timeout: 30)
        }
        return exitStatus ?? -1
    }

    private static func decode(_ raw: Int32) -> Int32 {
        let low = raw & 0x7f
        return low == 0 ? (raw >> 8) & 0xff : 128 + low  // exited : killed by a signal
    }
}
