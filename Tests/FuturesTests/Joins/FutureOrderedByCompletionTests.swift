import Dispatch
import Testing
@testable import Futures

@Suite("Ordered by completion")
struct FutureOrderedByCompletionTests {
    @Test func theKthToCompleteIsInSlotK() {
        let promises = (0..<4).map { _ in Promise<Int>() }
        let ordered = promises.map(\.future).orderedByCompletion()
        #expect(ordered.allSatisfy { $0.isPending })
        promises[2].succeed(2)
        promises[0].fail(TestError())
        promises[3].succeed(3)
        #expect(ordered[0].outcome?.value == 2)
        #expect(ordered[1].outcome?.isFailure == true)
        #expect(ordered[2].outcome?.value == 3)
        #expect(ordered[3].isPending)
        promises[1].future.cancel()
        #expect(ordered[3].outcome?.isCancelled == true)
        withExtendedLifetime(promises) {}  // released earlier, a pending promise would break
    }

    @Test func alreadyCompletedFuturesComeFirst() {
        let pending = Promise<Int>()
        let ordered = [pending.future, Future(value: 1)].orderedByCompletion()
        #expect(ordered[0].outcome?.value == 1)
        #expect(ordered[1].isPending)
        pending.succeed(0)
        #expect(ordered[1].outcome?.value == 0)
    }

    @Test func everyOutcomeLandsInExactlyOneSlotUnderRaces() {
        for _ in 0..<100 {
            let promises = (0..<8).map { _ in Promise<Int>() }
            let ordered = promises.map(\.future).orderedByCompletion()
            DispatchQueue.concurrentPerform(iterations: 8) { promises[$0].succeed($0) }
            let values = ordered.compactMap { $0.outcome?.value }
            #expect(values.sorted() == Array(0..<8))
        }
    }

    @Test func outcomesArriveInCompletionOrderAndTheSequenceEnds() async {
        let promises = (0..<3).map { _ in Promise<String>() }
        let outcomes = promises.map(\.future).outcomesInCompletionOrder()
        promises[1].succeed("b")
        promises[2].fail(TestError())
        promises[0].succeed("a")
        var seen: [Int] = []
        for await (index, _) in outcomes { seen.append(index) }
        #expect(seen == [1, 2, 0])
    }

    @Test func anEmptyInputEndsAtOnce() async {
        var count = 0
        for await _ in [Future<Int>]().outcomesInCompletionOrder() { count += 1 }
        #expect(count == 0)
        #expect([Future<Int>]().orderedByCompletion().isEmpty)
    }
}
