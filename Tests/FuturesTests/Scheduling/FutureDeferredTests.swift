import Dispatch
import Testing
@testable import Futures

/// `Future.deferred` is cold and starts once, on the first demand.
@Suite("Deferred futures")
struct FutureDeferredTests {
    @Test func doesNotStartUntilSomethingNeedsIt() {
        let starts = Counter()
        let promise = Promise<Int>()
        let future = Future<Int>.deferred { starts.increment(); return promise.future }
        #expect(starts.value == 0)
        #expect(future.isPending && future.outcome == nil && future.progress == 0)
        future.whenProgress(on: .immediate) { _ in }
        #expect(starts.value == 0, "reading state and observing progress are not demands")
        let results = Recorder<Int>()
        future.whenSuccess(on: .immediate) { results.append($0) }
        #expect(starts.value == 1)
        promise.succeed(7)
        #expect(results.all == [7])
    }

    @Test func startsOnceForManyDemandsFromManyThreads() async {
        let starts = Counter()
        let future = Future<Int>.deferred { Future(value: starts.increment()) }
        await withTaskGroup(of: Int?.self) { group in
            for _ in 0..<8 {
                group.addTask { try? await future.map(on: .immediate) { $0 }.value }
            }
            for await value in group { #expect(value == 1) }
        }
        #expect(starts.value == 1)
    }

    @Test(arguments: ["map", "observe", "await", "all", "adopt", "whenComplete", "timeout"])
    func everyKindOfConsumerOrObserverStartsIt(kind: String) async throws {
        let starts = Counter()
        let future = Future<Int>.deferred { starts.increment(); return Future(value: 5) }
        let value: Int?
        switch kind {
        case "map": value = try await future.map(on: .immediate) { $0 }.value
        case "observe": value = try await future.observe().value
        case "await": value = try await future.value
        case "all": value = try await Future.all([future]).value.first
        case "adopt":
            let adopter = Promise<Int>()
            adopter.complete(with: future)
            value = try await adopter.future.value
        case "timeout": value = try await future.timeout(after: .seconds(60)).value
        default:
            let results = Recorder<Int>()
            future.whenComplete(on: .immediate) { results.append($0.value!) }
            value = results.all.first
        }
        #expect(value == 5)
        #expect(starts.value == 1)
    }

    @Test func cancelledBeforeItStartsNeverRunsAndReleasesItsWork() {
        weak var probe: Probe?
        let starts = Counter()
        let future: Future<Int> = {
            let captured = Probe()
            probe = captured
            return Future<Int>.deferred { starts.increment(); _ = captured; return Future(value: 1) }
        }()
        #expect(probe != nil)
        #expect(future.cancel())
        #expect(probe == nil, "the unstarted work was released")
        future.whenComplete(on: .immediate) { _ in }
        #expect(starts.value == 0)
        #expect(future.outcome?.isCancelled == true)
    }

    @Test func anUnusedDeferredFutureIsFreed() {
        weak var weakWork: Probe?
        weak var storage: FutureStorage<Int>?
        do {
            let captured = Probe()
            weakWork = captured
            let future = Future<Int>.deferred { _ = captured; return Future(value: 1) }
            storage = future.storage
        }
        #expect(storage == nil && weakWork == nil)
    }

    @Test func cancellingItsConsumerCancelsTheStartedWork() {
        let inner = Promise<Int>()
        let future = Future<Int>.deferred { inner.future }
        let consumer = future.map(on: .immediate) { $0 + 1 }
        #expect(consumer.cancel())
        #expect(inner.isCancelled, "the deferred future and its work had no other consumer")
    }

    @Test func aBodyReturningItsOwnFutureFailsWithCycle() {
        let holder = Locked<Future<Int>?>(nil)
        let future = Future<Int>.deferred { holder.withLock { $0! } }
        holder.withLock { $0 = future }
        let results = Recorder<Outcome<Int>>()
        future.whenComplete(on: .immediate) { results.append($0) }
        guard case .failure(FutureError.cycle)? = results.all.first else {
            Issue.record("expected a cycle, got \(results.all)")
            return
        }
    }

    @Test func runsOnTheDemandingThreadAfterTheRegistrationReturnsControl() {
        // The body runs inside the demanding call but outside every lock: it may use the future.
        let future = Future<Int>.deferred { Future(value: 3) }
        let seen = Recorder<Bool>()
        _ = Future<Int>.deferred {
            seen.append(future.isPending)  // would deadlock if the body ran under a lock
            return future
        }.map(on: .immediate) { $0 }
        #expect(seen.all == [true])
    }

    /// A deferred future whose work returns the next deferred future, 100,000 levels deep.
    static func countdown(_ n: Int) -> Future<Int> {
        Future<Int>.deferred { n == 0 ? Future(value: 0) : countdown(n - 1).map(on: .immediate) { $0 + 1 } }
    }

    @Test func aRecursiveDeferredChainRunsOnASmallStack() async {
        let result = Locked<Int?>(nil)
        await onSmallStackOffThePool {
            let future = Self.countdown(100_000)
            future.whenSuccess(on: .immediate) { value in result.withLock { $0 = value } }
            _ = future  // dropped here: releasing it must not recurse either
        }
        #expect(result.withLock { $0 } == 100_000)
    }

    @Test func aRecursiveDeferredAdoptionChainRunsOnASmallStack() async {
        // Each level's work returns the next level itself: adoption of a deferred future.
        @Sendable func levels(_ n: Int) -> Future<Int> {
            Future<Int>.deferred { n == 0 ? Future(value: 7) : levels(n - 1) }
        }
        let result = Locked<Int?>(nil)
        await onSmallStackOffThePool {
            levels(100_000).whenSuccess(on: .immediate) { value in result.withLock { $0 = value } }
        }
        #expect(result.withLock { $0 } == 7)
    }

    @Test func aRejectedAdoptionDoesNotStartTheDeferredFuture() {
        let starts = Counter()
        let adopter = Promise<Int>()
        adopter.succeed(1)
        let deferred = Future<Int>.deferred { starts.increment(); return Future(value: 2) }
        #expect(!adopter.complete(with: deferred))
        #expect(starts.value == 0)
    }

    /// An observer that does not count as a demand (a tracing span's) waits in the future's
    /// callbacks like any other: many of them on one unstarted deferred future neither nest nor
    /// start it, run in order once something starts it, and go with the future if nothing does.
    @Test func observersThatDoNotStartADeferredFutureWaitInItsCallbacks() async {
        await onSmallStackOffThePool {
            let starts = Counter()
            let seen = Recorder<Int>()
            let future = Future<Int>.deferred { starts.increment(); return Future(value: 5) }
            for index in 0..<20_000 { future.whenCompleteWithoutStarting { _ in seen.append(index) } }
            #expect(starts.value == 0)
            #expect(future.map(on: .immediate) { $0 }.outcome?.value == 5)
            #expect(starts.value == 1)
            #expect(seen.all == Array(0..<20_000))
            // Unstarted and dropped: the observers go with it, in a loop.
            let dropped = Future<Int>.deferred { starts.increment(); return Future(value: 6) }
            for _ in 0..<20_000 { dropped.whenCompleteWithoutStarting { _ in seen.append(-1) } }
        }
    }

    @Test func anObserverThatDoesNotStartADeferredFutureSeesItsCancellation() {
        let starts = Counter()
        let seen = Recorder<Bool>()
        let future = Future<Int>.deferred { starts.increment(); return Future(value: 5) }
        future.whenCompleteWithoutStarting { seen.append($0.isCancelled) }
        #expect(future.cancel())
        #expect(seen.all == [true] && starts.value == 0)
    }
}
