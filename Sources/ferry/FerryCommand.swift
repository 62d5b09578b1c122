import ArgumentParser

/// `ferry`: the root command.
struct FerryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "Keep a folder in sync between machines; the folder is the database.",
        discussion: """
            ferry [-C DIR] COMMAND — DIR defaults to the current directory or its nearest ancestor holding .ferry/.
            Exit codes: 0 success, 1 failure, 2 usage error, 3 authentication/TLS trust failure, 4 folder not initialized or locked.
            Logs go to stderr: warnings by default (serve: info), info with -v, errors only with -q (sync, serve, scan); \
            FERRY_LOG=trace|debug|info|notice|warning|error|critical overrides both.
            """,
        version: FerryVersion.current,
        subcommands: [
            InitCommand.self, ServeCommand.self, SyncCommand.self, ScanCommand.self, StatusCommand.self, LogCommand.self, ShowCommand.self,
            ConflictsCommand.self, VerifyCommand.self, CompactCommand.self, UsersCommand.self, IdentityCommand.self, PeerCommand.self, PeersCommand.self,
            DiffCommand.self, RestoreCommand.self,
        ]
    )
}
