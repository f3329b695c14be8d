import Dispatch
import Testing
@testable import Futures
import FuturesTestSupport

/// `FutureCache` shares fetches, evicts failures, expires values.
@Suite("Future cache")
struct FutureCacheTests {
    /// A fetch the test completes, counting how often it started.
    final class Fetcher: Sendable {
        let promises = Locked<[Promise<Int>]>([])
        var count: Int { promises.withLock { $0.count } }
        func fetch() -> Future<Int> {
            let promise = Promise<Int>()
            promises.withLock { $0.append(promise) }
            return promise.future
        }
        func promise(_ index: Int) -> Promise<Int> { promises.withLock { $0[index] } }
    }

    @Test func sharesARunningFetchAndThenServesTheValue() {
        let cache = FutureCache<String, Int>()
        let fetcher = Fetcher()
        let first = cache.value(for: "a") { fetcher.fetch() }
        let second = cache.value(for: "a") { fetcher.fetch() }
        let other = cache.value(for: "b") { fetcher.fetch() }
        #expect(fetcher.count == 2, "one fetch per key")
        fetcher.promise(0).succeed(1)
        #expect(first.outcome?.value == 1 && second.outcome?.value == 1)
        #expect(other.isPending)
        let third = cache.value(for: "a") { fetcher.fetch() }
        #expect(third.outcome?.value == 1 && fetcher.count == 2, "served from the cache")
    }

    @Test(arguments: [false, true])
    func failuresAndCancellationsAreEvicted(cancel: Bool) {
        let cache = FutureCache<String, Int>()
        let fetcher = Fetcher()
        let first = cache.value(for: "a") { fetcher.fetch() }
        if cancel { fetcher.promise(0).cancel() } else { fetcher.promise(0).fail(TestError()) }
        #expect(cancel ? first.outcome?.isCancelled == true : first.outcome?.isFailure == true)
        #expect(cache.count == 0)
        let second = cache.value(for: "a") { fetcher.fetch() }
        #expect(fetcher.count == 2, "fetched again")
        fetcher.promise(1).succeed(2)
        #expect(second.outcome?.value == 2)
    }

    @Test func theSharedFetchIsCancelledOnlyWhenEveryCallerCancelled() {
        let cache = FutureCache<String, Int>()
        let fetcher = Fetcher()
        let first = cache.value(for: "a") { fetcher.fetch() }
        let second = cache.value(for: "a") { fetcher.fetch() }
        #expect(first.cancel())
        #expect(!fetcher.promise(0).isCancelled, "the second caller still wants it")
        #expect(second.isPending)
        #expect(second.cancel())
        #expect(fetcher.promise(0).isCancelled, "nobody wants it any more")
        #expect(cache.count == 0, "and it was evicted")
        let third = cache.value(for: "a") { fetcher.fetch() }
        #expect(fetcher.count == 2 && third.isPending, "a new caller starts a new fetch")
    }

    @Test func valuesExpireAfterTheirLifetimeFromArrival() {
        let clock = ManualClock()
        let cache = FutureCache<String, Int>(clock: clock)
        let fetcher = Fetcher()
        _ = cache.value(for: "a", expiresAfter: .seconds(10)) { fetcher.fetch() }
        clock.advance(by: .seconds(60))  // the lifetime starts when the value arrives
        fetcher.promise(0).succeed(1)
        clock.advance(by: .seconds(9))
        #expect(cache.value(for: "a") { fetcher.fetch() }.outcome?.value == 1)
        clock.advance(by: .seconds(1))
        let refetched = cache.value(for: "a") { fetcher.fetch() }
        #expect(fetcher.count == 2 && refetched.isPending, "expired: fetched again")
    }

    @Test func removeExpiredDropsOnlyExpiredValues() {
        let clock = ManualClock()
        let cache = FutureCache<String, Int>(clock: clock)
        _ = cache.value(for: "short", expiresAfter: .seconds(1)) { Future(value: 1) }
        _ = cache.value(for: "long", expiresAfter: .seconds(100)) { Future(value: 2) }
        _ = cache.value(for: "forever") { Future(value: 3) }
        clock.advance(by: .seconds(5))
        cache.removeExpired()
        #expect(cache.count == 2)
        cache.removeAll()
        #expect(cache.count == 0)
    }

    @Test func aKeyRemovedWhileFetchingIsNotRefilledByTheOldFetch() {
        let cache = FutureCache<String, Int>()
        let fetcher = Fetcher()
        let old = cache.value(for: "a") { fetcher.fetch() }
        cache.removeValue(for: "a")
        let new = cache.value(for: "a") { fetcher.fetch() }
        fetcher.promise(0).succeed(1)
        #expect(old.outcome?.value == 1, "the old fetch goes on for its callers")
        #expect(new.isPending, "the new caller waits for the new fetch")
        fetcher.promise(1).succeed(2)
        #expect(cache.value(for: "a") { fetcher.fetch() }.outcome?.value == 2)
    }

    @Test func manyThreadsAskingForOneKeyShareOneFetch() async throws {
        let cache = FutureCache<Int, Int>()
        let fetches = Counter()
        let gate = Promise<Int>()
        let futures = Locked<[Future<Int>]>([])
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            let future = cache.value(for: index % 4) { fetches.increment(); return gate.future.map(on: .immediate) { $0 } }
            futures.withLock { $0.append(future) }
        }
        gate.succeed(7)
        let all = futures.withLock { $0 }
        #expect(fetches.value == 4)
        #expect(try await Future.all(all).value == Array(repeating: 7, count: 64))
    }

    @Test func aCallerWhoDidNotCancelNeverGetsACancelledFuture() async {
        // Per key, one caller asks while another asks and cancels at once, from two threads.
        let cache = FutureCache<Int, Int>()
        let fetches = Locked<[Promise<Int>]>([])
        let kept = Locked<[Future<Int>]>([])
        DispatchQueue.concurrentPerform(iterations: 4_000) { index in
            let future = cache.value(for: index / 2) {
                let promise = Promise<Int>()
                fetches.withLock { $0.append(promise) }
                return promise.future
            }
            if index % 2 == 0 { kept.withLock { $0.append(future) } } else { future.cancel() }
        }
        for promise in fetches.withLock({ $0 }) { promise.succeed(1) }
        var cancelled = 0
        for future in kept.withLock({ $0 }) where await future.result.isCancelled { cancelled += 1 }
        #expect(cancelled == 0)
    }

    @Test func aDroppedCacheReleasesItsEntriesWhileFetchesRun() {
        weak var weakCache: FutureCache<Int, Int>?
        let fetcher = Fetcher()
        let future: Future<Int>
        do {
            let cache = FutureCache<Int, Int>()
            weakCache = cache
            future = cache.value(for: 1) { fetcher.fetch() }
        }
        #expect(weakCache == nil)
        fetcher.promise(0).succeed(3)
        #expect(future.outcome?.value == 3)
    }
}
