import ArgumentParser
import Dispatch
import FerryStore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs a command line and maps every failure to SPEC §3's exit codes: 1 failure, 2 usage,
/// 3 authentication or TLS trust, 4 folder not initialized or locked. Errors are one line on
/// stderr, prefixed `ferry: `.
enum CommandRunner {
    static func run(_ arguments: [String]) async -> Int32 {
        if let topic = unknownHelpTopic(arguments) {
            FileHandleOutput.stderr("ferry: no command '\(topic)'; 'ferry help' lists them")
            return 2
        }
        var command: ParsableCommand
        do {
            command = try FerryCommand.parseAsRoot(arguments)
        } catch {
            // Anything that stops parsing is a usage error (or a help request).
            return reportParserError(error, failure: 2)
        }
        do {
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            return 0
        } catch let error as StoreError {
            FileHandleOutput.stderr("ferry: \(error.message)")
            switch error.code {
            case .notInitialized, .locked: return 4
            default: return 1
            }
        } catch let error as CLIError {
            FileHandleOutput.stderr("ferry: \(error.message)")
            return error.exitCode
        } catch let error as ExitCode {
            return error.rawValue
        } catch {
            // Help requested inside a command, validation errors, and anything else the
            // argument parser knows how to describe.
            return reportParserError(error, failure: FerryCommand.exitCode(for: error) == .validationFailure ? 2 : 1)
        }
    }

    /// The first name after `help` that names no command (`ferry help nosuch`, `ferry help
    /// identity nosuch`); the parser's own `help` would show the root's help for it and exit 0.
    static func unknownHelpTopic(_ arguments: [String]) -> String? {
        guard arguments.first == "help" else { return nil }
        var command: ParsableCommand.Type = FerryCommand.self
        for name in arguments.dropFirst() where !name.hasPrefix("-") {
            guard let sub = command.subcommand(named: name) else { return name }
            command = sub
        }
        return nil
    }

    /// Prints what the argument parser says about `error`: help on stdout (exit 0), anything
    /// else on stderr with exit status `failure`.
    private static func reportParserError(_ error: Error, failure: Int32) -> Int32 {
        if FerryCommand.exitCode(for: error) == .success {
            print(FerryCommand.fullMessage(for: error))
            return 0
        }
        FileHandleOutput.stderr(FerryCommand.fullMessage(for: error))
        return failure
    }
}

extension ParsableCommand {
    /// The subcommand called `name` (or one of its aliases), if there is one.
    static func subcommand(named name: String) -> ParsableCommand.Type? {
        configuration.subcommands.first { $0._commandName == name || $0.configuration.aliases.contains(name) }
    }
}

/// A failure the CLI reports with its own exit code.
struct CLIError: Error {
    /// One sentence.
    let message: String
    /// The process's exit status.
    let exitCode: Int32

    /// A failure (exit 1 unless said otherwise).
    init(_ message: String, exitCode: Int32 = 1) {
        self.message = message
        self.exitCode = exitCode
    }
}

/// Writing to the standard streams without buffering surprises.
enum FileHandleOutput {
    /// One line on stderr.
    static func stderr(_ line: String) {
        var text = line
        if !text.hasSuffix("\n") { text += "\n" }
        _ = text.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }

    /// Text on stderr as is (a progress line redrawn with `\r`).
    static func stderrRaw(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }

    /// Raw bytes on stdout.
    static func stdout(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            if n <= 0 { if errno == EINTR { continue }; return }
            offset += n
        }
    }
}

/// Counts the termination signals a command received.
final class Interruption: Sendable {
    /// The shell's convention for a process ended by SIGINT (128 + 2).
    static let exitCode: Int32 = 130
    private let state = Mutex((count: 0, caughtUp: false))

    /// Records one signal, and whether the work was caught up when the first came; returns how
    /// many there have been.
    func signal(caughtUp: Bool = false) -> Int {
        state.withLock {
            if $0.count == 0 { $0.caughtUp = caughtUp }
            $0.count += 1
            return $0.count
        }
    }

    /// True once a signal has arrived.
    var happened: Bool { state.withLock { $0.count > 0 } }

    /// True when the first signal came while the work was caught up (nothing left undone).
    var cameCaughtUp: Bool { state.withLock { $0.caughtUp } }
}

/// Calls `handler` on SIGINT and SIGTERM (instead of dying), so a command can stop cleanly;
/// cancel the returned sources when done.
func onTerminationSignals(_ handler: @escaping @Sendable () -> Void) -> [DispatchSourceSignal] {
    [SIGINT, SIGTERM].map { sig in
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler(handler: handler)
        source.resume()
        return source
    }
}
