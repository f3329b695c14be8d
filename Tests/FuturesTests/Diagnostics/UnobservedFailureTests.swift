import Foundation
import Futures
import FuturesTestSupport
import Testing

/// What counts as reading a failure, for ``FutureEvent/unobservedFailure(_:error:)``: every way a
/// caller gets the failure does; the library's own housekeeping on a future it returns does not.
@Suite struct UnobservedFailureTests {
    @Test func aFailureReadByAwaitingTheValueIsNotReported() async {
        let log = EventScope()
        await log.scope.run {
            let promise = Promise<Int>()
            promise.fail(TrackedTestError())
            await #expect(throws: TrackedTestError.self) { try await promise.future.value }
        }
        #expect(log.recorded.all.isEmpty, "reported: \(log.recorded.all)")
    }

    @Test func aFailureReadByAwaitingTheResultIsNotReported() async {
        let log = EventScope()
        await log.scope.run {
            let promise = Promise<Int>()
            promise.fail(TrackedTestError())
            #expect(await promise.future.result.error is TrackedTestError)
        }
        #expect(log.recorded.all.isEmpty, "reported: \(log.recorded.all)")
    }

    @Test func aFailureReadByWaitingIsNotReported() {
        let log = EventScope()
        log.scope.run {
            let promise = Promise<Int>()
            promise.fail(TrackedTestError())
            #expect(throws: TrackedTestError.self) { try promise.future.wait() }
        }
        #expect(log.recorded.all.isEmpty, "reported: \(log.recorded.all)")
    }

    /// `cancellable(by:)` keeps its registration on the token alive with a callback on its own
    /// result: that callback reads no failure for anyone.
    @Test func aCancellableFailureNobodyReadIsReported() {
        let log = EventScope()
        let source = CancellationSource()
        log.scope.run {
            let promise = Promise<Int>()
            _ = promise.future.cancellable(by: source.token)
            promise.fail(TrackedTestError())
        }
        let events = log.recorded.all
        #expect(events.count == 1, "events: \(events)")
        guard case .unobservedFailure(let description, let error)? = events.first else { return }
        #expect(description.kind == "cancellable")
        #expect(error is TrackedTestError)
    }

    /// A timeout cancels its timer with a callback on its own result: a timed-out future nobody
    /// read is a failure nobody saw.
    @Test func aTimeoutNobodyReadIsReported() async throws {
        let log = EventScope()
        let clock = ManualClock()
        let promise = Promise<Int>()
        log.scope.run {
            _ = promise.future.timeout(after: .seconds(1), clock: clock)
        }
        await clock.waitForSleepers()
        clock.advance(by: .seconds(1))
        // Reported when the timed-out future is freed: by the timer's job, once it has run.
        let event = await log.next()
        guard case .unobservedFailure(let description, let error)? = event else {
            Issue.record("expected an unobserved failure, got \(String(describing: event))")
            return
        }
        #expect(description.kind == "timeout")
        #expect(error as? FutureError == .timedOut)
        #expect(promise.isCancelled, "the timeout withdrew from the promise")
    }

    /// Reading a future while it is pending (its `outcome`, a `wait()` refused inside a callback)
    /// reads no failure, nor does taking its completion token or following a join's progress: a
    /// failure that comes later and nobody reads is reported when the future is freed.
    @Test func readingAPendingFutureOrItsTokenOrAJoinsProgressObservesNothing() {
        let log = EventScope()
        log.scope.run {
            let polled = Promise<Int>()
            #expect(polled.future.outcome == nil)
            let refused = Promise<Int>()
            let waiter = Future(value: 0).map(on: .immediate) { _ in
                #expect(throws: FutureError.blockingWait) { try refused.future.wait() }
            }
            #expect(waiter.outcome?.isSuccess == true)
            let tokened = Promise<Int>()
            _ = tokened.future.completionToken
            let member = Promise<Int>()
            let join = Future.all([member.future])
            _ = join.progressUpdates
            for promise in [polled, refused, tokened, member] { promise.fail(TrackedTestError()) }
            #expect(join.isPending == false)
        }
        // The member's failure was read by the join; the join's, nobody's.
        let reported = log.recorded.all.compactMap { event -> String? in
            if case .unobservedFailure(let future, _) = event { return future.kind }
            return nil
        }
        #expect(reported.sorted() == ["all", "promise", "promise", "promise"], "\(log.recorded.all)")
    }
}
