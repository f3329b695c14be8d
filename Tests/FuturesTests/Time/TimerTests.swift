import Dispatch
import Testing
import FuturesTestSupport
@testable import Futures

/// Timers on the standard clocks: a future completed before its deadline never times out, huge
/// durations mean "never" instead of trapping, and a finished or cancelled timer keeps nothing.
@Suite("Timers")
struct TimerTests {
    @Test(arguments: [Duration.seconds(-1), .zero, .nanoseconds(1)])
    func aFutureCompletedBeforeItsTimeoutNeverTimesOut(duration: Duration) async {
        for _ in 0..<5_000 {
            #expect(await Future(value: 1).timeout(after: duration).result.value == 1)
        }
        let promise = Promise<Int>()
        let timed = promise.future.timeout(after: .seconds(60))
        promise.succeed(2)
        #expect(await timed.result.value == 2)
    }

    /// Inside a drain loop, an `.immediate` registration on a completed future runs after the
    /// running callback returns; a zero timeout armed meanwhile must still see the outcome.
    @Test func aTimeoutSetInsideACallbackOnACompletedFutureNeverTimesOut() async {
        let trigger = Promise<Void>()
        let timeouts = Recorder<Future<Int>>()
        for _ in 0..<2_000 {
            trigger.future.whenComplete(on: .immediate) { _ in
                timeouts.append(Future(value: 1).timeout(after: .zero))
            }
        }
        trigger.succeed(())
        for timed in timeouts.all {
            #expect(await timed.result.value == 1)
        }
    }

    @Test func aTimeoutFiresOnTheStandardClock() async {
        let promise = Promise<Int>()
        let timed = promise.future.timeout(after: .milliseconds(1))
        guard case .failure(FutureError.timedOut) = await timed.result else {
            Issue.record("expected a timeout")
            return
        }
        #expect(promise.isCancelled, "the timeout was its only consumer, and withdrew")
        #expect(await Future.after(.milliseconds(1), value: 3, clock: SuspendingClock()).result.value == 3)
    }

    @Test func hugeDurationsMeanNeverAndDoNotTrap() async {
        for duration in [Duration.seconds(Int64.max), .seconds(Int64(1) << 40), TimerThread.longestSleep] {
            let promise = Promise<Int>()
            let timed = promise.future.timeout(after: duration)
            let later = Future.after(duration, value: 1)
            let delayed = Future(value: 1).delayed(by: duration)
            let manual = Future.after(duration, value: 1, clock: ManualClock())
            #expect(timed.isPending && later.isPending && delayed.isPending && manual.isPending)
            promise.succeed(5)
            #expect(await timed.result.value == 5)
            #expect(later.cancel() && delayed.cancel() && manual.cancel())
        }
        #expect(await Future.after(.seconds(Int64.min), value: 7).result.value == 7)
        let hugelyNegative = Duration(secondsComponent: .min, attosecondsComponent: .min) + .seconds(Int64.min)
        #expect(await Future.after(hugelyNegative, value: 8).result.value == 8)
        let promise = Promise<Int>()
        let timed = promise.future.timeout(after: hugelyNegative)
        guard case .failure(FutureError.timedOut) = await timed.result else {
            Issue.record("a negative timeout fires at once")
            return
        }
        withExtendedLifetime(promise) {}  // released earlier, the promise would break first
    }

    @Test func anExponentialBackoffStopsGrowingInsteadOfOverflowing() {
        let unbounded = Backoff<Duration>.exponential(initial: .seconds(1))
        #expect(unbounded.delay(1) == .seconds(1))
        #expect(unbounded.delay(4) == .seconds(8))
        #expect(unbounded.delay(200) == TimerThread.longestSleep)
        #expect(unbounded.delay(Int.max) == TimerThread.longestSleep)
        let capped = Backoff<Duration>.exponential(initial: .seconds(1), factor: 3, maximum: .seconds(100))
        #expect(capped.delay(5) == .seconds(81))
        #expect(capped.delay(6) == .seconds(100))
        #expect(capped.delay(Int.max) == .seconds(100))
        #expect(Backoff<Duration>.exponential(initial: .seconds(2), factor: 1).delay(Int.max) == .seconds(2))
        #expect(Backoff<Duration>.exponential(initial: .seconds(Int64.max), factor: 1_000).delay(3)
            == TimerThread.longestSleep)
        let ticks = Backoff<Ticks>.exponential(initial: Ticks(value: 1_000_000_000))
        #expect(ticks.delay(3) == Ticks(value: 4_000_000_000))
        #expect(ticks.delay(Int.max) == Ticks(value: 1_000_000_000 << 20), "a type of unknown range grows 2^20-fold")
        #expect(Backoff<Ticks>.exponential(initial: Ticks(value: 1), factor: .max).delay(Int.max) == Ticks(value: 1))
        let cappedTicks = Backoff<Ticks>.exponential(initial: Ticks(value: 3), factor: 10, maximum: Ticks(value: Int.max))
        #expect(cappedTicks.delay(Int.max) == Ticks(value: Int.max))
        let seconds = Backoff<Seconds>.exponential(initial: Seconds(value: 1), maximum: Seconds(value: .infinity))
        #expect(seconds.delay(Int.max) == Seconds(value: .infinity), "an infinite ceiling ends the loop")
        // A NaN delay cannot be ordered: it only has to end the loop, and never pass the ceiling.
        let nan = Backoff<Seconds>.exponential(initial: Seconds(value: .nan), maximum: Seconds(value: 10)).delay(Int.max)
        #expect(nan.value.isNaN || nan.value <= 10)
    }

    @Test func aRetryWhoseBackoffIsTooLongToSleepWaitsForeverWithoutTrapping() async {
        let attempts = Counter()
        let retried = Future<Int>.retry(attempts: 5, backoff: .constant(.seconds(Int64.max))) {
            attempts.increment()
            return Future(error: TestError())
        }
        #expect(attempts.value == 1)
        #expect(retried.isPending)
        #expect(retried.cancel())
    }

    /// Measured in a process of its own: a timeout finished or cancelled, and an `after`
    /// cancelled, long before their 8-second deadline keep nothing.
    @Test(arguments: ["timeout-finished", "timeout-cancelled", "after-cancelled"])
    func finishedAndCancelledTimersKeepNothing(scenario: String) async throws {
        guard let kept = try await heapKeptPerIteration(scenario) else { return }
        #expect(kept < 32, "\(scenario) keeps \(kept) B")
    }

    /// A burst of timers (a long chain of timeouts, say) leaves no large buffer behind once they end.
    @Test func theTimerHeapGivesBackItsRoomAfterABurst() {
        let timers = (0..<20_000).map { _ in Timer.start(after: .seconds(3_600), clock: ContinuousClock()) {} }
        #expect(TimerThread.shared.heapCapacity >= 20_000)
        for timer in timers { timer.cancel() }
        TimerThread.shared.checkInvariants()
        // Other tests may have a few timers running meanwhile; never room for the burst.
        #expect(TimerThread.shared.heapCapacity < 5_000)
    }

    @Test func theTimerHeapStaysOrderedWhileTimersComeAndGo() {
        var timers: [Timer] = []
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let hours = Int64.random(in: 1...1_000, using: &generator)
            timers.append(Timer.start(after: .seconds(hours * 3_600), clock: ContinuousClock()) {})
        }
        #expect(timers.allSatisfy { TimerThread.shared.isScheduled($0) })
        timers.shuffle(using: &generator)
        for timer in timers.prefix(250) { timer.cancel() }
        TimerThread.shared.checkInvariants()
        #expect(timers.prefix(250).allSatisfy { !TimerThread.shared.isScheduled($0) })
        #expect(timers.dropFirst(250).allSatisfy { TimerThread.shared.isScheduled($0) })
        for timer in timers.dropFirst(250) { timer.cancel() }
        TimerThread.shared.checkInvariants()
        #expect(timers.allSatisfy { !TimerThread.shared.isScheduled($0) })
    }
}

/// A duration type of unknown range, for the backoff's generic path.
struct Ticks: DurationProtocol, Hashable {
    var value: Int
    static var zero: Ticks { Ticks(value: 0) }
    static func + (lhs: Ticks, rhs: Ticks) -> Ticks { Ticks(value: lhs.value + rhs.value) }
    static func - (lhs: Ticks, rhs: Ticks) -> Ticks { Ticks(value: lhs.value - rhs.value) }
    static func * (lhs: Ticks, rhs: Int) -> Ticks { Ticks(value: lhs.value * rhs) }
    static func / (lhs: Ticks, rhs: Int) -> Ticks { Ticks(value: lhs.value / rhs) }
    static func / (lhs: Ticks, rhs: Ticks) -> Double { Double(lhs.value) / Double(rhs.value) }
    static func < (lhs: Ticks, rhs: Ticks) -> Bool { lhs.value < rhs.value }
}

/// A floating-point duration type, for the backoff's infinite and NaN edges.
struct Seconds: DurationProtocol, Hashable {
    var value: Double
    static var zero: Seconds { Seconds(value: 0) }
    static func + (lhs: Seconds, rhs: Seconds) -> Seconds { Seconds(value: lhs.value + rhs.value) }
    static func - (lhs: Seconds, rhs: Seconds) -> Seconds { Seconds(value: lhs.value - rhs.value) }
    static func * (lhs: Seconds, rhs: Int) -> Seconds { Seconds(value: lhs.value * Double(rhs)) }
    static func / (lhs: Seconds, rhs: Int) -> Seconds { Seconds(value: lhs.value / Double(rhs)) }
    static func / (lhs: Seconds, rhs: Seconds) -> Double { lhs.value / rhs.value }
    static func < (lhs: Seconds, rhs: Seconds) -> Bool { lhs.value < rhs.value }
}
