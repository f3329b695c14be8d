import Dispatch
import Testing
@testable import Futures

@Suite("FutureQueue")
struct FutureQueueTests {
    @Test func runsInOrderWithinTheLimit() {
        let queue = FutureQueue(maxConcurrent: 2)
        let promises = (0..<5).map { _ in Promise<Int>() }
        let started = Recorder<Int>()
        let futures = (0..<5).map { index in
            queue.add { started.append(index); return promises[index].future }
        }
        #expect(started.all == [0, 1])
        #expect(queue.runningCount == 2 && queue.waitingCount == 3)
        promises[1].succeed(1)
        #expect(started.all == [0, 1, 2])
        promises[0].succeed(0)
        #expect(started.all == [0, 1, 2, 3])
        for index in 2..<5 { promises[index].succeed(index) }
        #expect(futures.map { $0.outcome?.value } == [0, 1, 2, 3, 4])
        #expect(queue.runningCount == 0)
    }

    @Test func cancellingAQueuedItemRemovesOnlyThatItem() {
        let queue = FutureQueue(maxConcurrent: 1)
        let promises = (0..<4).map { _ in Promise<Int>() }
        let started = Recorder<Int>()
        weak var weakProbe: Probe?
        var futures: [Future<Int>] = []
        for index in 0..<4 {
            if index == 2 {
                let probe = Probe(2)   // captured by the queued item 2 only
                weakProbe = probe
                futures.append(queue.add {
                    _ = probe
                    started.append(index)
                    return promises[index].future
                })
            } else {
                futures.append(queue.add {
                    started.append(index)
                    return promises[index].future
                })
            }
        }
        #expect(futures[2].cancel())
        #expect(queue.waitingCount == 2)
        #expect(weakProbe == nil, "the removed operation was released at once")
        promises[0].succeed(0)
        promises[1].succeed(1)
        promises[3].succeed(3)
        #expect(started.all == [0, 1, 3])
        #expect(futures[2].outcome?.isCancelled == true)
        #expect(futures[3].outcome?.value == 3)
    }

    @Test func cancellingARunningItemCancelsItsOperationAndStartsTheNext() {
        let queue = FutureQueue(maxConcurrent: 1)
        let first = Promise<Int>(), second = Promise<Int>()
        let a = queue.add { first.future }
        let b = queue.add { second.future }
        a.cancel()
        #expect(first.isCancelled)
        #expect(queue.runningCount == 1, "the second operation started")
        second.succeed(2)
        #expect(b.outcome?.value == 2)
    }

    @Test func addingFromManyThreadsRespectsTheLimit() async throws {
        let queue = FutureQueue(maxConcurrent: 3)
        let inFlight = InFlight()
        let futures = Locked<[Future<Int>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for item in 0..<50 {
                let future = queue.add {
                    inFlight.enter()
                    return Future(on: .global()) { () -> Int in
                        inFlight.leave()
                        return thread * 100 + item
                    }
                }
                futures.withLock { $0.append(future) }
            }
        }
        let values = try await Future.all(futures.withLock { $0 }).value
        #expect(values.count == 200)
        #expect(Set(values).count == 200)
        #expect(inFlight.maximum <= 3)
    }

    @Test func anOperationThatThrowsFailsItsFutureAndFreesItsSlot() async throws {
        let queue = FutureQueue(maxConcurrent: 1)
        let failed = queue.add { () throws -> Future<Int> in throw TestError(code: 3) }
        let next = queue.add { Future(value: 4) }
        #expect((await failed.result.error as? TestError)?.code == 3)
        #expect(try await next.value == 4)
        #expect(queue.runningCount == 0)
    }
}
