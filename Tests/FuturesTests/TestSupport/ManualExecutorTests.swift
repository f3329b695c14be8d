import Dispatch
import Testing
import Futures
import FuturesTestSupport

@Suite("ManualExecutor")
struct ManualExecutorTests {
    @Test func runsNothingUntilTold() {
        let executor = ManualExecutor()
        let recorder = Recorder<Int>()
        executor.execute { recorder.append(1) }
        executor.execute { recorder.append(2) }
        #expect(recorder.all.isEmpty)
        #expect(executor.queuedCount == 2)
        #expect(executor.runNext())
        #expect(recorder.all == [1])
        #expect(executor.runAll() == 1)
        #expect(recorder.all == [1, 2])
        #expect(!executor.runNext())
        #expect(executor.runCount == 2)
    }

    @Test func runAllRunsWorkQueuedByWork() {
        let executor = ManualExecutor()
        let recorder = Recorder<String>()
        executor.execute {
            recorder.append("first")
            executor.execute { recorder.append("second") }
        }
        #expect(executor.runAll() == 2)
        #expect(recorder.all == ["first", "second"])
    }

    @Test func documentedExample() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let seen = Recorder<Int>()
        promise.future.map(on: executor) { $0 * 2 }.whenSuccess(on: .immediate) { seen.append($0) }
        promise.succeed(21)
        #expect(seen.all.isEmpty)
        executor.runAll()
        #expect(seen.all == [42])
    }

    /// A job that ran may hold the last reference to a pending promise; releasing it breaks the
    /// promise, whose callback queues a job here. Released under the executor's lock, that deadlocks.
    @Test func releasingAJobThatHeldAPromiseQueuesItsCallbacksWithoutDeadlocking() {
        let executor = ManualExecutor()
        let outcomes = Recorder<Bool>()
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do {
                let promise = Promise<Int>()
                promise.future.whenComplete(on: executor) { outcomes.append($0.isFailure) }
                executor.execute { _ = promise }
            }
            executor.execute {}
            executor.runAll()
            finished.signal()
        }
        #expect(finished.wait(timeout: .now() + 60) == .success, "runAll deadlocked")
        #expect(outcomes.all == [true], "the broken promise's callback ran on the executor")
    }
}
