import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import FuturesTestSupport
@testable import Futures

/// The time operators, on a manual clock: no test sleeps.
@Suite("Time")
struct TimeTests {
    @Test func afterSucceedsOnceTheDurationHasPassed() async throws {
        let clock = ManualClock()
        let future = Future.after(.seconds(5), value: "ding", clock: clock)
        clock.advance(by: .seconds(4))
        #expect(future.isPending, "the deadline has not passed, so nothing can complete it")
        clock.advance(by: .seconds(1))
        #expect(try await future.value == "ding")
    }

    @Test func aCancelledTimerReleasesItsValueAtOnce() {
        let clock = ManualClock()
        weak var weakProbe: Probe?
        let future: Future<Probe>
        do {
            let probe = Probe()
            weakProbe = probe
            future = Future.after(.seconds(5), value: probe, clock: clock)
        }
        #expect(weakProbe != nil)
        #expect(future.cancel())
        #expect(weakProbe == nil)
    }

    @Test func delayedDelaysSuccessAndFailureButNotCancellation() async {
        let clock = ManualClock()
        let promise = Promise<Int>()
        let delayed = promise.future.delayed(by: .seconds(2), clock: clock)
        promise.succeed(1)
        #expect(delayed.isPending)
        clock.advance(by: .seconds(2))
        #expect(await delayed.result.value == 1)

        let failing = Promise<Int>()
        let delayedFailure = failing.future.delayed(by: .seconds(2), clock: clock)
        failing.fail(TestError())
        clock.advance(by: .seconds(2))
        #expect(await delayedFailure.result.isFailure)

        let cancelled = Promise<Int>()
        let delayedCancel = cancelled.future.delayed(by: .seconds(2), clock: clock)
        cancelled.cancel()
        #expect(delayedCancel.outcome?.isCancelled == true, "cancellation passes at once")
    }

    @Test func cancellingADelayedFutureStopsItsTimerAndReleasesTheValue() {
        let clock = ManualClock()
        weak var weakProbe: Probe?
        let delayed: Future<Probe>
        do {
            let promise = Promise<Probe>()
            delayed = promise.future.delayed(by: .seconds(2), clock: clock)
            let probe = Probe()
            weakProbe = probe
            promise.succeed(probe)
        }
        #expect(weakProbe != nil, "the running timer holds the outcome")
        #expect(delayed.cancel())
        #expect(weakProbe == nil)
        clock.advance(by: .seconds(2))
        #expect(delayed.outcome?.isCancelled == true)
    }

    @Test func timeoutFailsWithTimedOutAndWithdrawsFromItsSource() async {
        let clock = ManualClock()
        let slow = Promise<Int>()
        let guarded = slow.future.timeout(after: .seconds(5), clock: clock)
        clock.advance(by: .seconds(5))
        let outcome = await guarded.result
        #expect(outcome.error as? FutureError == .timedOut)
        #expect(slow.isCancelled, "the timeout was its only consumer")
    }

    @Test func timeoutLeavesASourceWithOtherConsumers() async {
        let clock = ManualClock()
        let slow = Promise<Int>()
        let other = slow.future.map(on: .immediate) { $0 }
        let guarded = slow.future.timeout(after: .seconds(5), clock: clock)
        clock.advance(by: .seconds(5))
        #expect(await guarded.result.error as? FutureError == .timedOut)
        #expect(slow.future.isPending)
        slow.succeed(2)
        #expect(other.outcome?.value == 2)
    }

    @Test func timeoutPassesAnEarlyOutcomeAndStopsItsTimer() async {
        let clock = ManualClock()
        let fast = Promise<Int>()
        let guarded = fast.future.timeout(after: .seconds(5), clock: clock)
        fast.succeed(3)
        #expect(guarded.outcome?.value == 3)
        clock.advance(by: .seconds(10))
        #expect(guarded.outcome?.value == 3)
    }

    @Test func cancellingATimeoutCancelsItsSource() {
        let clock = ManualClock()
        let slow = Promise<Int>()
        let guarded = slow.future.timeout(after: .seconds(5), clock: clock)
        guarded.cancel()
        #expect(slow.isCancelled)
    }

    @Test func retryRetriesUntilSuccess() async throws {
        let attempts = Counter()
        let future = Future<Int>.retry(attempts: 5) {
            attempts.increment() < 3 ? Future(error: TestError()) : Future(value: 42)
        }
        #expect(try await future.value == 42)
        #expect(attempts.value == 3)
    }

    @Test func retryReportsTheLastErrorWhenAttemptsRunOut() async {
        let attempts = Counter()
        let future = Future<Int>.retry(attempts: 3) {
            Future(error: TestError(code: attempts.increment()))
        }
        #expect((await future.result.error as? TestError)?.code == 3)
        #expect(attempts.value == 3)
    }

    /// Without a backoff, an attempt that fails at once is retried at once, in the same call, with
    /// no timer and no hop, up to a batch of attempts; then one hop, so that `retry` returns and the
    /// caller can cancel it. Thousands of attempts run on a small stack.
    @Test func retryWithoutBackoffRetriesAtOnceInBatches() async throws {
        let attempts = Counter()
        let inCall = Counter()  // attempts made on the calling thread, which runs no queue's jobs
        let future = await onSmallStackOffThePoolReturning {
            let caller = pthread_self()
            return Future<Int>.retry(attempts: 100_000) {
                if pthread_equal(pthread_self(), caller) != 0 { inCall.increment() }
                return Future(error: TestError(code: attempts.increment()))
            }
        }
        let error = await future.result.error as? TestError
        #expect(inCall.value == inlineAttempts, "the first batch ran in the call, and no more")
        #expect(error?.code == 100_000)
        #expect(attempts.value == 100_000)
    }

    @Test func aRetryWithoutBackoffCanBeCancelledBetweenBatches() async {
        let attempts = Counter()
        let future = Future<Int>.retry(attempts: 1_000_000) { Future(error: TestError(code: attempts.increment())) }
        #expect(future.cancel())
        let made = attempts.value
        #expect(made < 1_000_000)
        #expect(await future.result.isCancelled)
        #expect(attempts.value <= made + inlineAttempts, "at most the batch in flight finishes")
    }

    @Test func retryAsksWhetherToRetry() async {
        let attempts = Counter()
        let future = Future<Int>.retry(attempts: 5, while: { ($0 as? TestError)?.code != 2 }) {
            Future(error: TestError(code: attempts.increment()))
        }
        #expect((await future.result.error as? TestError)?.code == 2)
        #expect(attempts.value == 2)
    }

    @Test func retryWaitsTheBackoffBetweenAttempts() async throws {
        let clock = ManualClock()
        let attempts = Counter()
        let future = Future<Int>.retry(attempts: 3, backoff: .exponential(initial: .seconds(1), factor: 2), clock: clock) {
            attempts.increment() < 3 ? Future(error: TestError()) : Future(value: 7)
        }
        #expect(attempts.value == 1)
        await clock.waitForSleepers()          // the first wait has started
        clock.advance(by: .milliseconds(999))
        #expect(attempts.value == 1, "the first wait has not passed, so nothing can start attempt 2")
        clock.advance(by: .milliseconds(1))    // 1 s after the first failure: attempt 2 fails
        await clock.waitForSleepers()          // the second wait has started (its deadline is fixed)
        #expect(attempts.value == 2)
        clock.advance(by: .seconds(1))
        #expect(attempts.value == 2, "the second wait is twice as long")
        clock.advance(by: .seconds(1))
        #expect(try await future.value == 7)
        #expect(attempts.value == 3)
    }

    @Test func backoffDelays() {
        let exponential = Backoff<Duration>.exponential(initial: .seconds(1), factor: 3, maximum: .seconds(20))
        #expect((1...5).map(exponential.delay) == [.seconds(1), .seconds(3), .seconds(9), .seconds(20), .seconds(20)])
        #expect(Backoff<Duration>.constant(.seconds(2)).delay(7) == .seconds(2))
        #expect(Backoff<Duration>.none.delay(1) == .zero)
    }

    @Test func retryWithTheDefaultClockCompiles() async throws {
        let profile = Future.retry(attempts: 3, backoff: .exponential(initial: .milliseconds(10), factor: 2)) {
            Future(value: "profile")
        }
        #expect(try await profile.value == "profile")
    }

    @Test func cancellingARetryStopsIt() {
        let clock = ManualClock()
        let attempts = Counter()
        let inFlight = Promise<Int>()
        let future = Future<Int>.retry(attempts: 3, clock: clock) {
            attempts.increment()
            return inFlight.future
        }
        future.cancel()
        #expect(inFlight.isCancelled, "the attempt in flight is cancelled")
        #expect(attempts.value == 1)
    }

    /// A cancelled retry whose attempt fails afterwards (it had another consumer, so it was not
    /// cancelled with the retry) starts no further attempt.
    @Test func noAttemptStartsAfterARetryIsCancelled() {
        let attempts = Counter()
        let current = Locked<Promise<Int>?>(nil)
        let keep = Recorder<Future<Int>>()
        let retried = Future<Int>.retry(attempts: 10) {
            attempts.increment()
            let promise = Promise<Int>()
            current.withLock { $0 = promise }
            keep.append(promise.future.map(on: .immediate) { $0 })  // a second consumer
            return promise.future
        }
        #expect(attempts.value == 1)
        #expect(retried.cancel())
        current.withLock { $0 }?.fail(TestError())
        #expect(attempts.value == 1, "no attempt after cancel")
    }
}
