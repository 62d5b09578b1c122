import ArgumentParser
import FerryCore
import FerryStore
import Foundation

/// `ferry init [DIR] [--name N] [--sample]`.
struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Make a folder a ferry folder, recording the files already there as first revisions.")

    @Argument(help: "The folder (created if missing; default: -C DIR or the current directory).")
    var directory: String?

    @Option(help: "The database name (default: the folder's name).")
    var name: String?

    @Flag(help: "Also install the inventory sample: samplelist.json with an image blob on every item.")
    var sample = false

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let root = absolute(directory ?? folder.directory ?? FileManager.default.currentDirectoryPath)
        var samples: String?
        if sample {
            let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
            samples = SampleInstaller.locate(executable: exe, environment: ProcessInfo.processInfo.environment)
            guard samples != nil else {
                throw CLIError("cannot find the samples directory; set FERRY_SAMPLES to the project's samples/ folder")
            }
        }
        try FileSystem.makeDirectories(root)
        let store = try FolderStore.create(at: root, name: name, logger: folder.makeLogger())
        if let samples { try SampleInstaller(samplesDirectory: samples).install(into: store) }
        let report = try store.batch { try store.scanAndRecord() }
        if output.json {
            printJSON([
                "folder": .string(root), "name": .string(store.info.name), "id": .string(store.info.id),
                "recorded": .int(report.recorded.count),
                "unreadable": ReportJSON.documents(report.unreadable, key: "error"),
                "skipped": ReportJSON.skipped(report.skipped),
            ])
            return
        }
        print("Initialized ferry folder \(root) (database \"\(store.info.name)\", id \(store.info.id))")
        print("Recorded \(report.recorded.count) document\(report.recorded.count == 1 ? "" : "s").")
        for u in report.unreadable { print("  not recorded: \(u.doc): \(u.reason)") }
        for s in report.skipped { print("  not synced: \(PrintablePath.text(s.path)): \(s.reason)") }
    }
}

/// `ferry scan`: record what changed while no agent was watching.
struct ScanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Record every change made to the folder since it was last recorded (what `serve` does at start).")

    @OptionGroup var folder: FolderOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var quiet: QuietOption

    func validate() throws {
        if quiet.quiet && (folder.verbose || output.json) { throw ValidationError("--quiet goes with neither --verbose nor --json") }
    }

    func run() throws {
        let store = try folder.open(writable: true, quiet: quiet.quiet)
        let report = try store.batch { try store.scanAndRecord() }
        if output.json {
            printJSON([
                "recorded": .array(report.recorded.map(\.json)),
                "unreadable": ReportJSON.documents(report.unreadable, key: "error"),
            ])
            return
        }
        // Under --quiet only what could not be recorded is said, on stderr.
        for u in report.unreadable where quiet.quiet { FileHandleOutput.stderr("ferry: not recorded: \(u.doc): \(u.reason)") }
        if quiet.quiet { return }
        for e in report.recorded { print("\(e.deleted ? "deleted" : "recorded") \(e.doc) \(e.rev)") }
        for u in report.unreadable { print("not recorded: \(u.doc): \(u.reason)") }
        if report.recorded.isEmpty && report.unreadable.isEmpty { print("Nothing changed.") }
    }
}
