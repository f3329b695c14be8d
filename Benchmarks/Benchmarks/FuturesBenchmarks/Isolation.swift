import Benchmark
import Dispatch
import Futures

// MARK: (o) awaiting a future from an actor

/// Awaits from its own isolation, as an actor's method does.
actor Awaiter {
    /// Awaits `count` futures, each completed from another queue.
    func awaitPending(_ count: Int) async throws -> Int {
        var sum = 0
        for _ in 0..<count {
            let promise = Promise<Int>()
            completerQueue.async { promise.succeed(1) }
            sum &+= try await promise.future.value
        }
        return sum
    }

    /// Awaits a completed future `count` times.
    func awaitCompleted(_ future: Future<Int>, _ count: Int) async throws -> Int {
        var sum = 0
        for _ in 0..<count { sum &+= try await future.value }
        return sum
    }

    /// The same as ``awaitPending(_:)`` with `withCheckedContinuation`.
    func awaitContinuations(_ count: Int) async -> Int {
        var sum = 0
        for _ in 0..<count {
            sum &+= await withCheckedContinuation { continuation in
                completerQueue.async { continuation.resume(returning: 1) }
            }
        }
        return sum
    }
}

func scenarioO() {
    Benchmark("o.await pending, from an actor [await] futures", configuration: perThousand) { (benchmark: Benchmark) async throws in
        let awaiter = Awaiter()
        var sum = 0
        try await measureAsync(benchmark) { sum = try await awaiter.awaitPending(benchmark.scaledIterations.count) }
        Benchmark.blackHole(sum)
    }

    Benchmark("o.await pending, from an actor [await] CC", configuration: perThousand) { (benchmark: Benchmark) async in
        let awaiter = Awaiter()
        var sum = 0
        await measureAsync(benchmark) { sum = await awaiter.awaitContinuations(benchmark.scaledIterations.count) }
        Benchmark.blackHole(sum)
    }

    Benchmark("o.await completed, from an actor [await] futures", configuration: perThousand) { (benchmark: Benchmark) async throws in
        let awaiter = Awaiter()
        let future = Future(value: 1)
        var sum = 0
        try await measureAsync(benchmark) { sum = try await awaiter.awaitCompleted(future, benchmark.scaledIterations.count) }
        Benchmark.blackHole(sum)
    }
}
