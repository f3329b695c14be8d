import Dispatch
import Testing
@testable import Futures

@Suite("State machine")
struct TransitionTests {
    #if DEBUG
    @Test func debugBuildsTrapOnATransitionWithoutTheLock() async {
        await #expect(processExitsWith: .failure) {
            let future = FutureStorage<Int>()
            var entry: CallbackEntry<Int>? = .success { _ in }
            _ = future.registerLocked(&entry, counted: false)
        }
    }

    @Test func debugBuildsTrapOnATransitionUnderAnotherObjectsLock() async {
        await #expect(processExitsWith: .failure) {
            let future = FutureStorage<Int>()
            // Two objects on different stripes: holding the other's lock does not count.
            var other = Probe()
            while LockTable.index(of: other) == LockTable.index(of: future) { other = Probe() }
            var work = CompletionWork()
            _ = LockTable.withLock(other) { future.completeLocked(.success(1), from: nil, into: &work) }
        }
    }

    @Test func debugBuildsTrapOnAnImpossiblePairOfStateAndEvent() async {
        await #expect(processExitsWith: .failure) {
            // Nobody drains a pending future: asking for its next drain batch is a bug.
            let future = FutureStorage<Int>()
            var batch = CallbackList<Int>()
            _ = LockTable.withLock(future) { future.takeLateCallbacksLocked(into: &batch) }
        }
    }

    @Test func debugBuildsCheckTheInvariantsAfterATransition() async {
        await #expect(processExitsWith: .failure) {
            // A completed future that still holds its upstream breaks a rule.
            let future = FutureStorage<Int>(outcome: .success(1))
            let source = FutureStorage<Int>()
            LockTable.withLock(future) {
                future.upstream = source
                future.checkInvariants()
            }
        }
    }
    #endif

    @Test func bothLocksOfAnAdoptionCountAsHeld() {
        let first = FutureStorage<Int>()
        let second = FutureStorage<Int>()
        LockTable.withLocks(first, second) {
            first.assertLocked()
            second.assertLocked()
            first.checkInvariants()
            second.checkInvariants()
        }
        #expect(first.outcome == nil && second.outcome == nil)
    }

    @Test func aMergedFuturesTransitionsRunOnTheFutureThatHoldsItsState() {
        let adopter = Promise<Int>()
        let inner = Promise<Int>()
        adopter.complete(with: inner.future)  // `inner` has no consumer: merged into the adopter
        let root = adopter.future.storage
        let reached = inner.future.storage.withState { $0 === root }
        #expect(reached)
        #expect(LockTable.withLock(inner.future.storage) { inner.future.storage.phase } == .linked)
        // Completing through the link completes the adopter, and the lock was given back.
        #expect(inner.succeed(4))
        #expect(adopter.future.outcome?.value == 4)
        #expect(inner.future.outcome?.value == 4)
    }

    @Test func aTransitionRunsExactlyOnceWhenItFollowsLinks() {
        let adopter = Promise<Int>()
        let middle = Promise<Int>()
        let inner = Promise<Int>()
        middle.complete(with: inner.future)
        adopter.complete(with: middle.future)
        var runs = 0
        let phase = inner.future.storage.withState { node -> Phase in
            runs += 1
            return node.phase
        }
        #expect(runs == 1)
        #expect(phase == .pending)
        withExtendedLifetime((adopter, middle, inner)) {}
    }

    @Test func guardedStateIsUpdatedAtomically() {
        let counter = Guarded(0)
        let rounds = 8
        let perRound = 10_000
        DispatchQueue.concurrentPerform(iterations: rounds) { _ in
            for _ in 0..<perRound { _ = counter.next() }
        }
        #expect(counter.withLock { $0 } == rounds * perRound)
    }
}
