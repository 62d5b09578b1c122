import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

// One malloc arena: glibc otherwise gives each busy thread (NIO's event loop, the Swift pool,
// the store) an arena of its own, and their free space alone added ~8 MiB to the peak RSS of
// a 10,000-document sync (measured; the time did not change). Swift's Glibc module does not
// show malloc.h, hence dlsym; M_ARENA_MAX is -8 there.
if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") {
    typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
    _ = unsafeBitCast(symbol, to: Mallopt.self)(-8, 1)
}

// `ferry -C DIR COMMAND …` (git's form) is accepted by moving `-C DIR` after the command name,
// where the commands' shared `FolderOptions` parse it.
var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.count >= 3, arguments[0] == "-C" {
    let dir = arguments[1]
    arguments.removeFirst(2)
    let command = FerryCommand.subcommand(named: arguments[0])
    // Not a command (`ferry -C DIR bogus`, `ferry -C DIR --help`): the parser speaks of what
    // follows, not of a `-C` it was never shown where it belongs.
    if let command {
        // Nested commands (`identity create`) keep their full path before the option.
        let insertAt = arguments.count > 1 && !command.configuration.subcommands.isEmpty ? 2 : 1
        arguments.insert(contentsOf: ["-C", dir], at: min(insertAt, arguments.count))
    }
}
exit(await CommandRunner.run(arguments))
