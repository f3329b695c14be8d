import Testing
@testable import Futures

@Suite("Future")
struct FutureTests {
    @Test func readyMadeFutures() {
        #expect(Future(value: 1).outcome?.value == 1)
        #expect(Future<Int>(error: TestError()).outcome?.error is TestError)
        #expect(Future<Int>(error: CancellationError()).outcome?.isCancelled == true)
        #expect(Future<Int>(outcome: .cancelled).outcome?.isCancelled == true)
        #expect(Future<Int>.cancelled.outcome?.isCancelled == true)
        #expect(!Future(value: 1).isPending)
    }

    @Test func promiseClosureInitialiserRunsInlineAndCatches() {
        var ran = false
        let future = Future<Int> { promise in
            ran = true
            promise.succeed(3)
        }
        #expect(ran)
        #expect(future.outcome?.value == 3)
        let failed = Future<Int> { _ in throw TestError() }
        #expect(failed.outcome?.error is TestError)
    }

    @Test func promiseClosureInitialiserWrapsCallbackApis() {
        func legacy(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) { completion(nil, TestError()) }
        let future = Future<Int> { promise in legacy { value, error in promise.complete(value: value, error: error) } }
        #expect(future.outcome?.error is TestError)
    }

    @Test func pendingStateAndCancel() {
        let promise = Promise<Int>()
        let future = promise.future
        #expect(future.isPending)
        #expect(future.outcome == nil)
        #expect(future.cancel())
        #expect(!future.isPending)
        #expect(future.outcome?.isCancelled == true)
        #expect(!future.cancel())
        #expect(!promise.succeed(1))
    }

    @Test func cancelReleasesSuccessAndFailureCallbacksAndRunsCompletionCallbacks() {
        let promise = Promise<Int>()
        let recorder = Recorder<String>()
        weak var weakProbe: Probe?
        do {
            let probe = Probe()
            weakProbe = probe
            promise.future.whenSuccess(on: .immediate) { _ in _ = probe; recorder.append("success") }
            promise.future.whenFailure(on: .immediate) { _ in _ = probe; recorder.append("failure") }
        }
        promise.future.whenCancelled(on: .immediate) { recorder.append("cancelled") }
        promise.future.whenComplete(on: .immediate) { recorder.append("complete \($0)") }
        #expect(weakProbe != nil)
        promise.future.cancel()
        #expect(weakProbe == nil)
        #expect(recorder.all == ["cancelled", "complete cancelled"])
    }

    @Test func cancelCancelsDerivedFutures() {
        let promise = Promise<Int>()
        let derived = promise.future.map(on: .immediate) { $0 + 1 }
        let further = derived.flatMap(on: .immediate) { Future(value: $0) }
        promise.future.cancel()
        #expect(derived.outcome?.isCancelled == true)
        #expect(further.outcome?.isCancelled == true)
    }

    @Test func neverStoresNoCallbacksAndCannotBeCancelled() {
        let never = Future<Int>.never
        weak var weakProbe: Probe?
        do {
            let probe = Probe()
            weakProbe = probe
            never.whenComplete(on: .immediate) { _ in _ = probe }
        }
        #expect(weakProbe == nil, "the callback was dropped at once")
        #expect(!never.cancel())
        #expect(never.isPending)
    }

    @Test func futuresDerivedFromNeverAreOrdinaryPendingFutures() {
        let derived = Future<Int>.never.map(on: .immediate) { $0 }
        #expect(derived.isPending)
        #expect(derived.cancel())
        #expect(derived.outcome?.isCancelled == true)
    }

    @Test func anUnreferencedPendingFutureIsFreed() {
        weak var weakStorage: FutureStorage<Int>?
        do {
            let derived = Future<Int>.never.map(on: .immediate) { $0 + 1 }.map(on: .global()) { $0 }
            weakStorage = derived.storage
            #expect(weakStorage != nil)
        }
        #expect(weakStorage == nil)
    }

    @Test func aDroppedPromiseAndFutureAreFreed() {
        weak var weakStorage: FutureStorage<Int>?
        do {
            let promise = Promise<Int>()
            promise.future.whenComplete(on: .immediate) { _ in }
            weakStorage = promise.storage
        }
        #expect(weakStorage == nil)
    }

    @Test func aCompletedDerivedFutureNoLongerHoldsItsSource() {
        weak var weakSource: FutureStorage<Int>?
        let derived: Future<Int>
        do {
            let promise = Promise<Int>()
            weakSource = promise.storage
            derived = promise.future.map(on: .immediate) { $0 + 1 }
            promise.succeed(1)
        }
        #expect(derived.outcome?.value == 2)
        #expect(weakSource == nil)
    }

    @Test func aFutureWaitingOnANeverRootedFutureIsFreedWhenUnreferenced() {
        weak var weakAdopter: FutureStorage<Int>?
        weak var weakTarget: FutureStorage<Int>?
        do {
            let target = Future<Int>.never.map(on: .immediate) { $0 }
            let otherConsumer = target.map(on: .immediate) { $0 }   // so adoption waits instead of merging
            let adopter = Promise<Int>()
            adopter.complete(with: target)
            weakAdopter = adopter.storage
            weakTarget = target.storage
            _ = otherConsumer
        }
        #expect(weakAdopter == nil)
        #expect(weakTarget == nil)
    }

    @Test func cancellingAConsumerOfANeverRootedFutureStillReachesIt() {
        let target = Future<Int>.never.map(on: .immediate) { $0 }
        let consumer = target.map(on: .immediate) { $0 }
        consumer.cancel()
        #expect(target.outcome?.isCancelled == true)
    }

    @Test func descriptionShowsTheState() {
        #expect(Future(value: 1).description == "Future<Int>(success(1))")
        let promise = Promise<Int>()
        #expect(promise.future.description == "Future<Int>(pending)")
        #expect(Future<Int>.never.description == "Future<Int>(never)")
        #expect(Future<Int>.cancelled.description == "Future<Int>(cancelled)")
    }
}
