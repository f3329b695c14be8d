import Dispatch
import Testing
@testable import Futures

/// Joins with policies, and races.
@Suite("Joins and races")
struct FutureAllTests {
    @Test func allSucceedsWithValuesInInputOrder() {
        let promises = (0..<5).map { _ in Promise<Int>() }
        let all = Future.all(promises.map(\.future))
        for index in [3, 1, 4, 0, 2] { promises[index].succeed(index * 10) }
        #expect(all.outcome?.value == [0, 10, 20, 30, 40])
    }

    /// A deferred member starts only while the join is undecided: once an earlier member's work
    /// (run as the join registers on it) has failed a fail-fast join, or a member that completed on
    /// another thread has decided it, a later deferred member is withdrawn from without running.
    @Test func aLaterDeferredMemberDoesNotStartOnceTheJoinIsDecided() {
        let started = Counter()
        let failing = Future<Int>.deferred { Future(error: TestError(code: 1)) }
        let later = Future<Int>.deferred {
            started.increment()
            return Future(value: 1)
        }
        let all = Future.all([failing, later])
        #expect(all.outcome?.error as? TestError == TestError(code: 1))
        #expect(started.value == 0)
        #expect(later.outcome?.isCancelled == true, "its only consumer left")

        let decided = Promise<Int>()
        decided.fail(TestError(code: 2))
        let afterDecided = Future<Int>.deferred {
            started.increment()
            return Future(value: 2)
        }
        let pending = Promise<Int>()
        let joined = Future.all([pending.future, decided.future, afterDecided])
        #expect(joined.outcome?.error as? TestError == TestError(code: 2))
        #expect(started.value == 0)
        #expect(pending.future.outcome?.isCancelled == true)
    }

    @Test func emptyInputSucceedsWithNothing() {
        #expect(Future<[Int]>.all([Future<Int>]()).outcome?.value == [])
        #expect(Future<[Outcome<Int>]>.allSettled([Future<Int>]()).outcome?.value?.isEmpty == true)
    }

    @Test func failFastFailsAtOnceAndCancelsMembersOnlyItConsumes() {
        let first = Promise<Int>(), second = Promise<Int>(), shared = Promise<Int>()
        let otherConsumer = shared.future.map(on: .immediate) { $0 }
        let all = Future.all([first.future, second.future, shared.future], policy: .failFast)
        first.fail(TestError(code: 1))
        #expect((all.outcome?.error as? TestError)?.code == 1)
        #expect(second.isCancelled, "only the join consumed it")
        #expect(shared.future.isPending, "another consumer still wants it")
        _ = otherConsumer
    }

    /// A member that failed before the call decides the join while it registers: the pending
    /// members before it (registered) and after it (never registered) are left alike, cancelled
    /// where only the join wanted them, their entries gone where another consumer stays.
    @Test func aMemberFailedBeforeTheCallLeavesThePendingMembersOnEitherSide() {
        let before = Promise<Int>(), sharedBefore = Promise<Int>(), after = Promise<Int>(), sharedAfter = Promise<Int>()
        let keepers = [sharedBefore, sharedAfter].map { $0.future.map(on: .immediate) { $0 } }
        let members = [before.future, sharedBefore.future, Future(error: TestError(code: 7)), after.future, sharedAfter.future]
        let all = Future.all(members, policy: .failFast)
        #expect((all.outcome?.error as? TestError)?.code == 7)
        #expect(before.isCancelled && after.isCancelled, "only the join consumed them")
        #expect(sharedBefore.future.isPending && sharedAfter.future.isPending, "another consumer still wants them")
        #expect(entryCount(sharedBefore.future) == 1 && entryCount(sharedAfter.future) == 1)
        #expect(keepers.allSatisfy { $0.outcome == nil })
    }

    @Test func collectErrorsWaitsAndReportsEveryFailureInInputOrder() {
        let promises = (0..<4).map { _ in Promise<Int>() }
        let all = Future.all(promises.map(\.future), policy: .collectErrors)
        promises[3].fail(TestError(code: 3))
        promises[1].fail(TestError(code: 1))
        promises[0].succeed(0)
        #expect(all.isPending)
        promises[2].succeed(2)
        guard case .failure(let error as JoinError)? = all.outcome else {
            Issue.record("expected a JoinError, got \(String(describing: all.outcome))")
            return
        }
        #expect(error.failures.map(\.index) == [1, 3])
        #expect(error.failures.map { ($0.error as? TestError)?.code } == [1, 3])
    }

    @Test func ignoreErrorsKeepsTheSuccessesInOrder() {
        let promises = (0..<4).map { _ in Promise<Int>() }
        let all = Future.all(promises.map(\.future), policy: .ignoreErrors)
        promises[0].succeed(0)
        promises[1].fail(TestError())
        promises[2].succeed(2)
        promises[3].fail(TestError())
        #expect(all.outcome?.value == [0, 2])
    }

    @Test func aMemberCancelledFromOutsideCountsAsACancelledMemberFailure() {
        let a = Promise<Int>(), b = Promise<Int>()
        let all = Future.all([a.future, b.future], policy: .collectErrors)
        a.future.cancel()
        b.succeed(1)
        guard case .failure(let error as JoinError)? = all.outcome else {
            Issue.record("expected a JoinError")
            return
        }
        #expect(error.failures.count == 1)
        #expect(error.failures.first?.index == 0)
        #expect(error.failures.first?.error as? FutureError == .cancelledMember)
    }

    @Test func cancellingAJoinCancelsItsMembersAsTheirConsumer() {
        let a = Promise<Int>(), b = Promise<Int>(), shared = Promise<Int>()
        let otherConsumer = shared.future.map(on: .immediate) { $0 }
        let all = Future.all([a.future, b.future, shared.future])
        all.cancel()
        #expect(a.isCancelled && b.isCancelled)
        #expect(shared.future.isPending)
        _ = otherConsumer
    }

    @Test func allSettledReportsEveryOutcome() {
        let a = Promise<Int>(), b = Promise<Int>(), c = Promise<Int>()
        let settled = Future.allSettled([a.future, b.future, c.future])
        a.succeed(1)
        b.fail(TestError())
        c.future.cancel()
        let outcomes = settled.outcome?.value
        #expect(outcomes?.count == 3)
        #expect(outcomes?[0].value == 1)
        #expect(outcomes?[1].isFailure == true)
        #expect(outcomes?[2].isCancelled == true)
    }

    @Test func allOrNilReplacesFailuresWithNil() {
        let a = Promise<Int>(), b = Promise<Int>()
        let values = Future.allOrNil([a.future, b.future])
        b.fail(TestError())
        a.succeed(7)
        #expect(values.outcome?.value == [7, nil])
    }

    @Test func allOfAThousandFuturesResolvedFromTwoThreads() {
        for _ in 0..<20 {
            let promises = (0..<1_000).map { _ in Promise<Int>() }
            let all = Future.all(promises.map(\.future))
            DispatchQueue.concurrentPerform(iterations: 2) { half in
                for index in stride(from: half, to: promises.count, by: 2) { promises[index].succeed(index) }
            }
            #expect(all.outcome?.value == Array(0..<1_000))
        }
    }

    // MARK: race / any

    @Test func raceTakesTheFirstOutcomeAndWithdrawsFromTheLosers() {
        let a = Promise<Int>(), b = Promise<Int>()
        let winner = Future.race([a.future, b.future])
        b.fail(TestError(code: 2))
        #expect((winner.outcome?.error as? TestError)?.code == 2)
        #expect(a.isCancelled, "the loser had no other consumer")
    }

    @Test func raceIgnoresMembersCancelledFromOutsideUnlessAllAre() {
        let a = Promise<Int>(), b = Promise<Int>()
        let winner = Future.race([a.future, b.future])
        a.future.cancel()
        #expect(winner.isPending)
        b.succeed(5)
        #expect(winner.outcome?.value == 5)

        let c = Promise<Int>(), d = Promise<Int>()
        let cancelled = Future.race([c.future, d.future])
        c.future.cancel()
        d.future.cancel()
        #expect(cancelled.outcome?.isCancelled == true)
    }

    @Test func anyTakesTheFirstSuccess() {
        let a = Promise<Int>(), b = Promise<Int>(), c = Promise<Int>()
        let first = Future.any([a.future, b.future, c.future])
        a.fail(TestError())
        #expect(first.isPending)
        c.succeed(3)
        #expect(first.outcome?.value == 3)
        #expect(b.isCancelled)
    }

    @Test func anyFailsWithEveryFailureWhenAllFail() {
        let a = Promise<Int>(), b = Promise<Int>()
        let first = Future.any([a.future, b.future])
        b.fail(TestError(code: 2))
        a.fail(TestError(code: 1))
        guard case .failure(let error as JoinError)? = first.outcome else {
            Issue.record("expected a JoinError")
            return
        }
        #expect(error.failures.map(\.index) == [0, 1])
    }

    @Test func racesOfNothingFailWithEmptyInput() {
        #expect(Future<Int>.race([]).outcome?.error as? FutureError == .emptyInput)
        #expect(Future<Int>.any([]).outcome?.error as? FutureError == .emptyInput)
    }

    @Test func racesResolvedFromSeveralThreadsHaveOneWinner() {
        for _ in 0..<200 {
            let promises = (0..<4).map { _ in Promise<Int>() }
            let winner = Future.race(promises.map(\.future))
            DispatchQueue.concurrentPerform(iterations: 4) { promises[$0].succeed($0) }
            let value = winner.outcome?.value
            #expect(value != nil)
        }
    }

    // MARK: Members that can never complete

    @Test func aJoinOfNeverStaysPendingAndIsNotABrokenPromise() {
        let all = Future<[Int]>.all([Future<Int>.never])
        #expect(all.isPending)
        let p = Promise<Int>()
        let mixed = Future.all([Future<Int>.never, p.future])
        p.succeed(1)
        #expect(mixed.isPending, "only `never` is left: it can never complete, and never breaks")
        let q = Promise<Int>()
        let race = Future.race([Future<Int>.never, q.future])
        q.future.cancel()
        #expect(race.isPending)
        let settled = Future.allSettled([Future<Int>.never.map(on: .immediate) { $0 }])
        #expect(settled.isPending)
    }

    @Test func aJoinWithANeverMemberStillDecidesEarlyAndCanBeCancelled() {
        let p = Promise<Int>()
        let failing = Future.all([Future<Int>.never, p.future])
        p.fail(TestError(code: 5))
        #expect((failing.outcome?.error as? TestError)?.code == 5)
        let q = Promise<Int>()
        let cancelled = Future.all([Future<Int>.never, q.future])
        #expect(cancelled.cancel())
        #expect(q.isCancelled)
    }

    @Test func anUnreferencedJoinOverANeverRootedMemberIsFreed() {
        weak var weakJoin: FutureStorage<[Int]>?
        weak var weakMember: FutureStorage<Int>?
        do {
            let member = Future<Int>.never.map(on: .immediate) { $0 + 1 }
            let join = Future.all([member])
            weakJoin = join.storage
            weakMember = member.storage
        }
        #expect(weakMember == nil)
        #expect(weakJoin == nil)
    }

    @Test func aNeverRootedMemberCancelledFromOutsideIsCountedAgain() {
        let member = Future<Int>.never.map(on: .immediate) { $0 }
        let p = Promise<Int>()
        let all = Future.allSettled([member, p.future])
        #expect(member.cancel())
        #expect(all.isPending, "p is still pending")
        p.succeed(2)
        #expect(all.outcome?.value?.map(\.isCancelled) == [true, false])
    }

    // A cancelled future derived from `never` has completed: a join must wait for its outcome,
    // not take it for a member that can never complete. Its outcome reaches the join late when
    // the join is made inside a drain loop, or while the member drains on another thread.
    @Test func aCancelledMemberDerivedFromNeverIsNotNeverLikeInsideADrainLoop() {
        let member = Future<Int>.never.map(on: .immediate) { $0 }
        #expect(member.cancel())
        let trigger = Promise<Int>()
        let joins = Recorder<(race: Future<Int>, all: Future<[Int]>)>()
        trigger.future.whenComplete(on: .immediate) { _ in
            joins.append((Future.race([member]), Future.all([member])))
        }
        trigger.succeed(1)
        let (race, all) = joins.all[0]
        #expect(race.outcome?.isCancelled == true)
        #expect(all.outcome?.error is FutureError, "fails: a member was cancelled")
    }

    @Test func aCancelledMemberDerivedFromNeverIsNotNeverLikeWhileItDrainsElsewhere() {
        let member = Future<Int>.never.map(on: .immediate) { $0 }
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        member.whenComplete(on: .immediate) { _ in
            entered.signal()
            release.wait()
        }
        DispatchQueue.global().async {
            member.cancel()
            done.signal()
        }
        #expect(entered.wait(timeout: .now() + 10) == .success)
        let race = Future.race([member])  // registered while the member's drain is blocked
        release.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(race.outcome?.isCancelled == true)
    }

    @Test func aJoinErrorWithManyFailuresDescribesItselfBriefly() {
        let error = JoinError(failures: (0..<1_000_000).map { (index: $0, error: TestError(code: $0)) })
        #expect(error.failures.count == 1_000_000)
        let text = error.description
        #expect(text.hasPrefix("1000000 members failed: [0: "))
        #expect(text.hasSuffix("and 999990 more]"))
        #expect(text.count < 1_000)
    }

    @Test func aNestedJoinErrorIsCountedNotDescribedLevelByLevel() {
        var error = JoinError(failures: [(index: 0, error: TestError(code: 0))])
        for level in 1...10_000 { error = JoinError(failures: [(index: 1, error: error), (index: 0, error: TestError(code: level))]) }
        #expect(error.failures.map(\.index) == [0, 1])
        #expect(error.description == "2 members failed: [0: TestError(code: 10000), 1: JoinError(2 members failed)]")
    }

    /// A nest of failed joins holds a join error inside a join error, as deep as the nest: it is
    /// freed in a loop, not by recursion.
    @Test func aDeepNestOfJoinErrorsIsFreedOnASmallStack() async {
        await onSmallStackOffThePool {
            var error = JoinError(failures: [(index: 0, error: TestError(code: 0))])
            for _ in 0..<200_000 { error = JoinError(failures: [(index: 0, error: error)]) }
            #expect(error.failures.count == 1)
        }
    }
}
