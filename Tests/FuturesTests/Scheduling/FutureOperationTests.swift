import Foundation
import Testing
@testable import Futures

/// `FutureOperation` and `OperationQueue.addFuture`.
@Suite("Operations")
struct FutureOperationTests {
    @Test func anOperationRunsUntilItsFutureCompletes() async throws {
        let queue = OperationQueue()
        let promise = Promise<Int>()
        let operation = FutureOperation { promise.future }
        let after = Promise<Bool>()
        let dependent = BlockOperation { after.succeed(!promise.future.isPending) }
        dependent.addDependency(operation)
        queue.addOperation(operation)
        queue.addOperation(dependent)
        #expect(promise.future.isPending)
        promise.succeed(4)
        #expect(try await operation.future.value == 4)
        #expect(try await after.future.value, "the dependency waited for the future")
        #expect(operation.isFinished && !operation.isExecuting)
    }

    @Test func theQueuesLimitAppliesToAsynchronousWork() async throws {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 2
        let running = Locked((now: 0, most: 0))
        let promises = (0..<6).map { _ in Promise<Int>() }
        let started = (0..<6).map { _ in Promise<Void>() }
        let futures = (0..<6).map { index in
            queue.addFuture {
                running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                started[index].succeed(())
                return promises[index].future.always(on: .immediate) { _ in running.withLock { $0.now -= 1 } }
            }
        }
        // Both slots fill without anything finishing; each later operation starts only when an
        // earlier one finishes.
        try await started[0].future.value
        try await started[1].future.value
        for index in 0..<6 {
            promises[index].succeed(index)
            if index + 2 < 6 { try await started[index + 2].future.value }
        }
        #expect(try await Future.all(futures).value == Array(0..<6))
        #expect(running.withLock { $0.most } == 2)
    }

    @Test func cancelledBeforeItStartsTheWorkNeverRuns() async {
        let queue = OperationQueue()
        queue.isSuspended = true
        let runs = Counter()
        let operation = FutureOperation<Int> { runs.increment(); return Future(value: 1) }
        queue.addOperation(operation)
        operation.cancel()
        queue.isSuspended = false
        #expect(await operation.future.result.isCancelled)
        await finished(operation, on: queue)
        #expect(runs.value == 0 && operation.isFinished)
    }

    @Test func startingTwiceRunsTheWorkOnce() async throws {
        let runs = Counter()
        let operation = FutureOperation { Future(value: runs.increment()) }
        operation.start()
        operation.start()
        #expect(try await operation.future.value == 1)
        #expect(runs.value == 1 && operation.isFinished)
    }

    @Test func cancellingTheFutureCancelsTheOperationAndItsWork() async {
        let queue = OperationQueue()
        let work = Promise<Int>()
        let started = Promise<Void>()
        let operation = FutureOperation { started.succeed(()); return work.future }
        queue.addOperation(operation)
        _ = await started.future.result
        #expect(operation.future.cancel())
        #expect(operation.isCancelled)
        #expect(work.isCancelled, "the operation was the work's only consumer")
        await finished(operation, on: queue)
        #expect(operation.isFinished)
    }

    @Test func cancellingAQueuedFutureRemovesOnlyItsOperation() async throws {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let runs = Recorder<Int>()
        let futures = (0..<3).map { index in
            queue.addFuture { runs.append(index); return Future(value: index) }
        }
        #expect(futures[1].cancel())
        queue.isSuspended = false
        #expect(try await futures[0].value == 0)
        #expect(try await futures[2].value == 2)
        #expect(await futures[1].result.isCancelled)
        #expect(runs.all == [0, 2])
    }

    /// Waits, without blocking, until `operation` has finished in `queue`.
    private func finished(_ operation: Operation, on queue: OperationQueue) async {
        let done = Promise<Void>()
        let after = BlockOperation { done.succeed(()) }
        after.addDependency(operation)
        queue.addOperation(after)
        _ = await done.future.result
    }

    @Test func workThatThrowsFailsTheFutureAndFinishesTheOperation() async {
        let queue = OperationQueue()
        let failed = queue.addFuture { () throws -> Future<Int> in throw TestError(code: 6) }
        #expect((await failed.result.error as? TestError)?.code == 6)
        let operation = FutureOperation { () throws -> Future<Int> in throw CancellationError() }
        queue.addOperation(operation)
        #expect(await operation.future.result.isCancelled)
    }
}
