import FuturesTestSupport
import Testing
@testable import Futures

/// A future adopted by another that had no consumer of its own is merged into its adopter. A
/// consumer that arrives on it later is counted apart: the adopted future is still consumed by its
/// adopter, so that consumer's leaving cancels nothing, however it consumed and however it left.
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
}
