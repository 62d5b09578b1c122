import ArgumentParser
import FerryCore
import FerryStore
import Foundation
import Logging

/// `-C DIR`: which folder; shared by every command that works on one.
struct FolderOptions: ParsableArguments {
    @Option(name: .customShort("C"), help: ArgumentHelp("The ferry folder (default: the current directory or its nearest ancestor holding .ferry/).", valueName: "dir"))
    var directory: String?

    @Flag(name: .shortAndLong, help: "Log what happens (info level) on stderr.")
    var verbose = false

    /// The folder's root: `-C DIR` as given (no search), or found from the current directory.
    func resolveRoot() throws -> String {
        if let directory {
            let root = absolute(directory)
            // A mistyped -C is named as such, not as a folder to run `ferry init` in.
            var st = stat()
            guard stat(root, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { throw StoreError(.notInitialized, "\(root): no such directory") }
            return root
        }
        let cwd = FileManager.default.currentDirectoryPath
        guard let root = FolderStore.locate(from: cwd) else {
            throw StoreError(.notInitialized, "\(cwd) is not inside a ferry folder (no .ferry/ here or above); run `ferry init`")
        }
        return root
    }

    /// Opens the folder, its log at `quiet`'s level.
    func open(writable: Bool, quiet: Bool = false) throws -> FolderStore {
        try FolderStore.open(at: try resolveRoot(), writable: writable, logger: makeLogger(quiet: quiet))
    }

    /// The folder opened as its one writer, for a command that changes `.ferry/tls/`: a
    /// running agent holds the lock and serves with the identity it loaded, so the change is
    /// refused while it runs.
    func lockForIdentityChange() throws -> FolderStore {
        do { return try open(writable: true) } catch let error as StoreError where error.code == .locked {
            throw CLIError("\(error.message); stop the agent before changing its identity (it loads it when it starts)")
        }
    }

    /// A logger on stderr: warnings by default, info with `--verbose`, errors only with
    /// `quiet`; `$FERRY_LOG` (trace … critical) overrides all three.
    func makeLogger(label: String = "ferry", quiet: Bool = false) -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = Self.environmentLevel ?? (quiet ? .error : verbose ? .info : .warning)
        return logger
    }

    /// `$FERRY_LOG`'s level, if it names one.
    static var environmentLevel: Logger.Level? {
        ProcessInfo.processInfo.environment["FERRY_LOG"].flatMap { Logger.Level(rawValue: $0.lowercased()) }
    }
}

/// `-q/--quiet`, for the commands that report as they go (`sync`, `serve`) and `scan`.
struct QuietOption: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Print nothing but errors: no progress, no summary, no log below error (unless FERRY_LOG says otherwise).")
    var quiet = false
}

/// `--json`: machine-readable output.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON instead of text.")
    var json = false
}

/// An absolute, normalized path for a user-supplied one.
func absolute(_ path: String) -> String {
    let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    var parts: [Substring] = []
    for c in full.split(separator: "/") {
        if c == "." { continue }
        if c == ".." { _ = parts.popLast(); continue }
        parts.append(c)
    }
    return "/" + parts.joined(separator: "/")
}

/// Prints a JSON value, pretty, with a trailing newline.
func printJSON(_ value: JSONValue) {
    FileHandleOutput.stdout(value.prettyBytes)
}

extension LogEntry {
    /// The entry as the JSON object of its log line.
    var json: JSONValue {
        (try? JSONParser.parse(encodedLine())) ?? .null
    }
}
