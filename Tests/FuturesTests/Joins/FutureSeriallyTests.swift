import Foundation
import Testing
@testable import Futures

/// Tracks how many operations run at once.
final class InFlight: @unchecked Sendable {
    // Safety: fields are only touched under `LockTable.withLock(self)`.
    private var current = 0
    private var highest = 0

    func enter() { LockTable.withLock(self) { current += 1; highest = max(highest, current) } }
    func leave() { LockTable.withLock(self) { current -= 1 } }
    var maximum: Int { LockTable.withLock(self) { highest } }
}

@Suite("Serially and concurrently")
struct FutureSeriallyTests {
    @Test func seriallyStartsEachItemAfterThePreviousSucceeded() {
        let promises = (0..<3).map { _ in Promise<Int>() }
        let started = Recorder<Int>()
        let all = Future<[Int]>.serially(0..<3) { index in
            started.append(index)
            return promises[index].future
        }
        #expect(started.all == [0])
        promises[0].succeed(10)
        #expect(started.all == [0, 1])
        promises[1].succeed(11)
        promises[2].succeed(12)
        #expect(all.outcome?.value == [10, 11, 12])
    }

    @Test func seriallyStopsAtTheFirstFailure() {
        let started = Recorder<Int>()
        let all = Future<[Int]>.serially(0..<5) { index in
            started.append(index)
            return index == 2 ? Future(error: TestError(code: 2)) : Future(value: index)
        }
        #expect((all.outcome?.error as? TestError)?.code == 2)
        #expect(started.all == [0, 1, 2])
    }

    @Test func cancellingSeriallyCancelsTheOperationInFlight() {
        let inFlight = Promise<Int>()
        let started = Counter()
        let all = Future<[Int]>.serially(0..<3) { _ in
            started.increment()
            return inFlight.future
        }
        all.cancel()
        #expect(inFlight.isCancelled)
        #expect(started.value == 1)
    }

    @Test func seriallyOverManyItemsOnASmallStack() async {
        await onSmallStackOffThePool {
            let all = Future<[Int]>.serially(0..<100_000) { Future(value: $0) }
            #expect(all.outcome?.value?.count == 100_000)
            #expect(all.outcome?.value?.last == 99_999)
        }
    }

    @Test func concurrentlyNeverExceedsItsLimitUnderLoad() async throws {
        let inFlight = InFlight()
        let results = try await Future<[Int]>.concurrently(0..<200, limit: 4) { index in
            inFlight.enter()
            return Future(on: .global()) { () -> Int in
                inFlight.leave()
                return index * 2
            }
        }.value
        #expect(results == (0..<200).map { $0 * 2 })
        #expect(inFlight.maximum <= 4)
        #expect(inFlight.maximum >= 1)
    }

    @Test func concurrentlyStartsTheNextItemWhenOneFinishes() {
        let promises = (0..<4).map { _ in Promise<Int>() }
        let started = Recorder<Int>()
        let all = Future<[Int]>.concurrently(0..<4, limit: 2) { index in
            started.append(index)
            return promises[index].future
        }
        #expect(started.all == [0, 1])
        promises[1].succeed(1)
        #expect(started.all == [0, 1, 2])
        promises[0].succeed(0)
        promises[2].succeed(2)
        promises[3].succeed(3)
        #expect(all.outcome?.value == [0, 1, 2, 3])
    }

    @Test func concurrentlyFailFastStartsNothingMore() {
        let promises = (0..<5).map { _ in Promise<Int>() }
        let started = Recorder<Int>()
        let all = Future<[Int]>.concurrently(0..<5, limit: 2) { index in
            started.append(index)
            return promises[index].future
        }
        promises[0].fail(TestError(code: 0))
        #expect((all.outcome?.error as? TestError)?.code == 0)
        #expect(promises[1].isCancelled, "the operation in flight was cancelled")
        #expect(started.all == [0, 1], "no item started after the failure")
    }

    @Test func concurrentlyCollectErrorsRunsEverything() {
        let all = Future<[Int]>.concurrently(0..<6, limit: 3, policy: .collectErrors) { index in
            index.isMultiple(of: 2) ? Future(value: index) : Future(error: TestError(code: index))
        }
        guard case .failure(let error as JoinError)? = all.outcome else {
            Issue.record("expected a JoinError, got \(String(describing: all.outcome))")
            return
        }
        #expect(error.failures.map(\.index) == [1, 3, 5])
    }

    @Test func cancellingConcurrentlyCancelsTheOperationsInFlight() {
        let promises = (0..<4).map { _ in Promise<Int>() }
        let all = Future<[Int]>.concurrently(0..<4, limit: 2) { promises[$0].future }
        all.cancel()
        #expect(promises[0].isCancelled && promises[1].isCancelled)
    }

    @Test func aCancelledConcurrentlyStartsNoFurtherOperation() {
        let started = Counter()
        let promises = (0..<3).map { _ in Promise<Int>() }
        let all = Future<[Int]>.concurrently(0..<10_000, limit: 3) { index in
            started.increment()
            return index < 3 ? promises[index].future : Future(value: index)
        }
        #expect(started.value == 3)
        #expect(all.cancel())
        // Each cancelled operation freed its slot: none of them may start the next item.
        #expect(started.value == 3)
        #expect(promises.allSatisfy { $0.isCancelled })
    }

    @Test func aConcurrentlyThatFailedFastStartsNoFurtherOperationAsTheOthersEnd() {
        let started = Counter()
        let promises = (0..<3).map { _ in Promise<Int>() }
        let all = Future<[Int]>.concurrently(0..<100, limit: 3) { index in
            started.increment()
            return index < 3 ? promises[index].future : Future(value: index)
        }
        promises[0].fail(TestError(code: 1))
        #expect((all.outcome?.error as? TestError)?.code == 1)
        promises[1].succeed(1)  // too late: the slot it frees starts nothing
        #expect(started.value == 3)
    }

    @Test func aCancelledSeriallyStartsNoFurtherOperation() {
        let started = Counter()
        let first = Promise<Int>()
        let all = Future<[Int]>.serially(0..<1_000) { index in
            started.increment()
            return index == 0 ? first.future : Future(value: index)
        }
        #expect(all.cancel())
        #expect(first.isCancelled)
        first.succeed(0)
        #expect(started.value == 1)
    }

    @Test func concurrentlyResolvedFromManyThreads() async throws {
        for _ in 0..<20 {
            let results = try await Future<[Int]>.concurrently(0..<64, limit: 8) { index in
                Future(on: .global()) { index }
            }.value
            #expect(results == Array(0..<64))
        }
    }

    @Test func concurrentlyRunsAsManyAsThereAreProcessorsByDefault() async throws {
        let limit = ProcessInfo.processInfo.activeProcessorCount
        let count = limit + 3
        let promises = (0..<count).map { _ in Promise<Int>() }
        let started = Counter()
        let all = Future<[Int]>.concurrently(0..<count) { index in
            started.increment()
            return promises[index].future
        }
        #expect(started.value == limit, "the first \(limit) start at once, the rest wait")
        for (index, promise) in promises.enumerated() { promise.succeed(index) }
        #expect(try await all.value == Array(0..<count))
        #expect(started.value == count)
    }
}
