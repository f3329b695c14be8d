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
}
