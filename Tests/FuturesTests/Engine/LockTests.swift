import CFuturesAtomicGlobals
import Dispatch
import Foundation
import Testing
@testable import Futures

#if canImport(Glibc)
import Glibc
#endif

@Suite("Locks")
struct LockTests {
    #if DEBUG
    @Test func debugBuildsTrapOnANestedStripeLock() async {
        await #expect(processExitsWith: .failure) {
            let first = Probe(1)
            let second = Probe(2)
            LockTable.withLock(first) { LockTable.withLock(second) {} }
        }
    }

    @Test func debugBuildsTrapWhenAFutureIsFreedUnderAStripeLock() async {
        await #expect(processExitsWith: .failure) {
            let guardObject = Probe()
            var future: FutureStorage<Int>? = FutureStorage()
            LockTable.withLock(guardObject) { future = nil }
            _ = future
        }
    }

    @Test func debugBuildsTrapWhenAStandaloneLockIsTakenTwiceOnOneThread() async {
        await #expect(processExitsWith: .failure) {
            let lock = Lock()
            lock.withLock { lock.withLock {} }
        }
    }
    #endif

    /// The stripe locks and the adoption gate are C globals, initialised statically; the Swift side
    /// indexes them with its own constants, which must describe them.
    @Test func theStripeTableIsTheCArray() {
        #expect(LockTable.count == swift_futures_stripe_count())
        #expect(swift_futures_stripe_stride() == LockTable.stride)
        #expect(MemoryLayout<RawLock>.size <= LockTable.stride)
        #expect(LockTable.count.nonzeroBitCount == 1, "a power of two, for the index's mask")
        #expect(AdoptionGate.spacing == swift_futures_gate_spacing())
        #expect(AdoptionGate.slotCount == swift_futures_gate_slot_count())
    }

    /// Every stripe is a working lock from the start, without a call that initialises it.
    @Test func everyStripeLocksAndUnlocks() {
        for index in 0..<LockTable.count {
            let lock = LockTable.lock(at: index)
            RawLockOps.lock(lock)
            #expect(!swift_futures_raw_lock_trylock(lock), "stripe \(index) is held")
            RawLockOps.unlock(lock)
        }
    }

    @Test func bothStripesOfAPairAreTakenAsOne() {
        let first = Probe(1)
        let second = Probe(2)
        let sum = LockTable.withLocks(first, second) { first.id + second.id }
        #expect(sum == 3)
        #expect(LockTable.withLock(first) { first.id } == 1, "both were released")
    }

    /// Threads that increment one counter under a stripe lock, and under a standalone lock, lose
    /// no increment: each holder sees every write of the one before it.
    @Test func aLockLetsOneThreadAtATimeIn() {
        let threads = 4
        let rounds = 200_000
        let counter = LockedCounters()
        let standalone = Lock()
        let start = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<threads {
            // Threads of their own (a concurrent queue may run the loops one after another), let go
            // together so that their loops overlap.
            Thread {
                start.wait()
                for _ in 0..<rounds {
                    LockTable.withLock(counter) { counter.striped += 1 }
                    standalone.withLock { counter.standalone += 1 }
                }
                done.signal()
            }.start()
        }
        for _ in 0..<threads { start.signal() }
        for _ in 0..<threads { done.wait() }
        #expect(counter.striped == threads * rounds)
        #expect(counter.standalone == threads * rounds)
    }

    @Test func aNewStandaloneLockIsUnlocked() {
        let lock = Lock()
        #expect(swift_futures_raw_lock_trylock(lock.raw))
        #expect(!swift_futures_raw_lock_trylock(lock.raw))
        RawLockOps.unlock(lock.raw)
        #expect(swift_futures_raw_lock_trylock(lock.raw), "a released lock can be taken again")
        RawLockOps.unlock(lock.raw)
    }

    #if os(Linux) || os(Android)
    /// A thread that finds the lock held marks it contended and sleeps; the release wakes it, and
    /// it gets the lock.
    @Test func aThreadAsleepOnAHeldLockIsWokenByItsRelease() {
        let lock = Lock()
        let counter = LockedCounters()
        let done = DispatchSemaphore(value: 0)
        RawLockOps.lock(lock.raw)
        #expect(swift_futures_raw_lock_state(lock.raw) == 1, "held, uncontended")
        Thread {
            lock.withLock { counter.striped += 1 }
            done.signal()
        }.start()
        // The waiter marks the word contended (2) only after its spin, just before it sleeps.
        let deadline = ContinuousClock.now + .seconds(60)
        while swift_futures_raw_lock_state(lock.raw) != 2, ContinuousClock.now < deadline { sched_yield() }
        #expect(swift_futures_raw_lock_state(lock.raw) == 2, "the waiter marked the lock contended")
        #expect(counter.striped == 0, "the waiter did not get in while the lock was held")
        counter.striped = 10
        RawLockOps.unlock(lock.raw)
        #expect(done.wait(timeout: .now() + 60) == .success, "the release woke the waiter")
        #expect(lock.withLock { counter.striped } == 11, "the woken waiter got the lock, and saw the write before the release")
        #expect(swift_futures_raw_lock_state(lock.raw) == 0, "released")
    }
    #endif
}

/// Counters written only under a lock (the tests above check that they are).
private final class LockedCounters: @unchecked Sendable {
    // Safety: `striped` is written under `LockTable.withLock(self)` or the test's `Lock`, and
    // `standalone` under the test's `Lock`; the tests read them after every writer has finished.
    var striped = 0
    var standalone = 0
}
