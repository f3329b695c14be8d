import Foundation
import Testing
@testable import Futures

@Suite("Token helpers")
struct FutureTokensTests {
    @Test func aPromiseIsCancelledWhenItsTokenIs() {
        let source = CancellationSource()
        let promise = Promise<Int>(cancelledBy: source.token)
        let stopped = Counter()
        promise.onCancel { stopped.increment() }
        #expect(promise.future.isPending)
        source.cancel()
        #expect(promise.isCancelled)
        #expect(promise.future.outcome?.isCancelled == true)
        #expect(stopped.value == 1)
    }

    @Test func anAlreadyCancelledTokenCancelsAtOnceAndNeverDoesNothing() {
        #expect(Promise<Int>(cancelledBy: .cancelled).future.outcome?.isCancelled == true)
        let never = Promise<Int>(cancelledBy: .never)
        #expect(never.future.isPending)
        #expect(never.succeed(1))
    }

    @Test func aCompletedPromiseLeavesNoRegistrationOnItsToken() {
        let source = CancellationSource()
        let core = source.token.core!
        for value in 0..<100 {
            let promise = Promise<Int>(cancelledBy: source.token)
            #expect(core.handlerCount == 1)
            promise.succeed(value)
            #expect(core.handlerCount == 0)
        }
        // A broken promise completes too (it fails), and leaves nothing either.
        do { _ = Promise<Int>(cancelledBy: source.token) }
        #expect(core.handlerCount == 0)
        #expect(!source.token.isCancelled)
    }

    @Test func documentedExample() {
        final class Request: Sendable {
            let stopped = Counter()
            func stop() { stopped.increment() }
        }
        let request = Request()

        let screen = CancellationSource()
        let promise = Promise<Data>(cancelledBy: screen.token)
        promise.onCancel { request.stop() }
        // when the screen closes:
        screen.cancel()

        #expect(request.stopped.value == 1)
        #expect(promise.future.outcome?.isCancelled == true)
    }

    @Test func tokenAndCompletionRaceToOneOutcome() async {
        // Under ThreadSanitizer in CI: the token's handler and the producer race.
        for _ in 0..<500 {
            let source = CancellationSource()
            let promise = Promise<Int>(cancelledBy: source.token)
            let group = DispatchGroup()
            let cancelled = Counter()
            let completed = Counter()
            DispatchQueue.global().async(group: group) { if source.cancel() { cancelled.increment() } }
            DispatchQueue.global().async(group: group) { if promise.succeed(1) { completed.increment() } }
            #expect(group.wait(timeout: .now() + 10) == .success)
            let outcome = promise.future.outcome
            #expect(cancelled.value == 1)
            #expect(completed.value + (outcome?.isCancelled == true ? 1 : 0) == 1, "exactly one of the two ended it")
            #expect(outcome?.value == 1 || outcome?.isCancelled == true)
            #expect(source.token.core!.handlerCount == 0)
        }
    }

    @Test func aCompletionTokenIsCancelledWhenTheFutureCompletesWhateverTheOutcome() {
        for complete in [{ (p: Promise<Int>) in p.succeed(1) }, { p in p.fail(TestError()) }, { p in p.cancel() }] {
            let promise = Promise<Int>()
            let token = promise.future.completionToken
            let fired = Counter()
            token.onCancel { fired.increment() }
            #expect(!token.isCancelled)
            #expect(token.canBeCancelled)
            _ = complete(promise)
            #expect(token.isCancelled)
            #expect(fired.value == 1)
        }
    }

    @Test func aCompletionTokenOfACompletedFutureIsCancelledAndOfNeverNeverIs() {
        #expect(Future(value: 1).completionToken.isCancelled)
        let never = Future<Int>.never.completionToken
        #expect(!never.isCancelled)
        #expect(!never.canBeCancelled, "nothing can ever cancel it")
    }

    @Test func aCompletionTokenDoesNotKeepTheFutureFromBeingCancelled() {
        let promise = Promise<Int>()
        let derived = promise.future.map(on: .immediate) { $0 }
        let token = derived.completionToken
        derived.cancel()
        #expect(promise.isCancelled, "the token's registration is not a consumer")
        #expect(token.isCancelled)
    }

    @Test func documentedCompletionTokenExample() {
        let polls = Counter()
        func runSearch(_ query: String) -> Future<[String]> { Future(value: [query]) }
        func pollSuggestions(until token: CancellationToken) {
            if !token.isCancelled { polls.increment() }
        }
        let query = "futures"

        let search = runSearch(query)
        pollSuggestions(until: search.completionToken)

        #expect(polls.value == 0, "the search had already completed")
    }

    @Test func readingTheCompletionTokenOftenRegistersOnce() {
        let promise = Promise<Int>()
        let first = promise.future.completionToken
        for _ in 0..<1_000 { #expect(promise.future.completionToken == first) }
        #expect(LockTable.withLock(promise.future.storage) { promise.future.storage.callbacks.count } == 1)
        promise.succeed(1)
        #expect(first.isCancelled)
    }

    @Test func aCompletionTokenReadAfterAMergeStillFires() {
        let adopter = Promise<Int>()
        let inner = Promise<Int>()
        let beforeMerge = inner.future.completionToken
        adopter.complete(with: inner.future)  // merged: the token's registration moves along
        let afterMerge = inner.future.completionToken
        inner.succeed(2)
        #expect(beforeMerge.isCancelled)
        #expect(afterMerge.isCancelled)
    }

    @Test func aCancelledTokenCancelsAtOnceEvenInsideATokensHandler() {
        let outer = CancellationSource()
        let observed = Recorder<Bool>()
        outer.token.onCancel {
            // Handlers of a token cancelled inside a handler are queued; this one must not be.
            let promise = Promise<Int>(cancelledBy: .cancelled)
            observed.append(promise.isCancelled)
            observed.append(promise.succeed(5))
        }
        outer.cancel()
        #expect(observed.all == [true, false])
    }

    @Test func aLongLivedTokenKeepsNoFutureThatCanNeverComplete() {
        let source = CancellationSource()
        weak var promised: FutureStorage<Int>?
        weak var derived: FutureStorage<Int>?
        do {
            let promise = Promise<Int>(cancelledBy: source.token)
            promised = promise.future.storage
            promise.complete(with: .never)  // can never complete now: freed once unreferenced
            let fromNever = Future<Int>.never.map(on: .immediate) { $0 }.cancellable(by: source.token)
            derived = fromNever.storage
        }
        #expect(promised == nil)
        #expect(derived == nil)
        #expect(source.token.core!.handlerCount == 0, "the registrations went with the futures")
    }

    /// A future whose completion token was read has a registrant, so an adopter waits on it: each
    /// keeps its own token, and both are cancelled when the adopted future completes.
    @Test func anAdoptedFutureKeepsItsCompletionToken() {
        let adopter = Promise<Int>()
        let inner = Promise<Int>()
        let innerToken = inner.future.completionToken
        adopter.complete(with: inner.future)
        #expect(inner.future.completionToken == innerToken)
        let adopterToken = adopter.future.completionToken
        #expect(adopterToken != innerToken)
        inner.succeed(2)
        #expect(innerToken.isCancelled)
        #expect(adopterToken.isCancelled)
    }

    /// A completion token read on a future after it was merged into its adopter belongs to that
    /// future alone: cancelling the adopter leaves it uncancelled while the future has work to do.
    @Test func aTokenReadOnAMergedFutureIsItsOwn() {
        let adopter = Promise<Int>()
        let inner = Promise<Int>()
        adopter.complete(with: inner.future)  // merged: nothing was registered on `inner` yet
        let innerToken = inner.future.completionToken
        let keep = inner.future.map(on: .immediate) { $0 }
        #expect(adopter.future.cancel())
        #expect(!innerToken.isCancelled)
        #expect(inner.succeed(3))
        #expect(innerToken.isCancelled)
        #expect(keep.outcome?.value == 3)
    }

    @Test func readingTheCompletionTokenStartsADeferredFuture() {
        let started = Counter()
        let deferred = Future<Int>.deferred {
            started.increment()
            return Future(value: 1)
        }
        let token = deferred.completionToken
        #expect(started.value == 1)
        #expect(token.isCancelled)
    }
}
