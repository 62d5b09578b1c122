import ArgumentParser
import FerryCore
import FerryNet
import FerryStore
import Foundation

/// `ferry users`: managing a listener's `--users FILE`.
struct UsersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Manage the users file a listener checks passwords against.",
        subcommands: [HashPassword.self])

    /// `ferry users hash-password --name NAME [--password-file F]`.
    struct HashPassword: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "hash-password",
            abstract: "Print a users-file line with a salted, slow hash (PBKDF2-SHA256) of a password.",
            discussion: """
                The password comes from --password-file, else $FERRY_PASSWORD, else a prompt (echo off) on a terminal, else the first line of standard input; \
                never from the command line. Append the printed line to a JSON Lines users file.
                """)

        @Option(help: "The user's name.")
        var name: String

        @Option(help: "A file whose first line is the password.")
        var passwordFile: String?

        @Option(help: ArgumentHelp("PBKDF2 rounds (at least 210000).", visibility: .hidden))
        var rounds = PasswordHash.defaultRounds

        func validate() throws {
            guard rounds >= PasswordHash.minimumRounds else { throw ValidationError("--rounds must be at least \(PasswordHash.minimumRounds)") }
            guard !name.isEmpty else { throw ValidationError("--name must not be empty") }
        }

        func run() throws {
            let password = try readPassword(file: passwordFile, prompt: "password for \(name): ")
            let hash = try PasswordHash(hashing: password, rounds: rounds)
            FileHandleOutput.stdout(JSONValue.object(["name": .string(name), "password_hash": .string(hash.description)]).canonicalBytes + [0x0A])
        }
    }
}

/// A password from a file's first line, else `$FERRY_PASSWORD`, else a prompt with echo off
/// when standard input is a terminal, else standard input's first line.
func readPassword(file: String?, prompt: String = "password: ") throws -> String {
    func firstLine(_ bytes: [UInt8]) -> String {
        var line = bytes.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false).first.map(Array.init) ?? []
        if line.last == 0x0D { line.removeLast() }
        return String(decoding: line, as: UTF8.self)
    }
    if let file { return firstLine(try FileSystem.readFile(absolute(file))) }
    if let env = ProcessInfo.processInfo.environment["FERRY_PASSWORD"] { return env }
    if isatty(0) == 1 { return try HiddenPrompt.read(prompt) }
    let stdin = FileHandle.standardInput.readDataToEndOfFile()
    guard !stdin.isEmpty else { throw CLIError("no password: use --password-file F, $FERRY_PASSWORD, or standard input", exitCode: 2) }
    return firstLine(Array(stdin))
}

/// Reads one line from the terminal with echo off, as `sudo` and `ssh` ask for passwords.
enum HiddenPrompt {
    /// Shows `prompt` on stderr and reads a line without echoing it.
    static func read(_ prompt: String) throws -> String {
        var saved = termios()
        guard tcgetattr(0, &saved) == 0 else { throw CLIError("cannot read a password from this terminal", exitCode: 2) }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        // Echo goes off before the prompt shows: what is typed after it must not be flushed.
        tcsetattr(0, TCSAFLUSH, &silent)
        FileHandleOutput.stderrRaw(prompt)
        defer {
            tcsetattr(0, TCSAFLUSH, &saved)
            FileHandleOutput.stderrRaw("\n")
        }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw CLIError("no password given", exitCode: 2)
        }
        return line
    }
}
