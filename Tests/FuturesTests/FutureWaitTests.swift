import Dispatch
import Foundation
import FuturesTestHelpers
import FuturesTestSupport
import Testing
@testable import Futures

/// `wait()`: blocks where that is safe, keeps the main queue running on the main thread (the script
/// run as a process of its own), and fails at once where the jobs it may need cannot run.
@Suite("Blocking wait")
struct FutureWaitTests {
    // MARK: Complete futures, anywhere

    @Test func aCompleteFutureReturnsOrThrowsLikeValue() throws {
        #expect(try Future(value: 7).wait() == 7)
        #expect(throws: FutureError.timedOut) { try Future<Int>(error: FutureError.timedOut).wait() }
        #expect(throws: CancellationError.self) { try Future<Int>.cancelled.wait() }
    }

    @Test func aCompleteFutureReturnsEvenWhereAPendingOneWouldBeRefused() async throws {
        let queue = DispatchQueue(label: "serial")
        let waited = Future(value: 0).map(on: .queue(queue)) { _ in Result { try Future(value: 3).wait() } }
        #expect(try await waited.value.get() == 3)
    }

    // MARK: Blocking where nothing the future needs waits behind it

    @Test func blocksUntilAnotherThreadCompletesTheFuture() throws {
        let promise = Promise<Int>()
        DispatchQueue.global().async { promise.succeed(5) }
        #expect(try promise.future.wait() == 5)
    }

    @Test func throwsTheFailureOfAFutureCompletedLater() {
        let promise = Promise<Int>()
        DispatchQueue.global().async { promise.fail(FutureError.timedOut) }
        #expect(throws: FutureError.timedOut) { try promise.future.map { $0 + 1 }.wait() }
    }

    @Test func aMainQueueStepWhileBlockingOffTheMainThread() throws {
        #expect(try Future(value: 1).map(on: .main) { $0 + 1 }.wait() == 2)
    }

    @Test func inAJobOfAGlobalQueueItBlocks() async throws {
        // A global queue runs jobs concurrently: what `.current` resolves to there does not wait
        // behind the blocked job.
        let outer = Future(on: .global()) { () throws -> Int in
            try Future(value: 20).map { $0 + 1 }.delayed(by: .milliseconds(1)).wait()
        }
        #expect(try await outer.value == 21)
    }

    // MARK: Refused at once

    @Test func refusedInAJobOfASerialQueue() async throws {
        let queue = DispatchQueue(label: "serial")
        let waited = Future(value: 0).map(on: .queue(queue)) { _ in
            // `.current` here is `queue`: this step's job would wait behind the one blocking.
            let next = Future(value: 1).map { $0 + 1 }
            return Result { try next.wait() }
        }
        await #expect(throws: FutureError.blockingWait) { try await waited.value.get() }
    }

    @Test func refusedInAJobOfAnOperationQueue() async throws {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let pending = Promise<Int>()
        let waited = Future(on: .operationQueue(queue)) { Result { try pending.future.wait() } }
        await #expect(throws: FutureError.blockingWait) { try await waited.value.get() }
        pending.succeed(0)
    }

    @Test func refusedInAJobOfACustomExecutor() throws {
        let executor = ManualExecutor()
        let pending = Promise<Int>()
        let waited = Future(on: executor) { Result { try pending.future.wait() } }
        #expect(executor.runAll() == 1)
        #expect(throws: FutureError.blockingWait) { try waited.outcome?.value?.get() }
        pending.succeed(0)
    }

    @Test func refusedInACallbackRunningInlineInACompletion() throws {
        let trigger = Promise<Int>()
        let other = Promise<Int>()
        let waited = Recorder<Result<Int, any Error>>()
        trigger.future.whenSuccess(on: .immediate) { _ in
            // The completion that runs this callback runs the next ones on this thread after it.
            waited.append(Result { try other.future.map(on: .immediate) { $0 }.wait() })
        }
        trigger.succeed(1)
        #expect(waited.count == 1)
        #expect(throws: FutureError.blockingWait) { try waited.all[0].get() }
        other.succeed(0)
    }

    @Test func theErrorSaysWhatToDoInstead() {
        #expect(FutureError.blockingWait.description.contains("await"))
    }

    // MARK: A script's top-level code, on the main thread

    @Test func aScriptWaitsOnTheMainThreadAndPrintsItsValues() throws {
        let process = Process()
        process.executableURL = builtProductsDirectory.appendingPathComponent("futures-waitscript")
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(String(decoding: data, as: UTF8.self).split(separator: "\n") == [
            "2", "40", "42", "timed out", "refused inside a job of the main queue",
        ])
    }
}
