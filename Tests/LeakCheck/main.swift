// futures-leakcheck: runs one scenario many times in a process of its own and prints how many bytes
// of heap each iteration kept, so that tests can check what stays allocated without other tests
// allocating alongside. Usage: futures-leakcheck SCENARIO [ITERATIONS]
import CHeapStatistics
import Dispatch
import Foundation
import Futures


/// The scenarios: each body is one iteration. A long-lived token or future they share lives in a global.
let app = CancellationSource()
var keptForTheMeter: [[UInt8]] = []

let scenarios: [String: () -> Void] = [
    // The meter itself: a 64-byte array kept per iteration, and one freed at once.
    "meter-leak": { keptForTheMeter.append([UInt8](repeating: 1, count: 64)) },
    "meter-clean": { _ = [UInt8](repeating: 1, count: 64) },
    // Composed tokens on a long-lived token, each request's source dropped.
    "either": {
        let request = CancellationSource()
        _ = CancellationToken.either(app.token, request.token).canBeCancelled
    },
    "both": {
        let request = CancellationSource()
        _ = CancellationToken.both(app.token, request.token).canBeCancelled
    },
    "nested": {
        let request = CancellationSource()
        let session = CancellationSource()
        _ = CancellationToken.both(CancellationToken.either(app.token, request.token), session.token).canBeCancelled
    },
    "unless": {
        let request = CancellationSource()
        request.token.onCancel(unless: app.token) {}
    },
    // Timers on the standard clocks, finished or cancelled long before their deadline.
    "timeout-finished": {
        let promise = Promise<Int>()
        let timed = promise.future.timeout(after: .seconds(8))
        promise.succeed(1)
        precondition(timed.outcome?.value == 1)
    },
    "timeout-cancelled": {
        let promise = Promise<Int>()
        precondition(promise.future.timeout(after: .seconds(8)).cancel())
    },
    "after-cancelled": {
        precondition(Future.after(.seconds(8), value: 1, clock: SuspendingClock()).cancel())
    },
]

// Consumers and observers that leave one long-lived pending future (a "configuration loaded" or
// "shutdown" future): each must take its registration off at once. `keeper` is a consumer that stays,
// so that the others leaving does not cancel `forever`.
let forever = Promise<Int>()
let keeper = forever.future.map(on: .immediate) { $0 }
struct Failed: Error {}

/// Runs the jobs of the tasks that prefer it on the calling thread, when asked: a task awaiting
/// `forever` runs until it suspends (registered), and after it is cancelled, until it ends.
final class InlineTaskExecutor: TaskExecutor, @unchecked Sendable {
    // Safety: `jobs` is only touched under `lock`.
    private let lock = NSLock()
    private var jobs: [UnownedJob] = []

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        lock.withLock { jobs.append(job) }
    }

    func runAll() {
        while let job = lock.withLock({ jobs.isEmpty ? nil : jobs.removeFirst() }) {
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
let inline = InlineTaskExecutor()

let leaving: [String: () -> Void] = [
    "await-cancelled": {
        let task = Task(executorPreference: inline) { await forever.future.result }
        inline.runAll()  // registered, suspended
        task.cancel()
        inline.runAll()  // resumed with `.cancelled`, ended
    },
    "map-cancelled": { precondition(forever.future.map { $0 + 1 }.cancel()) },
    "map-immediate-cancelled": { precondition(forever.future.map(on: .immediate) { $0 + 1 }.cancel()) },
    "flatMap-cancelled": { precondition(forever.future.flatMap { Future(value: $0) }.cancel()) },
    "recover-cancelled": { precondition(forever.future.recover(on: .immediate) { _ in 0 }.cancel()) },
    "always-cancelled": { precondition(forever.future.always { _ in }.cancel()) },
    "chain-cancelled": {
        precondition(forever.future.map(on: .immediate) { $0 }.flatMap { Future(value: $0) }.map { $0 }.cancel())
    },
    "adopter-cancelled": { precondition(Future(value: 1).flatMap(on: .immediate) { _ in forever.future }.cancel()) },
    "observe-cancelled": { precondition(forever.future.observe().cancel()) },
    "observe-map-cancelled": { precondition(forever.future.observe().map { $0 }.cancel()) },
    "cancellable-cancelled": {
        let source = CancellationSource()
        let derived = forever.future.cancellable(by: source.token)
        source.cancel()
        precondition(derived.outcome?.isCancelled == true)
    },
    "map-progress-cancelled": {
        let derived = forever.future.map(on: .immediate) { $0 + 1 }
        _ = derived.progress  // follows the long-lived future's progress from now on
        precondition(derived.cancel())
    },
    "observe-progress-cancelled": {
        let branch = forever.future.observe()
        branch.whenProgress(on: .immediate) { _ in }
        precondition(branch.cancel())
    },
    "flatMap-progress-cancelled": {
        let adopter = Future(value: 1).flatMap(on: .immediate) { _ in forever.future }
        adopter.whenProgress(on: .immediate) { _ in }
        precondition(adopter.cancel())
    },
    // Progress sequences whose consumer leaves early: breaking out, its task cancelled while it
    // waits for the next value, or never iterated.
    "progressUpdates-broken-off": {
        forever.progress = 0.5  // a value to break out on
        _ = Task(executorPreference: inline) { for await _ in forever.future.progressUpdates { break } }
        inline.runAll()
    },
    "progressUpdates-cancelled": {
        let task = Task(executorPreference: inline) { for await _ in forever.future.progressUpdates {} }
        inline.runAll()  // waiting for a value
        task.cancel()
        inline.runAll()  // ended
    },
    "progressUpdates-dropped": { _ = forever.future.progressUpdates },
    "timeout-long-lived-cancelled": { precondition(forever.future.timeout(after: .seconds(8)).cancel()) },
    "race-lost": { precondition(Future.race([forever.future, Future(value: 1)]).outcome?.value == 1) },
    "all-failed-fast": {
        precondition(Future.all([forever.future, Future(error: Failed())]).outcome?.error is Failed)
    },
]

// Allocation counts: each body does its operation `units` times; one unit costs the difference
// between 2 × units and units, so whatever a body allocates once (a task, an array) cancels out.

/// Runs every job at once, on the calling thread: the allocations an executor hop costs the
/// library, without those of a real queue.
struct RunAtOnce: Executor {
    func execute(_ work: @escaping @Sendable () -> Void) { work() }
}

/// Where promises escape to, as they do in real code: the optimiser may otherwise put a promise
/// that never leaves its function on the stack.
nonisolated(unsafe) var escaped: AnyObject?
@inline(never) func escape(_ object: AnyObject) { escaped = object }

/// A promise whose future gets one callback through a custom executor (`register`), then succeeds.
@inline(__always) func callbackHop(_ register: (Future<Int>) -> Void) {
    let promise = Promise<Int>()
    escape(promise)
    register(promise.future)
    promise.succeed(1)
}

func failureCallbackHop() { callbackHop { $0.whenFailure(on: RunAtOnce()) { _ in } } }
func cancelledCallbackHop() { callbackHop { $0.whenCancelled(on: RunAtOnce()) {} } }
func pendingCallbackHop() { callbackHop { $0.whenComplete(on: RunAtOnce()) { _ in } } }

func zipCallback() {
    let first = Promise<Int>()
    let second = Promise<Int>()
    escape(first)
    escape(second)
    Future.zip(first.future, second.future).whenComplete(on: .immediate) { _ in }
    first.succeed(1)
    second.succeed(2)
}

let allocationScenarios: [String: (Int) -> Void] = [
    // A promise completed with nothing registered.
    "promise": { units in
        for _ in 0..<units {
            let promise = Promise<Int>()
            escape(promise)
            promise.succeed(1)
        }
    },
    // Registrations through an executor on a future that then succeeds, without a context carrier
    // and with one (`carried-`: a value current; `carried-none-`: none; `two-carriers-`: two
    // installed, a value of one). `whenFailure` and `whenCancelled` are released unrun.
    "failure-callback-hop": { units in
        for _ in 0..<units { failureCallbackHop() }
    },
    "carried-failure-callback-hop": { units in
        withOneCarrier("r") { for _ in 0..<units { failureCallbackHop() } }
    },
    "cancelled-callback-hop": { units in
        for _ in 0..<units { cancelledCallbackHop() }
    },
    "carried-cancelled-callback-hop": { units in
        withOneCarrier("r") { for _ in 0..<units { cancelledCallbackHop() } }
    },
    "carried-pending-callback-hop": { units in
        withOneCarrier("r") { for _ in 0..<units { pendingCallbackHop() } }
    },
    "carried-none-pending-callback-hop": { units in
        withOneCarrier(nil) { for _ in 0..<units { pendingCallbackHop() } }
    },
    "two-carriers-pending-callback-hop": { units in
        withTwoCarriersOneValue { for _ in 0..<units { pendingCallbackHop() } }
    },
    // A zip of two promises' futures with one `.immediate` callback, the promises then succeeded;
    // with a carrier only that callback captures a context.
    "zip-callback": { units in
        for _ in 0..<units { zipCallback() }
    },
    "carried-zip-callback": { units in
        withOneCarrier("r") { for _ in 0..<units { zipCallback() } }
    },
    // A pending future with one callback, then completed.
    "pending-callback": { units in
        for _ in 0..<units {
            let promise = Promise<Int>()
            escape(promise)
            promise.future.whenComplete(on: .immediate) { _ in }
            promise.succeed(1)
        }
    },
    "pending-callback-hop": { units in
        for _ in 0..<units {
            let promise = Promise<Int>()
            escape(promise)
            promise.future.whenComplete(on: RunAtOnce()) { _ in }
            promise.succeed(1)
        }
    },
    // One step of a `map` chain, registered while pending.
    "map-step": { units in
        let promise = Promise<Int>()
        var future = promise.future
        for _ in 0..<units { future = future.map(on: .immediate) { $0 + 1 } }
        promise.succeed(0)
        precondition(future.outcome?.value == units)
    },
    "map-step-hop": { units in
        let promise = Promise<Int>()
        var future = promise.future
        for _ in 0..<units { future = future.map(on: RunAtOnce()) { $0 + 1 } }
        promise.succeed(0)
        precondition(future.outcome?.value == units)
    },
    // One step of a `map` chain on a serial queue (the default executor, registered in a job on the
    // queue), completed by a job on that queue: the steps run in that job.
    "map-step-queue": { units in
        let queue = DispatchQueue(label: "map-step-queue")
        let finished = DispatchSemaphore(value: 0)
        Future(value: 0).whenSuccess(on: .queue(queue)) { _ in
            let promise = Promise<Int>()
            var future = promise.future
            for _ in 0..<units { future = future.map { $0 + 1 } }
            future.whenComplete(on: .immediate) { _ in finished.signal() }
            promise.succeed(0)
        }
        finished.wait()
    },
    // One step of a chain of promises, each completed with the next one's future before that
    // completes: the adoption merges the two futures.
    "adoption-step": { units in
        let top = Promise<Int>()
        var current = top
        for _ in 0..<units {
            let next = Promise<Int>()
            precondition(current.complete(with: next.future))
            current = next
        }
        current.succeed(7)
        precondition(top.future.outcome?.value == 7)
    },
    // One iteration of a recursive `.immediate` `flatMap` loop.
    "flatmap-loop-step": { units in
        precondition(immediateLoop(units).outcome?.value == 7)
    },
    // One level of a recursive `flatMap` loop whose levels merge, each completed from outside after
    // the next level was made; and the same loop with a `whenFailure(on: .immediate)` observer on
    // every level, which the merge set carries until the loop completes.
    "merging-loop-level": { units in mergingLoop(units, observed: false) },
    // One level of a merge set (a promise completed with the next one's future, so that all of
    // them share the first one's state), then a `map` on it from the top down, each splitting the
    // set once more, then the set completed: what a consumer arriving on a merged level costs.
    "split-consumer": { units in splitConsumers(units) },
    "observed-loop-level": { units in mergingLoop(units, observed: true) },
    // The benchmarks' progress chain (a promise, then `.immediate` map, flatMap, map, flatMap):
    // with progress off; with 10 reports and no observer; with 10 reports and one
    // `whenProgress(on: .immediate)` observer at its end. One unit is one chain.
    "progress-chain": { units in
        for _ in 0..<units { progressChain(reports: 0, observed: false) }
    },
    "progress-chain-reports": { units in
        for _ in 0..<units { progressChain(reports: 10, observed: false) }
    },
    "progress-chain-observed": { units in
        for _ in 0..<units { progressChain(reports: 10, observed: true) }
    },
    // One report to that chain, observed at its end: one unit is one report.
    "progress-report-observed": { units in progressChain(reports: units, observed: true) },
    // One member of `Future.all` (its promise included), completed after joining.
    "join-member": { units in
        let promises = (0..<units).map { _ in Promise<Int>() }
        let all = Future.all(promises.map(\.future))
        for promise in promises { promise.succeed(1) }
        precondition(all.outcome?.value?.count == units)
    },
    // `await` of a completed future, in one task.
    "await-completed": { units in
        let future = Future(value: 1)
        _ = Task(executorPreference: inline) {
            for _ in 0..<units { _ = await future.result }
        }
        inline.runAll()
    },
    // `await` of a pending future, completed from outside, each in a task of its own; and the same
    // with a plain checked continuation, for comparison.
    "await-pending": { units in
        for _ in 0..<units {
            let promise = Promise<Int>()
            _ = Task(executorPreference: inline) { await promise.future.result }
            inline.runAll()
            promise.succeed(1)
            inline.runAll()
        }
    },
    "continuation-pending": { units in
        for _ in 0..<units {
            let slot = ContinuationSlot()
            _ = Task(executorPreference: inline) {
                await withCheckedContinuation { slot.store($0) }
            }
            inline.runAll()
            slot.resume()
            inline.runAll()
        }
    },
]

/// A promise, then `.immediate` map, flatMap, map, flatMap; the promise reports progress
/// `reports` times (rising, below 1), then succeeds; `observed`: one `whenProgress(on: .immediate)`
/// handler at the chain's end, which must see every report, then the steps completing, up to 1.0.
func progressChain(reports: Int, observed: Bool) {
    final class Seen: @unchecked Sendable {
        // Safety: written by the `.immediate` handler, which runs on this thread only (the reports
        // and the completion below are made on it), and read after.
        var count = 0
    }
    let seen = Seen()
    let promise = Promise<Int>()
    let end = promise.future
        .map(on: .immediate) { $0 &+ 1 }
        .flatMap(on: .immediate) { Future(value: $0 &+ 1) }
        .map(on: .immediate) { $0 &+ 1 }
        .flatMap(on: .immediate) { Future(value: $0 &+ 1) }
    if observed { end.whenProgress(on: .immediate) { _ in seen.count += 1 } }
    for step in 0..<reports { promise.progress = Double(step + 1) / Double(reports + 1) }
    promise.succeed(0)
    precondition(end.outcome?.value == 4)
    precondition(observed ? seen.count > reports : seen.count == 0)
}

/// A recursive `.immediate` `flatMap` loop of `remaining` iterations.
@Sendable func immediateLoop(_ remaining: Int) -> Future<Int> {
    if remaining == 0 { return Future(value: 7) }
    return Future(value: ()).flatMap(on: .immediate) { immediateLoop(remaining - 1) }
}

/// A recursive loop of `levels` levels, each a `flatMap` over a promise completed afterwards, in
/// order, from outside: each level adopts the next, which merges into the loop's first future.
func splitConsumers(_ levels: Int) {
    let promises = (0...levels).map { _ in Promise<Int>() }
    for level in 0..<levels { precondition(promises[level].complete(with: promises[level + 1].future)) }
    var later: [Future<Int>] = []
    later.reserveCapacity(levels)
    for level in 1...levels { later.append(promises[level].future.map(on: .immediate) { $0 }) }
    precondition(promises[levels].succeed(1))
    precondition(later.allSatisfy { $0.outcome?.value == 1 })
}

func mergingLoop(_ levels: Int, observed: Bool) {
    final class Levels: @unchecked Sendable {
        // Safety: used on this thread only (every callback is `.immediate`, run by the completions
        // below, on this thread).
        var promises: [Promise<Int>] = []
        let observed: Bool
        init(_ levels: Int, observed: Bool) {
            promises.reserveCapacity(levels + 1)
            self.observed = observed
        }
        func level(_ remaining: Int) -> Future<Int> {
            let promise = Promise<Int>()
            promises.append(promise)
            let level = promise.future.flatMap(on: .immediate) { value in remaining == 0 ? Future(value: value) : self.level(remaining - 1) }
            if observed { level.whenFailure(on: .immediate) { _ in } }
            return level
        }
    }
    let loop = Levels(levels, observed: observed)
    let top = loop.level(levels - 1)
    var next = 0
    while next < loop.promises.count {
        loop.promises[next].succeed(next)
        next += 1
    }
    precondition(top.outcome?.value == levels - 1)
}

/// Holds one continuation until the test resumes it.
final class ContinuationSlot: @unchecked Sendable {
    // Safety: `continuation` is only touched under `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, Never>?

    func store(_ continuation: CheckedContinuation<Void, Never>) { lock.withLock { self.continuation = continuation } }
    func resume() { lock.withLock { continuation.take() }?.resume() }
}

/// Allocations and bytes one unit of `body` costs (the least over a few rounds).
func allocationsPerUnit(_ body: (Int) -> Void, units: Int) -> (allocations: Int, bytes: Int) {
    func counted(_ units: Int) -> (Int, Int) {
        let (allocations, bytes) = (allocation_count(), allocation_bytes())
        allocation_counting_set(1)
        body(units)
        allocation_counting_set(0)
        return (allocation_count() - allocations, allocation_bytes() - bytes)
    }
    body(units)  // warm up
    var least = (allocations: Int.max, bytes: Int.max)
    for _ in 0..<3 {
        let single = counted(units)
        let double = counted(2 * units)
        // Rounded to the nearest: a job handed to GCD allocates a little, not always the same.
        least.allocations = min(least.allocations, (double.0 - single.0 + units / 2) / units)
        least.bytes = min(least.bytes, (double.1 - single.1 + units / 2) / units)
    }
    return least
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.first == "--allocations" {
    guard let name = arguments.dropFirst().first, let body = allocationScenarios[name] ?? bridgeAllocationScenarios[name] else {
        FileHandle.standardError.write(Data("usage: futures-leakcheck --allocations SCENARIO\nscenarios: \((Array(allocationScenarios.keys) + Array(bridgeAllocationScenarios.keys)).sorted().joined(separator: " "))\n".utf8))
        exit(2)
    }
    guard allocation_counting_available() != 0 else {
        print("\(name) unmeasured")
        exit(0)
    }
    let (allocations, bytes) = allocationsPerUnit(body, units: 1_000)
    print("\(name) \(allocations) \(bytes)")
    exit(0)
}
let everyScenario = scenarios.merging(leaving) { first, _ in first }
guard let name = arguments.first, let body = everyScenario[name] else {
    FileHandle.standardError.write(Data("usage: futures-leakcheck SCENARIO [ITERATIONS]\nscenarios: \(everyScenario.keys.sorted().joined(separator: " "))\n".utf8))
    exit(2)
}
let iterations = arguments.dropFirst().first.flatMap { Int($0) } ?? 20_000
if heap_statistics_available() == 0 {
    print("\(name) unmeasured")
    exit(0)
}
// Warm up (lazy globals, the timer thread, dictionary capacity), then the least of three rounds.
for _ in 0..<iterations { body() }
var least = Int.max
for _ in 0..<3 {
    let before = Int(heap_statistics_in_use())
    for _ in 0..<iterations { body() }
    least = min(least, (Int(heap_statistics_in_use()) - before) / iterations)
}
print("\(name) \(least)")
