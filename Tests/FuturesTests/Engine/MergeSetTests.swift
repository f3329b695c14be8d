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
        func handler(_ name: String) -> @Sendable () -> Void {
            { self.names.withLock { $0.append(name) } }
        }
        func take() -> [String] { names.withLock { names in defer { names = [] }; return names } }
    }

    final class Owner {}

    @Test func aMergeMovesEveryLevelOneDeeperAndBorrowsTheTargetsRegistration() {
        let log = Log()
        let owner = Owner()
        var root = MergeSet<Int>()
        let target = PendingExtras<Int>()
        target.merge.cancelHandlers.add(depth: 0, run: log.handler("target's producer"))
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
        let next = PendingExtras<Int>()
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
            let target = PendingExtras<Int>()
            target.merge.cancelHandlers.add(depth: 0, run: log.handler("handler \(level)"))
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
        own.runAndEmpty(with: .success(0))
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

    /// A merge takes a split set's root, whose carried observers' buffer may hold the last
    /// reference to an observer already cut off it: the buffer must go after the locks (debug
    /// builds trap when a promise is freed under a stripe lock; here the observer holds one).
    @Test func mergingASplitSetsRootFreesNothingUnderItsLocks() {
        let p0 = Promise<Int>(), p1 = Promise<Int>(), p2 = Promise<Int>(), p3 = Promise<Int>()
        let q = Promise<Int>()
        // When q completes, this adopts p0's future, the root of the set split below, by merging.
        let adopter = q.future.flatMap(on: .immediate) { _ in p0.future }
        p3.future.whenComplete(on: .immediate) { _ in _ = q.succeed(0) }  // holds q, on level 3
        #expect(p2.complete(with: p3.future))
        p2.future.whenComplete(on: .immediate) { _ in }  // on level 2
        #expect(p1.complete(with: p2.future))
        for _ in 0..<3 { p1.future.whenComplete(on: .immediate) { _ in } }  // on level 1
        #expect(p0.complete(with: p1.future))
        let c2 = p2.future.map(on: .immediate) { $0 }  // a consumer on level 2 splits the set
        let c3 = p3.future.map(on: .immediate) { $0 }  // and one on level 3 splits the part split off
        // Completed inside a running drain loop, so that the completion's work is released before
        // the callbacks run.
        let starter = Promise<Int>()
        starter.future.whenComplete(on: .immediate) { _ in _ = p3.succeed(7) }
        #expect(starter.succeed(0))
        #expect(adopter.outcome?.value == 7 && c2.outcome?.value == 7 && c3.outcome?.value == 7)
        #expect(p0.future.outcome?.value == 7)
    }

    /// A merge takes the target's table of forwards over as it is, counting its thresholds from
    /// one level deeper, instead of copying it: a chain built from the bottom up and split at every
    /// level as it grows copied the whole table at every merge (quadratic, found by an attack).
    @Test func aMergeTakesTheTargetsForwardTableOverWithoutCopyingIt() throws {
        let split = FutureStorage<Int>()
        let table = MergeForwards<Int>(depth: 3, target: split)
        let target = PendingExtras<Int>()
        target.merge.depth = 2
        target.merge.forward = table
        var root = MergeSet<Int>()
        var none = CallbackList<Int>()
        root.absorb(target, callbacks: &none, at: 1, key: RegistrationKey(Owner()))
        root._checkInvariantsNow()
        #expect(root.forward === table && root.depth == 3 && table.shallowest == 4)
        let entry = try #require(root.forward?.entry(at: 5))
        #expect(entry.target === split && entry.depth == 1 && entry.next == Int32.max)
        #expect(root.forward?.entry(at: 3) == nil)
    }

    /// The address of a handler list's buffer: it changes only when the buffer is reallocated.
    static func address(_ handlers: CancelHandlers) -> UnsafeRawPointer? {
        handlers.buffer.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func handlersKeepTheOrderOfTheirLevels() {
        var handlers = CancelHandlers()
        handlers.add(depth: 2) {}
        handlers.add(depth: 5) {}
        handlers.add(depth: 3) {}  // a shallower producer adds one later: it goes between
        handlers.add(depth: 2) {}
        #expect(handlers.map(\.depth) == [2, 2, 3, 5])
        var deeper = CancelHandlers()
        deeper.add(depth: 0) {}
        deeper.add(depth: 1) {}
        handlers.absorb(&deeper, shiftedBy: 6)
        #expect(handlers.map(\.depth) == [2, 2, 3, 5, 6, 7] && deeper.isEmpty)
        var longer = CancelHandlers()
        for depth: Int32 in 0..<10 { longer.add(depth: depth) {} }
        var shallow = CancelHandlers()
        shallow.add(depth: 0) {}
        shallow.absorb(&longer, shiftedBy: 1)  // the longer side's buffer is kept, this one prepended
        #expect(shallow.map(\.depth) == Array(0...10))
        let below = shallow.cut(at: 4)
        #expect(shallow.map(\.depth) == [0, 1, 2, 3] && below.map(\.depth) == Array(0...6))
        shallow._checkInvariants()
        below._checkInvariants()
    }

    /// A chain whose every level has a cancel handler, built from the bottom up (each new level
    /// merges the set made so far) or from the top down, then split level by level: the longer
    /// side's buffer is kept at each step, so it is reallocated a logarithmic number of times,
    /// not once per level (which made both quadratic in the number of levels).
    @Test(arguments: [false, true])
    func handlersMoveInConstantAmortisedTimePerLevel(bottomUp: Bool) {
        let levels = 20_000
        var set = CancelHandlers()
        set.add(depth: 0) {}
        var reallocations = 0
        for level in 1..<levels {
            let before = Self.address(set)
            if bottomUp {
                var top = CancelHandlers()
                top.add(depth: 0) {}
                top.absorb(&set, shiftedBy: 1)
                set = top
            } else {
                var next = CancelHandlers()
                next.add(depth: 0) {}
                set.absorb(&next, shiftedBy: Int32(level))
            }
            if Self.address(set) != before { reallocations += 1 }
        }
        #expect(set.count == levels && set.map(\.depth) == (0..<Int32(levels)).map { $0 })
        #expect(reallocations <= 40, "\(reallocations) reallocations for \(levels) levels")
        // Splits level by level from the top: each keeps the longer part's buffer (the last, of
        // two handlers, copies one).
        var moves = 0
        for _ in 1..<levels {
            let before = Self.address(set)
            set = set.cut(at: 1)
            if Self.address(set) != before { moves += 1 }
        }
        #expect(set.count == 1 && moves <= 2, "\(moves) moves")
    }

    /// A handler added before every other (its producer armed it after its level merged into a
    /// set built from the bottom up) takes the slot before the head: the others stay where they
    /// are, and the buffer grows a logarithmic number of times. One added in the middle moves the
    /// shorter side by one slot.
    @Test func handlersAddedBeforeTheOthersTakeTheSlotsBeforeTheHead() {
        let levels: Int32 = 20_000
        var handlers = CancelHandlers()
        handlers.add(depth: levels) {}
        var reallocations = 0
        for depth in stride(from: levels - 1, through: 0, by: -1) {
            let before = Self.address(handlers)
            handlers.add(depth: depth) {}
            if Self.address(handlers) != before { reallocations += 1 }
        }
        #expect(handlers.map(\.depth) == Array(0...levels))
        #expect(reallocations <= 40, "\(reallocations) reallocations for \(levels) handlers")
        let log = Log()
        handlers.add(depth: 3, run: log.handler("second at 3"))
        handlers.add(depth: levels - 3, run: log.handler("second near the end"))
        #expect(handlers.map(\.depth) == Array(0...3) + [3] + Array(4...(levels - 3)) + [levels - 3] + Array((levels - 2)...levels))
        for handler in handlers { handler.run() }
        #expect(log.take() == ["second at 3", "second near the end"])
        handlers._checkInvariants()
    }

    /// The same for carried observers: a set built from the bottom up keeps moving its buffer to
    /// the new root, which puts its own level's observer before the head.
    @Test(arguments: [false, true])
    func observersMoveInConstantAmortisedTimePerLevel(bottomUp: Bool) {
        let levels = 20_000
        var set = MergedObservers<Int>()
        set.append(.success { _ in }, depth: 0)
        var reallocations = 0
        for level in 1..<levels {
            let before = set.buffer.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
            var single = MergedObservers<Int>()
            single.append(.success { _ in }, depth: 0)
            if bottomUp {
                single.absorb(&set, shiftedBy: 1)
                set = single
            } else {
                set.absorb(&single, shiftedBy: Int32(level))
            }
            if set.buffer.withUnsafeBufferPointer({ UnsafeRawPointer($0.baseAddress) }) != before { reallocations += 1 }
        }
        #expect(set.count == levels && set.map(\.depth) == (0..<Int32(levels)).map { $0 })
        #expect(reallocations <= 40, "\(reallocations) reallocations for \(levels) levels")
    }

    /// A loop that observes every level keeps one carried observer per level until it completes:
    /// its size is most of what observing a level costs.
    @Test func aCarriedObserverTakesFourWords() {
        #expect(MemoryLayout<MergedObserver<Int>>.stride <= 32)
        #expect(MemoryLayout<MergedObserver<String>>.stride <= 32)
    }

    /// Carried observers run from the set's own buffer, the deepest level first, each level's in
    /// the order they were registered there.
    @Test func carriedObserversRunDeepestLevelFirstInRegistrationOrder() {
        let log = Log()
        var observers = MergedObservers<Int>()
        observers.append(log.entry("1a"), depth: 1)
        observers.append(log.entry("1b"), depth: 1)
        observers.append(log.entry("2a"), depth: 2)
        observers.append(log.entry("4a"), depth: 4)
        observers.append(log.entry("4b"), depth: 4)
        observers.append(.failure { _ in log.names.withLock { $0.append("4c failed") } }, depth: 4)
        observers.run(with: .success(1))
        #expect(log.take() == ["4a", "4b", "2a", "1a", "1b"])
        observers.run(with: .failure(CancellationError()))
        #expect(log.take() == ["4c failed"])
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
