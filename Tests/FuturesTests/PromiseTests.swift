import Foundation
import Testing
@testable import Futures

@Suite("Promise")
struct PromiseTests {
    @Test func firstCompletionWinsAndLaterOnesReturnFalse() {
        let promise = Promise<Int>()
        #expect(promise.succeed(1))
        #expect(!promise.succeed(2))
        #expect(!promise.fail(TestError()))
        #expect(!promise.complete(.cancelled))
        #expect(!promise.complete(with: Result<Int, TestError>.success(3)))
        #expect(!promise.complete(with: Future(value: 4)))
        #expect(!promise.cancel())
        #expect(!promise.future.cancel())
        #expect(promise.future.outcome?.value == 1)
    }

    @Test func concurrentCompletionsHaveExactlyOneWinner() {
        for _ in 0..<200 {
            let promise = Promise<Int>()
            let winners = Counter()
            let callbacks = Counter()
            promise.future.whenComplete(on: .immediate) { _ in callbacks.increment() }
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                let won: Bool
                switch index % 4 {
                case 0: won = promise.succeed(index)
                case 1: won = promise.fail(TestError(code: index))
                case 2: won = promise.cancel()
                default: won = promise.future.cancel()
                }
                if won { winners.increment() }
            }
            #expect(winners.value == 1)
            #expect(callbacks.value == 1)
            #expect(promise.future.outcome != nil)
        }
    }

    @Test func adoptionRacingOtherCompletionsHasExactlyOneWinner() {
        for _ in 0..<200 {
            let promise = Promise<Int>()
            let inner = Promise<Int>()
            let winners = Counter()
            DispatchQueue.concurrentPerform(iterations: 4) { index in
                let won: Bool
                switch index {
                case 0: won = promise.complete(with: inner.future)
                case 1: won = promise.succeed(1)
                case 2: won = promise.fail(TestError())
                default: won = promise.complete(with: Result<Int, TestError>.success(3))
                }
                if won { winners.increment() }
            }
            inner.succeed(2)
            #expect(winners.value == 1)
            #expect(promise.future.outcome != nil)
        }
    }

    @Test func aFutureThatAdoptedCanStillBeCancelled() {
        let inner = Promise<Int>()
        let promise = Promise<Int>()
        promise.complete(with: inner.future)
        #expect(promise.future.cancel())
        #expect(promise.future.outcome?.isCancelled == true)
        inner.succeed(1)
        #expect(promise.future.outcome?.isCancelled == true)
    }

    @Test func twoThreadsClosingOneCycleBothFailWithCycle() {
        for _ in 0..<200 {
            let a = Promise<Int>()
            let b = Promise<Int>()
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if index == 0 { a.complete(with: b.future) } else { b.complete(with: a.future) }
            }
            #expect(isCycle(a.future.outcome))
            #expect(isCycle(b.future.outcome))
        }
    }

    @Test func failingWithCancellationErrorCancels() {
        let promise = Promise<Int>()
        promise.fail(CancellationError())
        #expect(promise.future.outcome?.isCancelled == true)
        #expect(promise.isCancelled)
    }

    @Test func completeWithResultAndOutcome() {
        let a = Promise<Int>()
        a.complete(with: Result<Int, TestError>.failure(TestError(code: 2)))
        #expect((a.future.outcome?.error as? TestError)?.code == 2)
        let b = Promise<Int>()
        b.complete(.success(9))
        #expect(b.future.outcome?.value == 9)
    }

    @Test func valueErrorAdapterPrefersErrorAndRejectsNilNil() {
        let a = Promise<Int>()
        a.complete(value: 1, error: nil)
        #expect(a.future.outcome?.value == 1)
        let b = Promise<Int>()
        b.complete(value: 1, error: TestError())
        #expect(b.future.outcome?.error is TestError)
        let c = Promise<Int>()
        c.complete(value: nil, error: nil)
        #expect(c.future.outcome?.error as? FutureError == .invalidCallback)
    }

    @Test func droppedPendingPromiseBreaksWithFileAndLine() {
        var promise: Promise<Int>? = Promise<Int>(); let line = #line
        let future = promise!.future
        let completions = Counter()
        future.whenComplete(on: .immediate) { _ in completions.increment() }
        promise = nil
        guard case .failure(FutureError.brokenPromise(let file, let brokenLine))? = future.outcome else {
            Issue.record("expected a broken promise, got \(String(describing: future.outcome))")
            return
        }
        #expect(file == #fileID)
        #expect(brokenLine == line)
        #expect(completions.value == 1)
    }

    @Test func aBrokenPromiseNamesALineThatDoesNotFitIn32BitsAsTheLargestItCanKeep() {
        var promise: Promise<Int>? = Promise<Int>(line: UInt(UInt32.max) + 5)
        let future = promise!.future
        promise = nil
        guard case .failure(FutureError.brokenPromise(_, let line))? = future.outcome else {
            Issue.record("expected a broken promise, got \(String(describing: future.outcome))")
            return
        }
        #expect(line == Int(UInt32.max))
    }

    @Test func droppedCompletedPromiseChangesNothing() {
        var promise: Promise<Int>? = Promise<Int>()
        let future = promise!.future
        promise!.succeed(1)
        promise = nil
        #expect(future.outcome?.value == 1)
    }

    @Test func promiseThatAdoptedIsNotBrokenWhenDropped() {
        let inner = Promise<Int>()
        var outer: Promise<Int>? = Promise<Int>()
        let future = outer!.future
        outer!.complete(with: inner.future)
        outer = nil
        #expect(future.isPending)
        inner.succeed(5)
        #expect(future.outcome?.value == 5)
    }

    @Test func adoptedPromiseDroppedBreaksTheAdopter() {
        var inner: Promise<Int>? = Promise<Int>()
        let outer = Promise<Int>()
        outer.complete(with: inner!.future)
        inner = nil
        #expect(isBrokenPromise(outer.future.outcome))
    }

    @Test func completeWithFutureAdoptsItsOutcome() {
        let inner = Promise<String>()
        let outer = Promise<String>()
        #expect(outer.complete(with: inner.future))
        #expect(!outer.succeed("too late"))
        #expect(outer.future.isPending)
        inner.succeed("inner")
        #expect(outer.future.outcome?.value == "inner")

        let failed = Promise<String>()
        failed.complete(with: Future(error: TestError()))
        #expect(failed.future.outcome?.error is TestError)
    }

    @Test func adoptingYourselfFailsWithCycle() {
        let promise = Promise<Int>()
        #expect(promise.complete(with: promise.future))
        #expect(isCycle(promise.future.outcome))
    }

    @Test(arguments: [2, 3, 100])
    func adoptionCyclesFailEveryMemberWhenTheyClose(length: Int) {
        let promises = (0..<length).map { _ in Promise<Int>() }
        for index in 0..<(length - 1) {
            promises[index].complete(with: promises[index + 1].future)
            #expect(promises[index].future.isPending, "no cycle yet")
        }
        promises[length - 1].complete(with: promises[0].future)
        for promise in promises {
            #expect(isCycle(promise.future.outcome))
        }
    }

    @Test(arguments: [2, 3, 100])
    func cyclesOfFuturesWithOtherConsumersAlsoFail(length: Int) {
        // Each future has a consumer of its own, so adoption waits instead of merging.
        let promises = (0..<length).map { _ in Promise<Int>() }
        let derived = promises.map { $0.future.map(on: .immediate) { $0 } }
        for index in stride(from: length - 1, to: 0, by: -1) {
            promises[index].complete(with: promises[index - 1].future)
        }
        #expect(promises.allSatisfy { $0.future.isPending })
        promises[0].complete(with: promises[length - 1].future)
        for (promise, consumer) in zip(promises, derived) {
            #expect(isCycle(promise.future.outcome))
            #expect(isCycle(consumer.outcome))
        }
    }

    @Test func aFreedCompletersAddressCannotCompleteAFuture() {
        // Regression: a new object allocated where `never` used to be must not become the
        // completer of a future that adopted `never`.
        for _ in 0..<1_000 {
            let s = Promise<Int>()
            s.complete(with: .never)
            let b = Promise<Int>()
            #expect(b.complete(with: s.future))
            #expect(!b.succeed(42))
            #expect(b.future.isPending)
        }
    }

    @Test func aCancelledLinkInACompressedWaitChainIsNotACycle() {
        // Regression: Y waits on Z, X on Y, and W adopting X compresses X's parent to Z. Y is
        // cancelled inside a callback, so X's cancellation is still queued when Z adopts X: that is
        // no cycle; Z ends cancelled with X.
        let pz = Promise<Int>(), py = Promise<Int>(), px = Promise<Int>(), pw = Promise<Int>()
        let consumers = [pz, py, px].map { $0.future.map(on: .immediate) { $0 } }
        py.complete(with: pz.future)
        px.complete(with: py.future)
        pw.complete(with: px.future)
        Future(value: 0).whenSuccess(on: .immediate) { _ in
            py.future.cancel()
            pz.complete(with: px.future)
        }
        #expect(pz.future.outcome?.isCancelled == true)
        #expect(pw.future.outcome?.isCancelled == true)
        #expect(consumers.allSatisfy { $0.outcome?.isCancelled == true })
    }

    @Test func onCancelRunsWhenTheFutureIsCancelled() {
        let promise = Promise<Int>()
        let runs = Counter()
        promise.onCancel { runs.increment() }
        promise.onCancel { runs.increment() }
        #expect(!promise.isCancelled)
        #expect(promise.future.cancel())
        #expect(promise.isCancelled)
        #expect(runs.value == 2)
        promise.onCancel { runs.increment() }  // already cancelled: inline
        #expect(runs.value == 3)
    }

    @Test func onCancelHandlersAreReleasedWhenTheFutureSucceeds() {
        let promise = Promise<Int>()
        weak var weakProbe: Probe?
        do {
            let probe = Probe()
            weakProbe = probe
            promise.onCancel { _ = probe }
        }
        #expect(weakProbe != nil)
        promise.succeed(1)
        #expect(weakProbe == nil)
        let runs = Counter()
        promise.onCancel { runs.increment() }
        #expect(runs.value == 0)
    }

    @Test func producerCancelCancelsTheFuture() {
        let promise = Promise<Int>()
        let cancelled = Counter()
        promise.future.whenCancelled(on: .immediate) { cancelled.increment() }
        #expect(promise.cancel())
        #expect(promise.future.outcome?.isCancelled == true)
        #expect(cancelled.value == 1)
    }
    @Test func droppedPromiseWhoseCompletionLostBreaksNothing() {
        // The future was cancelled from the consumer side; the promise's completion loses, so the
        // promise is not marked settled, and its deinit finds the future completed under the lock.
        var promise: Promise<Int>? = Promise<Int>()
        let future = promise!.future
        future.cancel()
        #expect(!promise!.succeed(1))
        promise = nil
        #expect(future.outcome?.isCancelled == true)
    }

    @Test func promiseCompletedOnOneThreadAndReleasedOnAnotherIsNotBroken() {
        // The winning completion records that the promise is settled, without a lock; the deinit
        // that reads it may run on another thread (checked under ThreadSanitizer in CI).
        let completer = DispatchQueue(label: "completer")
        let releaser = DispatchQueue(label: "releaser")
        // Only the two blocks hold the promise once this returns: one of them releases it last.
        func start(_ round: Int, in group: DispatchGroup) -> Future<Int> {
            let promise = Promise<Int>()
            completer.async(group: group) { promise.succeed(round) }
            releaser.async(group: group) { _ = promise.isCancelled }
            return promise.future
        }
        for round in 0..<200 {
            let group = DispatchGroup()
            let future = start(round, in: group)
            group.wait()
            #expect(future.outcome?.value == round)
        }
    }
}
