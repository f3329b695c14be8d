import Testing
import Futures
import FuturesTestSupport

@Suite("ManualClock")
struct ManualClockTests {
    @Test func timeMovesOnlyWhenAdvanced() {
        let clock = ManualClock()
        let start = clock.now
        #expect(clock.now == start)
        clock.advance(by: .seconds(3))
        #expect(start.duration(to: clock.now) == .seconds(3))
    }

    @Test func sleepersWakeInDeadlineOrder() async throws {
        let clock = ManualClock()
        let order = Recorder<Int>()
        let deadlines = [3, 1, 2]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, seconds) in deadlines.enumerated() {
                let deadline = clock.now.advanced(by: .seconds(seconds))
                group.addTask {
                    try await clock.sleep(until: deadline)
                    order.append(index)
                }
            }
            await clock.waitForSleepers(count: 3)
            clock.advance(by: .seconds(1))
            try await group.next()
            clock.advance(by: .seconds(1))
            try await group.next()
            clock.advance(by: .seconds(1))
            try await group.next()
        }
        #expect(order.all == [1, 2, 0])
    }

    @Test func aPassedDeadlineReturnsAtOnce() async throws {
        let clock = ManualClock()
        let deadline = clock.now.advanced(by: .seconds(1))
        clock.advance(by: .seconds(2))
        try await clock.sleep(until: deadline)
        #expect(clock.sleeperCount == 0)
    }

    @Test func cancellingASleeperWakesItWithCancellationError() async {
        let clock = ManualClock()
        let task = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(100))) }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test func aSleeperCancelledBeforeItSleepsDoesNotHang() async {
        let clock = ManualClock()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: clock.now.advanced(by: .seconds(100)))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func gettingStartedExample() async {
        let clock = ManualClock()
        let executor = ManualExecutor()
        let slow = Promise<Int>()
        let guarded = slow.future.timeout(after: .seconds(5), clock: clock)
        let label = guarded.recover(on: executor) { _ in -1 }
        clock.advance(by: .seconds(5))
        _ = await guarded.result            // the timer fired
        executor.runAll()                   // runs the recovery
        #expect(label.outcome?.value == -1)
        #expect(slow.isCancelled)           // the timeout was its only consumer, and withdrew
    }

    @Test func documentedExample() async {
        let clock = ManualClock()
        let slow = Promise<Int>()
        let guarded = slow.future.timeout(after: .seconds(5), clock: clock)
        clock.advance(by: .seconds(5))
        let outcome = await guarded.result
        #expect(outcome.error as? FutureError == .timedOut)
    }
}
