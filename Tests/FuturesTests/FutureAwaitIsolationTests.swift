import Dispatch
import Foundation
import Futures
import Testing

/// A serial executor that counts the jobs it is given, so a test can see when an actor's task leaves
/// the actor and comes back (coming back is a job).
private final class CountingExecutor: SerialExecutor, @unchecked Sendable {
    // Safety: `jobs` is only touched while holding `lock`; `queue` runs one job at a time.
    private let lock = NSLock()
    private var jobs = 0
    private let queue = DispatchQueue(label: "counting executor")

    var count: Int { lock.withLock { jobs } }

    func enqueue(_ job: consuming ExecutorJob) {
        lock.withLock { jobs += 1 }
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }
}

/// An actor on a ``CountingExecutor``.
private actor Isolated {
    let executor = CountingExecutor()

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Awaits `future` and says how many jobs the actor's executor was given meanwhile.
    func awaitValue(of future: Future<Int>) async throws -> (value: Int, jobs: Int) {
        let before = executor.count
        let value = try await future.value
        return (value, executor.count - before)
    }

    /// ``awaitValue(of:)`` with `result`.
    func awaitResult(of future: Future<Int>) async -> (outcome: Outcome<Int>, jobs: Int) {
        let before = executor.count
        let outcome = await future.result
        return (outcome, executor.count - before)
    }

    /// Awaits `future`, completed by `complete` once the wait has begun, and checks that the task is
    /// back on the actor afterwards.
    func awaitPending(_ future: Future<Int>, completing promise: Promise<Int>) async throws -> Int {
        DispatchQueue.global().async { promise.succeed(3) }
        let value = try await future.value
        preconditionIsolated("resumed off the actor")
        return value
    }
}

@Suite struct FutureAwaitIsolationTests {
    @Test func awaitingACompletedFutureFromAnActorNeverLeavesTheActor() async throws {
        let actor = Isolated()
        let (value, jobs) = try await actor.awaitValue(of: Future(value: 1))
        #expect(value == 1)
        #expect(jobs == 0, "a hop off the actor and back would be one job")
        let (outcome, resultJobs) = await actor.awaitResult(of: Future(value: 2))
        #expect(outcome.value == 2)
        #expect(resultJobs == 0)
    }

    @Test func awaitingAPendingFutureFromAnActorResumesOnTheActor() async throws {
        let actor = Isolated()
        let promise = Promise<Int>()
        #expect(try await actor.awaitPending(promise.future, completing: promise) == 3)
    }
}
