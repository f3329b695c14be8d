import FuturesTestSupport
import Synchronization
import Testing
@testable import Futures

/// A future that becomes immortal (it adopts `never`, or waits on or merges a future that did)
/// after others registered on it: they hold it weakly from then on, as they would had they
/// registered later, so a structure nobody references is freed; one that someone references still
/// hears a cancellation.
@Suite("Futures that become immortal")
struct ImmortalityTests {
    final class Captured: Sendable {}

    /// Builds a structure with `build`, drops every reference, and returns whether what the
    /// structure's callbacks captured was freed.
    static func freed(_ build: (Captured) -> Void) -> Bool {
        weak var weakCaptured: Captured?
        do {
            let captured = Captured()
            weakCaptured = captured
            build(captured)
        }
        return weakCaptured == nil
    }

    @Test func aWaiterOnAFutureThatAdoptsNeverIsFreed() {
        let wasFreed = Self.freed { captured in
            let outer = Promise<Int>()
            let inner = Promise<Int>()
            let consumer = inner.future.map(on: .immediate) { $0 }  // so that `outer` waits instead of merging
            outer.future.whenComplete(on: .immediate) { _ in _ = captured }
            #expect(outer.complete(with: inner.future))
            #expect(inner.complete(with: Future<Int>.never))
            _ = consumer
        }
        #expect(wasFreed, "a callback of a structure nobody references was kept")
    }

    @Test func aMergedSetRootedInNeverIsFreed() {
        let wasFreed = Self.freed { captured in
            let outer = Promise<Int>()
            let inner = Promise<Int>()
            outer.future.whenComplete(on: .immediate) { _ in _ = captured }
            #expect(outer.complete(with: inner.future))
            #expect(inner.complete(with: Future<Int>.never))
        }
        #expect(wasFreed, "a callback of a structure nobody references was kept")
    }

    @Test func derivedFuturesOfAFutureThatAdoptsNeverAreFreed() {
        let wasFreed = Self.freed { captured in
            let promise = Promise<Int>()
            let mapped = promise.future.map(on: .immediate) { $0 + 1 }
            let recovered = mapped.recover(on: .immediate) { _ in 0 }
            recovered.whenComplete(on: .immediate) { _ in _ = captured }
            #expect(promise.complete(with: Future<Int>.never))
        }
        #expect(wasFreed, "a callback of a structure nobody references was kept")
    }

    /// Each waits on the next; the last adopts `never`: every one of them becomes immortal in
    /// turn, in a loop, however long the chain.
    @Test func aLongChainOfWaitsOnAFutureThatAdoptsNeverIsFreed() {
        let levels = 10_000
        let wasFreed = Self.freed { captured in
            let bottom = Promise<Int>()
            var inner = bottom.future
            var consumers: [Future<Int>] = []
            for _ in 0..<levels {
                let promise = Promise<Int>()
                consumers.append(inner.map(on: .immediate) { $0 })  // each level waits on the next
                #expect(promise.complete(with: inner))
                inner = promise.future
            }
            inner.whenComplete(on: .immediate) { _ in _ = captured }
            #expect(bottom.complete(with: Future<Int>.never))
            #expect(inner.storage.withState { $0.immortal })
        }
        #expect(wasFreed, "a callback of a structure nobody references was kept")
    }

    /// A waiter someone references still ends when what it waits on is cancelled, after that
    /// became immortal: the waiter's consumer cancels it, it withdraws, and the future it waits
    /// on, left with no consumer, is cancelled; its producer hears it.
    @Test func aReferencedWaiterStillHearsACancellation() {
        let outer = Promise<Int>()
        let inner = Promise<Int>()
        let heard = Mutex(false)
        inner.onCancel { heard.withLock { $0 = true } }
        let consumer = inner.future.map(on: .immediate) { $0 }
        #expect(outer.complete(with: inner.future))
        #expect(inner.complete(with: Future<Int>.never))
        let mapped = outer.future.map(on: .immediate) { $0 }
        #expect(consumer.cancel())
        #expect(mapped.cancel())
        #expect(outer.future.outcome?.isCancelled == true)
        #expect(inner.future.outcome?.isCancelled == true)
        #expect(heard.withLock { $0 })
    }

    /// A producer's cancel handler keeps the future it was added to alive for the consumers that
    /// registered before it adopted `never`: the producer is gone, and a consumer that cancels
    /// still reaches the handler.
    @Test func aProducersCancelHandlerStillHearsAnEarlyConsumerLeave() {
        let heard = Mutex(false)
        let consumer: Future<Int>
        do {
            let promise = Promise<Int>()
            promise.onCancel { heard.withLock { $0 = true } }
            consumer = promise.future.map(on: .immediate) { $0 }
            #expect(promise.complete(with: Future<Int>.never))
        }
        #expect(consumer.cancel())
        #expect(heard.withLock { $0 })
    }

    /// A timeout can still fail with `timedOut` after its source adopted `never`: it does not
    /// become immortal with its source, and neither does what waits on it.
    @Test func aTimeoutOfAFutureThatAdoptsNeverStillTimesOut() async {
        let clock = ManualClock()
        let promise = Promise<Int>()
        let timed = promise.future.timeout(after: .seconds(5), clock: clock)
        let other = timed.map(on: .immediate) { $0 }  // so that `waiter` waits on `timed`
        let waiter = Promise<Int>()
        #expect(waiter.complete(with: timed))
        #expect(promise.complete(with: Future<Int>.never))
        #expect(!timed.storage.withState { $0.immortal })
        #expect(!waiter.future.storage.withState { $0.immortal })
        // And on `never` itself.
        #expect(!Future<Int>.never.timeout(after: .seconds(5), clock: clock).storage.withState { $0.immortal })
        clock.advance(by: .seconds(5))
        let outcome = await waiter.future.result
        #expect(outcome.error as? FutureError == .timedOut)
        _ = other
    }

    /// The same with the producer cancelling: a promise that adopted `never` may still cancel its
    /// future, and the waiter (held by the test) hears it through its weak link.
    @Test func aReferencedWaiterHearsItsSourcesProducerCancel() {
        let outer = Promise<Int>()
        let inner = Promise<Int>()
        let consumer = inner.future.map(on: .immediate) { $0 }
        #expect(outer.complete(with: inner.future))
        #expect(inner.complete(with: Future<Int>.never))
        #expect(inner.cancel())
        #expect(consumer.outcome?.isCancelled == true)
        #expect(outer.future.outcome?.isCancelled == true)
    }
}
