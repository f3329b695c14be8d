import Dispatch
import Foundation
import Testing
@testable import Futures

/// Executors and callbacks that break their contracts, or push the library hard: it never
/// crashes, deadlocks, runs a callback twice, or leaves a future pending forever without a failure.
@Suite("Fault injection")
struct FaultInjectionTests {
    /// Drops every job: releases it without running it.
    struct DroppingExecutor: Executor {
        func execute(_ work: @escaping @Sendable () -> Void) {}
    }

    /// Keeps every job until told to run them, then runs each `times` times.
    final class HoardingExecutor: Executor, @unchecked Sendable {
        // Safety: `jobs` is only touched while holding `lock`.
        private let lock = NSLock()
        private var jobs: [@Sendable () -> Void] = []
        let times: Int

        init(times: Int = 1) { self.times = times }

        func execute(_ work: @escaping @Sendable () -> Void) {
            lock.lock()
            jobs.append(work)
            lock.unlock()
        }

        func runAll() {
            lock.lock()
            let taken = jobs
            jobs = []
            lock.unlock()
            for job in taken { for _ in 0..<times { job() } }
        }

        func dropAll() {
            lock.lock()
            let taken = jobs
            jobs = []
            lock.unlock()
            withExtendedLifetime(taken) {}
        }
    }

    @Test func aDroppedJobFailsTheFutureItWouldHaveCompleted() async {
        let source = Promise<Int>()
        let runs = Recorder<Int>()
        let derived: [Future<Int>] = [
            source.future.map(on: DroppingExecutor()) { runs.append(1); return $0 },
            source.future.flatMap(on: DroppingExecutor()) { runs.append(2); return Future(value: $0) },
            source.future.mapOutcome(on: DroppingExecutor()) { _ in runs.append(3); return 0 },
        ]
        source.future.whenComplete(on: DroppingExecutor()) { _ in runs.append(4) }
        #expect(source.succeed(1))
        for future in derived {
            let outcome = await future.result
            #expect(outcome.error as? FutureError == .droppedJob, "\(outcome)")
        }
        #expect(runs.all.isEmpty)
        let work = await Future(on: DroppingExecutor()) { 1 }.result
        guard case .failure(FutureError.brokenPromise) = work else {
            Issue.record("Future(on:) on a dropping executor: \(work)")
            return
        }
    }

    @Test func aJobDroppedLaterFailsTheFutureThen() async {
        let executor = HoardingExecutor()
        let source = Promise<Int>()
        let derived = source.future.map(on: executor) { $0 + 1 }
        #expect(source.succeed(1))
        #expect(derived.isPending)
        executor.dropAll()
        #expect(await derived.result.error as? FutureError == .droppedJob)
    }

    /// An executor that drops its jobs while it holds its own lock, with a callback of the failed
    /// future queued on itself: the failure is not delivered under that lock.
    @Test func anExecutorDroppingJobsUnderItsOwnLockDoesNotDeadlock() async {
        final class LockedHoard: Executor, @unchecked Sendable {
            // Safety: `jobs` is only touched while holding `lock`; `queued` is Sendable.
            let lock = NSLock()
            var jobs: [@Sendable () -> Void] = []
            /// One element for every job handed over, after it is stored.
            let (handedOver, queued) = AsyncStream.makeStream(of: Void.self)
            func execute(_ work: @escaping @Sendable () -> Void) {
                lock.lock()
                jobs.append(work)
                lock.unlock()
                queued.yield()
            }
            func dropAllUnderTheLock() {
                lock.lock()
                jobs.removeAll()
                lock.unlock()
            }
        }
        let executor = LockedHoard()
        var handedOver = executor.handedOver.makeAsyncIterator()
        let source = Promise<Int>()
        let derived = source.future.map(on: executor) { $0 }
        derived.whenComplete(on: executor) { _ in }
        #expect(source.succeed(1))
        #expect(await handedOver.next() != nil)  // the map's job
        executor.dropAllUnderTheLock()
        #expect(await derived.result.error as? FutureError == .droppedJob)
        // The observer's job, queued as the failure arrived (on the thread that reports the
        // dropped job, which may still be running the failure's callbacks when `await` returns),
        // refers to the executor that holds it: dropped too once it is there, or the two would
        // keep each other alive (LeakSanitizer reports it).
        #expect(await handedOver.next() != nil)
        executor.dropAllUnderTheLock()
    }

    /// An operation queue's cancelled operations never run: their futures fail too.
    @Test func cancelledOperationsFailTheirFutures() async {
        let queue = OperationQueue()
        queue.isSuspended = true
        let source = Promise<Int>()
        let derived = source.future.map(on: .operationQueue(queue)) { $0 + 1 }
        #expect(source.succeed(1))
        queue.cancelAllOperations()
        queue.isSuspended = false
        #expect(await derived.result.error as? FutureError == .droppedJob)
    }

    /// A job that runs late, after its future was cancelled, changes nothing and runs nothing twice.
    @Test func aLateJobAfterACancellationChangesNothing() {
        let executor = HoardingExecutor()
        let source = Promise<Int>()
        let runs = Recorder<Int>()
        let derived = source.future.map(on: executor) { runs.append($0); return $0 }
        let guarded = source.future.mapOutcome(on: executor) { _ in runs.append(-1); return 0 }
        #expect(source.succeed(1))
        #expect(derived.cancel())
        #expect(guarded.cancel())
        executor.runAll()
        #expect(derived.outcome?.isCancelled == true)
        #expect(guarded.outcome?.isCancelled == true)
        #expect(runs.all.count <= 1, "a guarded transform ran for a cancelled future")
        #expect(!runs.all.contains(-1))
    }

    #if !DEBUG
    /// In release builds a job run twice runs once.
    @Test func aJobRunTwiceRunsOnce() {
        let executor = HoardingExecutor(times: 2)
        let source = Promise<Int>()
        let runs = Recorder<Int>()
        let derived = source.future.map(on: executor) { runs.append($0); return $0 }
        source.future.whenSuccess(on: executor) { runs.append($0 + 10) }
        #expect(source.succeed(1))
        executor.runAll()
        #expect(runs.all == [1, 11])
        #expect(derived.outcome?.value == 1)
    }
    #else
    /// In debug builds an executor that runs a job twice traps, naming the broken contract.
    @Test func debugBuildsTrapWhenAnExecutorRunsAJobTwice() async {
        await #expect(processExitsWith: .failure) {
            let executor = HoardingExecutor(times: 2)
            let source = Promise<Int>()
            let derived = source.future.map(on: executor) { $0 }
            _ = source.succeed(1)
            executor.runAll()
            withExtendedLifetime(derived) {}
        }
    }
    #endif

    /// Callbacks that complete and cancel other futures, and register on them, from inside the
    /// drain loop, on several threads at once: every future ends, every callback runs once.
    @Test func reentrantCallbacksOnManyThreads() async {
        let rounds = 200
        let ran = Recorder<Int>()
        await withTaskGroup(of: Void.self) { group in
            for round in 0..<rounds {
                group.addTask {
                    let a = Promise<Int>(), b = Promise<Int>(), c = Promise<Int>()
                    let mapped = b.future.map(on: .global()) { $0 * 2 }
                    a.future.whenComplete(on: .immediate) { _ in
                        _ = b.succeed(round)
                        _ = mapped.cancel()
                        c.future.whenComplete(on: .immediate) { _ in ran.append(round) }
                        _ = c.cancel()
                    }
                    a.future.whenSuccess(on: .global()) { _ in _ = c.fail(TestError()) }
                    _ = a.succeed(round)
                    _ = await mapped.result
                    _ = await c.future.result
                }
            }
        }
        #expect(ran.all.count == rounds)
        #expect(Set(ran.all).count == rounds)
    }

    /// A callback that blocks waits for work on other threads without holding any lock the
    /// library needs: the other futures complete meanwhile.
    @Test func aBlockingCallbackDoesNotStopOtherFutures() {
        let gate = Promise<Int>()
        let other = Promise<Int>()
        let released = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        gate.future.whenComplete(on: .immediate) { _ in
            DispatchQueue.global().async {
                // Completing and observing other futures while the callback blocks.
                _ = other.succeed(2)
                other.future.map(on: .immediate) { $0 }.whenComplete(on: .immediate) { _ in released.signal() }
            }
            released.wait()
        }
        DispatchQueue.global().async {
            _ = gate.succeed(1)
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 30) == .success, "a blocking callback stopped another future")
    }

    /// A progress handler that sets progress on the future it watches: no recursion, no deadlock,
    /// and the last report is the final one.
    @Test func aProgressHandlerThatSetsProgress() {
        let promise = Promise<Int>()
        let reports = Recorder<Double>()
        promise.future.whenProgress(on: .immediate) { value in
            reports.append(value)
            if value < 0.5 { promise.progress = value + 0.1 }
        }
        promise.progress = 0.1
        #expect(promise.succeed(1))
        let all = reports.all
        #expect(all.first == 0.1)
        #expect(all.last == 1)
        #expect(zip(all, all.dropFirst()).allSatisfy { $0 < $1 })
    }
}
