import Dispatch
import Testing
@testable import Futures

/// Cycles closed through derived futures (`map`, `recover`, `always`, `flatMap`, ...) fail every
/// member with `.cycle` when they close, like cycles of plain adoptions.
@Suite("Cycle detection")
struct CycleDetectionTests {
    enum Step: String, CaseIterable, Sendable {
        case map, recover, always, flatMap, mapError, observe

        /// Whether the step's closure runs on a failure. A member's failure with `.cycle` still
        /// reaches such a closure through the member's source (its result is discarded).
        var runsOnFailure: Bool { [.recover, .always, .mapError].contains(self) }

        /// A future derived from `future` by this kind of step; `ran` counts closures that ran.
        func derive(_ future: Future<Int>, ran: Counter) -> Future<Int> {
            switch self {
            case .map: future.map(on: .immediate) { ran.increment(); return $0 + 1 }
            case .recover: future.recover(on: .immediate) { _ in ran.increment(); return 0 }
            case .always: future.always(on: .immediate) { _ in ran.increment() }
            case .flatMap: future.flatMap(on: .immediate) { value in ran.increment(); return Future(value: value) }
            case .mapError: future.mapError(on: .immediate) { error in ran.increment(); return error }
            case .observe: future.observe()
            }
        }
    }

    @Test(arguments: Step.allCases, [1, 2, 3, 100])
    func cyclesThroughDerivedFuturesFailEveryMember(step: Step, length: Int) {
        let ran = Counter()
        let promises = (0..<length).map { _ in Promise<Int>() }
        let derived = promises.map { step.derive($0.future, ran: ran) }
        for index in 0..<(length - 1) {
            #expect(promises[index].complete(with: derived[index + 1]))
            #expect(promises[index].future.isPending, "no cycle yet")
        }
        #expect(promises[length - 1].complete(with: derived[0]))
        for (promise, member) in zip(promises, derived) {
            #expect(isCycle(promise.future.outcome))
            #expect(isCycle(member.outcome), "\(step) member")
        }
        if !step.runsOnFailure { #expect(ran.value == 0, "no success transform of a cycle member runs") }
    }

    @Test func aCycleThroughTransformsThatChangeTheTypeFails() {
        let promise = Promise<Int>()
        let text = promise.future.map(on: .immediate) { String($0) }
        let number = text.map(on: .immediate) { Int($0)! }
        promise.complete(with: number)
        #expect(isCycle(promise.future.outcome))
        #expect(isCycle(text.outcome))
        #expect(isCycle(number.outcome))
    }

    @Test func aFlatMapReturningAMapOfItsOwnResultFails() {
        let source = Promise<Int>()
        let own = Locked<Future<Int>?>(nil)
        let result = source.future.flatMap(on: .immediate) { _ in own.withLock { $0! }.map(on: .immediate) { $0 + 1 } }
        own.withLock { $0 = result }
        source.succeed(1)
        #expect(isCycle(result.outcome))
        own.withLock { $0 = nil }
    }

    @Test func cyclesThroughMixedStepsAndAdoptionsFail() {
        // p waits on q's map (an adopter), q waits on r's recover, r on p's flatMap.
        let (p, q, r) = (Promise<Int>(), Promise<Int>(), Promise<Int>())
        let ran = Counter()
        p.complete(with: Step.map.derive(q.future, ran: ran))
        q.complete(with: Step.recover.derive(r.future, ran: ran))
        let closing = Step.flatMap.derive(p.future, ran: ran)
        r.complete(with: closing)
        for future in [p.future, q.future, r.future, closing] { #expect(isCycle(future.outcome)) }
    }

    @Test(arguments: [2, 3, 100])
    func twoThreadsClosingOneCycleThroughMapsBothFail(length: Int) {
        for _ in 0..<50 {
            let ran = Counter()
            let promises = (0..<length).map { _ in Promise<Int>() }
            let derived = promises.map { Step.map.derive($0.future, ran: ran) }
            for index in 1..<(length - 1) { promises[index].complete(with: derived[index + 1]) }
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                if side == 0 {
                    promises[0].complete(with: derived[1])
                } else {
                    promises[length - 1].complete(with: derived[0])
                }
            }
            for (promise, member) in zip(promises, derived) {
                #expect(isCycle(promise.future.outcome))
                #expect(isCycle(member.outcome))
            }
            #expect(ran.value == 0)
        }
    }

    @Test func aChainWhoseSourceCompletedIsNoCycle() {
        let first = Promise<Int>()
        let mapped = first.future.map(on: .immediate) { $0 + 1 }
        first.succeed(1)
        let other = Promise<Int>()
        #expect(other.complete(with: mapped))
        #expect(other.future.outcome?.value == 2)
    }

    @Test func adoptingTheTailOfALongPendingChainIsNoCycleAndCompletesLater() {
        let head = Promise<Int>()
        var tail = head.future
        for _ in 0..<10_000 { tail = tail.map(on: .immediate) { $0 + 1 } }
        let adopters = (0..<100).map { _ in Promise<Int>() }
        for adopter in adopters { #expect(adopter.complete(with: tail)) }
        #expect(adopters.allSatisfy { $0.future.isPending })
        head.succeed(0)
        #expect(adopters.allSatisfy { $0.future.outcome?.value == 10_000 })
    }

    @Test func aLongChainOfAdoptersThatClosesIsFoundWithoutWalkingItEachTime() {
        // Each adopter has another consumer, so adoption waits instead of merging: the compressed
        // pointers keep every adoption cheap, and the closing one still fails every member.
        let length = 20_000
        let promises = (0..<length).map { _ in Promise<Int>() }
        let consumers = promises.map { $0.future.map(on: .immediate) { $0 } }
        for index in 1..<length { promises[index].complete(with: promises[index - 1].future) }
        promises[0].complete(with: promises[length - 1].future)
        #expect(promises.allSatisfy { isCycle($0.future.outcome) })
        #expect(consumers.allSatisfy { isCycle($0.outcome) })
    }

    /// Each promise adopts a transform of the previous promise's future: a promise nothing waits
    /// on yet can close no cycle, so no adoption walks the chain behind its target.
    @Test func aChainOfPromisesAdoptingMapsOfTheirPredecessorsDoesNotWalkIt() {
        let length = 5_000
        let first = Promise<Int>()
        var previous = first.future
        // Counted on this thread, where the test adopts: other tests' walks do not count.
        let context = ThreadContext.current.takeUnretainedValue()
        let walkedBefore = context.cycleStepsWalked
        for _ in 0..<length {
            let next = Promise<Int>()
            #expect(next.complete(with: previous.map(on: .immediate) { $0 + 1 }))
            previous = next.future
        }
        let walked = context.cycleStepsWalked - walkedBefore
        #expect(walked < length, "the walks followed \(walked) waits for \(length) adoptions")
        first.succeed(0)
        #expect(previous.outcome?.value == length)
    }

    /// Each promise already has a consumer when it adopts a transform of the previous level's
    /// consumer (what nested cache fetches that map their inner future do): the walk passes plain
    /// derived futures and merge-set roots in turn, and compresses the whole run.
    @Test func aChainOfPromisesWithConsumersAdoptingMapsDoesNotWalkItEachTime() {
        let length = 5_000
        let root = Promise<Int>()
        var previous = root.future
        var promises: [Promise<Int>] = []
        let context = ThreadContext.current.takeUnretainedValue()
        let walkedBefore = context.cycleStepsWalked
        for _ in 0..<length {
            let next = Promise<Int>()
            let consumer = next.future.map(on: .immediate) { $0 }
            #expect(next.complete(with: previous.map(on: .immediate) { $0 + 1 }))
            promises.append(next)
            previous = consumer
        }
        let walked = context.cycleStepsWalked - walkedBefore
        #expect(walked < 10 * length, "the walks followed \(walked) waits for \(length) adoptions")
        root.succeed(0)
        #expect(previous.outcome?.value == length)
    }

    @Test func aCycleClosedByAPromiseThatIsWaitedOnIsStillFound() {
        let first = Promise<Int>()
        let consumer = first.future.map(on: .immediate) { $0 }
        var previous = first.future
        for _ in 0..<100 {
            let next = Promise<Int>()
            next.complete(with: previous.map(on: .immediate) { $0 + 1 })
            previous = next.future
        }
        #expect(first.complete(with: previous))
        #expect(isCycle(first.future.outcome))
        #expect(isCycle(consumer.outcome))
        #expect(isCycle(previous.outcome))
    }

    /// Adopting a completed future takes no global lock: it goes on while another thread holds
    /// the adoption gate exclusively (as a split or a cycle check does).
    @Test func adoptingACompletedFutureTakesNoAdoptionLock() {
        let done = DispatchSemaphore(value: 0)
        let adopter = Promise<Int>()
        let finished = AdoptionGate.exclusively { () -> DispatchTimeoutResult in
            DispatchQueue.global().async {
                adopter.complete(with: Future(value: 7))
                done.signal()
            }
            return done.wait(timeout: .now() + 60)
        }
        #expect(finished == .success)
        #expect(adopter.future.outcome?.value == 7)
    }

    /// The adoptions that cannot close a cycle hold the adoption gate only shared, where threads
    /// write no common memory: a new promise adopting a pending future (merged, or waited on if
    /// it has a consumer), and a consumed loop's next level, which waits on a promise that waits
    /// on nothing. The others hold it exclusively: a cycle, and a target two waits from a future
    /// that waits on something.
    @Test
    func onlyAdoptionsThatMayCloseACycleHoldTheGateExclusively() {
        #expect(!needsExclusivity { let inner = Promise<Int>(); return { _ = Promise<Int>().complete(with: inner.future) } }, "merged")
        #expect(
            !needsExclusivity {
                let inner = Promise<Int>()
                let consumer = inner.future.map(on: .immediate) { $0 }
                return { withExtendedLifetime(consumer) { _ = Promise<Int>().complete(with: inner.future) } }
            }, "waited on")
        let levels = Locked<[(Promise<Int>, Future<Int>)]>([])
        #expect(
            !needsExclusivity {
                let step = Promise<Int>()
                let adopter = Promise<Int>()
                let consumer = adopter.future.map(on: .immediate) { $0 }
                let nextLevel = step.future.flatMap(on: .immediate) { Future(value: $0) }
                levels.withLock { $0.append((step, consumer)) }
                return { _ = adopter.complete(with: nextLevel) }
            }, "a loop's next level")
        for (step, consumer) in levels.withLock({ $0 }) {
            step.succeed(3)
            #expect(consumer.outcome?.value == 3)
        }
        let cycles = Locked<[Future<Int>]>([])
        #expect(
            needsExclusivity {
                let far = Promise<Int>()
                let farConsumer = far.future.map(on: .immediate) { $0 }
                let twoAway = Promise<Int>()
                twoAway.complete(with: far.future.map(on: .immediate) { $0 })
                cycles.withLock { $0 += [far.future, farConsumer] }
                return { _ = far.complete(with: twoAway.future.map(on: .immediate) { $0 }) }
            }, "two waits from a future that waits")
        #expect(
            needsExclusivity {
                let own = Promise<Int>()
                cycles.withLock { $0.append(own.future) }
                return { _ = own.complete(with: own.future.map(on: .immediate) { $0 }) }
            }, "its own map")
        for future in cycles.withLock({ $0 }) { #expect(isCycle(future.outcome)) }
    }

    /// Whether the adoption `make` returns needed the adoption gate exclusively. Made again while
    /// another thread (another test) held the gate exclusively when it started, which keeps every
    /// adoption from sharing it.
    private func needsExclusivity(_ make: () -> () -> Void) -> Bool {
        let context = ThreadContext.current.takeUnretainedValue()
        while true {
            let adoption = make()
            let (kept, needing) = (context.adoptionsKeptFromSharing, context.adoptionsNeedingExclusivity)
            adoption()
            if context.adoptionsKeptFromSharing == kept { return context.adoptionsNeedingExclusivity > needing }
        }
    }

    /// How the futures of a cycle that threads close at once are joined.
    enum Joining: CaseIterable, Sendable {
        /// Each promise adopts the next one's future, which nothing consumes: they merge.
        case merging
        /// The same, but every future has a consumer: each waits on the next.
        case waiting
        /// Every future has a consumer, and each promise adopts a map of the next one's future:
        /// whether it closes a cycle depends on a future two waits away.
        case throughMaps
    }

    /// Threads that each make one adoption of a cycle at the same time: whichever adoption comes
    /// last finds the cycle, however the futures are joined, and every member fails.
    @Test(arguments: [2, 3, 8], Joining.allCases)
    func threadsClosingOneCycleOfPromisesAtOnceAllFail(length: Int, joining: Joining) {
        for _ in 0..<(DepthMatrixTests.sanitized ? 20 : 200) {
            let promises = (0..<length).map { _ in Promise<Int>() }
            let consumers = joining == .merging ? [] : promises.map { $0.future.map(on: .immediate) { $0 } }
            let targets = promises.map { joining == .throughMaps ? $0.future.map(on: .immediate) { $0 } : $0.future }
            DispatchQueue.concurrentPerform(iterations: length) { index in
                promises[index].complete(with: targets[(index + 1) % length])
            }
            for future in promises.map(\.future) + consumers + targets { #expect(isCycle(future.outcome)) }
        }
    }

    @Test func aRejectedAdoptionFailsNothing() {
        let p = Promise<Int>()
        let q = Promise<Int>()
        #expect(p.complete(with: q.future))
        let derived = p.future.map(on: .immediate) { $0 + 1 }
        #expect(!p.complete(with: derived), "p already adopted q")
        #expect(derived.isPending)
        q.succeed(1)
        #expect(derived.outcome?.value == 2)
    }

    @Test func theFutureAFlatMapCycleMemberReturnsIsWithdrawnFrom() {
        let p = Promise<Int>()
        let started = Promise<Int>()
        let cancelled = Counter()
        started.onCancel { cancelled.increment() }
        let member = p.future.flatMapError(on: .immediate) { _ in started.future }
        p.complete(with: member)
        #expect(isCycle(p.future.outcome) && isCycle(member.outcome))
        #expect(started.isCancelled, "the member no longer needs it, and it had no other consumer")
        #expect(cancelled.value == 1)
    }

    /// A merge can leave a stale compressed pointer that leads around a loop; the walk must end.
    @Test func aStaleCompressedPointerCannotTrapTheWalk() {
        let finished = DispatchSemaphore(value: 0)
        let outcome = Locked<Int?>(nil)
        DispatchQueue.global().async {
            let p = Promise<Int>()
            let z = p.future.map(on: .immediate) { $0 }
            let z2 = z.map(on: .immediate) { $0 }
            let a = Promise<Int>()
            a.complete(with: z)
            let aConsumer = a.future.map(on: .immediate) { $0 }
            let x = Promise<Int>()
            x.complete(with: a.future)
            let r = Promise<Int>()
            r.complete(with: x.future)
            let trigger = Promise<Void>()
            trigger.future.whenComplete(on: .immediate) { _ in
                a.future.cancel()
                p.complete(with: r.future)
            }
            trigger.succeed(())
            let s = Promise<Int>()
            s.complete(with: z2)
            p.future.cancel()
            outcome.withLock { $0 = s.future.outcome == nil ? -1 : 1 }
            withExtendedLifetime((aConsumer, s)) {}
            finished.signal()
        }
        #expect(finished.wait(timeout: .now() + 60) == .success, "the cycle walk looped")
        #expect(outcome.withLock { $0 } == 1)
    }
}
