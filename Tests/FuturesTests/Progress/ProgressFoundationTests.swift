import Foundation
import Testing
import FuturesTestSupport
@testable import Futures

@Suite("Progress and Foundation")
struct ProgressFoundationTests {
    @Test func aFoundationProgressFollowsTheFuture() {
        let promise = Promise<Int>()
        let progress = promise.future.makeProgress(totalUnitCount: 100)
        #expect(progress.isCancellable)
        promise.progress = 0.25
        #expect(progress.completedUnitCount == 25)
        promise.succeed(1)
        #expect(progress.completedUnitCount == 100)
        #expect(progress.fractionCompleted == 1)
    }

    /// Totals up to `Int64.max`, those past the integers a `Double` holds exactly included: the
    /// count is the fraction of the total, rounded, never past the total and never going back
    /// while the fraction grows, and exactly the total once the future succeeds.
    @Test(arguments: [0, 1, 3, 100, 1 << 53 - 1, 1 << 53, 1 << 53 + 1, .max / 2, .max - 1, .max] as [Int64])
    func aFoundationProgressCountsExactlyForAnyTotal(total: Int64) {
        let promise = Promise<Int>()
        let progress = promise.future.makeProgress(totalUnitCount: total)
        promise.progress = 0.5
        #expect(progress.completedUnitCount == total / 2 + total % 2, "half, a tie rounded up")
        var last = progress.completedUnitCount
        for fraction in [0.6, 0.1 + 0.7, 0.999_999_999, 1.0.nextDown] {
            promise.progress = fraction
            let count = progress.completedUnitCount
            #expect(count >= last && count <= total, "\(fraction) of \(total) counted \(count)")
            last = count
        }
        if total == .max { #expect(last == .max - 1_024, "the largest fraction below 1, exactly") }
        promise.succeed(1)
        #expect(progress.completedUnitCount == total)
    }

    @Test func cancellingTheFoundationProgressCancelsTheFuture() async {
        let promise = Promise<Int>()
        let progress = promise.future.makeProgress()
        progress.cancel()   // Foundation may run the cancellation handler on another queue
        #expect(await promise.future.result.isCancelled)
    }

    @Test func aPromiseFollowsAFoundationProgress() async {
        let clock = ManualClock()
        let foundation = Progress(totalUnitCount: 10)
        let promise = Promise<Int>()
        promise.follow(foundation, every: .seconds(1), clock: clock)
        await clock.waitForSleepers()          // the first sample is taken; the sampler sleeps
        foundation.completedUnitCount = 3
        clock.advance(by: .seconds(1))
        for await value in promise.future.progressUpdates where value >= 0.3 { break }
        #expect(promise.future.progress == 0.3)
        promise.succeed(1)
        #expect(promise.future.progress == 1)
    }

    @Test func cancellingTheFutureCancelsTheFollowedProgress() async {
        let clock = ManualClock()
        let foundation = Progress(totalUnitCount: 10)
        let promise = Promise<Int>()
        promise.follow(foundation, every: .seconds(1), clock: clock)
        promise.future.cancel()
        #expect(foundation.isCancelled)
    }

    @Test func aCancelledFollowedProgressCancelsTheFuture() async {
        let clock = ManualClock()
        let foundation = Progress(totalUnitCount: 10)
        let promise = Promise<Int>()
        promise.follow(foundation, every: .seconds(1), clock: clock)
        await clock.waitForSleepers()
        foundation.cancel()
        clock.advance(by: .seconds(1))
        #expect(await promise.future.result.isCancelled)
    }

    /// Sampling a `Progress` never spins: an interval below the minimum (zero and negative
    /// included) waits the minimum, a millisecond, between samples; a longer one is kept.
    @Test(arguments: zip(
        [Duration.zero, .milliseconds(-5), .nanoseconds(1), .microseconds(999), .seconds(2)],
        [Duration.milliseconds(1), .milliseconds(1), .milliseconds(1), .milliseconds(1), .seconds(2)]
    ))
    func samplingWaitsAtLeastTheMinimumInterval(interval: Duration, expected: Duration) async throws {
        let clock = SleepRecordingClock()
        let foundation = Progress(totalUnitCount: 10)
        let promise = Promise<Int>()
        promise.follow(foundation, every: interval, clock: clock)
        var sleeps = clock.sleeps.makeAsyncIterator()
        let first = try #require(await sleeps.next())
        try #require(first.now.duration(to: first.deadline) == expected, "slept \(first.now.duration(to: first.deadline))")
        foundation.completedUnitCount = 4
        clock.base.advance(by: expected)
        let second = try #require(await sleeps.next())
        #expect(second.now == first.deadline && second.now.duration(to: second.deadline) == expected)
        #expect(promise.future.progress == 0.4)
        promise.succeed(1)
    }
}

/// A manual clock that hands the test each sleep it is asked for (when it was asked, and until
/// when), then sleeps on ``base``. A sleep that would return at once ends the sleeper with
/// `CancellationError`, so a sampler that would spin stops instead.
struct SleepRecordingClock: Clock {
    struct Sleep: Sendable {
        let now: ManualClock.Instant
        let deadline: ManualClock.Instant
    }

    let base = ManualClock()
    let sleeps: AsyncStream<Sleep>
    private let recorded: AsyncStream<Sleep>.Continuation

    init() { (sleeps, recorded) = AsyncStream.makeStream() }

    var now: ManualClock.Instant { base.now }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: ManualClock.Instant, tolerance: Duration? = nil) async throws {
        let now = base.now
        recorded.yield(Sleep(now: now, deadline: deadline))
        guard now < deadline else { throw CancellationError() }
        try await base.sleep(until: deadline)
    }
}
