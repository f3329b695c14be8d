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
    "timeout-long-lived-cancelled": { precondition(forever.future.timeout(after: .seconds(8)).cancel()) },
    "race-lost": { precondition(Future.race([forever.future, Future(value: 1)]).outcome?.value == 1) },
    "all-failed-fast": {
        precondition(Future.all([forever.future, Future(error: Failed())]).outcome?.error is Failed)
    },
]

let arguments = CommandLine.arguments.dropFirst()
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
