import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

// `ferry -C DIR COMMAND …` (git's form) is accepted by moving `-C DIR` after the command name,
// where the commands' shared `FolderOptions` parse it.
var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.count >= 3, arguments[0] == "-C" {
    let dir = arguments[1]
    arguments.removeFirst(2)
    var insertAt = 1
    // Nested commands (`identity create`) keep their full path before the option.
    if arguments.count > 1, FerryCommand.configuration.subcommands.contains(where: {
        $0.configuration.commandName == arguments[0] && !$0.configuration.subcommands.isEmpty
    }) { insertAt = 2 }
    arguments.insert(contentsOf: ["-C", dir], at: min(insertAt, arguments.count))
}
exit(await CommandRunner.run(arguments))
