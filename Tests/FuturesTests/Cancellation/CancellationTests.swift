import Dispatch
import Testing
import FuturesTestSupport
@testable import Futures

/// Cancellation propagates down to every pending derived future, and up only when every
/// consumer a future ever had has withdrawn.
@Suite("Cancellation propagation")
struct CancellationTests {
    @Test func downToEveryPendingDerivedFuture() {
        let promise = Promise<Int>()
        let source = promise.future
        let derived: [Future<Int>] = [
            source.map(on: .immediate) { $0 },
            source.flatMap(on: .immediate) { Future(value: $0) },
            source.recover(on: .immediate) { _ in 0 },
            source.always(on: .immediate) { _ in },
            source.observe(),
            source.map(on: .immediate) { $0 }.map(on: .immediate) { $0 },
        ]
        #expect(source.cancel())
        for future in derived { #expect(future.outcome?.isCancelled == true) }
    }

    @Test func upWhenTheOnlyConsumerIsCancelled() {
        let promise = Promise<Int>()
        let told = Counter()
        promise.onCancel { told.increment() }
        let derived = promise.future.map(on: .immediate) { $0 + 1 }
        #expect(derived.cancel())
        #expect(promise.isCancelled)
        #expect(told.value == 1)
        #expect(!promise.succeed(1))
    }

    @Test func upOnlyWhenEveryConsumerHasWithdrawn() {
        let promise = Promise<Int>()
        let first = promise.future.map(on: .immediate) { $0 }
        let second = promise.future.flatMap(on: .immediate) { Future(value: $0) }
        first.cancel()
        #expect(promise.future.isPending)
        #expect(second.isPending)
        second.cancel()
        #expect(promise.isCancelled)
    }

    @Test func consumersThatCompletedCountAsConsumersEverHad() {
        // A consumer that is itself cancelled later, after a new consumer came and went, still counts.
        let promise = Promise<Int>()
        let first = promise.future.map(on: .immediate) { $0 }
        let second = promise.future.map(on: .immediate) { $0 }
        second.cancel()
        let third = promise.future.map(on: .immediate) { $0 }
        third.cancel()
        #expect(promise.future.isPending, "`first` still consumes it")
        first.cancel()
        #expect(promise.isCancelled)
    }

    @Test func observersAreNotConsumers() {
        let promise = Promise<Int>()
        let seen = Recorder<String>()
        promise.future.whenComplete(on: .immediate) { seen.append("\($0)") }
        let derived = promise.future.map(on: .immediate) { $0 }
        derived.cancel()
        #expect(promise.isCancelled, "the observer did not keep it alive")
        #expect(seen.all == ["cancelled"])
    }

    @Test func aFutureWithOnlyObserversIsNotCancelledByThem() {
        let promise = Promise<Int>()
        promise.future.whenSuccess(on: .immediate) { _ in }
        let branch = promise.future.observe()
        branch.cancel()
        #expect(promise.future.isPending)
        promise.succeed(1)
        #expect(promise.future.outcome?.value == 1)
    }

    @Test func observeBranchesNeverReachTheSource() {
        let upload = Promise<String>()
        let label = upload.future.observe().map(on: .immediate) { _ in "Done." }
        label.cancel()                       // the screen went away
        #expect(upload.future.isPending)     // the upload goes on
        let again = upload.future.observe().map(on: .immediate) { $0 }
        upload.future.cancel()               // cancelling the upload cancels its observers
        #expect(again.outcome?.isCancelled == true)
    }

    @Test func cancellingAFlatMapThatAdoptedAnObserveBranchLeavesTheSource() {
        // Regression: the merged branch's upstream is not one it consumes.
        let p = Promise<Int>()
        let keep = p.future.map(on: .immediate) { $0 }
        let a = Promise<Int>()
        let d = a.future.flatMap(on: .immediate) { _ in p.future.observe() }
        a.succeed(1)
        d.cancel()
        #expect(p.future.isPending)
        #expect(keep.isPending)
    }

    @Test func upThroughAChain() {
        let promise = Promise<Int>()
        let a = promise.future.map(on: .immediate) { $0 }
        let b = a.map(on: .immediate) { $0 }
        let c = b.recover(on: .immediate) { _ in 0 }
        c.cancel()
        #expect(a.outcome?.isCancelled == true)
        #expect(b.outcome?.isCancelled == true)
        #expect(promise.isCancelled)
    }

    @Test func aFlatMapThatAdoptedIsItsInnerFuturesConsumer() {
        let source = Promise<Int>()
        let inner = Promise<String>()
        let outer = source.future.flatMap(on: .immediate) { _ in inner.future }
        source.succeed(1)
        #expect(outer.isPending)
        outer.cancel()
        #expect(inner.isCancelled, "the adopting future was the inner future's only consumer")
    }

    @Test func anAdoptedInnerFutureWithOtherConsumersSurvives() {
        let source = Promise<Int>()
        let inner = Promise<String>()
        let otherConsumer = inner.future.map(on: .immediate) { $0 }
        let outer = source.future.flatMap(on: .immediate) { _ in inner.future }
        source.succeed(1)
        outer.cancel()
        #expect(inner.future.isPending)
        inner.succeed("still wanted")
        #expect(otherConsumer.outcome?.value == "still wanted")
        #expect(outer.outcome?.isCancelled == true)
    }

    @Test func cancellingTheAdopterBeforeItAdoptsCancelsTheReturnedFuture() {
        let source = Promise<Int>()
        let inner = Promise<String>()
        let outer = Box<Future<String>>()
        outer.value = source.future.flatMap(on: .immediate) { _ in
            outer.value?.cancel()   // cancelled after the closure started, before adoption
            return inner.future
        }
        source.succeed(1)
        #expect(outer.value?.outcome?.isCancelled == true)
        #expect(inner.isCancelled, "the adopter counts as a consumer that withdrew")
    }

    @Test func returningCancelledFromFlatMapStopsTheChain() {
        let recorder = Recorder<String>()
        let end = Future(value: 1)
            .flatMap(on: .immediate) { _ in Future<Int>.cancelled }
            .map(on: .immediate) { value -> Int in recorder.append("map"); return value }
        end.whenFailure(on: .immediate) { _ in recorder.append("failure") }
        end.whenComplete(on: .immediate) { _ in recorder.append("complete") }
        #expect(recorder.all == ["complete"])
    }

    @Test func neverCannotBeCancelledButItsDerivedFuturesCan() {
        #expect(!Future<Int>.never.cancel())
        let derived = Future<Int>.never.map(on: .immediate) { $0 }
        #expect(derived.cancel())
    }

    @Test func producerHandlersRunOnceWhenCancelledFromAnyDirection() {
        let promise = Promise<Int>()
        let runs = Counter()
        promise.onCancel { runs.increment() }
        let a = promise.future.map(on: .immediate) { $0 }
        let b = promise.future.map(on: .immediate) { $0 }
        a.cancel()
        b.cancel()
        promise.cancel()
        promise.future.cancel()
        #expect(runs.value == 1)
    }

    @Test func cancellingAMillionLinkChainFromItsTailReachesItsHead() async {
        await onSmallStackOffThePool {
            let promise = Promise<Int>()
            var future = promise.future
            for _ in 0..<StackSafetyTests.links { future = future.map(on: .immediate) { $0 + 1 } }
            #expect(future.cancel())
            #expect(promise.isCancelled)
        }
    }

    @Test func cancelRacingSucceedHasExactlyOneOutcomeAndHandlersRunOnce() {
        for _ in 0..<500 {
            let promise = Promise<Int>()
            let derived = promise.future.map(on: .immediate) { $0 }
            let completions = Counter()
            let cancelHandlers = Counter()
            promise.onCancel { cancelHandlers.increment() }
            derived.whenComplete(on: .immediate) { _ in completions.increment() }
            let wins = Counter()
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if index == 0 {
                    if promise.succeed(1) { wins.increment() }
                } else {
                    if derived.cancel() { wins.increment() }
                }
            }
            #expect(completions.value == 1)
            #expect(wins.value >= 1)
            if promise.isCancelled {
                #expect(cancelHandlers.value == 1)
                #expect(derived.outcome?.isCancelled == true)
            } else {
                #expect(cancelHandlers.value == 0)
                #expect(promise.future.outcome?.value == 1)
            }
        }
    }

    /// A cancel of a completed future is rejected without reading the callbacks that a thread
    /// running them owns (without the lock, from the moment it took the drain). Here each callback
    /// is registered on the completed future inside another callback, so a drain loop runs: the
    /// registration takes the future's drain, and the loop runs it after the outer callback
    /// returns, while another thread keeps cancelling. Every callback runs once and the outcome
    /// stays; under ThreadSanitizer (in CI) a read of the drain's callbacks is reported when the
    /// two threads meet there, which this interleaving makes possible but not certain.
    @Test func cancellingACompletedFutureLeavesItsDrainAlone() {
        let future = Future(value: 1)
        let runs = Counter()
        let rounds = 20_000
        let bothStarted = DispatchGroup()
        bothStarted.enter()
        bothStarted.enter()
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            bothStarted.leave()
            bothStarted.wait()
            for _ in 0..<rounds {
                if index == 0 {
                    Future(value: ()).whenComplete(on: .immediate) { _ in
                        future.whenComplete(on: .immediate) { _ in runs.increment() }
                    }
                } else {
                    #expect(!future.cancel())
                }
            }
        }
        #expect(runs.value == rounds)
        #expect(future.outcome?.value == 1)
    }

    @Test func withdrawalsRacingFromManyThreadsCancelOnce() {
        for _ in 0..<200 {
            let promise = Promise<Int>()
            let consumers = (0..<8).map { _ in promise.future.map(on: .immediate) { $0 } }
            let handlers = Counter()
            promise.onCancel { handlers.increment() }
            DispatchQueue.concurrentPerform(iterations: consumers.count) { consumers[$0].cancel() }
            #expect(promise.isCancelled)
            #expect(handlers.value == 1)
        }
    }

    /// A producer handler that cancels a consumer sees the consumer's source cancelled when
    /// `cancel()` returns, as it would outside any cancellation: withdrawals nest inline, a few
    /// levels deep.
    @Test func aWithdrawalInsideACancellationHandlerIsDoneWhenItReturns() {
        let outer = Promise<Int>()
        let consumer = outer.future.map(on: .immediate) { $0 }
        let source = Promise<Int>()
        let derived = source.future.map(on: .immediate) { $0 }
        let seen = Locked<Bool?>(nil)
        outer.onCancel {
            derived.cancel()
            seen.withLock { $0 = source.isCancelled }
        }
        #expect(consumer.cancel())
        #expect(seen.withLock { $0 } == true)
    }

    /// Deep in a nest of joins, withdrawals queue behind the outermost loop; the futures they hold
    /// are freed inside that loop, so code their release runs (here, a deinit that cancels another
    /// future) withdraws like any other, and nothing is left queued.
    @Test func whatAQueuedWithdrawalHeldIsFreedInsideTheLoop() {
        final class Canary: Sendable {
            let victim: Future<Int>
            init(_ victim: Future<Int>) { self.victim = victim }
            deinit { victim.cancel() }
        }
        var others: [Promise<Int>] = []
        func nestOfJoins(on future: Future<Int>) -> Future<Int> {
            var nest = future
            for _ in 0..<40 {
                let other = Promise<Int>()
                others.append(other)
                nest = Future.all([nest, other.future]).map(on: .immediate) { $0[0] + $0[1] }
            }
            return nest
        }
        // The canary's future is a nest of its own, so its cancellation queues withdrawals too.
        let victimSource = Promise<Int>()
        let root = Promise<Int>()
        var nest: Future<Int>
        do {
            let canary = Canary(nestOfJoins(on: victimSource.future))
            nest = root.future.map(on: .immediate) { value in withExtendedLifetime(canary) { value } }
        }
        nest = nestOfJoins(on: nest)
        #expect(nest.cancel())
        #expect(root.isCancelled)
        #expect(others.allSatisfy { $0.isCancelled })
        #expect(victimSource.isCancelled, "the canary's future was freed and cancelled its source")
        let context = ThreadContext.current.takeUnretainedValue()
        #expect(context.withdrawalNesting == 0)
        #expect(context.withdrawals.isEmpty)
    }
}

/// A mutable reference for tests that need a closure to see a value assigned after it was made.
final class Box<Value: Sendable>: @unchecked Sendable {
    // Safety: used by single-threaded tests only (set before the closure that reads it runs).
    var value: Value?
}
