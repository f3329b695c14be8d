import Testing
@testable import Futures

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

    @Test func bothStripesOfAPairAreTakenAsOne() {
        let first = Probe(1)
        let second = Probe(2)
        let sum = LockTable.withLocks(first, second) { first.id + second.id }
        #expect(sum == 3)
        #expect(LockTable.withLock(first) { first.id } == 1, "both were released")
    }
}
