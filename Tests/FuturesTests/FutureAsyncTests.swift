import Testing
@testable import Futures

@Suite("async/await")
struct FutureAsyncTests {
    @Test func valueAndResultMirrorTask() async throws {
        #expect(try await Future(value: 1).value == 1)
        await #expect(throws: TestError.self) { try await Future<Int>(error: TestError()).value }
        await #expect(throws: CancellationError.self) { try await Future<Int>.cancelled.value }
        #expect(await Future<Int>.cancelled.result.isCancelled)
        #expect(await Future<Int>(error: TestError()).result.isFailure)
    }

    @Test func awaitingAPendingFutureResumesWhenItCompletes() async throws {
        let promise = Promise<String>()
        async let value = promise.future.value
        promise.succeed("later")
        #expect(try await value == "later")
    }

    @Test func asyncInitialiserRunsTheOperation() async throws {
        #expect(try await Future { 40 + 2 }.value == 42)
        await #expect(throws: TestError.self) { try await Future<Int> { throw TestError() }.value }
    }

    @Test func aTaskEndingWithCancellationErrorLeavesTheFutureCancelled() async {
        let future = Future<Int> { throw CancellationError() }
        #expect(await future.result.isCancelled)
    }

    @Test func cancellingTheFutureCancelsItsTask() async throws {
        let observed = Promise<Bool>()
        let started = Promise<Void>()
        let future = Future<Int> {
            started.succeed(())
            _ = await Future<Int>.never.result   // waits until the task is cancelled
            observed.succeed(Task.isCancelled)
            return 0
        }
        try await started.future.value
        #expect(future.cancel())
        #expect(try await observed.future.value)
        #expect(await future.result.isCancelled)
    }

    @Test func aCancelledWaitingTaskStopsWaitingAndWithdraws() async {
        let promise = Promise<Int>()
        let waiting = Task { await promise.future.result }
        waiting.cancel()
        #expect(await waiting.value.isCancelled)
        #expect(promise.isCancelled, "its only consumer withdrew, so the future is cancelled")
    }

    @Test func aCancelledWaitingTaskLeavesAFutureWithOtherConsumers() async throws {
        let promise = Promise<Int>()
        let other = promise.future.map(on: .immediate) { $0 }
        let started = Promise<Void>()
        let waiting = Task {
            started.succeed(())
            return await promise.future.result
        }
        try await started.future.value
        waiting.cancel()
        #expect(await waiting.value.isCancelled)
        #expect(promise.future.isPending)
        promise.succeed(1)
        #expect(other.outcome?.value == 1)
    }

    @Test func aCancelledAwaitDoesNotKeepCountingAsAConsumer() async {
        // Regression: after an awaiting task is cancelled, cancelling the only other consumer (an
        // adopter) must still reach the producer.
        let inner = Promise<Int>()
        let waiting = Task { await inner.future.result }
        waiting.cancel()
        _ = await waiting.value
        let outer = Promise<Int>()
        outer.complete(with: inner.future)
        outer.future.cancel()
        #expect(inner.isCancelled)
    }

    @Test func whenEveryWaitingTaskIsCancelledTheFutureIsCancelled() async {
        let promise = Promise<Int>()
        let first = Task { await promise.future.result }
        let second = Task { await promise.future.result }
        first.cancel()
        second.cancel()
        #expect(await first.value.isCancelled)
        #expect(await second.value.isCancelled)
        #expect(promise.isCancelled)
    }

    @Test func anAlreadyCancelledTaskThrowsAtOnceAndCountsAsAWithdrawnConsumer() async {
        let promise = Promise<Int>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await promise.future.value
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(promise.isCancelled)
    }

    @Test func anAlreadyCancelledTaskDoesNotCancelAFutureWithOtherConsumers() async {
        let promise = Promise<Int>()
        let other = promise.future.map(on: .immediate) { $0 }
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await promise.future.value
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(promise.future.isPending)
        #expect(other.isPending)
    }

    @Test func waitingFromManyTasksAllResume() async throws {
        let promise = Promise<Int>()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<100 { group.addTask { try await promise.future.value } }
            promise.succeed(7)
            var total = 0
            for try await value in group { total += value }
            #expect(total == 700)
        }
    }
}
