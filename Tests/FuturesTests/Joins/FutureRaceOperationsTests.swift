import Dispatch
import Testing
@testable import Futures

/// `Future.race(_:until:)`, CollapsingFutures' race of cancellable operations.
@Suite("Racing cancellable operations")
struct FutureRaceOperationsTests {
    /// Operations whose promises and tokens the test controls.
    final class Contenders: Sendable {
        let promises: [Promise<Int>]
        let tokens = Locked<[Int: CancellationToken]>([:])

        init(_ count: Int) { promises = (0..<count).map { _ in Promise<Int>() } }

        var operations: [@Sendable (CancellationToken) -> Future<Int>] {
            promises.indices.map { index in
                { token in
                    self.tokens.withLock { $0[index] = token }
                    return self.promises[index].future
                }
            }
        }

        func token(_ index: Int) -> CancellationToken { tokens.withLock { $0[index]! } }
        var cancelledTokens: [Int] {
            tokens.withLock { tokens in tokens.keys.sorted().filter { tokens[$0]!.isCancelled } }
        }
    }

    @Test func theFirstSuccessWinsAndTheLosersAreCancelled() {
        let until = CancellationSource()
        let contenders = Contenders(3)
        let race = Future.race(contenders.operations, until: until.token)
        #expect(contenders.cancelledTokens.isEmpty, "every operation started with a live token")
        contenders.promises[0].fail(TestError(code: 0))
        #expect(race.isPending, "a failure does not end the race")
        contenders.promises[2].succeed(20)
        #expect(race.outcome?.value == 20)
        #expect(contenders.cancelledTokens == [0, 1], "the losers' tokens")
        #expect(contenders.promises[1].isCancelled, "the race withdrew from the pending loser")
        #expect(!contenders.token(2).isCancelled, "the winner's token lives until `until`")
        until.cancel()
        #expect(contenders.token(2).isCancelled, "`until` ends the winner's lifetime")
        #expect(race.outcome?.value == 20, "a finished race keeps its value")
    }

    @Test func theWinnersTokenOutlivesEveryOtherReference() {
        let until = CancellationSource()
        let contenders = Contenders(2)
        do {
            let race = Future.race(contenders.operations, until: until.token)
            contenders.promises[1].succeed(1)
            #expect(race.outcome?.value == 1)
        }
        #expect(contenders.token(1).canBeCancelled, "`until` keeps the winner's source alive")
        until.cancel()
        #expect(contenders.token(1).isCancelled)
    }

    @Test func everyFailureFailsWithAJoinErrorInInputOrder() {
        let until = CancellationSource()
        let contenders = Contenders(3)
        let race = Future.race(contenders.operations, until: until.token)
        for index in [2, 0, 1] { contenders.promises[index].fail(TestError(code: index)) }
        guard case .failure(let error as JoinError)? = race.outcome else {
            Issue.record("expected a JoinError, got \(String(describing: race.outcome))")
            return
        }
        #expect(error.failures.map(\.index) == [0, 1, 2])
        #expect(error.failures.map { ($0.error as? TestError)?.code } == [0, 1, 2])
        #expect(contenders.cancelledTokens == [0, 1, 2], "nobody won, so nothing lives on")
    }

    @Test func untilCancelsARaceStillRunningAndEveryToken() {
        let until = CancellationSource()
        let contenders = Contenders(2)
        let race = Future.race(contenders.operations, until: until.token)
        until.cancel()
        #expect(race.outcome?.isCancelled == true)
        #expect(contenders.cancelledTokens == [0, 1])
        #expect(contenders.promises.allSatisfy { $0.isCancelled }, "the race was their only consumer")
    }

    @Test func cancellingTheRaceCancelsEveryOperationAndUnregistersFromUntil() {
        let until = CancellationSource()
        let contenders = Contenders(2)
        let race = Future.race(contenders.operations, until: until.token)
        #expect(race.cancel())
        #expect(contenders.cancelledTokens == [0, 1])
        #expect(contenders.promises.allSatisfy { $0.isCancelled })
        #expect(until.token.core?.handlerCount == 0, "nothing is left waiting for `until`")
    }

    @Test func aRaceCancelledAsItsWinnerArrivesLeavesNoTokenAlive() {
        let until = CancellationSource()
        let contenders = Contenders(2)
        let race = Future.race(contenders.operations, until: until.token)
        let trigger = Promise<Void>()
        trigger.future.whenSuccess(on: .immediate) {
            // Inside a drain: the success is recorded by the join after this callback returns,
            // when the race has already been cancelled.
            contenders.promises[0].succeed(42)
            _ = race.cancel()
        }
        trigger.succeed(())
        #expect(race.outcome?.isCancelled == true)
        #expect(contenders.cancelledTokens == [0, 1], "the caller got no value: nothing may live on")
        #expect(until.token.core?.handlerCount == 0)
    }

    @Test func anAlreadyCancelledUntilStartsNothing() {
        let contenders = Contenders(2)
        let race = Future.race(contenders.operations, until: .cancelled)
        #expect(race.outcome?.isCancelled == true)
        #expect(contenders.tokens.withLock { $0.isEmpty })
    }

    @Test func noOperationsFailsWithEmptyInput() {
        let race = Future<Int>.race([], until: .never)
        guard case .failure(FutureError.emptyInput)? = race.outcome else {
            Issue.record("expected emptyInput, got \(String(describing: race.outcome))")
            return
        }
    }

    @Test func racesResolvedFromManyThreadsHaveOneWinner() async {
        for _ in 0..<200 {
            let until = CancellationSource()
            let contenders = Contenders(4)
            let race = Future.race(contenders.operations, until: until.token)
            DispatchQueue.concurrentPerform(iterations: 4) { index in
                contenders.promises[index].succeed(index)
            }
            let winner = try? await race.value
            #expect(winner != nil)
            let losers = contenders.cancelledTokens
            #expect(losers.count == 3 && !losers.contains(winner ?? -1))
        }
    }
}
