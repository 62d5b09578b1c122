import Foundation
import Testing
@testable import FerryReplicator

/// What a session lets pile up: blob fetches wait for one of a few turns.
@Suite struct RequestBudgetTests {
    /// A budget shared by tasks, as a session's actor shares it.
    final class SharedBudget: @unchecked Sendable {
        let lock = NSLock()
        var budget = RequestBudget()
        var started = 0
        var count: Int { lock.withLock { started } }
    }

    @Test func atMostMaxFetchesRunAtOnceAndTheEndOfTheConnectionFreesTheRest() async throws {
        let shared = SharedBudget()
        let fetches = RequestBudget.maxFetches + 3
        let tasks = (0..<fetches).map { _ in
            Task {
                await withCheckedContinuation { c in shared.lock.withLock { shared.budget.takeFetchTurn(c) } }
                shared.lock.withLock { shared.started += 1 }
            }
        }
        func waitFor(_ n: Int) async throws {
            for _ in 0..<400 where shared.count < n { try await Task.sleep(for: .milliseconds(5)) }
            try await Task.sleep(for: .milliseconds(30))
        }
        try await waitFor(RequestBudget.maxFetches)
        #expect(shared.count == RequestBudget.maxFetches)
        shared.lock.withLock { shared.budget.endFetchTurn() }
        shared.lock.withLock { shared.budget.endFetchTurn() }
        try await waitFor(RequestBudget.maxFetches + 2)
        #expect(shared.count == RequestBudget.maxFetches + 2)
        shared.lock.withLock { shared.budget.releaseAll() }
        for task in tasks { await task.value }
        #expect(shared.count == fetches)
    }
}
