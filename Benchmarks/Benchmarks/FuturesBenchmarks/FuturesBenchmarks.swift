// Benchmarks of swift-futures against plain GCD, SwiftNIO's EventLoopFuture and plain closures.
//
// Every benchmark name is "<scenario>.<what> [<unit>] <contender>", so a scenario's contenders sort
// side by side. The unit in brackets says what one "operation" is: the benchmark does that many
// operations per iteration (see `scalingFactor`), and `Benchmarks/README.md` divides by it.
//
// Contenders:
//   futures  this library
//   GCD      DispatchQueue / DispatchGroup doing the same job by hand
//   NIO      SwiftNIO 2.101.3 EventLoopPromise / EventLoopFuture
//   closure  a plain completion-handler closure chain (scenario b only)
//   CC       withCheckedContinuation (scenarios f and o)
//   Combine  OpenCombine 0.14.0 (Combine on Apple platforms) doing the same job alone (scenario i)
//   URLSession  Foundation's URLSession with a completion handler (scenario i)

import Benchmark
import Dispatch
import Futures
import NIOCore
import NIOEmbedded
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Shared fixtures

/// A one-thread SwiftNIO event loop group; never shut down (it lives as long as the process).
let nioGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let nioLoop: any EventLoop = nioGroup.next()

/// The serial queue that `.queue(q)` callbacks (and the GCD baselines' callbacks) run on.
let callbackQueue = DispatchQueue(label: "bench.callbacks")
/// Two queues that complete promises "from another thread".
let completerQueue = DispatchQueue(label: "bench.completer.1")
let completerQueue2 = DispatchQueue(label: "bench.completer.2")

/// A thread-safe counter for callbacks to bump.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)

    init() {}

    /// Adds one and returns the new value.
    @discardableResult
    func increment() -> Int {
        storage.add(1, ordering: .relaxed).newValue
    }

    var value: Int {
        get { storage.load(ordering: .relaxed) }
        set { storage.store(newValue, ordering: .relaxed) }
    }
}

/// A fixed array of slots that different threads write at different indices (DispatchGroup baseline).
final class Slots: @unchecked Sendable {
    // Safety: each index is written by exactly one thread, and read only after a DispatchGroup wait.
    let buffer: UnsafeMutableBufferPointer<Int>

    init(count: Int) {
        buffer = .allocate(capacity: count)
        buffer.initialize(repeating: 0)
    }

    deinit { buffer.deallocate() }
}

/// A box of values handed to an event loop and back (its users never touch it concurrently).
final class LoopBox<Element>: @unchecked Sendable {
    // Safety: filled inside one `submit` on the loop, read after `wait()` returns.
    var items: [Element] = []

    init(capacity: Int) { items.reserveCapacity(capacity) }
}

struct BenchmarkFailure: Error {}

// MARK: - Wake-ups

/// The custom metric for thread wake-ups: voluntary context switches of the whole process (every
/// thread blocking, which is what each wake-up undoes), from `getrusage(RUSAGE_SELF)`.
let wakeups = BenchmarkMetric.custom("voluntaryContextSwitches", polarity: .prefersSmaller, useScalingFactor: true)

func voluntaryContextSwitches() -> Int {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return Int(usage.ru_nvcsw)
}

/// Measures only `body` (setup and teardown around it are not measured), and records wake-ups.
func measure(_ benchmark: Benchmark, _ body: () throws -> Void) rethrows {
    let before = voluntaryContextSwitches()
    benchmark.startMeasurement()
    try body()
    benchmark.stopMeasurement()
    benchmark.measurement(wakeups, voluntaryContextSwitches() - before)
}

/// ``measure(_:_:)`` for round trips, one per scaled iteration: `start` sets one off, and whatever
/// ends it signals the semaphore it is given.
func measureRoundTrips(_ benchmark: Benchmark, _ start: (DispatchSemaphore) -> Void) {
    let done = DispatchSemaphore(value: 0)
    measure(benchmark) {
        for _ in benchmark.scaledIterations {
            start(done)
            done.wait()
        }
    }
}

/// ``measure(_:_:)`` for async work.
func measureAsync(_ benchmark: Benchmark, _ body: () async throws -> Void) async rethrows {
    let before = voluntaryContextSwitches()
    benchmark.startMeasurement()
    try await body()
    benchmark.stopMeasurement()
    benchmark.measurement(wakeups, voluntaryContextSwitches() - before)
}

// MARK: - Configurations

let timeMetrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, wakeups]

/// 1,000 operations per iteration; per-operation numbers are the iteration's divided by 1,000.
var perThousand: Benchmark.Configuration { .init(metrics: timeMetrics, scalingFactor: .kilo) }

let memoryMetrics: [BenchmarkMetric] = [
    .wallClock, .throughput, .mallocCountTotal, .mallocBytesCount, .memoryLeakedBytes, .mallocFreeDelta, wakeups,
]

/// The number of promises in the contention scenario (d).
let contentionCount = 100_000

// MARK: - The benchmarks

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: timeMetrics,
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 5_000
    )

    scenarioA()
    scenarioB()
    scenarioC()
    scenarioD()
    scenarioE()
    scenarioF()
    scenarioG()
    scenarioH()
    scenarioI()
    scenarioJ()
    scenarioK()
    scenarioL()
    scenarioM()
    scenarioN()
    scenarioO()
    scenarioP()
}

// MARK: (a) a pending future, one callback on a serial queue, completed from another queue

func scenarioA() {
    // a1: the callback is registered from the benchmark's thread, the promise completed on
    // `completerQueue`, the callback runs on `callbackQueue` and wakes the benchmark thread.
    Benchmark("a1.pending+callback [round trip] futures", configuration: perThousand) { benchmark in
        measureRoundTrips(benchmark) { done in
            let promise = Promise<Int>()
            promise.future.whenSuccess(on: .queue(callbackQueue)) { _ in done.signal() }
            completerQueue.async { promise.succeed(1) }
        }
    }

    Benchmark("a1.pending+callback [round trip] GCD", configuration: perThousand) { benchmark in
        measureRoundTrips(benchmark) { done in
            completerQueue.async {
                callbackQueue.async { done.signal() }
            }
        }
    }

    // NIO registers a callback made off its loop by hopping onto the loop first.
    Benchmark("a1.pending+callback [round trip] NIO", configuration: perThousand) { benchmark in
        measureRoundTrips(benchmark) { done in
            let promise = nioLoop.makePromise(of: Int.self)
            promise.futureResult.whenSuccess { _ in done.signal() }
            completerQueue.async { promise.succeed(1) }
        }
    }

    // a2: everything starts on the callback's own queue/loop (NIO's home turf): make the promise
    // and register the callback there, complete it from another queue, run the callback there.
    Benchmark("a2.pending+callback, registered on q [round trip] futures", configuration: perThousand) { benchmark in
        measureRoundTrips(benchmark) { done in
            callbackQueue.async {
                let promise = Promise<Int>()
                promise.future.whenSuccess(on: .queue(callbackQueue)) { _ in done.signal() }
                completerQueue.async { promise.succeed(1) }
            }
        }
    }

    Benchmark("a2.pending+callback, registered on q [round trip] GCD", configuration: perThousand) { benchmark in
        measureRoundTrips(benchmark) { done in
            callbackQueue.async {
                completerQueue.async {
                    callbackQueue.async { done.signal() }
                }
            }
        }
    }

    Benchmark("a2.pending+callback, registered on q [round trip] NIO", configuration: perThousand) { benchmark in
        measureRoundTrips(benchmark) { done in
            nioLoop.execute {
                let promise = nioLoop.makePromise(of: Int.self)
                promise.futureResult.whenSuccess { _ in done.signal() }
                completerQueue.async { promise.succeed(1) }
            }
        }
    }
}

// MARK: (b) a 1,000-step map chain

/// Builds a `steps`-long `map` chain on `executor` (`.current` resolves where this runs) and
/// completes it; `done` is signalled when the last step has run.
func runChain(steps: Int, on executor: some Executor, done: DispatchSemaphore) {
    let promise = Promise<Int>()
    var future = promise.future
    for _ in 0..<steps {
        future = future.map(on: executor) { $0 &+ 1 }
    }
    future.whenComplete(on: .immediate) { _ in done.signal() }
    promise.succeed(0)
}

/// Measures `runChain` on `executor`, registered inside a callback running on
/// `.queue(callbackQueue)`: `.current` resolves to that queue.
func measureChainInQueueJob(_ benchmark: Benchmark, on executor: some Executor) {
    let done = DispatchSemaphore(value: 0)
    let steps = benchmark.scaledIterations.count
    measure(benchmark) {
        Future(value: ()).whenSuccess(on: .queue(callbackQueue)) { _ in
            runChain(steps: steps, on: executor, done: done)
        }
        done.wait()
    }
}

/// One hop of the plain GCD chain: adds 1 and enqueues the next hop on `callbackQueue`.
@Sendable func asyncChainStep(remaining: Int, value: Int, done: DispatchSemaphore) {
    guard remaining > 0 else {
        Benchmark.blackHole(value)
        done.signal()
        return
    }
    callbackQueue.async { asyncChainStep(remaining: remaining - 1, value: value &+ 1, done: done) }
}

func scenarioB() {
    // Built and run on the benchmark's thread; every step runs inline.
    Benchmark("b.map chain .immediate [step] futures", configuration: perThousand) { benchmark in
        measure(benchmark) {
            let promise = Promise<Int>()
            var future = promise.future
            for _ in benchmark.scaledIterations {
                future = future.map(on: .immediate) { $0 &+ 1 }
            }
            promise.succeed(0)
            Benchmark.blackHole(future.outcome)
        }
    }

    // The default executor, registered from a plain dispatch queue (not a futures callback, not
    // the main queue): `.current` resolves to `.global()`, so every step is a hop to the global
    // concurrent queue.
    Benchmark("b.map chain .current->.global [step] futures", configuration: perThousand) { benchmark in
        let done = DispatchSemaphore(value: 0)
        let steps = benchmark.scaledIterations.count
        measure(benchmark) {
            callbackQueue.async { runChain(steps: steps, on: .current, done: done) }
            done.wait()
        }
    }

    // The default executor, registered inside a callback running on `.queue(callbackQueue)`:
    // `.current` resolves to that queue, so every step is an async onto the serial queue.
    Benchmark("b.map chain .current->.queue [step] futures", configuration: perThousand) { benchmark in
        measureChainInQueueJob(benchmark, on: .current)
    }

    // The same as the row above with every step `.immediate`: one hop onto the queue and one
    // wake-up of the benchmark's thread per 1,000 steps, as there. The two rows differ only in the
    // executor of the steps.
    Benchmark("b.map chain .immediate in a .queue job [step] futures", configuration: perThousand) { benchmark in
        measureChainInQueueJob(benchmark, on: .immediate)
    }

    // NIO on its event loop, without a hop: an EmbeddedEventLoop runs on the benchmark's thread.
    Benchmark("b.map chain [step] NIO (EmbeddedEventLoop)", configuration: perThousand) { benchmark in
        measure(benchmark) {
            let loop = EmbeddedEventLoop()
            let promise = loop.makePromise(of: Int.self)
            var future = promise.futureResult
            for _ in benchmark.scaledIterations {
                future = future.map { $0 &+ 1 }
            }
            promise.succeed(0)
            future.whenSuccess { Benchmark.blackHole($0) }
        }
    }

    // NIO on a real event loop: the chain is built and run inside one `submit` (one hop there and
    // back per 1,000 steps).
    Benchmark("b.map chain [step] NIO (event loop, 1 hop)", configuration: perThousand) { benchmark in
        let steps = benchmark.scaledIterations.count
        try measure(benchmark) {
            let result = try nioLoop.submit { () -> Int in
                let promise = nioLoop.makePromise(of: Int.self)
                var future = promise.futureResult
                for _ in 0..<steps {
                    future = future.map { $0 &+ 1 }
                }
                promise.succeed(0)
                let last = Counter()
                future.whenSuccess { last.value = $0 }
                return last.value
            }.wait()
            guard result == steps else { throw BenchmarkFailure() }
        }
    }

    // Plain GCD: 1,000 hops onto the serial queue, each adding 1 and enqueueing the next (what a
    // chain costs that hands every step to the queue).
    Benchmark("b.map chain [step] GCD (q.async per step)", configuration: perThousand) { benchmark in
        let done = DispatchSemaphore(value: 0)
        let steps = benchmark.scaledIterations.count
        measure(benchmark) {
            callbackQueue.async { asyncChainStep(remaining: steps, value: 0, done: done) }
            done.wait()
        }
    }

    // A completion-handler chain: 1,000 closures, each calling the next with its value + 1.
    Benchmark("b.map chain [step] closure", configuration: perThousand) { benchmark in
        measure(benchmark) {
            var next: @Sendable (Int) -> Void = { Benchmark.blackHole($0) }
            for _ in benchmark.scaledIterations {
                let following = next
                next = { following($0 &+ 1) }
            }
            next(0)
        }
    }
}

// MARK: (c) joining 1,000 futures completed from two threads
//
// The member futures are collected with a closure, not a key path (`map(\.future)`): projecting
// through a `KeyPath` costs about 40 ns per element in both contenders, which is not join cost.

/// One `Future.all` over `size` new promises, completed in equal slices, one slice per queue in
/// `completers`; returns when the join has completed.
func joinOnce(size: Int, completedFrom completers: [DispatchQueue], done: DispatchSemaphore) {
    let promises = (0..<size).map { _ in Promise<Int>() }
    let all = Future.all(promises.map { $0.future })
    all.whenComplete(on: .immediate) { outcome in
        precondition(outcome.value?.count == size)
        done.signal()
    }
    let slice = size / completers.count
    for (number, queue) in completers.enumerated() {
        let end = number == completers.count - 1 ? size : (number + 1) * slice
        queue.async { for index in number * slice..<end { promises[index].succeed(index) } }
    }
    done.wait()
}

func scenarioC() {
    Benchmark("c.all of 1000 [member] futures", configuration: perThousand) { benchmark in
        let done = DispatchSemaphore(value: 0)
        let count = benchmark.scaledIterations.count
        measure(benchmark) {
            joinOnce(size: count, completedFrom: [completerQueue, completerQueue2], done: done)
        }
    }

    // The same join with every member completed from one queue: no two threads contend for the
    // join's state, so the difference from the row above is the cost of that contention.
    Benchmark("c.all of 1000, one completer thread [member] futures", configuration: perThousand) { benchmark in
        let done = DispatchSemaphore(value: 0)
        let count = benchmark.scaledIterations.count
        measure(benchmark) {
            joinOnce(size: count, completedFrom: [completerQueue], done: done)
        }
    }

    // The same 1,000 members as 10 joins of 100: a join's cost per member should not depend on
    // its size; if it does, this row is cheaper per member than the one above.
    Benchmark("c.all of 100, x10 [member] futures", configuration: perThousand) { benchmark in
        let done = DispatchSemaphore(value: 0)
        let size = benchmark.scaledIterations.count / 10
        measure(benchmark) {
            for _ in 0..<10 {
                joinOnce(size: size, completedFrom: [completerQueue, completerQueue2], done: done)
            }
        }
    }

    // The promises are completed off the loop (from the two queues), so each completion hops onto it.
    Benchmark("c.all of 1000 [member] NIO whenAllSucceed", configuration: perThousand) { benchmark in
        let done = DispatchSemaphore(value: 0)
        let count = benchmark.scaledIterations.count
        let half = count / 2
        measure(benchmark) {
            let promises = (0..<count).map { _ in nioLoop.makePromise(of: Int.self) }
            let all = EventLoopFuture.whenAllSucceed(promises.map { $0.futureResult }, on: nioLoop)
            all.whenComplete { result in
                precondition((try? result.get())?.count == count)
                done.signal()
            }
            completerQueue.async { for index in 0..<half { promises[index].succeed(index) } }
            completerQueue2.async { for index in half..<count { promises[index].succeed(index) } }
            done.wait()
        }
    }

    Benchmark("c.all of 1000 [member] GCD DispatchGroup", configuration: perThousand) { benchmark in
        let count = benchmark.scaledIterations.count
        let half = count / 2
        measure(benchmark) {
            let slots = Slots(count: count)
            let group = DispatchGroup()
            for _ in 0..<count { group.enter() }
            completerQueue.async {
                for index in 0..<half {
                    slots.buffer[index] = index
                    group.leave()
                }
            }
            completerQueue2.async {
                for index in half..<count {
                    slots.buffer[index] = index
                    group.leave()
                }
            }
            group.wait()
            Benchmark.blackHole(Array(slots.buffer))
        }
    }
}

// MARK: (d) contention: one thread completes 100,000 promises while another attaches callbacks

func scenarioD() {
    let configuration = Benchmark.Configuration(
        metrics: timeMetrics + [.peakMemoryResident],
        scalingFactor: .one,
        maxDuration: .seconds(3)
    )

    Benchmark("d.contention [100k promises] futures", configuration: configuration) { benchmark in
        let promises = (0..<contentionCount).map { _ in Promise<Int>() }
        let callbacks = Counter()
        let group = DispatchGroup()
        withExtendedLifetime(promises) {
            measure(benchmark) {
                completerQueue.async(group: group) {
                    for promise in promises { promise.succeed(1) }
                }
                completerQueue2.async(group: group) {
                    for promise in promises {
                        promise.future.whenSuccess(on: .immediate) { _ in callbacks.increment() }
                    }
                }
                group.wait()
            }
        }
        precondition(callbacks.value == contentionCount)
    }

    // NIO's model: the completer runs on the loop (no hop), the attacher is another thread, so
    // each of its `whenSuccess` calls is a task executed on the loop.
    Benchmark("d.contention [100k promises] NIO", configuration: configuration) { benchmark in
        let promises = (0..<contentionCount).map { _ in nioLoop.makePromise(of: Int.self) }
        let callbacks = Counter()
        let allCalled = DispatchSemaphore(value: 0)
        let completed = DispatchSemaphore(value: 0)
        let attached = DispatchSemaphore(value: 0)
        withExtendedLifetime(promises) {
            measure(benchmark) {
                nioLoop.execute {
                    for promise in promises { promise.succeed(1) }
                    completed.signal()
                }
                completerQueue2.async {
                    for promise in promises {
                        promise.futureResult.whenSuccess { _ in
                            if callbacks.increment() == contentionCount { allCalled.signal() }
                        }
                    }
                    attached.signal()
                }
                completed.wait()
                attached.wait()
                allCalled.wait()
            }
        }
    }
}

// MARK: (e) bytes and allocations per pending future with one callback

func scenarioE() {
    let configuration = Benchmark.Configuration(metrics: memoryMetrics, scalingFactor: .kilo)

    // The callback captures a counter, as a real one captures something: that closure context is
    // one allocation of the caller's in every contender.
    Benchmark("e.pending+1 callback, capturing [future] futures .immediate", configuration: configuration) { benchmark in
        let sink = Counter()
        var pending: [Promise<Int>] = []
        pending.reserveCapacity(benchmark.scaledIterations.count)
        measure(benchmark) {
            for _ in benchmark.scaledIterations {
                let promise = Promise<Int>()
                promise.future.whenSuccess(on: .immediate) { _ in sink.increment() }
                pending.append(promise)
            }
        }
        for promise in pending { promise.succeed(1) }
    }

    Benchmark("e.pending+1 callback, capturing [future] futures .queue", configuration: configuration) { benchmark in
        let sink = Counter()
        var pending: [Promise<Int>] = []
        pending.reserveCapacity(benchmark.scaledIterations.count)
        measure(benchmark) {
            for _ in benchmark.scaledIterations {
                let promise = Promise<Int>()
                promise.future.whenSuccess(on: .queue(callbackQueue)) { _ in sink.increment() }
                pending.append(promise)
            }
        }
        for promise in pending { promise.succeed(1) }
        callbackQueue.sync {}
    }

    Benchmark("e.pending+1 callback, capturing [future] NIO", configuration: configuration) { benchmark in
        let sink = Counter()
        let count = benchmark.scaledIterations.count
        let pending = LoopBox<EventLoopPromise<Int>>(capacity: count)
        try measure(benchmark) {
            try nioLoop.submit {
                for _ in 0..<count {
                    let promise = nioLoop.makePromise(of: Int.self)
                    promise.futureResult.whenSuccess { _ in sink.increment() }
                    pending.items.append(promise)
                }
            }.wait()
        }
        try nioLoop.submit { for promise in pending.items { promise.succeed(1) } }.wait()
    }

    // GCD's "pending callback": a block enqueued on a suspended queue.
    Benchmark("e.pending+1 callback, capturing [future] GCD block", configuration: configuration) { benchmark in
        let sink = Counter()
        let queue = DispatchQueue(label: "bench.suspended")
        queue.suspend()
        measure(benchmark) {
            for _ in benchmark.scaledIterations {
                queue.async { sink.increment() }
            }
        }
        queue.resume()
        queue.sync {}
    }

    // The library's own cost: the callback captures nothing, so it allocates no context.
    Benchmark("e.pending+1 callback, non-capturing [future] futures .immediate", configuration: configuration) { benchmark in
        var pending: [Promise<Int>] = []
        pending.reserveCapacity(benchmark.scaledIterations.count)
        measure(benchmark) {
            for _ in benchmark.scaledIterations {
                let promise = Promise<Int>()
                promise.future.whenSuccess(on: .immediate) { Benchmark.blackHole($0) }
                pending.append(promise)
            }
        }
        for promise in pending { promise.succeed(1) }
    }

    Benchmark("e.pending+1 callback, non-capturing [future] NIO", configuration: configuration) { benchmark in
        let count = benchmark.scaledIterations.count
        let pending = LoopBox<EventLoopPromise<Int>>(capacity: count)
        try measure(benchmark) {
            try nioLoop.submit {
                for _ in 0..<count {
                    let promise = nioLoop.makePromise(of: Int.self)
                    promise.futureResult.whenSuccess { Benchmark.blackHole($0) }
                    pending.items.append(promise)
                }
            }.wait()
        }
        try nioLoop.submit { for promise in pending.items { promise.succeed(1) } }.wait()
    }

    Benchmark("e.pending, no callback [future] futures", configuration: configuration) { benchmark in
        var pending: [Promise<Int>] = []
        pending.reserveCapacity(benchmark.scaledIterations.count)
        measure(benchmark) {
            for _ in benchmark.scaledIterations {
                pending.append(Promise<Int>())
            }
        }
        for promise in pending { promise.succeed(1) }
    }
}

// MARK: (f) awaiting a future

func scenarioF() {
    Benchmark("f.await completed [await] futures", configuration: perThousand) { (benchmark: Benchmark) async throws in
        let future = Future(value: 1)
        var sum = 0
        try await measureAsync(benchmark) {
            for _ in benchmark.scaledIterations {
                sum &+= try await future.value
            }
        }
        Benchmark.blackHole(sum)
    }

    Benchmark("f.await completed [await] CC", configuration: perThousand) { (benchmark: Benchmark) async in
        var sum = 0
        await measureAsync(benchmark) {
            for _ in benchmark.scaledIterations {
                sum &+= await withCheckedContinuation { continuation in continuation.resume(returning: 1) }
            }
        }
        Benchmark.blackHole(sum)
    }

    // The promise is completed from another queue, almost always after the task has suspended.
    Benchmark("f.await pending [await] futures", configuration: perThousand) { (benchmark: Benchmark) async throws in
        var sum = 0
        try await measureAsync(benchmark) {
            for _ in benchmark.scaledIterations {
                let promise = Promise<Int>()
                completerQueue.async { promise.succeed(1) }
                sum &+= try await promise.future.value
            }
        }
        Benchmark.blackHole(sum)
    }

    Benchmark("f.await pending [await] CC", configuration: perThousand) { (benchmark: Benchmark) async in
        var sum = 0
        await measureAsync(benchmark) {
            for _ in benchmark.scaledIterations {
                sum &+= await withCheckedContinuation { continuation in
                    completerQueue.async { continuation.resume(returning: 1) }
                }
            }
        }
        Benchmark.blackHole(sum)
    }
}

// MARK: (g) cancelling a tree of 1,000 futures

func scenarioG() {
    let configuration = perThousand

    // One root promise, 1,000 maps of it. Cancelling the root cancels every derived future (down).
    Benchmark("g.cancel root->1000 maps, down [future] futures", configuration: configuration) { benchmark in
        let promise = Promise<Int>()
        let leaves = benchmark.scaledIterations.map { _ in promise.future.map(on: .immediate) { $0 } }
        withExtendedLifetime(leaves) {
            measure(benchmark) { promise.cancel() }
        }
        precondition(leaves.allSatisfy { $0.outcome?.isCancelled == true })
    }

    // Cancelling each of the 1,000 maps: the last withdrawal cancels the root (up).
    Benchmark("g.cancel 1000 maps->root, up [future] futures", configuration: configuration) { benchmark in
        let promise = Promise<Int>()
        let leaves = benchmark.scaledIterations.map { _ in promise.future.map(on: .immediate) { $0 } }
        withExtendedLifetime(leaves) {
            measure(benchmark) {
                for leaf in leaves { leaf.cancel() }
            }
        }
        precondition(promise.isCancelled)
    }

    // Two levels: root -> 10 maps -> 100 maps each (1,010 futures); cancel the root.
    Benchmark("g.cancel root->10x100 tree, down [future] futures", configuration: configuration) { benchmark in
        let promise = Promise<Int>()
        let middles = (0..<10).map { _ in promise.future.map(on: .immediate) { $0 } }
        let leaves = middles.flatMap { middle in (0..<100).map { _ in middle.map(on: .immediate) { $0 } } }
        withExtendedLifetime((middles, leaves)) {
            measure(benchmark) { promise.cancel() }
        }
        precondition(leaves.allSatisfy { $0.outcome?.isCancelled == true })
    }

    // Two levels, up: cancelling all 1,000 leaves cancels the 10 middles and then the root.
    Benchmark("g.cancel 10x100 tree leaves->root, up [future] futures", configuration: configuration) { benchmark in
        let promise = Promise<Int>()
        let middles = (0..<10).map { _ in promise.future.map(on: .immediate) { $0 } }
        let leaves = middles.flatMap { middle in (0..<100).map { _ in middle.map(on: .immediate) { $0 } } }
        withExtendedLifetime((middles, leaves)) {
            measure(benchmark) {
                for leaf in leaves { leaf.cancel() }
            }
        }
        precondition(promise.isCancelled)
    }

    // The same fan-out failed instead of cancelled: the futures library...
    Benchmark("g.fail root->1000 maps, down [future] futures", configuration: configuration) { benchmark in
        let promise = Promise<Int>()
        let leaves = benchmark.scaledIterations.map { _ in promise.future.map(on: .immediate) { $0 } }
        withExtendedLifetime(leaves) {
            measure(benchmark) { promise.fail(BenchmarkFailure()) }
        }
        precondition(leaves.allSatisfy { $0.outcome?.isFailure == true })
    }

    // ...and NIO, which has no cancellation: failing the root is how its fan-out is torn down.
    Benchmark("g.fail root->1000 maps, down [future] NIO (EmbeddedEventLoop)", configuration: configuration) { benchmark in
        let loop = EmbeddedEventLoop()
        let promise = loop.makePromise(of: Int.self)
        let failed = Counter()
        let leaves = benchmark.scaledIterations.map { _ in promise.futureResult.map { $0 } }
        for leaf in leaves { leaf.whenFailure { _ in failed.increment() } }
        withExtendedLifetime(leaves) {
            measure(benchmark) { promise.fail(BenchmarkFailure()) }
        }
        precondition(failed.value == leaves.count)
    }
}

// MARK: (h) progress on vs off

/// One chain: a promise, then map, flatMap, map, flatMap (all `.immediate`); with `reports`, the
/// promise reports progress 10 times before it succeeds; with `observe`, the end of the chain
/// has a `whenProgress` observer.
@inline(__always)
func progressChain(reports: Bool, observe: Bool, seen: Counter) {
    let promise = Promise<Int>()
    let end = promise.future
        .map(on: .immediate) { $0 &+ 1 }
        .flatMap(on: .immediate) { Future(value: $0 &+ 1) }
        .map(on: .immediate) { $0 &+ 1 }
        .flatMap(on: .immediate) { Future(value: $0 &+ 1) }
    if observe {
        end.whenProgress(on: .immediate) { _ in seen.increment() }
    }
    if reports {
        for step in 1...10 { promise.progress = Double(step) / 11 }
    }
    promise.succeed(0)
    Benchmark.blackHole(end.outcome)
}

func scenarioH() {
    Benchmark("h.progress off: 4-step chain [chain] futures", configuration: perThousand) { benchmark in
        let seen = Counter()
        measure(benchmark) {
            for _ in benchmark.scaledIterations { progressChain(reports: false, observe: false, seen: seen) }
        }
    }

    Benchmark("h.progress 10 reports, no observer: 4-step chain [chain] futures", configuration: perThousand) { benchmark in
        let seen = Counter()
        measure(benchmark) {
            for _ in benchmark.scaledIterations { progressChain(reports: true, observe: false, seen: seen) }
        }
    }

    Benchmark("h.progress 10 reports + whenProgress: 4-step chain [chain] futures", configuration: perThousand) { benchmark in
        let seen = Counter()
        measure(benchmark) {
            for _ in benchmark.scaledIterations { progressChain(reports: true, observe: true, seen: seen) }
        }
        precondition(seen.value > 0)
    }
}

// MARK: (j) retrying an operation that fails at once, without a backoff

func scenarioJ() {
    // One operation is one attempt: `retry` of 1,000 attempts, every one failing at once.
    Benchmark("j.retry, every attempt fails at once [attempt] futures", configuration: perThousand) { benchmark in
        let attempts = benchmark.scaledIterations.count
        var last: Future<Int>?
        measure(benchmark) {
            last = Future<Int>.retry(attempts: attempts) { Future(error: BenchmarkFailure()) }
        }
        precondition(last?.outcome?.isFailure == true)
    }

    // The same calls by hand: make each attempt's failed future and look at its outcome, in a loop.
    Benchmark("j.retry, every attempt fails at once [attempt] plain loop", configuration: perThousand) { benchmark in
        let attempts = benchmark.scaledIterations.count
        var last: Future<Int>?
        measure(benchmark) {
            for _ in 0..<attempts {
                let attempt = Future<Int>(error: BenchmarkFailure())
                if attempt.outcome?.isFailure == true { last = attempt; continue }
                break
            }
        }
        precondition(last?.outcome?.isFailure == true)
    }
}

// MARK: (m) diagnostics: the b and e rows of the futures with tracking on

/// Runs `body` with diagnostics tracking every future made, and turns tracking off after.
func tracking(_ body: () throws -> Void) rethrows {
    FutureDiagnostics.startTracking()
    defer { FutureDiagnostics.stopTracking() }
    try body()
}

func scenarioM() {
    Benchmark("m.map chain .immediate [step] futures, tracking on", configuration: perThousand) { benchmark in
        tracking {
            measure(benchmark) {
                let promise = Promise<Int>()
                var future = promise.future
                for _ in benchmark.scaledIterations {
                    future = future.map(on: .immediate) { $0 &+ 1 }
                }
                promise.succeed(0)
                Benchmark.blackHole(future.outcome)
            }
        }
    }

    let configuration = Benchmark.Configuration(metrics: memoryMetrics, scalingFactor: .kilo)

    Benchmark("m.pending+1 callback, non-capturing [future] futures .immediate, tracking on", configuration: configuration) { benchmark in
        var pending: [Promise<Int>] = []
        pending.reserveCapacity(benchmark.scaledIterations.count)
        tracking {
            measure(benchmark) {
                for _ in benchmark.scaledIterations {
                    let promise = Promise<Int>()
                    promise.future.whenSuccess(on: .immediate) { Benchmark.blackHole($0) }
                    pending.append(promise)
                }
            }
        }
        for promise in pending { promise.succeed(1) }
    }

    Benchmark("m.pending, no callback [future] futures, tracking on", configuration: configuration) { benchmark in
        var pending: [Promise<Int>] = []
        pending.reserveCapacity(benchmark.scaledIterations.count)
        tracking {
            measure(benchmark) {
                for _ in benchmark.scaledIterations {
                    pending.append(Promise<Int>())
                }
            }
        }
        for promise in pending { promise.succeed(1) }
    }
}
