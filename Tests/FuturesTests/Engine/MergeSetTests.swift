import Synchronization
import Testing
@testable import Futures

/// A merge set alone, without futures or locks: what a merge and a split do to its levels.
@Suite("Merge set")
struct MergeSetTests {
    /// Records which entries ran, by name.
    final class Log: Sendable {
        let names = Mutex<[String]>([])
        func entry(_ name: String) -> CallbackEntry<Int> {
            .success { _ in self.names.withLock { $0.append(name) } }
        }
        func handler(_ name: String, depth: Int32) -> CancelHandler {
            CancelHandler(depth: depth) { self.names.withLock { $0.append(name) } }
        }
        func take() -> [String] { names.withLock { names in defer { names = [] }; return names } }
    }

    final class Owner {}

    @Test func aMergeMovesEveryLevelOneDeeperAndBorrowsTheTargetsRegistration() {
        let log = Log()
        let owner = Owner()
        var root = MergeSet<Int>()
        let target = Extras<Int>()
        target.merge.cancelHandlers.append(log.handler("target's producer", depth: 0))
        var callbacks = CallbackList<Int>()
        callbacks.append(log.entry("first"))
        callbacks.append(log.entry("second"))
        root.absorb(target, callbacks: &callbacks, at: 1, key: RegistrationKey(owner))
        root._checkInvariantsNow()
        #expect(root.depth == 1)
        #expect(root.cancelHandlers.map(\.depth) == [1])
        #expect(root.observerCount == 2 && callbacks.isEmpty)
        #expect(root.upstreamKey == RegistrationKey(owner))
        // A second merge at the next level keeps the registration the set borrowed first.
        let next = Extras<Int>()
        let borrowed = Owner()
        next.merge.upstreamKey = RegistrationKey(borrowed)
        var none = CallbackList<Int>()
        root.absorb(next, callbacks: &none, at: 2, key: RegistrationKey(owner))
        #expect(root.depth == 2)
        #expect(root.upstreamKey == RegistrationKey(borrowed), "the target's borrowed registration is the one to leave")
        // A target with no extras box is a set of one: the merge borrows the target's own key.
        let plain = Owner()
        var third = MergeSet<Int>()
        third.absorb(nil, callbacks: &none, at: 1, key: RegistrationKey(plain))
        #expect(third.depth == 1 && third.upstreamKey == RegistrationKey(plain) && third.cancelHandlers.isEmpty)
    }

    @Test func aSplitHandsTheLevelsBelowItsDepthOverCountedFromThere() {
        let log = Log()
        let owner = Owner()
        var set = MergeSet<Int>()
        // Four levels merged one by one from the top, each with a handler and an observer.
        for level: Int32 in 1...4 {
            let target = Extras<Int>()
            target.merge.cancelHandlers.append(log.handler("handler \(level)", depth: 0))
            var callbacks = CallbackList<Int>()
            callbacks.append(log.entry("observer \(level)"))
            set.absorb(target, callbacks: &callbacks, at: level, key: RegistrationKey(owner))
        }
        set._checkInvariantsNow()
        #expect(set.depth == 4 && set.cancelHandlers.map(\.depth) == [1, 2, 3, 4])
        var own = CallbackList<Int>()
        let below = set.split(at: 3, key: RegistrationKey(owner), own: &own)
        below._checkInvariantsNow()
        // The new future is level 3: its own observers become its callbacks; level 4 is 1 below it.
        #expect(below.depth == 1)
        #expect(below.cancelHandlers.map(\.depth) == [0, 1])
        #expect(below.observerCount == 1)
        own.run(with: .success(0))
        #expect(log.take() == ["observer 3"])
        for handler in below.cancelHandlers { handler.run() }
        #expect(log.take() == ["handler 3", "handler 4"])
        // The root keeps levels 1 and 2, with their handlers and observers.
        #expect(set.depth == 2 && set.cancelHandlers.map(\.depth) == [1, 2] && set.observerCount == 2)
        #expect(below.upstreamKey == set.upstreamKey)
    }

    @Test func aSplitOfALongSetCopiesOnlyTheSmallerPart() {
        let log = Log()
        let owner = Owner()
        var set = MergeSet<Int>()
        for level: Int32 in 1...1_000 {
            var callbacks = CallbackList<Int>()
            callbacks.append(log.entry("\(level)"))
            set.absorb(nil, callbacks: &callbacks, at: level, key: RegistrationKey(owner))
        }
        // Split near the bottom: the 10 levels below keep their depths, relative to a new base.
        var own = CallbackList<Int>()
        let below = set.split(at: 990, key: RegistrationKey(owner), own: &own)
        #expect(own.count == 1 && below.observerCount == 10 && set.observerCount == 989)
        below._checkInvariantsNow()
        set._checkInvariantsNow()
    }

    #if DEBUG
    @Test func debugBuildsTrapOnAnObserverAtNoLevelOfItsSet() async {
        await #expect(processExitsWith: .failure) {
            var set = MergeSet<Int>()
            var observers = MergedObservers<Int>()
            observers.append(.success { _ in }, depth: 3)
            set.observers = observers
            set.depth = 2
            set._checkInvariants()
        }
    }
    #endif
}
