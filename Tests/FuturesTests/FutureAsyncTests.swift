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

    @Test func aCancelledWaitingTaskStopsWaitingWithCancellation() async {
        let promise = Promise<Int>()
        let waiting = Task { await promise.future.result }
        waiting.cancel()
        #expect(await waiting.value.isCancelled)
        #expect(promise.future.isPending, "cancellation propagation to the future is issue 3's")
    }

    @Test func anAlreadyCancelledTaskThrowsAtOnce() async {
        let promise = Promise<Int>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await promise.future.value
        }
        await #expect(throws: CancellationError.self) { try await task.value }
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
