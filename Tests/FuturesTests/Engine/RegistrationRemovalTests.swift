import Dispatch
import FuturesTestSupport
import Testing
@testable import Futures

/// Consumers and observers that leave a pending future take their registration off it at once, so a
/// long-lived future keeps nothing of them.
@Suite("Removable registrations")
struct RegistrationRemovalTests {
    /// Each scenario leaves one long-lived pending future, which another consumer keeps alive,
    /// 20,000 times per round (measured in a process of its own).
    @Test(arguments: [
        "await-cancelled", "map-cancelled", "map-immediate-cancelled", "flatMap-cancelled",
        "recover-cancelled", "always-cancelled", "chain-cancelled", "adopter-cancelled",
        "observe-cancelled", "observe-map-cancelled", "cancellable-cancelled",
        "timeout-long-lived-cancelled", "race-lost", "all-failed-fast",
        "map-progress-cancelled", "observe-progress-cancelled", "flatMap-progress-cancelled",
    ])
    func leavingALongLivedFutureKeepsNothing(scenario: String) async throws {
        guard let kept = try await heapKeptPerIteration(scenario) else { return }  // under a sanitizer
        #expect(kept < 16, "\(scenario) keeps \(kept) B per iteration on a long-lived future")
    }

    @Test func aCancelledDerivedFutureNeverRunsItsTransform() {
        let promise = Promise<Int>()
        let kept = promise.future.map(on: .immediate) { $0 + 1 }
        let ran = Counter()
        let left = promise.future.map(on: .immediate) { value -> Int in
            ran.increment()
            return value
        }
        #expect(left.cancel())
        promise.succeed(1)
        #expect(kept.outcome?.value == 2)
        #expect(ran.value == 0, "the transform of a cancelled map ran")
    }

    @Test func aCancelledObserveBranchTakesItsEntryOffTheSource() {
        let promise = Promise<Int>()
        let keeper = promise.future.map(on: .immediate) { $0 }
        for _ in 0..<100 { #expect(promise.future.observe().cancel()) }
        #expect(entryCount(promise.future) == 1)
        #expect(promise.future.outcome == nil, "an observe() branch never cancels its source")
        promise.succeed(1)
        #expect(keeper.outcome?.value == 1)
    }

    /// Many consumers leave, in registration order, in reverse and interleaved: the list uses its
    /// index past a few entries; the rest keep their order and each runs once.
    @Test(arguments: [0, 1, 2])
    func manyConsumersLeaveAndTheRestRunInOrder(pattern: Int) {
        let promise = Promise<Int>()
        let order = Recorder<Int>()
        var futures: [Future<Int>] = []
        for index in 0..<3_000 {
            futures.append(promise.future.map(on: .immediate) { value in
                order.append(index)
                return value
            })
        }
        let leaving: [Int] = switch pattern {
        case 0: Array(0..<3_000).filter { $0 % 3 != 0 }
        case 1: Array((0..<3_000).reversed()).filter { $0 % 3 != 0 }
        default: Array(0..<3_000).filter { $0 % 3 != 0 }.sorted { ($0 * 7919) % 3_001 < ($1 * 7919) % 3_001 }
        }
        for index in leaving { #expect(futures[index].cancel()) }
        #expect(entryCount(promise.future) == 1_000)
        promise.succeed(7)
        #expect(order.all == Array(stride(from: 0, to: 3_000, by: 3)))
        for index in stride(from: 0, to: 3_000, by: 3) { #expect(futures[index].outcome?.value == 7) }
    }

    /// Every entry but one leaves, the first included, again and again: the list empties and
    /// refills without losing or repeating one.
    @Test func theFirstEntryLeavingHandsItsPlaceToTheNext() {
        let promise = Promise<Int>()
        let ran = Counter()
        var futures: [Future<Int>] = []
        for round in 0..<50 {
            for _ in 0..<40 {
                futures.append(promise.future.map(on: .immediate) { value in
                    ran.increment()
                    return value + round
                })
            }
            // Leave the oldest 39 of those still pending (registration order: always the first).
            let pending = futures.indices.filter { futures[$0].outcome == nil }
            for index in pending.prefix(39) { #expect(futures[index].cancel()) }
        }
        #expect(entryCount(promise.future) == futures.count { $0.outcome == nil })
        promise.succeed(1)
        #expect(ran.value == futures.count { $0.outcome?.value != nil })
        #expect(futures.allSatisfy { $0.outcome != nil })
    }

    @Test func aJoinListingOneFutureTwiceLeavesBothEntries() {
        let promise = Promise<Int>()
        let keeper = promise.future.map(on: .immediate) { $0 }
        struct Failure: Error {}
        let all = Future.all([promise.future, promise.future, Future(error: Failure())])
        #expect(all.outcome?.error is Failure)
        #expect(entryCount(promise.future) == 1)
        promise.succeed(1)
        #expect(keeper.outcome?.value == 1)
    }

    /// A future that followed a long-lived one's progress leaves it however it ends: merged into
    /// an adopter (which follows in its place) and cancelled there, timed out, or as a decided join.
    @Test func progressFollowersLeaveHoweverTheyEnd() async {
        let source = Promise<Int>()
        let keeper = source.future.map(on: .immediate) { $0 }

        let follower = source.future.map(on: .immediate) { $0 }
        follower.whenProgress(on: .immediate) { _ in }
        #expect(progressListenerCount(source.future) == 1)
        let adopter = Future(value: 1).flatMap(on: .immediate) { _ in follower }
        #expect(progressListenerCount(source.future) == 1, "the adopter follows in the merged follower's place")
        #expect(adopter.cancel())
        #expect(progressListenerCount(source.future) == 0)

        let clock = ManualClock()
        let timed = source.future.timeout(after: .seconds(5), clock: clock)
        #expect(timed.progress == 0)
        #expect(progressListenerCount(source.future) == 1)
        clock.advance(by: .seconds(5))
        #expect(await timed.result.error as? FutureError == .timedOut)
        #expect(progressListenerCount(source.future) == 0)

        let winner = Promise<Int>()
        let race = Future.race([source.future, winner.future])
        race.whenProgress(on: .immediate) { _ in }
        #expect(progressListenerCount(source.future) == 1)
        #expect(winner.succeed(2))
        #expect(race.outcome?.value == 2)
        #expect(progressListenerCount(source.future) == 0)

        #expect(source.succeed(1))
        #expect(keeper.outcome?.value == 1)
    }

    /// A cancelled adopter leaves the future it waited on, even after it was merged into another.
    @Test func aMergedAdopterLeavesWithTheTargetsRegistration() {
        let source = Promise<Int>()
        let keeper = source.future.map(on: .immediate) { $0 }
        let outer = Promise<Int>()
        // `waiting` waits on `source` (which has a consumer); `outer` then merges `waiting` in.
        let waiting = Future(value: 0).flatMap(on: .immediate) { _ in source.future }
        outer.complete(with: waiting)
        #expect(entryCount(source.future) == 2)
        #expect(outer.future.cancel())
        #expect(entryCount(source.future) == 1)
        #expect(waiting.outcome?.isCancelled == true)
        source.succeed(1)
        #expect(keeper.outcome?.value == 1)
    }
}

/// Withdrawals are counted exactly once, whoever races them.
@Suite("Withdrawal accounting")
struct WithdrawalAccountingTests {
    struct Failure: Error {}

    /// A join decided by a member that was already complete, before it registered on the others,
    /// counts as a consumer of each later one that withdrew as it arrived: it takes no count from
    /// a member that others consume, and cancels one that nothing else needs, exactly as if the
    /// winner had completed a moment later.
    @Test(arguments: ["all", "race", "any"])
    func aJoinDecidedWhileRegisteringWithdrawsFromLaterMembers(kind: String) {
        let loser = Promise<Int>()
        let decided: Bool = switch kind {
        case "all": Future.all([Future(error: Failure()), loser.future]).outcome != nil
        case "race": Future.race([Future(value: 1), loser.future]).outcome != nil
        default: Future.any([Future(value: 1), loser.future]).outcome != nil
        }
        #expect(decided)
        #expect(loser.isCancelled, "a loser nothing else needs was left running")
    }

    /// Members complete before the call decide a join in input order, even one still running its
    /// callbacks on another thread (a registration there would wait behind them).
    @Test func membersCompleteBeforeTheCallDecideInInputOrder() {
        let first = Promise<Int>()
        let inCallback = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        first.future.whenComplete(on: .immediate) { _ in
            inCallback.signal()
            release.wait()
        }
        DispatchQueue.global().async { _ = first.succeed(1) }
        inCallback.wait()
        let race = Future.race([first.future, Future(value: 2)])
        let all = Future.all([Future<Int>(error: Failure()), first.future.map(on: .immediate) { $0 }])
        release.signal()
        #expect(race.outcome?.value == 1)
        #expect(all.outcome?.error is Failure)
    }

    @Test(arguments: ["all", "race", "any"])
    func aJoinDecidedWhileRegisteringTakesNoCountFromLaterMembers(kind: String) {
        let shared = Promise<Int>()
        let first = shared.future.map(on: .immediate) { $0 }
        let second = shared.future.map(on: .immediate) { $0 }
        let decided: Bool = switch kind {
        case "all": Future.all([Future(error: Failure()), shared.future]).outcome != nil
        case "race": Future.race([Future(value: 1), shared.future]).outcome != nil
        default: Future.any([Future(value: 1), shared.future]).outcome != nil
        }
        #expect(decided)
        #expect(consumerCount(shared.future) == 2)
        #expect(entryCount(shared.future) == 2, "the join registered on a member after it had decided")
        #expect(first.cancel())
        #expect(shared.future.outcome == nil, "a join that never registered took a consumer's count")
        #expect(second.cancel())
        #expect(shared.future.outcome?.isCancelled == true, "a join that left still counts as a consumer")
    }

    /// Joins decided on another thread while still registering: every member ends with exactly
    /// the consumers that stayed.
    @Test func joinsDecidedOnAnotherThreadWhileRegisteringCountEachMemberOnce() {
        for _ in 0..<200 {
            let trigger = Promise<Int>()
            let members = (0..<64).map { _ in Promise<Int>() }
            let keepers = members.map { $0.future.map(on: .immediate) { $0 } }
            let start = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) {
                start.wait()
                trigger.fail(Failure())
            }
            start.signal()
            let all = Future.all([trigger.future] + members.map(\.future))
            group.wait()
            #expect(all.outcome?.error is Failure)
            for member in members {
                #expect(consumerCount(member.future) == 1)
                #expect(entryCount(member.future) == 1)
            }
            #expect(keepers.allSatisfy { $0.outcome == nil })
            withExtendedLifetime(members) {}  // pending: a released promise breaks its future
        }
    }

    /// A timeout takes its registration on the source with the right to complete: cancelling the
    /// timed-out future before it fails does not withdraw from the source a second time.
    @Test func aTimeoutThatFiresLeavesItsSourceOnce() throws {
        let source = Promise<Int>()
        let keeper = source.future.map(on: .immediate) { $0 }
        let derived = FutureStorage<Int>()
        source.future.storage.register({ outcome in _ = derived.finish(outcome, origin: derived) }, derived: derived)
        #expect(consumerCount(source.future) == 2)
        // What the timer does, with a cancellation between leaving the source and failing.
        let token = CompleterToken()
        let upstream = try #require(derived.reserveLeavingUpstream(for: token, from: derived))
        #expect(derived.cancel())
        if let upstream { Cancellation.withdraw(from: upstream) }
        #expect(!derived.finish(.failure(FutureError.timedOut), origin: token))
        #expect(consumerCount(source.future) == 1)
        #expect(entryCount(source.future) == 1)
        #expect(keeper.outcome == nil, "the source's other consumer was cancelled")
    }

    /// Timeouts firing while other threads cancel them never cancel the source's other consumer.
    @Test func timeoutsRacingTheirCancellationNeverCancelTheSource() async {
        for _ in 0..<20 {
            let sources = (0..<500).map { _ in Promise<Int>() }
            let keepers = sources.map { $0.future.map(on: .immediate) { $0 } }
            let timeouts = sources.map { $0.future.timeout(after: .zero) }
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) { for timeout in timeouts { _ = timeout.cancel() } }
            for timeout in timeouts { _ = await timeout.result }
            group.wait()
            #expect(keepers.allSatisfy { $0.outcome == nil })
            withExtendedLifetime(sources) {}
        }
    }

    /// An adopter cancelled as it starts waiting on a future with other consumers leaves no
    /// entry behind.
    @Test func anAdopterCancelledAsItStartsWaitingLeavesNoEntry() {
        for _ in 0..<2_000 {
            let target = Promise<Int>()
            let keeper = target.future.map(on: .immediate) { $0 }
            let outer = Promise<Int>()
            let future = outer.future
            let start = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) {
                start.wait()
                _ = future.cancel()
            }
            start.signal()
            outer.complete(with: target.future)
            group.wait()
            #expect(future.outcome?.isCancelled == true)
            #expect(entryCount(target.future) == 1)
            #expect(consumerCount(target.future) == 1)
            #expect(keeper.outcome == nil)
            withExtendedLifetime(target) {}  // pending: a released promise breaks its future
        }
    }

    /// A promise whose future was cancelled before it completed withdraws from each future it is
    /// then given: nothing needs those any more, unless something else consumes them.
    @Test func aPromiseCancelledFirstWithdrawsFromEachFutureItIsGiven() {
        let promise = Promise<Int>()
        _ = promise.future.cancel()
        let given = Promise<Int>()
        #expect(!promise.complete(with: given.future))
        #expect(given.future.outcome?.isCancelled == true)
        let second = Promise<Int>()
        #expect(!promise.complete(with: second.future))
        #expect(second.future.outcome?.isCancelled == true)
        let consumed = Promise<Int>()
        let consumer = consumed.future.map(on: .immediate) { $0 }
        #expect(!promise.complete(with: consumed.future))
        #expect(consumed.future.isPending && consumer.isPending)
    }

    /// A promise that completed with one future, and whose future was cancelled after, refuses a
    /// second future and leaves it alone: it never was that future's consumer.
    @Test(arguments: [false, true])
    func aRefusedSecondFutureIsLeftAlone(firstHasAnotherConsumer: Bool) {
        let promise = Promise<Int>()
        let first = Promise<Int>()
        let keeper = firstHasAnotherConsumer ? first.future.map(on: .immediate) { $0 } : nil
        #expect(promise.complete(with: first.future))
        _ = promise.future.cancel()
        #expect(promise.future.outcome?.isCancelled == true)
        let second = Promise<Int>()
        #expect(!promise.complete(with: second.future))
        #expect(second.future.isPending)
        #expect(second.succeed(2))
        #expect(keeper?.isPending ?? true)
        withExtendedLifetime(first) {}
    }

    /// A promise that completed its future with a cancelled future has used its right: a second
    /// `complete(with:)` is refused and leaves its future alone.
    @Test func aPromiseThatAdoptedACancelledFutureLeavesASecondFutureAlone() {
        let promise = Promise<Int>()
        let cancelled = Promise<Int>()
        _ = cancelled.future.cancel()
        #expect(promise.complete(with: cancelled.future))
        #expect(promise.future.outcome?.isCancelled == true)
        let second = Promise<Int>()
        #expect(!promise.complete(with: second.future))
        #expect(second.future.isPending)
        withExtendedLifetime(second) {}
    }

    /// The same for a promise that adopted a future already failed as a member of a cycle.
    @Test func aPromiseThatAdoptedACycleFailureLeavesASecondFutureAlone() {
        let promise = Promise<Int>()
        let cycle = Promise<Int>()
        #expect(cycle.complete(with: cycle.future))
        #expect(cycle.future.outcome?.error as? FutureError == .cycle)
        #expect(promise.complete(with: cycle.future))
        let second = Promise<Int>()
        #expect(!promise.complete(with: second.future))
        #expect(second.future.isPending)
        withExtendedLifetime(second) {}
    }

    /// A promise whose future was merged into an adopter that was then cancelled had not used its
    /// right to complete: it withdraws from the future it is given. The adopter's own promise had
    /// (it adopted), and leaves a second future alone.
    @Test func aMergedPromiseOfACancelledAdopterWithdrawsAndTheAdopterDoesNot() {
        let adopter = Promise<Int>()
        let merged = Promise<Int>()
        #expect(adopter.complete(with: merged.future))
        _ = adopter.future.cancel()
        #expect(merged.future.outcome?.isCancelled == true)
        let given = Promise<Int>()
        #expect(!merged.complete(with: given.future))
        #expect(given.future.outcome?.isCancelled == true)
        let second = Promise<Int>()
        #expect(!adopter.complete(with: second.future))
        #expect(second.future.isPending)
        withExtendedLifetime((merged, second)) {}
    }
}

/// How many consumers a future's root counts.
private func consumerCount<Value>(_ future: Future<Value>) -> Int32 {
    let root = future.storage.root()
    return LockTable.withLock(root) { root.consumers }
}
