import Benchmark
import Dispatch
import Futures

// MARK: (k) splitting a merge set: a consumer arrives on every future merged into one state

/// A merge set `levels` deep: each promise's future adopts the next one's, which has no consumer,
/// so all of them share the state of the first.
func mergeSet(_ levels: Int) -> [Promise<Int>] {
    let promises = (0...levels).map { _ in Promise<Int>() }
    for level in 0..<levels { precondition(promises[level].complete(with: promises[level + 1].future)) }
    return promises
}

func scenarioK() {
    // One iteration registers 20,000 consumers (maps), one on each future of a set of 20,000, from
    // the top down: each splits the set once more. The baseline registers the same maps on a plain
    // chain of 20,000 pending maps.
    let configuration = Benchmark.Configuration(metrics: timeMetrics, maxDuration: .seconds(10), maxIterations: 20)
    let levels = 20_000

    Benchmark("k.split a set of 20,000 top-down [20,000 consumers] futures", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            let promises = mergeSet(levels)
            var later: [Future<Int>] = []
            later.reserveCapacity(levels)
            measure(benchmark) {
                for level in 1...levels { later.append(promises[level].future.map(on: .immediate) { $0 }) }
            }
            precondition(promises[levels].succeed(1))
            precondition(later.allSatisfy { $0.outcome?.value == 1 })
        }
    }

    // From the bottom up; the measurement includes completing the set, which then finishes every
    // level through the first future's table.
    Benchmark("k.split a set of 20,000 bottom-up, then complete [20,000 consumers] futures", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            let promises = mergeSet(levels)
            var later: [Future<Int>] = []
            later.reserveCapacity(levels)
            measure(benchmark) {
                for level in stride(from: levels, through: 1, by: -1) {
                    later.append(promises[level].future.map(on: .immediate) { $0 })
                }
                precondition(promises[levels].succeed(2))
            }
            precondition(later.allSatisfy { $0.outcome?.value == 2 })
        }
    }

    Benchmark("k.consumers on a chain of 20,000 pending maps [20,000 consumers] futures", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            let source = Promise<Int>()
            var chain: [Future<Int>] = [source.future]
            chain.reserveCapacity(levels + 1)
            for _ in 0..<levels { chain.append(chain[chain.count - 1].map(on: .immediate) { $0 }) }
            var later: [Future<Int>] = []
            later.reserveCapacity(levels)
            measure(benchmark) {
                for level in 1...levels { later.append(chain[level].map(on: .immediate) { $0 }) }
            }
            precondition(source.succeed(3))
            precondition(later.allSatisfy { $0.outcome?.value == 3 })
        }
    }
}

// MARK: (l) adopting on two threads at once

/// Adoptions per thread in scenario l.
let adoptionsPerThread = 100_000

func scenarioL() {
    let configuration = Benchmark.Configuration(metrics: timeMetrics, maxDuration: .seconds(5), maxIterations: 50)

    // Two threads, each completing 100,000 promises with an already completed future (what a
    // `flatMap` returning `Future(value:)` does): no global lock on this path.
    Benchmark("l.two threads adopt completed futures [200k adoptions] futures", configuration: configuration) { benchmark in
        let promises = (0..<2).map { _ in (0..<adoptionsPerThread).map { _ in Promise<Int>() } }
        let inner = Future(value: 1)
        let group = DispatchGroup()
        measure(benchmark) {
            for (thread, queue) in [completerQueue, completerQueue2].enumerated() {
                queue.async(group: group) {
                    for promise in promises[thread] { precondition(promise.complete(with: inner)) }
                }
            }
            group.wait()
        }
    }

    // The same with pending inner futures, each merged into its adopter: such an adoption cannot
    // close a cycle, so it holds the adoption gate only shared, and the two threads write no common
    // memory.
    Benchmark("l.two threads adopt pending futures [200k adoptions] futures", configuration: configuration) { benchmark in
        let promises = (0..<2).map { _ in (0..<adoptionsPerThread).map { _ in Promise<Int>() } }
        let inners = (0..<2).map { _ in (0..<adoptionsPerThread).map { _ in Promise<Int>() } }
        let group = DispatchGroup()
        measure(benchmark) {
            for (thread, queue) in [completerQueue, completerQueue2].enumerated() {
                queue.async(group: group) {
                    for (promise, inner) in zip(promises[thread], inners[thread]) {
                        precondition(promise.complete(with: inner.future))
                    }
                }
            }
            group.wait()
        }
        withExtendedLifetime(inners) {}
    }

    // The pending case on one thread, 200,000 adoptions: the same work without a second thread.
    Benchmark("l.one thread adopts pending futures [200k adoptions] futures", configuration: configuration) { benchmark in
        let promises = (0..<(2 * adoptionsPerThread)).map { _ in Promise<Int>() }
        let inners = (0..<(2 * adoptionsPerThread)).map { _ in Promise<Int>() }
        measure(benchmark) {
            for (promise, inner) in zip(promises, inners) { precondition(promise.complete(with: inner.future)) }
        }
        withExtendedLifetime(inners) {}
    }
}

// MARK: (p) memory of a recursive loop that observes every level

/// A recursive loop of `steps` levels on a serial queue: each level is a `flatMap` over a promise
/// the queue completes, returning the next level; with `observed`, each level also gets a
/// `whenFailure` observer.
func observedLoop(_ steps: Int, observed: Bool, on queue: DispatchQueue) -> Future<Int> {
    guard steps > 0 else { return Future(value: 0) }
    let promise = Promise<Int>()
    queue.async { promise.succeed(steps) }
    let level = promise.future.flatMap(on: .immediate) { _ in observedLoop(steps - 1, observed: observed, on: queue) }
    if observed { level.whenFailure(on: .immediate) { _ in } }
    return level
}

func scenarioP() {
    // Peak memory of 200,000 levels, with and without an observer on each: a level whose only
    // registrant is an observer is merged like the others, carrying its observer.
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .peakMemoryResident, .mallocCountTotal],
        maxDuration: .seconds(10),
        maxIterations: 5
    )
    let steps = 200_000
    let queue = DispatchQueue(label: "loop")
    for observed in [false, true] {
        let name = observed ? "a whenFailure observer at every level" : "plain"
        Benchmark("p.recursive loop of 200,000 levels, \(name) [loop] futures", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                let done = DispatchSemaphore(value: 0)
                observedLoop(steps, observed: observed, on: queue).whenComplete(on: .immediate) { _ in done.signal() }
                done.wait()
            }
        }
    }
}
