import Testing
@testable import Futures

/// The drain queue lends the futures it holds to their drains and releases each once; a future's rare
/// state is one box of its phase. What must hold for both.
@Suite("Drain entries and each phase's rare state")
struct DrainOwnershipTests {
    /// Completes a promise when freed.
    final class Breaker: Sendable {
        let promise: Promise<Int>
        init(_ promise: Promise<Int>) { self.promise = promise }
        deinit { _ = promise.succeed(7) }
    }

    /// The drain queue holds the last reference to a completed future; its release after the
    /// entry runs frees the outcome, whose deinit completes another future: that completion is
    /// queued on the same loop and runs before the outermost call returns.
    @Test func aFutureFreedByTheDrainAfterItsEntryRunsQueuesWhatItsReleaseCompletes() {
        let heard = Locked<[Int]>([])
        let last = Promise<Int>()
        last.future.whenComplete(on: .immediate) { outcome in heard.withLock { $0.append(outcome.value ?? -1) } }
        let middle = Locked<Promise<Breaker>?>(Promise<Breaker>())
        weak var middleStorage: FutureStorage<Breaker>?
        do {
            let future = middle.withLock { $0! }.future
            middleStorage = future.storage
            future.whenComplete(on: .immediate) { _ in heard.withLock { $0.append(0) } }
        }
        let outer = Promise<Int>()
        outer.future.whenComplete(on: .immediate) { _ in
            let promise = middle.withLock { $0.take()! }
            _ = promise.succeed(Breaker(last))
        }
        _ = outer.succeed(1)
        #expect(heard.withLock { $0 } == [0, 7])
        #expect(middleStorage == nil)
        #expect(Drain.isRunningHere == false)
    }

    /// Many entries queued behind one callback (the queue's compaction paths past 4096 entries),
    /// each the last reference to its future: every one runs once and is freed.
    @Test func manyQueuedEntriesRunOnceAndAreFreed() {
        let count = 10_000
        let ran = Locked(0)
        let promises = Locked<[Promise<Int>]>((0..<count).map { _ in Promise<Int>() })
        var weakStorages: [Weak] = []
        promises.withLock { list in
            for promise in list {
                weakStorages.append(Weak(promise.future.storage))
                promise.future.whenComplete(on: .immediate) { _ in ran.withLock { $0 += 1 } }
            }
        }
        let outer = Promise<Int>()
        outer.future.whenComplete(on: .immediate) { _ in
            let list = promises.withLock { list in
                defer { list = [] }
                return list
            }
            for promise in list { _ = promise.succeed(1) }
        }
        _ = outer.succeed(0)
        #expect(ran.withLock { $0 } == count)
        #expect(weakStorages.allSatisfy { $0.object == nil })
    }

    final class Weak {
        weak var object: AnyObject?
        init(_ object: AnyObject) { self.object = object }
    }

    /// A waiting adopter cancelled after its producer handed the right to complete to a token
    /// keeps that token (strongly) in its completed box, refuses its producer, and is freed.
    @Test func aCancelledWaitingAdopterKeepsItsTokenAndIsFreed() {
        weak var adopterStorage: FutureStorage<Int>?
        weak var targetStorage: FutureStorage<Int>?
        do {
            let target = Promise<Int>()
            let keeper = target.future.map(on: .immediate) { $0 }  // so the adopter waits
            let outer = Promise<Int>()
            let storage = outer.future.storage
            adopterStorage = storage
            targetStorage = target.future.storage
            #expect(outer.complete(with: target.future))
            #expect(LockTable.withLock(storage) { storage.extras?.completerToken != nil })
            #expect(outer.future.cancel())
            #expect(LockTable.withLock(storage) {
                storage.rare?.ofCompleted == true && storage.completedExtras?.completerToken != nil
            })
            #expect(!outer.succeed(2))
            #expect(!outer.complete(with: Future(value: 1)))
            #expect(outer.future.outcome?.isCancelled == true)
            #expect(keeper.outcome == nil)
            _ = target.succeed(3)
            #expect(keeper.outcome?.value == 3)
        }
        #expect(adopterStorage == nil)
        #expect(targetStorage == nil)
    }

    /// Two futures adopting each other through waiting adopters fail as a cycle; the token that
    /// closed it is held by the completed box, and everything is freed.
    @Test func aCycleClosedByATokenIsFreed() {
        weak var first: FutureStorage<Int>?
        weak var second: FutureStorage<Int>?
        do {
            let a = Promise<Int>()
            let b = Promise<Int>()
            let keepA = a.future.map(on: .immediate) { $0 }
            let keepB = b.future.map(on: .immediate) { $0 }
            first = a.future.storage
            second = b.future.storage
            _ = a.complete(with: b.future)
            _ = b.complete(with: a.future)
            let failedAsCycle: (Outcome<Int>?) -> Bool = {
                if case .failure(FutureError.cycle)? = $0 { true } else { false }
            }
            #expect(failedAsCycle(a.future.outcome) || failedAsCycle(b.future.outcome))
            _ = (keepA, keepB)
        }
        #expect(first == nil)
        #expect(second == nil)
    }
}
