import Testing
import FuturesTestSupport
@testable import Futures

@Suite("whenEachComplete")
struct WhenEachCompleteTests {
    @Test func eachMemberReportsItsIndexAndOutcomeAsItCompletes() {
        let promises = (0..<4).map { _ in Promise<Int>() }
        let seen = Recorder<String>()
        promises.map(\.future).whenEachComplete(on: .immediate) { index, outcome in
            seen.append("\(index):\(outcome)")
        }
        promises[2].succeed(20)
        promises[0].fail(TestError(code: 1))
        promises[3].cancel()
        #expect(seen.all == ["2:success(20)", "0:failure(TestError(code: 1))", "3:cancelled"])
        promises[1].succeed(10)
        #expect(seen.all.last == "1:success(10)")
        #expect(seen.count == 4)
    }

    @Test func handlersRunOnTheExecutorAndAreNotConsumers() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let derived = promise.future.map(on: .immediate) { $0 }
        let seen = Recorder<Int>()
        [derived, Future(value: 5)].whenEachComplete(on: executor) { index, _ in seen.append(index) }
        #expect(seen.count == 0, "nothing runs inline on an executor")
        _ = executor.runAll()
        #expect(seen.all == [1])
        derived.cancel()
        #expect(promise.isCancelled, "the handler is an observer, not a consumer")
        _ = executor.runAll()
        #expect(seen.all == [1, 0])
    }

    @Test func anEmptySequenceDoesNothing() {
        let seen = Counter()
        [Future<Int>]().whenEachComplete(on: .immediate) { _, _ in seen.increment() }
        #expect(seen.value == 0)
    }

    @Test func documentedExample() async {
        let arrived = Counter()
        let done = Promise<Void>()
        struct Row: Sendable {
            let shown = Recorder<String>()
            let arrived: Counter
            let done: Promise<Void>
            func show(_ outcome: Outcome<Int>) {
                shown.append("\(outcome)")
                if arrived.increment() == 2 { done.succeed(()) }
            }
        }
        let urls = [1, 2]
        @Sendable func download(_ url: Int) -> Future<Int> { Future(value: url * 10) }
        let rows = [Row(arrived: arrived, done: done), Row(arrived: arrived, done: done)]

        let downloads = urls.map { download($0) }
        downloads.whenEachComplete(on: .main) { index, outcome in
            rows[index].show(outcome)
        }

        _ = await done.future.result
        #expect(rows.map(\.shown.all) == [["success(10)"], ["success(20)"]])
    }
}
