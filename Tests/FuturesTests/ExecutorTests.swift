import Dispatch
import Foundation
import FuturesTestHelpers
import Testing
import FuturesTestSupport
@testable import Futures

@MainActor final class MainState {
    var values: [Int] = []
}

@Suite("Executors")
struct ExecutorTests {
    @Test @MainActor func currentOnTheMainQueueStaysOnTheMainQueue() async throws {
        let onMain = try await Future<Int> { promise in
            DispatchQueue.global().async { promise.succeed(1) }
        }
        .map { _ in MainQueue.isCurrent }   // registered on the main queue: runs there
        .value
        #expect(onMain)
    }

    @Test func currentInsideACallbackStaysOnThatCallbacksExecutor() async throws {
        let queue = MarkedQueue("sticky")
        let stayed = try await Future(value: 1)
            .flatMap(on: .queue(queue.queue)) { _ in
                // Registered while running on `queue`, with the default executor.
                Future<Int> { promise in DispatchQueue.global().async { promise.succeed(2) } }
                    .map { _ in queue.isCurrent }
            }
            .value
        #expect(stayed)
    }

    @Test func currentInsideACustomExecutorsCallbackStaysOnIt() {
        let executor = ManualExecutor()
        let recorder = Recorder<String>()
        Future(value: 1).whenSuccess(on: executor) { _ in
            Future(value: 2).whenSuccess { _ in recorder.append("inner") }  // default: `.current`
            recorder.append("outer")
        }
        #expect(executor.runNext())
        #expect(recorder.all == ["outer"])
        #expect(executor.queuedCount == 1, "the inner callback went to the same manual executor")
        executor.runAll()
        #expect(recorder.all == ["outer", "inner"])
    }

    @Test func currentStaysOnACustomExecutorThroughTheJobsOfTheStepsItRegisters() {
        let executor = ManualExecutor()
        let recorder = Recorder<String>()
        let promise = Promise<Int>()
        Future(value: 1).whenSuccess(on: executor) { _ in
            // Registered in the executor's job with the default executor: its step is a job of the
            // same executor, and what that job registers with the default stays there too.
            _ = promise.future.map { value in
                Future(value: value).whenSuccess { _ in recorder.append("registered in the step's job") }
                recorder.append("step")
            }
        }
        #expect(executor.runNext())
        promise.succeed(2)
        #expect(executor.queuedCount == 1, "the step's job")
        #expect(executor.runNext())
        #expect(recorder.all == ["step"])
        #expect(executor.queuedCount == 1, "the callback registered in the step's job went to the same executor")
        executor.runAll()
        #expect(recorder.all == ["step", "registered in the step's job"])
    }

    @Test func currentExecutesOnACustomExecutorRecordedInsideItsJob() {
        let executor = ManualExecutor()
        let recorder = Recorder<String>()
        Future(value: 1).whenSuccess(on: executor) { _ in
            CurrentExecutor().execute {
                Future(value: 2).whenSuccess { _ in recorder.append("registered in the job") }  // default
                recorder.append("job")
            }
        }
        #expect(executor.runNext())
        #expect(executor.queuedCount == 1, "the job went to the same executor")
        #expect(executor.runNext())
        #expect(recorder.all == ["job"])
        #expect(executor.queuedCount == 1, "what the job registered with the default stayed there")
        executor.runAll()
        #expect(recorder.all == ["job", "registered in the job"])
    }

    @Test func currentElsewhereIsGlobal() async throws {
        let resolved = try await Future(on: .global()) { () -> String in
            String(describing: type(of: CurrentExecutor.resolve()))
        }.value
        #expect(resolved == "GlobalExecutor")
        let outside = Future<String> { promise in
            Thread { promise.succeed(String(describing: type(of: CurrentExecutor.resolve()))) }.start()
        }
        #expect(try await outside.value == "GlobalExecutor")
    }

    @Test @MainActor func mainAcceptsMainActorClosures() async throws {
        let state = MainState()
        let doubled = try await Future(value: 21)
            .map(on: .main) { value in
                state.values.append(value)   // main-actor state, no assumeIsolated
                return value * 2
            }
            .value
        #expect(doubled == 42)
        #expect(state.values == [21])
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Future(value: 3).whenSuccess(on: .main) { value in
                state.values.append(value)
                continuation.resume()
            }
        }
        #expect(state.values == [21, 3])
    }

    @Test func mainRunsOnTheMainQueueFromABackgroundThread() async throws {
        let onMain = try await Future(on: .global()) { 1 }
            .flatMap(on: .main) { _ in Future(value: MainQueue.isCurrent) }
            .value
        #expect(onMain)
    }

    @Test @MainActor func mainImmediateRunsInlineOnTheMainQueue() {
        let state = MainState()
        Future(value: 1).whenSuccess(on: .mainImmediate) { value in state.values.append(value) }
        #expect(state.values == [1])
    }

    @Test func mainImmediateHopsFromOtherQueues() async throws {
        let onMain = try await Future(on: .global()) { 1 }
            .map(on: .mainImmediate) { _ in MainQueue.isCurrent }
            .value
        #expect(onMain)
    }

    @Test func globalAndQueueExecutorsRunThere() async throws {
        let queue = MarkedQueue("q")
        let onQueue = try await Future(on: .queue(queue.queue)) { queue.isCurrent }.value
        #expect(onQueue)
        let onGlobal = try await Future(on: .global(qos: .utility)) { !MainQueue.isCurrent }.value
        #expect(onGlobal)
    }

    @Test func operationQueueExecutorRunsAsAnOperation() async throws {
        let operations = OperationQueue()
        operations.maxConcurrentOperationCount = 1
        let current = try await Future(on: .operationQueue(operations)) { OperationQueue.current === operations }.value
        #expect(current)
    }

    @Test func customExecutorsRunCallbacks() {
        let executor = ManualExecutor()
        let mapped = Future(value: 1).map(on: executor) { $0 + 1 }
        #expect(executor.runAll() == 1)
        #expect(mapped.outcome?.value == 2)
    }

    @Test func futureOnAnExecutorThatDropsTheJobBreaks() {
        struct DroppingExecutor: Executor {
            func execute(_ work: @escaping @Sendable () -> Void) {}
        }
        let future = Future(on: DroppingExecutor()) { 1 }
        #expect(isBrokenPromise(future.outcome))
    }

    @Test func futureOnExecutorCatchesErrors() {
        let executor = ManualExecutor()
        let failing = Future<Int>(on: executor) { throw TestError() }
        let cancelled = Future<Int>(on: executor) { throw CancellationError() }
        #expect(failing.isPending)
        executor.runAll()
        #expect(failing.outcome?.error is TestError)
        #expect(cancelled.outcome?.isCancelled == true)
        #expect(Future(on: .immediate) { 5 }.outcome?.value == 5)
    }

    /// The Executors article's example, as written, then the same order checked.
    @Test func anImmediateCallbackThatCompletesAPromiseRunsItsCallbacksAfterReturning() {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let first = Promise<Int>()
        let second = Promise<Int>()
        second.future.whenSuccess(on: .immediate) { _ in print("2: second's callback") }
        first.future.whenSuccess(on: .immediate) { _ in
            second.succeed(2)   // queues second's callback: it runs once this callback returns
            print("1: still in first's callback")
        }
        first.succeed(1)   // prints 1, then 2
        #expect(printed.all == ["1: still in first's callback", "2: second's callback"])
    }
}
