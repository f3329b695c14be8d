import CFuturesAtomicGlobals
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
            #if canImport(Glibc)
            #expect(pthread_mutex_trylock(lock) != 0, "stripe \(index) is held")
            #endif
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
}
