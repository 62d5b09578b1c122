import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A place to run ferry the way its users run it: as a normal user, not root, in a folder
/// under that user's home (not `/tmp`, where vim and emacs save differently), with a fresh
/// `HOME` (editors with their default settings) and a clean environment.
///
/// When the tests run as root (CI), commands run as the unprivileged user `ferrytest`
/// (`scripts/setup.sh` creates it) through `setpriv`; otherwise as the current user. The
/// ferry binary, the samples and the test tools are copied where that user can read them.
public final class UserSandbox: @unchecked Sendable {
    /// The unprivileged user root's tests run as.
    public static let userName = "ferrytest"
    /// This sandbox's folder (owned by the user); removed when the value goes away.
    public let root: String
    /// A fresh home for the commands run here.
    public let home: String
    /// The ferry binary the user runs.
    public let ferry: String
    /// The samples `ferry init --sample` installs.
    public let samples: String
    /// The test tools (`Tests/Tools`): editor drivers, writers.
    public let tools: String
    private let ids: (uid: uid_t, gid: gid_t)?

    /// Why a sandbox cannot be made.
    public struct Unavailable: Error, CustomStringConvertible {
        /// One sentence.
        public let description: String
    }

    /// A new sandbox.
    public init() throws {
        let base: String
        if getuid() == 0 {
            guard let pw = getpwnam(Self.userName) else {
                throw Unavailable(description: "the end-to-end tests run ferry as the unprivileged user `\(Self.userName)`; `bash scripts/setup.sh` creates it")
            }
            ids = (pw.pointee.pw_uid, pw.pointee.pw_gid)
            base = String(cString: pw.pointee.pw_dir) + "/ferry-tests"
        } else {
            ids = nil
            base = (ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()) + "/.cache/ferry-tests"
        }
        // One copy of the tools per run of the tests, refreshed when the build changed; made
        // by one sandbox at a time (tests run side by side).
        let shared = base + "/tools"
        ferry = shared + "/ferry"
        samples = shared + "/samples"
        tools = shared + "/tools"
        try Self.settingUp.withLock { [ids, ferry, samples, tools] in
            try Self.makeDirectory(base, ids)
            try Self.makeDirectory(shared, ids)
            try Self.copyIfChanged(FerryProcess.ferryExecutable, to: ferry, ids)
            try Self.copyTree(FerryProcess.samplesDirectory, to: samples, ids)
            try Self.copyTree((FerryProcess.samplesDirectory as NSString).deletingLastPathComponent + "/Tests/Tools", to: tools, ids)
        }
        var template = Array((base + "/run-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw Unavailable(description: "cannot make a directory in \(base)")
        }
        root = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if let ids { chown(root, ids.uid, ids.gid) }
        home = root + "/home"
        try Self.makeDirectory(home, ids)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    /// A path in the sandbox.
    public func path(_ relative: String) -> String { root + "/" + relative }

    /// `argv` as a command line that runs it as the sandbox's user, with only `environment`
    /// and a fresh `HOME`, `PATH`, `TERM` and `FERRY_SAMPLES` in its environment.
    public func command(_ argv: [String], environment: [String: String] = [:]) -> [String] {
        var env = ["HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm",
                   "FERRY_SAMPLES": samples, "USER": Self.userName]
        env.merge(environment) { $1 }
        let clean = ["/usr/bin/env", "-i"] + env.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        guard let ids else { return clean + argv }
        return ["/usr/bin/setpriv", "--reuid=\(ids.uid)", "--regid=\(ids.gid)", "--init-groups"] + clean + argv
    }

    /// Runs `argv` as the user in `directory` (default: the sandbox).
    @discardableResult
    public func run(_ argv: [String], in directory: String? = nil, environment: [String: String] = [:],
                    timeout: TimeInterval = 120) throws -> FerryProcess.Result {
        let line = command(argv, environment: environment)
        return try FerryProcess.run(line[0], Array(line.dropFirst()), in: directory ?? root, timeout: timeout)
    }

    /// Runs a shell command line as the user.
    @discardableResult
    public func shell(_ script: String, in directory: String? = nil, timeout: TimeInterval = 120) throws -> FerryProcess.Result {
        try run(["/bin/bash", "-c", script], in: directory, timeout: timeout)
    }

    /// Runs `ferry ARGS` as the user in `directory`.
    @discardableResult
    public func ferry(_ arguments: [String], in directory: String, environment: [String: String] = [:]) throws -> FerryProcess.Result {
        try run([ferry] + arguments, in: directory, environment: environment)
    }

    /// Starts `ferry serve ARGS` as the user in `folder`.
    public func agent(folder: String, arguments: [String] = ["--no-listen"], environment: [String: String] = [:]) throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: arguments, launcher: command([], environment: environment), executable: ferry)
    }

    // MARK: Setting up

    private static let settingUp = NSLock()

    private static func makeDirectory(_ path: String, _ ids: (uid: uid_t, gid: gid_t)?) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        if let ids { chown(path, ids.uid, ids.gid) }
    }

    private static func copyIfChanged(_ source: String, to target: String, _ ids: (uid: uid_t, gid: gid_t)?) throws {
        let fm = FileManager.default
        let a = try fm.attributesOfItem(atPath: source)
        if let b = try? fm.attributesOfItem(atPath: target), a[.size] as? Int == b[.size] as? Int,
           (a[.modificationDate] as? Date) ?? .distantPast <= (b[.modificationDate] as? Date) ?? .distantPast { return }
        let temp = target + ".tmp-\(getpid())"
        try? fm.removeItem(atPath: temp)
        try fm.copyItem(atPath: source, toPath: temp)
        if let ids { chown(temp, ids.uid, ids.gid) }
        _ = Glibc.rename(temp, target)
    }

    private static func copyTree(_ source: String, to target: String, _ ids: (uid: uid_t, gid: gid_t)?) throws {
        let fm = FileManager.default
        try makeDirectory(target, ids)
        for name in try fm.contentsOfDirectory(atPath: source) {
            var isDir: ObjCBool = false
            _ = fm.fileExists(atPath: source + "/" + name, isDirectory: &isDir)
            if isDir.boolValue { try copyTree(source + "/" + name, to: target + "/" + name, ids) }
            else { try copyIfChanged(source + "/" + name, to: target + "/" + name, ids) }
        }
    }
}
