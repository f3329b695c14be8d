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

let arguments = CommandLine.arguments.dropFirst()
guard let name = arguments.first, let body = scenarios[name] else {
    FileHandle.standardError.write(Data("usage: futures-leakcheck SCENARIO [ITERATIONS]\nscenarios: \(scenarios.keys.sorted().joined(separator: " "))\n".utf8))
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
