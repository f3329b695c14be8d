import FuturesTestSupport
import Testing
@testable import Futures

/// A future adopted by another that had no registrant is merged into its adopter. A registrant
/// that arrives on it later splits it off again: the adopted future is one of the consumers of it,
/// the adopter another, so neither's leaving, however it consumed and however it left, cancels
/// what the other still needs.
@Suite("Consumers of a merged future")
struct MergedFutureConsumerTests {
    /// An adopter `outer` that merged `inner`, which nobody else consumes yet.
    private static func merged() -> (inner: Promise<Int>, outer: Promise<Int>) {
        let inner = Promise<Int>()
        let outer = Promise<Int>()
        #expect(outer.complete(with: inner.future))
        return (inner, outer)
    }

    private static func expectBothPending(_ inner: Promise<Int>, _ outer: Promise<Int>) {
        #expect(outer.future.isPending, "the adopter still consumes the adopted future")
        #expect(!inner.isCancelled, "the adopted future's producer was told to stop")
        #expect(inner.succeed(7))
        #expect(outer.future.outcome?.value == 7)
    }

    @Test func aLaterDerivedFutureThatIsCancelledLeavesTheAdopterAlone() {
        let (inner, outer) = Self.merged()
        let later = inner.future.map(on: .immediate) { $0 }
        #expect(later.cancel())
        Self.expectBothPending(inner, outer)
    }

    @Test func aLaterJoinThatIsCancelledLeavesTheAdopterAlone() {
        let (inner, outer) = Self.merged()
        let other = Promise<Int>()
        let join = Future.all([inner.future, other.future])
        #expect(join.cancel())
        #expect(other.isCancelled, "the join's other member had no other consumer")
        Self.expectBothPending(inner, outer)
    }

    @Test func aLaterTimeoutThatFiresLeavesTheAdopterAlone() async {
        let (inner, outer) = Self.merged()
        let clock = ManualClock()
        let timed = inner.future.timeout(after: .seconds(1), clock: clock)
        clock.advance(by: .seconds(1))
        #expect(await timed.result.error as? FutureError == .timedOut)
        Self.expectBothPending(inner, outer)
    }

    @Test func aLaterTaskThatIsCancelledLeavesTheAdopterAlone() async throws {
        let (inner, outer) = Self.merged()
        let started = Promise<Void>()
        let waiting = Task {
            started.succeed(())
            return await inner.future.result
        }
        try await started.future.value
        waiting.cancel()
        #expect(await waiting.value.isCancelled)
        Self.expectBothPending(inner, outer)
    }

    @Test func aSecondAdopterThatIsCancelledLeavesTheFirstAlone() {
        let (inner, outer) = Self.merged()
        let second = Promise<Int>()
        #expect(second.complete(with: inner.future))
        #expect(second.future.cancel())
        Self.expectBothPending(inner, outer)
    }

    @Test func aPromiseCancelledFirstLeavesAnAdoptedFutureItIsGivenAlone() {
        let (inner, outer) = Self.merged()
        let cancelled = Promise<Int>()
        #expect(cancelled.future.cancel())
        #expect(!cancelled.complete(with: inner.future))
        Self.expectBothPending(inner, outer)
    }

    @Test func theAdoptersOwnConsumersLeavingFirstThenTheLaterOneCancelsBoth() {
        let (inner, outer) = Self.merged()
        let own = outer.future.map(on: .immediate) { $0 }
        let later = inner.future.map(on: .immediate) { $0 }
        #expect(own.cancel())
        #expect(later.cancel())
        #expect(outer.future.outcome?.isCancelled == true, "every consumer the adopter had has left")
        #expect(inner.isCancelled)
    }

    @Test func theLaterConsumerLeavingFirstThenTheAdoptersOwnCancelsBoth() {
        let (inner, outer) = Self.merged()
        let own = outer.future.map(on: .immediate) { $0 }
        let later = inner.future.map(on: .immediate) { $0 }
        #expect(later.cancel())
        #expect(outer.future.isPending)
        #expect(own.cancel())
        #expect(outer.future.outcome?.isCancelled == true)
        #expect(inner.isCancelled)
    }

    @Test func aLaterConsumerThatStaysKeepsTheAdoptedFutureGoing() {
        let (inner, outer) = Self.merged()
        let later = inner.future.map(on: .immediate) { $0 + 1 }
        #expect(inner.succeed(1))
        #expect(later.outcome?.value == 2)
        #expect(outer.future.outcome?.value == 1)
    }

    // MARK: The adopter leaves first

    @Test func cancellingTheAdopterLeavesAnAdoptedFutureWithALaterConsumer() {
        let (inner, outer) = Self.merged()
        let told = Counter()
        inner.onCancel { told.increment() }
        let later = inner.future.map(on: .immediate) { $0 + 1 }
        #expect(outer.future.cancel())
        #expect(outer.future.outcome?.isCancelled == true)
        #expect(inner.future.isPending, "another consumer still needs the adopted future")
        #expect(later.isPending)
        #expect(told.value == 0, "the adopted future's producer was told to stop")
        #expect(inner.succeed(1), "the producer still completes its future, through its link")
        #expect(later.outcome?.value == 2)
        #expect(outer.future.outcome?.isCancelled == true)
    }

    @Test func cancellingTheAdopterLeavesALaterObserverToTheAdoptedFuture() {
        let (inner, outer) = Self.merged()
        let seen = Recorder<Int?>()
        inner.future.whenComplete(on: .immediate) { seen.append($0.value) }
        let keep = inner.future.map(on: .immediate) { $0 }
        #expect(outer.future.cancel())
        #expect(seen.all.isEmpty, "the observer heard its adopter's cancellation")
        #expect(inner.succeed(5))
        #expect(seen.all == [5])
        #expect(keep.outcome?.value == 5)
    }

    @Test func anObserverAloneDoesNotKeepTheAdoptedFutureFromBeingCancelled() {
        let (inner, outer) = Self.merged()
        let seen = Recorder<Bool>()
        inner.future.whenComplete(on: .immediate) { seen.append($0.isCancelled) }
        #expect(outer.future.cancel())
        #expect(inner.isCancelled, "nothing but the adopter consumed the adopted future")
        #expect(seen.all == [true])
    }

    @Test func theLaterConsumerLeavingAfterTheAdopterCancelsTheAdoptedFuture() {
        let (inner, outer) = Self.merged()
        let told = Counter()
        inner.onCancel { told.increment() }
        let later = inner.future.map(on: .immediate) { $0 }
        #expect(outer.future.cancel())
        #expect(told.value == 0)
        #expect(later.cancel())
        #expect(inner.isCancelled)
        #expect(told.value == 1)
        #expect(!inner.succeed(1))
    }

    @Test func theAdoptersProducerIsToldAndTheAdoptedOnesIsNot() {
        let outer = Promise<Int>()
        let outerTold = Counter()
        outer.onCancel { outerTold.increment() }
        let inner = Promise<Int>()
        let innerTold = Counter()
        inner.onCancel { innerTold.increment() }
        #expect(outer.complete(with: inner.future))
        let later = inner.future.map(on: .immediate) { $0 }
        #expect(outer.future.cancel())
        #expect(outerTold.value == 1)
        #expect(innerTold.value == 0)
        #expect(later.cancel())
        #expect(innerTold.value == 1)
        #expect(outerTold.value == 1)
    }

    @Test func aLaterProgressReaderHearsTheAdoptedFuturesOwnProgress() {
        let inner = Promise<Int>()
        let combined = Future(value: 1).flatMap(on: .immediate) { _ in inner.future }
        let combinedReports = Recorder<Double>()
        combined.whenProgress(on: .immediate) { combinedReports.append($0) }
        inner.progress = 0.5
        #expect(combined.progress == 0.75)
        #expect(inner.future.progress == 0.5, "a merged future reported its adopter's progress")
        let reports = Recorder<Double>()
        inner.future.whenProgress(on: .immediate) { reports.append($0) }
        inner.progress = 0.8
        #expect(reports.all == [0.5, 0.8])
        #expect(combined.progress == 0.9)
        #expect(combinedReports.all == [0.75, 0.9])
        #expect(inner.succeed(1))
        #expect(reports.all == [0.5, 0.8, 1])
        #expect(combinedReports.all == [0.75, 0.9, 1])
    }

    /// A chain of three merged futures, `top` ← `middle` ← `bottom`: consumers at two depths each
    /// keep what they consume when the ones above them leave.
    @Test func consumersAtTwoDepthsEachKeepTheirFuture() {
        let top = Promise<Int>(), middle = Promise<Int>(), bottom = Promise<Int>()
        #expect(top.complete(with: middle.future))
        #expect(middle.complete(with: bottom.future))
        let onBottom = bottom.future.map(on: .immediate) { $0 * 10 }
        let onMiddle = middle.future.map(on: .immediate) { $0 * 100 }
        #expect(top.future.cancel())
        #expect(middle.future.isPending)
        #expect(onMiddle.cancel())
        #expect(middle.isCancelled, "its last consumer left")
        #expect(bottom.future.isPending, "still consumed by `onBottom`")
        #expect(bottom.succeed(2))
        #expect(onBottom.outcome?.value == 20)
        #expect(top.future.outcome?.isCancelled == true)
    }

    @Test func aConsumerBelowTheOnlyOneLeftKeepsTheBottomWhenTheMiddleGoes() {
        let top = Promise<Int>(), middle = Promise<Int>(), bottom = Promise<Int>()
        #expect(top.complete(with: middle.future))
        #expect(middle.complete(with: bottom.future))
        let onBottom = bottom.future.map(on: .immediate) { $0 }
        #expect(top.future.cancel())
        #expect(middle.isCancelled, "nothing but `top` consumed it")
        #expect(bottom.future.isPending)
        #expect(bottom.succeed(4))
        #expect(onBottom.outcome?.value == 4)
    }

    @Test func everythingSucceedsTogetherAfterSplitsAtTwoDepths() {
        let top = Promise<Int>(), middle = Promise<Int>(), bottom = Promise<Int>()
        #expect(top.complete(with: middle.future))
        #expect(middle.complete(with: bottom.future))
        let onBottom = bottom.future.map(on: .immediate) { $0 + 1 }
        let onMiddle = middle.future.map(on: .immediate) { $0 + 2 }
        let onTop = top.future.map(on: .immediate) { $0 + 3 }
        #expect(bottom.succeed(0))
        #expect([onBottom.outcome?.value, onMiddle.outcome?.value, onTop.outcome?.value] == [1, 2, 3])
    }

    @Test func aFutureMergedAfterASplitStillCompletesThroughTheForward() {
        let outer = Promise<Int>(), inner = Promise<Int>(), deeper = Promise<Int>()
        #expect(outer.complete(with: inner.future))
        let later = inner.future.map(on: .immediate) { $0 }
        #expect(inner.complete(with: deeper.future), "the adopted future's own producer adopts in turn")
        #expect(outer.future.cancel())
        #expect(deeper.future.isPending)
        #expect(deeper.succeed(8))
        #expect(later.outcome?.value == 8)
    }

    @Test func aRecursiveLoopStillRunsInOneState() {
        // A loop of adoptions nobody else registers on keeps merging: the bottom completes the top.
        let top = Promise<Int>()
        var current = top
        for _ in 0..<1_000 {
            let next = Promise<Int>()
            #expect(current.complete(with: next.future))
            current = next
        }
        let reader = top.future.map(on: .immediate) { $0 }
        #expect(current.succeed(9))
        #expect(reader.outcome?.value == 9)
    }
}
