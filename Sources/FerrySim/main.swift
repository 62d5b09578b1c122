import ArgumentParser
import FerrySimulation
import Foundation

/// `ferry-sim`: runs the deterministic simulation (`FerrySimulation`) over many seeds, or
/// replays one seed with its trace.
@main
struct FerrySim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-sim",
        abstract: "Run ferry's deterministic multi-peer simulation.",
        discussion: """
            Each seed builds 2 to 6 peers in a random topology, runs random edits, deletions, \
            stale and invalid saves, cut connections and restarts, replicates until quiet, and \
            checks that every peer holds the same files and revisions and that no edit was lost. \
            A failing seed is printed with the command that replays it.
            """)

    @Option(help: "Replay this one seed (prints its trace).")
    var seed: UInt64?

    @Option(help: "How many seeds to run.")
    var seeds: Int = 2000

    @Option(help: "The first seed.")
    var first: UInt64 = 1

    @Option(help: "Seeds run at once (each on a thread of its own).")
    var jobs: Int = 2

    @Flag(help: "Print every seed's trace, not only failing ones'.")
    var trace = false

    @Option(help: "Where the simulated folders go (default: /dev/shm when writable).")
    var directory: String?

    func run() async throws {
        Self.makeHashingDeterministic()
        if let seed {
            let outcome = await Simulation.run(seed: seed, directory: directory)
            print(outcome.trace.joined(separator: "\n"))
            report(outcome)
            print(outcome.summary)
            if !outcome.passed { throw ExitCode(1) }
            return
        }
        let start = ContinuousClock.now
        var failed: [SimulationOutcome] = []
        var done = 0
        let all = (0..<UInt64(max(seeds, 0))).map { first + $0 }
        var next = all.makeIterator()
        await withTaskGroup(of: SimulationOutcome.self) { group in
            for _ in 0..<max(jobs, 1) {
                guard let s = next.next() else { break }
                group.addTask { await Simulation.run(seed: s, directory: directory) }
            }
            for await outcome in group {
                done += 1
                if trace { print(outcome.trace.joined(separator: "\n")) }
                if !outcome.passed {
                    failed.append(outcome)
                    report(outcome)
                }
                if let s = next.next() { group.addTask { await Simulation.run(seed: s, directory: directory) } }
            }
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("\(done - failed.count) of \(done) seeds passed (\(first)…\(first + UInt64(max(seeds, 1)) - 1)) in \(String(format: "%.1f", seconds)) s")
        if !failed.isEmpty { throw ExitCode(1) }
    }

    func report(_ outcome: SimulationOutcome) {
        guard !outcome.passed else { return }
        print("seed \(outcome.seed) FAILED (\(outcome.summary)):")
        for f in outcome.failures.prefix(10) { print("  \(f)") }
        print("  replay: scripts/simulate.sh --seed \(outcome.seed)")
    }

    /// Swift seeds its hashing per process, which changes the order dictionaries are walked
    /// in; a replay must walk them as the failing run did. Runs itself again with
    /// `SWIFT_DETERMINISTIC_HASHING` set, once.
    static func makeHashingDeterministic() {
        guard ProcessInfo.processInfo.environment["SWIFT_DETERMINISTIC_HASHING"] == nil else { return }
        setenv("SWIFT_DETERMINISTIC_HASHING", "1", 1)
        let args = CommandLine.arguments.map { strdup($0) } + [nil]
        execv("/proc/self/exe", args)
    }
}
