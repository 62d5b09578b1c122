import Testing
import FerrySimulation

/// The simulation's own checks, on a few seeds (`scripts/test.sh` runs 2,000 with `ferry-sim`).
@Suite struct SimulationTests {
    @Test func aFewSeedsPass() async {
        for seed in UInt64(1)...20 {
            let outcome = await Simulation.run(seed: seed)
            #expect(outcome.passed, "seed \(seed): \(outcome.failures.prefix(3))\n\(outcome.trace.joined(separator: "\n"))")
        }
    }

    /// One seed, run twice, makes the same revisions and files: a failing seed replays.
    @Test func aSeedReplaysExactly() async {
        for seed in [UInt64(7), 11] {
            let first = await Simulation.run(seed: seed)
            let second = await Simulation.run(seed: seed)
            #expect(first.fingerprint == second.fingerprint && first.trace == second.trace, "seed \(seed)")
        }
    }
}
