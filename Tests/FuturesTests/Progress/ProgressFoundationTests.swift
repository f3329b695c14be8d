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
