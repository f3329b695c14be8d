import Dispatch
import Foundation
import FuturesModel
import FuturesTestSupport
import Testing
@testable import Futures

/// Splitting a merge set (see `Documentation/Internals.md`, "Split"): the state of the futures
/// below a registrant moves to a new future while the rest of the set waits on it. These tests pin
/// what a split must carry over: a wait the set's root was making, completions racing it, progress
/// listeners, and lifetimes.
@Suite("Splitting a merge set")
struct MergeSplitTests {
    /// A value a test's threads write and its body reads.
    final class Slot<T>: @unchecked Sendable {
        // Safety: `stored` is only touched while holding `lock`.
        private let lock = Lock()
        private var stored: T
        init(_ value: T) { stored = value }
        var value: T {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
        func update(_ body: (inout T) -> Void) { lock.withLock { body(&stored) } }
    }

    @Test func aRootThatWaitedBeforeTheSplitStillCompletes() {
        let outer = Promise<Int>(), inner = Promise<Int>(), waited = Promise<Int>()
        let waitedConsumer = waited.future.map(on: .immediate) { $0 }  // so it is waited on, not merged
        #expect(outer.complete(with: inner.future))
        #expect(inner.complete(with: waited.future))
        let later = inner.future.map(on: .immediate) { $0 + 100 }
        #expect(waited.succeed(1))
        #expect(waitedConsumer.outcome?.value == 1)
        #expect(later.outcome?.value == 101)
        #expect(outer.future.outcome?.value == 1)
    }

    @Test func aRootWaitingOnADeferredFutureStillCompletes() {
        let outer = Promise<Int>(), inner = Promise<Int>(), gate = Promise<Int>()
        let deferred = Future<Int>.deferred { gate.future }
        #expect(outer.complete(with: inner.future))
        #expect(inner.complete(with: deferred))
        let later = inner.future.map(on: .immediate) { $0 + 100 }
        #expect(gate.succeed(2))
        #expect(later.outcome?.value == 102)
        #expect(outer.future.outcome?.value == 2)
    }

    /// The adoption's own completion comes after the adoption lock: a split in between has moved
    /// the right to complete, which the adopting future's walk still reaches.
    @Test func aCompletedFutureAdoptedWhileASplitRunsCompletesEverything() {
        for _ in 0..<2_000 {
            let outer = Promise<Int>(), inner = Promise<Int>()
            #expect(outer.complete(with: inner.future))
            let accepted = Slot(false)
            let later = Slot<Future<Int>?>(nil)
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                if thread == 0 {
                    accepted.value = inner.complete(with: Future(value: 3))
                } else {
                    later.value = inner.future.map(on: .immediate) { $0 }
                }
            }
            #expect(accepted.value)
            #expect(later.value?.outcome?.value == 3)
            #expect(outer.future.outcome?.value == 3)
        }
    }

    @Test func aCycleClosedWhileASplitRunsEndsEverything() {
        for _ in 0..<2_000 {
            let outer = Promise<Int>(), inner = Promise<Int>()
            #expect(outer.complete(with: inner.future))
            let later = Slot<Future<Int>?>(nil)
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                if thread == 0 {
                    _ = inner.complete(with: outer.future.map(on: .immediate) { $0 })
                } else {
                    later.value = inner.future.map(on: .immediate) { $0 }
                }
            }
            #expect(later.value?.isPending == false)
            #expect(outer.future.isPending == false)
        }
    }

    /// Registrants at random depths of a chain of merged futures, while the bottom is merged in and
    /// completed and the top is cancelled or read: every registrant gets an outcome, the value when
    /// nothing was cancelled.
    @Test func registrantsAtRandomDepthsRacingCompletionAndCancellation() {
        for iteration in 0..<500 {
            let count = 6
            let promises = (0..<count).map { _ in Promise<Int>() }
            for level in 0..<(count - 2) { #expect(promises[level].complete(with: promises[level + 1].future)) }
            let registrants = Slot<[Future<Int>]>([])
            let cancelsTop = iteration % 3 == 0
            DispatchQueue.concurrentPerform(iterations: 5) { thread in
                switch thread {
                case 0: _ = promises[count - 2].complete(with: promises[count - 1].future)
                case 1: _ = promises[count - 1].succeed(iteration)
                case 2: if cancelsTop { _ = promises[0].future.cancel() } else { _ = promises[0].future.progress }
                default:
                    let future = promises[(iteration + thread) % count].future.map(on: .immediate) { $0 }
                    registrants.update { $0.append(future) }
                }
            }
            for future in registrants.value {
                #expect(!future.isPending)
                if !cancelsTop { #expect(future.outcome?.value == iteration) }
            }
            if !cancelsTop { #expect(promises[0].future.outcome?.value == iteration) }
        }
    }

    // MARK: Progress

    /// A report from the upstream the new future took over, arriving between the split and the
    /// root's following the new future, is not applied to the root.
    @Test func aLateReportFromTheHandedOverUpstreamIsDropped() {
        let source = Promise<Int>()
        let deepest = source.future.flatMap(on: .immediate) { _ in Promise<Int>().future }
        let outer = Promise<Int>()
        #expect(outer.complete(with: deepest))
        outer.future.whenProgress(on: .immediate) { _ in }
        source.progress = 0.2
        #expect(outer.future.progress == 0.1)
        let root = outer.future.storage
        var keepAlive: [AnyObject] = []
        let split = AdoptionGate.exclusively { FutureStorage<Int>.split(root, at: 1, keepAlive: &keepAlive) }
        source.progress = 0.6
        if let (_, change) = split, let change { root.progressSplit(change) }
        #expect(outer.future.progress == 0.3)
        source.progress = 0.8
        #expect(outer.future.progress == 0.4)
        #expect(deepest.progress == 0.4)
        let listeners = LockTable.withLock(source.future.storage) { source.future.storage.progress?.observers.count ?? 0 }
        #expect(listeners == 1, "only the new future follows the source")
    }

    /// `startFollowing` on the root with a split between its first step and adding its listener: the
    /// listener comes off again, since the root no longer follows that upstream.
    @Test func aListenerAddedAfterTheSplitComesOff() {
        let source = Promise<Int>()
        let keep = source.future.map(on: .immediate) { $0 }
        let deepest = source.future.flatMap(on: .immediate) { _ in Promise<Int>().future }
        let outer = Promise<Int>()
        #expect(outer.complete(with: deepest))
        let root = outer.future.storage
        let (upstream, _) = root.beginForwarding()
        _ = deepest.progress  // splits
        let key = ObjectIdentifier(root)
        _ = upstream!.addProgressObserver({ _, _ in }, follower: key)
        if !root.stillFollows(ObjectIdentifier(upstream!)) { upstream!.removeProgressFollower(key) }
        #expect(outer.future.cancel())
        let left = LockTable.withLock(source.future.storage) { source.future.storage.progress?.observers.count ?? 0 }
        #expect(left == 0, "listeners left on the long-lived source")
        _ = keep
    }

    @Test func readingProgressWhileTheRootStartsFollowingLeavesNoListener() {
        let source = Promise<Int>()
        let keep = source.future.map(on: .immediate) { $0 }
        for _ in 0..<2_000 {
            let deepest = source.future.flatMap(on: .immediate) { _ in Promise<Int>().future }
            let outer = Promise<Int>()
            #expect(outer.complete(with: deepest))
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                if thread == 0 { _ = outer.future.progress } else { _ = deepest.progress }
            }
            #expect(outer.future.cancel())
        }
        let left = LockTable.withLock(source.future.storage) { source.future.storage.progress?.observers.count ?? 0 }
        #expect(left == 0, "listeners left on the long-lived source")
        _ = keep
    }

    /// A join merged into an adopter keeps reporting to its own state after a split.
    @Test func aMergedJoinReportsToItsOwnStateAfterASplit() {
        let first = Promise<Int>(), second = Promise<Int>()
        let join = Future.all([first.future, second.future])
        let outer = Promise<[Int]>()
        #expect(outer.complete(with: join))
        outer.future.whenProgress(on: .immediate) { _ in }
        first.progress = 0.5
        #expect(outer.future.progress == 0.25)
        #expect(join.progress == 0.25)
        first.progress = 1
        #expect(join.progress == 0.5)
        #expect(outer.future.progress == 0.5)
    }

    /// A future split off a merge set follows its producer's progress with the weights of the
    /// `flatMap`s between them, and the future it split from keeps its own.
    @Test func aSplitAtAnIntermediateDepthKeepsItsOwnWeight() {
        let bottom = Promise<Int>(), gate = Promise<Int>()
        let middle = gate.future.flatMap(on: .immediate) { _ in bottom.future }
        let top = Future(value: 1).flatMap(on: .immediate) { _ in middle }
        #expect(gate.succeed(1))
        bottom.progress = 0.5
        #expect(top.progress == 0.875)
        #expect(middle.progress == 0.75)
        #expect(top.progress == 0.875)
    }

    /// Three levels with different weights, merged into one set: each level, read once the set is
    /// complete down to the producer, reports the weights from its own depth down.
    @Test func eachSplitLevelReportsTheWeightsFromItsDepthDown() {
        let producer = Promise<Int>()
        let gates = (0..<3).map { _ in Promise<Int>() }
        let third = gates[2].future.flatMap(progressWeight: 0.25, on: .immediate) { _ in producer.future }
        let second = gates[1].future.flatMap(progressWeight: 0.5, on: .immediate) { _ in third }
        let first = gates[0].future.flatMap(progressWeight: 0.75, on: .immediate) { _ in second }
        for gate in gates { #expect(gate.succeed(0)) }
        producer.progress = 0.5
        // 1 - (1 - w) * (1 - p), from the producer up: 0.625, then 0.8125, then 0.953125.
        #expect(first.progress == 0.953125)
        #expect(third.progress == 0.625)
        #expect(second.progress == 0.8125)
        #expect(first.progress == 0.953125)
        producer.progress = 0.75
        #expect(third.progress == 0.8125)
        #expect(second.progress == 0.90625)
        #expect(first.progress == 0.9765625)
    }

    /// A recursive loop, every level a plain `flatMap` (weight 0.5), split in the middle: the
    /// split-off future counts only the levels from its own down.
    @Test func aDeepLoopSplitInTheMiddleReportsItsOwnLevels() {
        let levels = 40
        let producer = Promise<Int>()
        let gates = (0..<levels).map { _ in Promise<Int>() }
        var chain: [Future<Int>] = [gates[levels - 1].future.flatMap(on: .immediate) { _ in producer.future }]
        for level in (0..<(levels - 1)).reversed() {
            let inner = chain[0]
            chain.insert(gates[level].future.flatMap(on: .immediate) { _ in inner }, at: 0)
        }
        // Opened from the top, each level merges the next: one set, `levels` deep.
        for gate in gates { #expect(gate.succeed(0)) }
        producer.progress = 0.5
        let middle = levels / 2
        #expect(chain[middle].progress == 1 - 0.5 * pow(0.5, Double(levels - middle)))
        #expect(chain[0].progress == 1 - 0.5 * pow(0.5, Double(levels)))
        #expect(chain[levels - 1].progress == 0.75)
    }

    // MARK: Cost

    /// A merge set `levels` deep: each promise's future adopts the next one's.
    static func mergeSet(_ levels: Int) -> [Promise<Int>] {
        let promises = (0...levels).map { _ in Promise<Int>() }
        for level in 0..<levels { #expect(promises[level].complete(with: promises[level + 1].future)) }
        return promises
    }

    /// The futures the walks along links and forwards on this thread pass while `body` runs.
    static func mergeSteps(_ body: () -> Void) -> Int {
        let context = ThreadContext.current.takeUnretainedValue()
        let before = context.mergeStepsWalked
        body()
        return context.mergeStepsWalked - before
    }

    /// Splitting from the top down: each split happens below the last, and every walk reaches it
    /// through a shortcut the walk before it recorded, not through all the splits above it.
    @Test func splittingTopDownWalksAFewFuturesPerSplit() {
        let levels = 3_000
        let promises = Self.mergeSet(levels)
        var later: [Future<Int>] = []
        let steps = Self.mergeSteps {
            for level in 1...levels { later.append(promises[level].future.map(on: .immediate) { $0 }) }
        }
        #expect(steps <= 12 * levels, "\(steps) futures passed for \(levels) splits")
        let completing = Self.mergeSteps { #expect(promises[levels].succeed(7)) }
        #expect(completing <= 12 * levels, "\(completing) futures passed completing \(levels) levels")
        #expect(later.allSatisfy { $0.outcome?.value == 7 })
        #expect(promises[0].future.outcome?.value == 7)
    }

    /// A consumer's split walks once: the walk that found the set still pending is the one the
    /// split uses inside the adoption gate, since no table of forwards changed in between.
    /// In a process of its own: the count of changes to the tables of forwards is process-wide, and
    /// tests running beside this one raise it, which rightly makes a split walk again.
    @Test func aConsumersSplitWalksToTheSetOnce() async {
        await #expect(processExitsWith: .success) {
            let levels = 1_000
            let promises = MergeSplitTests.mergeSet(levels)
            var later: [Future<Int>] = []
            let steps = MergeSplitTests.mergeSteps {
                for level in 1...levels { later.append(promises[level].future.map(on: .immediate) { $0 }) }
            }
            precondition(steps <= 3 * levels, "\(steps) futures passed for \(levels) splits")
            precondition(promises[levels].succeed(6))
            precondition(later.allSatisfy { $0.outcome?.value == 6 })
        }
    }

    #if DEBUG
    /// A consumer's walk found a set's root, which then merged into another set and lost its
    /// last handle before the walk locked it: the walk lets go of it before it walks again, so it
    /// is freed under no lock (debug builds trap on a future freed under a stripe lock), and the
    /// consumer lands on the state of its own.
    @Test func aRootThatMergesAwayBetweenAConsumersWalkAndItsLockIsFreedUnderNoLock() {
        let outer = Promise<Int>()
        var root: Promise<Int>? = Promise<Int>()
        let inner = Promise<Int>()
        #expect(root!.complete(with: inner.future))  // inner's future merges into root's
        weak let freedRoot = root!.future.storage
        ThreadContext.current.takeUnretainedValue().afterConsumerWalk = {
            // Root's set merges into outer's, and root's last handle goes.
            #expect(outer.complete(with: root!.future))
            root = nil
        }
        let consumer = inner.future.map(on: .immediate) { $0 + 1 }
        #expect(ThreadContext.current.takeUnretainedValue().afterConsumerWalk == nil, "the hook ran")
        #expect(freedRoot == nil)
        #expect(inner.succeed(41))
        #expect(consumer.outcome?.value == 42)
        #expect(outer.future.outcome?.value == 41)
    }
    #endif

    /// Splitting from the bottom up, then completing: each level's wait finishes the level above
    /// through the first future's table in one step, not through every split below it.
    @Test func completingASetSplitBottomUpWalksAFewFuturesPerLevel() {
        let levels = 3_000
        let promises = Self.mergeSet(levels)
        var later: [Future<Int>] = []
        let splitting = Self.mergeSteps {
            for level in stride(from: levels, through: 1, by: -1) {
                later.append(promises[level].future.map(on: .immediate) { $0 })
            }
        }
        #expect(splitting <= 12 * levels, "\(splitting) futures passed for \(levels) splits")
        let completing = Self.mergeSteps { #expect(promises[levels].succeed(8)) }
        #expect(completing <= 12 * levels, "\(completing) futures passed completing \(levels) levels")
        #expect(later.allSatisfy { $0.outcome?.value == 8 })
        #expect(promises[0].future.outcome?.value == 8)
    }

    /// Splitting from the outside in (the deepest level, then the shallowest, then the deepest
    /// left, ...): each walk takes the entry of a shallower split first, and a shortcut between two
    /// thresholds keeps the next walk as short.
    @Test func splittingFromTheOutsideInWalksAFewFuturesPerSplit() {
        let levels = 2_000
        let promises = Self.mergeSet(levels)
        var order: [Int] = []
        var (low, high) = (1, levels)
        while low <= high {
            order.append(high)
            if low < high { order.append(low) }
            (low, high) = (low + 1, high - 1)
        }
        var later: [Future<Int>] = []
        let splitting = Self.mergeSteps {
            for level in order { later.append(promises[level].future.map(on: .immediate) { $0 }) }
        }
        #expect(splitting <= 12 * levels, "\(splitting) futures passed for \(levels) splits")
        let completing = Self.mergeSteps { #expect(promises[levels].succeed(9)) }
        #expect(completing <= 12 * levels, "\(completing) futures passed completing \(levels) levels")
        #expect(later.allSatisfy { $0.outcome?.value == 9 })
    }

    /// Splits in a shuffled order, then the top is cancelled: the top ends cancelled, every level
    /// with a consumer of its own stays pending (its consumer still needs it), and completing the
    /// bottom reaches every one of them.
    @Test func splitsInAnyOrderThenCancellingTheTopLeavesTheLevelsWithConsumers() {
        var generator = SeededRandom(seed: 42)
        for round in 0..<20 {
            let levels = 200
            let promises = Self.mergeSet(levels)
            var order = Array(1...levels)
            order.shuffle(using: &generator)
            var later: [Int: Future<Int>] = [:]
            for level in order.prefix(levels / 2) { later[level] = promises[level].future.map(on: .immediate) { $0 } }
            #expect(promises[0].future.cancel())
            #expect(promises[0].future.outcome?.isCancelled == true)
            #expect(later.values.allSatisfy { $0.isPending })
            #expect(promises[levels].succeed(round))
            for (level, future) in later { #expect(future.outcome?.value == round, "level \(level)") }
        }
    }

    /// Splits in a shuffled order, then completion at the bottom: every level gets the value.
    @Test func splitsInAnyOrderThenCompletionReachEveryLevel() {
        var generator = SeededRandom(seed: 7)
        for round in 0..<20 {
            let levels = 200
            let promises = Self.mergeSet(levels)
            var order = Array(1...levels)
            order.shuffle(using: &generator)
            var later: [Future<Int>] = []
            let splitting = Self.mergeSteps {
                for level in order { later.append(promises[level].future.map(on: .immediate) { $0 }) }
            }
            #expect(splitting <= 12 * levels, "\(splitting) futures passed for \(levels) splits")
            #expect(promises[levels].succeed(round))
            #expect(later.allSatisfy { $0.outcome?.value == round })
            #expect(promises[0].future.outcome?.value == round)
        }
    }

    // MARK: Lifetimes

    @Test func aSplitSetRootedInNeverIsFreed() {
        weak var root: FutureStorage<Int>?
        weak var state: FutureStorage<Int>?
        do {
            let outer = Promise<Int>(), inner = Promise<Int>()
            #expect(outer.complete(with: inner.future))
            #expect(inner.complete(with: Future<Int>.never))
            let later = inner.future.map(on: .immediate) { $0 }
            root = outer.future.storage
            state = inner.future.storage.ownRoot()
            _ = later
        }
        #expect(root == nil)
        #expect(state == nil)
    }

    // MARK: Observers carried by a merge set

    /// A chain of adoptions, each level with an observer: each level's promise adopts the future
    /// of the level below it, the last one `producer`'s. Returns the levels, the top first.
    static func observedChain(_ levels: Int, producer: Promise<Int>, seen: Recorder<String>) -> [Future<Int>] {
        var chain: [Future<Int>] = []
        var inner = producer.future
        for level in (1..<levels).reversed() {
            let promise = Promise<Int>()
            promise.future.whenComplete(on: .immediate) { seen.append("\(level) \($0)") }
            #expect(promise.complete(with: inner))
            chain.insert(promise.future, at: 0)
            inner = promise.future
        }
        let top = Promise<Int>()
        #expect(top.complete(with: inner))
        chain.insert(top.future, at: 0)
        return chain
    }

    /// A future whose only registrants are observers still merges: the chain keeps one future,
    /// and every observer runs once, the deepest first, as if each level had waited on the next.
    @Test func observedLevelsMergeAndTheirObserversRunDeepestFirst() {
        let producer = Promise<Int>()
        let seen = Recorder<String>()
        let chain = Self.observedChain(4, producer: producer, seen: seen)
        for level in chain.dropFirst() {
            #expect(LockTable.withLock(level.storage) { level.storage.phase } == .linked)
        }
        #expect(producer.succeed(7))
        #expect(chain[0].outcome?.value == 7)
        #expect(seen.all == ["3 success(7)", "2 success(7)", "1 success(7)"])
    }

    /// A consumer arriving on an observed level splits the set there: that level's observers go
    /// with the new future, and see its outcome, not the cancellation of the levels above.
    @Test func aSplitTakesTheObserversOfItsDepths() {
        let producer = Promise<Int>()
        let seen = Recorder<String>()
        let middle = Promise<Int>()
        middle.future.whenComplete(on: .immediate) { seen.append("middle \($0)") }
        #expect(middle.complete(with: producer.future))
        let top = Promise<Int>()
        top.future.whenComplete(on: .immediate) { seen.append("top \($0)") }
        let outer = Future(value: 0).flatMap(on: .immediate) { _ in top.future }
        #expect(top.complete(with: middle.future))
        // A consumer of the middle level: the set splits at its depth.
        let doubled = middle.future.map(on: .immediate) { $0 * 2 }
        // The outer level's only consumer leaves: it and `top`, merged into it, are cancelled.
        #expect(outer.cancel())
        #expect(seen.all == ["top cancelled"])
        #expect(producer.succeed(21))
        #expect(doubled.outcome?.value == 42)
        #expect(seen.all == ["top cancelled", "middle success(21)"])
    }

    /// Weights that change at every level, under a first level of weight 1: the second level,
    /// split off, reports the weights from its depth down, not the first level's.
    @Test func aSplitBelowAWeightOfOneKeepsItsOwnWeights() {
        let levels = 20
        let producer = Promise<Int>()
        let gates = (0..<levels).map { _ in Promise<Int>() }
        let weights = [1.0] + (1..<levels).map { $0.isMultiple(of: 2) ? 0.01 : 0.02 }
        var chain: [Future<Int>] = [
            gates[levels - 1].future.flatMap(progressWeight: weights[levels - 1], on: .immediate) { _ in producer.future }
        ]
        for level in (0..<(levels - 1)).reversed() {
            let inner = chain[0]
            chain.insert(gates[level].future.flatMap(progressWeight: weights[level], on: .immediate) { _ in inner }, at: 0)
        }
        for gate in gates { #expect(gate.succeed(0)) }
        producer.progress = 0
        let expected = 1 - weights.dropFirst().reduce(1) { $0 * (1 - $1) }
        let read = chain[1].progress
        #expect(abs(read - expected) < 1e-9, "\(read) where \(expected) was expected")
        #expect(chain[0].progress == 1)
    }

    /// An observed set split from the top down, one level after the other: each level's observer
    /// sees the outcome once, the deepest first.
    @Test func anObservedSetSplitTopDownRunsEachObserverOnce() {
        let levels = 500
        let producer = Promise<Int>()
        let seen = Recorder<Int>()
        var chain: [Future<Int>] = []
        var inner = producer.future
        for level in (1..<levels).reversed() {
            let promise = Promise<Int>()
            promise.future.whenSuccess(on: .immediate) { _ in seen.append(level) }
            #expect(promise.complete(with: inner))
            chain.insert(promise.future, at: 0)
            inner = promise.future
        }
        let top = Promise<Int>()
        #expect(top.complete(with: inner))
        let consumers = chain.map { $0.map(on: .immediate) { $0 + 1 } }
        #expect(producer.succeed(1))
        #expect(consumers.allSatisfy { $0.outcome?.value == 2 })
        #expect(seen.all == Array((1..<levels).reversed()))
        #expect(top.future.outcome?.value == 1)
    }

    /// A chain built from the bottom up, each new observed promise adopting the set made so far:
    /// every level merges, however many observers the set carries already (its buffer moves up
    /// to the new root, which copies only its own), and every observer runs once, the deepest
    /// first.
    @Test func anObservedChainBuiltBottomUpMergesAndRunsEachObserverOnce() {
        let levels = 1_000
        let producer = Promise<Int>()
        let seen = Recorder<Int>()
        var inner = producer.future
        var chain: [Future<Int>] = []
        for level in 0..<levels {
            let promise = Promise<Int>()
            promise.future.whenSuccess(on: .immediate) { _ in seen.append(level) }
            #expect(promise.complete(with: inner))
            inner = promise.future
            chain.append(inner)
        }
        let waiting = chain.dropLast().filter { level in LockTable.withLock(level.storage) { level.storage.phase } != .linked }
        #expect(waiting.isEmpty, "\(waiting.count) of \(levels - 1) levels waited instead of merging")
        #expect(producer.succeed(1))
        #expect(inner.outcome?.value == 1)
        #expect(seen.all == Array(0..<levels))
    }

    /// Weights whose products round above 1 still read at most 1.
    @Test func progressNeverReadsAboveOne() {
        let weights = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
        let producer = Promise<Int>()
        let gates = weights.map { _ in Promise<Int>() }
        var top = gates[weights.count - 1].future.flatMap(progressWeight: weights[weights.count - 1], on: .immediate) { _ in
            producer.future
        }
        for level in (0..<(weights.count - 1)).reversed() {
            let inner = top
            top = gates[level].future.flatMap(progressWeight: weights[level], on: .immediate) { _ in inner }
        }
        for gate in gates { #expect(gate.succeed(0)) }
        producer.progress = 0.1
        #expect(top.progress <= 1)
    }

    /// A future whose completion token was read keeps its identity when adopted: the token is
    /// cancelled when the future completes.
    @Test func aFutureWithACompletionTokenIsNotMerged() {
        let inner = Promise<Int>()
        let token = inner.future.completionToken
        let outer = Promise<Int>()
        #expect(outer.complete(with: inner.future))
        #expect(!token.isCancelled)
        #expect(inner.succeed(1))
        #expect(token.isCancelled)
        #expect(outer.future.outcome?.value == 1)
    }
}

