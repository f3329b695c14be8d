import Foundation
import Testing

/// Allocations per operation, counted in a process of its own (`futures-leakcheck --allocations`):
/// deterministic, so the budgets are exact. They hold for optimised builds, the code users ship; a
/// debug build allocates more (unoptimised closures and copies), so there the test only checks that
/// the meter counts.
@Suite("Allocation budgets")
struct AllocationBudgetTests {
    struct Budget: Sendable, CustomTestStringConvertible {
        var scenario: String
        var allocations: Int
        var bytes: Int
        var testDescription: String { scenario }
    }

    static let budgets: [Budget] = {
        var budgets = [
            // A promise and its future, completed: the promise and the storage.
            Budget(scenario: "promise", allocations: 2, bytes: 152),
            // A pending future with one `.immediate` callback: nothing more (the first entry is inline).
            Budget(scenario: "pending-callback", allocations: 2, bytes: 152),
            // The same through a custom executor: the callback's closure, the job, and the guard that
            // runs the job at most once. (The executor is kept inline, in no box of its own.)
            Budget(scenario: "pending-callback-hop", allocations: 7, bytes: 417),
            // An `.immediate` map step: the derived future, holding its transform.
            Budget(scenario: "map-step", allocations: 1, bytes: 120),
            // A map step through a custom executor (no affinity: a job per step), the job guarded (a
            // job the executor drops fails the step's future).
            Budget(scenario: "map-step-hop", allocations: 5, bytes: 352),
            // A map step of the default executor on a serial queue, run in the job of the chain's first
            // step: the derived future, holding its transform and its executor (the queue, not an
            // existential); no callback closure, no job. (The one hop's own allocations by GCD may vary
            // a little from run to run: a few bytes per step of slack.)
            Budget(scenario: "map-step-queue", allocations: 1, bytes: 140),
            // A promise completed with the next promise's future, which merges into it: the promise,
            // its storage, and the adopter's box for the right to complete. Walking the merge links
            // allocates nothing.
            Budget(scenario: "adoption-step", allocations: 3, bytes: 184),
            // One iteration of a recursive `.immediate` `flatMap` loop: its source, the derived future
            // with its closure, and the merge of the inner future.
            Budget(scenario: "flatmap-loop-step", allocations: 6, bytes: 344),
            // One level of a recursive loop whose levels merge, each completed from outside after the
            // next level was made: its promise, the derived future with its closure, the merge.
            Budget(scenario: "merging-loop-level", allocations: 6, bytes: 376),
            // The same level with a `whenFailure(on: .immediate)` observer: no allocation more (the
            // observer is stored as its body), and the merge set carries its entry (32 bytes, in a
            // buffer that grows by doubling, so a level's share is a fraction, rounded) until the
            // loop completes.
            Budget(scenario: "observed-loop-level", allocations: 6, bytes: 442),
            // A level of a merge set, then a `map` on it that splits the set there (from the top
            // down), then the set completed: the level's promise and its merge; the map; the split's
            // future, its extras box, its table of forwards, the wait's token and callback. The
            // future waited on is held strongly, so it gets no side table (one allocation more).
            Budget(scenario: "split-consumer", allocations: 15, bytes: 1233),
            // A join's member, its promise included: the member costs the join no allocation.
            Budget(scenario: "join-member", allocations: 2, bytes: 216),
            // A promise, `.immediate` map, flatMap, map, flatMap, reporting progress 10 times to a
            // `whenProgress(on: .immediate)` handler at its end, then succeeding (with progress off
            // the chain costs 11 allocations, 904 bytes): each future's progress state (its one
            // observer inline), the listener of each follower, the handler's delivery. No report
            // allocates.
            Budget(scenario: "progress-chain-observed", allocations: 23, bytes: 2198),
            // `await` of a completed future.
            Budget(scenario: "await-completed", allocations: 0, bytes: 0),
        ]
        // The bridges, each with the framework's own job beside it (scenario: allocations, bytes),
        // when the package trait that builds the bridge is enabled.
        #if FuturesNIO
        budgets += [
            // An EventLoopFuture into a Future and back, the NIO promise included (one `flatMap`: 7, 360).
            Budget(scenario: "nio-round-trip", allocations: 8, bytes: 544),
        ]
        #endif
        #if canImport(Combine) || FuturesCombine
        budgets += [
            // A subscription to a completed future's publisher (Combine's own `Future`: 13, 625).
            Budget(scenario: "combine-publisher", allocations: 14, bytes: 832),
            // The first value of a two-value sequence publisher (Combine's `first()`: 9, 416); the
            // cancel handler's weak reference to the subscriber costs a side table, and the cancel
            // handler an extras box, which holds a merge set's weights per depth, the observers it
            // carries and its cancel handlers (a deque: a buffer, its head and its base, one word
            // more than an array). (The bytes move by a few from one build to the next: a word of
            // slack.)
            Budget(scenario: "combine-first-value", allocations: 16, bytes: 1064),
        ]
        #endif
        return budgets
    }()

    @Test(arguments: budgets)
    func operationsStayWithinTheirAllocationBudgets(budget: Budget) async throws {
        guard let (allocations, bytes) = try await allocationsPerOperation(budget.scenario) else { return }
        #if DEBUG
        #expect(allocations >= 0 && bytes >= 0)
        #else
        #expect(allocations <= budget.allocations, "\(budget.scenario): \(allocations) allocations")
        #expect(bytes <= budget.bytes, "\(budget.scenario): \(bytes) bytes")
        #endif
    }

    /// A loop that observes every level keeps one carried entry per level, and nothing else: no
    /// allocation more than the same loop unobserved, and at most 80 bytes a level more (an entry
    /// of 32 bytes in a buffer that doubles; no wrapping closure, no copy into the drain's list, no
    /// cycle walk at each adoption because observers watch the loop's future).
    @Test func observingEveryLevelOfALoopCostsOnlyItsCarriedEntries() async throws {
        guard let plain = try await allocationsPerOperation("merging-loop-level"),
              let observed = try await allocationsPerOperation("observed-loop-level") else { return }
        #if !DEBUG
        #expect(observed.allocations == plain.allocations, "\(observed.allocations) allocations a level, \(plain.allocations) unobserved")
        #expect(observed.bytes - plain.bytes <= 80, "\(observed.bytes - plain.bytes) bytes a level more than unobserved")
        #endif
        #expect(observed.bytes > plain.bytes, "the meter counts the carried entries")
    }

    /// Once a chain's end is observed, a report costs no allocation, however many follow: no
    /// closure, job or list per report on the way to an `.immediate` handler.
    @Test func aProgressReportToAnObservedChainAllocatesNothing() async throws {
        guard let (allocations, bytes) = try await allocationsPerOperation("progress-report-observed"),
              let (chain, _) = try await allocationsPerOperation("progress-chain-observed") else { return }
        #if !DEBUG
        #expect(allocations == 0, "\(allocations) allocations a report")
        #expect(bytes == 0, "\(bytes) bytes a report")
        #endif
        #expect(chain > 0, "the meter counts the chain")
    }

    /// Awaiting a pending future costs no more allocations than awaiting a checked continuation
    /// resumed the same way.
    @Test func awaitingAPendingFutureAllocatesNoMoreThanAContinuation() async throws {
        guard let (future, _) = try await allocationsPerOperation("await-pending"),
              let (continuation, _) = try await allocationsPerOperation("continuation-pending") else { return }
        #if !DEBUG
        #expect(future <= continuation, "await: \(future) allocations, continuation: \(continuation)")
        #endif
        #expect(continuation > 0, "the meter counts a task's allocations")
    }

    /// What a context carrier adds to a registration (see `FutureContext`): exactly one
    /// allocation, the callback's wrapper, whatever the kind of callback, whether or not a value
    /// was captured, with two carriers installed; and a join's own registrations capture nothing,
    /// so a zip with one callback costs that one too.
    struct CarriedCost: Sendable, CustomTestStringConvertible {
        var plain: String
        var carried: String
        var testDescription: String { carried }
    }

    static let carriedCosts = [
        CarriedCost(plain: "pending-callback-hop", carried: "carried-pending-callback-hop"),
        CarriedCost(plain: "pending-callback-hop", carried: "carried-none-pending-callback-hop"),
        CarriedCost(plain: "pending-callback-hop", carried: "two-carriers-pending-callback-hop"),
        CarriedCost(plain: "failure-callback-hop", carried: "carried-failure-callback-hop"),
        CarriedCost(plain: "cancelled-callback-hop", carried: "carried-cancelled-callback-hop"),
        CarriedCost(plain: "zip-callback", carried: "carried-zip-callback"),
    ]

    @Test(arguments: carriedCosts)
    func aCarrierCostsARegistrationOneAllocation(cost: CarriedCost) async throws {
        guard let (plain, _) = try await allocationsPerOperation(cost.plain),
              let (carried, _) = try await allocationsPerOperation(cost.carried) else { return }
        #if !DEBUG
        #expect(carried == plain + 1, "\(cost.plain): \(plain) allocations, \(cost.carried): \(carried)")
        #endif
        #expect(plain > 0, "the meter counts")
    }

    /// The meter counts: a promise allocates at least its storage, in any build.
    @Test func theAllocationMeterCounts() async throws {
        guard let (allocations, bytes) = try await allocationsPerOperation("promise") else { return }
        #expect(allocations >= 1)
        #expect(bytes >= 64)
    }
}

/// Allocations and bytes per operation of `scenario`, or `nil` where allocations cannot be counted
/// (under a sanitizer, or off glibc).
func allocationsPerOperation(_ scenario: String) async throws -> (allocations: Int, bytes: Int)? {
    let words = try await runLeakCheck(["--allocations", scenario])
    guard words.count == 3 || (words.count == 2 && words[1] == "unmeasured"), words[0] == scenario else {
        throw LeakCheckError(output: words.joined(separator: " "), status: 0)
    }
    guard words.count == 3, let allocations = Int(words[1]), let bytes = Int(words[2]) else { return nil }
    return (allocations, bytes)
}
