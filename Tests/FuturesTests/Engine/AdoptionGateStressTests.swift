import Dispatch
import Synchronization
import Testing
@testable import Futures

/// Threads that close cycles of 2 to 50 futures at once, each link made a different way (a
/// promise adopting the next future, a map of it, a `flatMap` or `flatMapError` that adopts it
/// when its trigger completes, a deferred future), some links made before the threads start and
/// some consumers arriving meanwhile: whichever adoption comes last must find the cycle, so
/// every future of it (and every consumer) has failed with `FutureError.cycle` once the threads
/// are done. A future still pending then is a cycle the shared adoptions let through.
@Suite("Adoption gate under concurrent cycles")
struct AdoptionGateStressTests {
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    enum Link: CaseIterable, Sendable {
        /// `promise.complete(with: next)`, on a thread.
        case direct
        /// `promise.complete(with: next.map { $0 })`, on a thread.
        case map
        /// The promise adopts `trigger.flatMap { next }` before the threads start; a thread
        /// completes the trigger.
        case flatMapTrigger
        /// `promise.complete(with: next.flatMap { Future(value: $0) })`, on a thread.
        case flatMapOfNext
        /// The promise adopts `failing.flatMapError { _ in next }` before the threads start; a
        /// thread fails `failing`.
        case recover
        /// `promise.complete(with: .deferred { next })`, on a thread.
        case deferred
        /// The same, before the threads start: the deferred future adopts `next` then.
        case deferredEarly
        /// The promise adopts `next` before the threads start.
        case directEarly
        /// `promise.complete(with: next.timeout(after: an hour))`, on a thread.
        case timeout
    }

    struct Boom: Error {}

    // `Locked`, not `Mutex`: ThreadSanitizer sees pthread locks, not `Synchronization.Mutex` on Linux.
    final class Made: Sendable { let futures = Locked<[Future<Int>]>([]) }

    /// One cycle of `length` futures, with random links and random consumers.
    static func closeOneCycle(length: Int, seed: UInt64, links allowed: [Link]) -> [Future<Int>] {
        var random = Generator(state: seed)
        let promises = (0..<length).map { _ in Promise<Int>() }
        var watched: [Future<Int>] = promises.map(\.future)
        var actions: [@Sendable () -> Void] = []
        var links = (0..<length).map { _ in allowed.randomElement(using: &random)! }
        // At least one link made on a thread, or the setup itself closes the cycle.
        if !links.contains(where: { ![.flatMapTrigger, .recover, .deferredEarly, .directEarly].contains($0) }) {
            links[0] = .direct
        }
        for index in 0..<length {
            let promise = promises[index]
            let next = promises[(index + 1) % length].future
            switch links[index] {
            case .direct:
                actions.append { _ = promise.complete(with: next) }
            case .map:
                actions.append { _ = promise.complete(with: next.map(on: .immediate) { $0 }) }
            case .flatMapTrigger:
                let trigger = Promise<Int>()
                #expect(promise.complete(with: trigger.future.flatMap(on: .immediate) { _ in next }))
                actions.append { _ = trigger.succeed(1) }
            case .flatMapOfNext:
                actions.append { _ = promise.complete(with: next.flatMap(on: .immediate) { Future(value: $0) }) }
            case .recover:
                let failing = Promise<Int>()
                #expect(promise.complete(with: failing.future.flatMapError(on: .immediate) { _ in next }))
                actions.append { _ = failing.fail(Boom()) }
            case .deferred:
                actions.append { _ = promise.complete(with: .deferred { next }) }
            case .deferredEarly:
                #expect(promise.complete(with: .deferred { next }))
            case .directEarly:
                #expect(promise.complete(with: next))
            case .timeout:
                actions.append { _ = promise.complete(with: next.timeout(after: .seconds(3600))) }
            }
        }
        // Consumers: some before the threads start, some arriving while they adopt (each may
        // split a set the adoptions made).
        for index in 0..<length where Int.random(in: 0..<3, using: &random) == 0 {
            watched.append(promises[index].future.map(on: .immediate) { $0 })
        }
        let late = Locked<[Future<Int>]>([])
        for index in 0..<length where Int.random(in: 0..<3, using: &random) == 0 {
            let future = promises[index].future
            actions.append {
                let consumer = future.map(on: .immediate) { $0 }
                late.withLock { $0.append(consumer) }
            }
        }
        actions.shuffle(using: &random)
        let work = actions
        DispatchQueue.concurrentPerform(iterations: work.count) { work[$0]() }
        return watched + late.withLock { $0 }
    }

    #if DEBUG
    static var rounds: Int { DepthMatrixTests.sanitized ? 30 : 100 }
    #else
    static var rounds: Int { DepthMatrixTests.sanitized ? 30 : 300 }
    #endif

    @Test(arguments: [2, 3, 5, 17, 50])
    func everyLinkKindMixed(length: Int) {
        var pending = 0
        var other = 0
        for round in 0..<Self.rounds {
            let futures = Self.closeOneCycle(length: length, seed: UInt64(length * 100_000 + round), links: Link.allCases)
            for future in futures {
                if future.outcome == nil { pending += 1 } else if !isCycle(future.outcome) { other += 1 }
            }
        }
        #expect(pending == 0, "futures of a closed cycle still pending")
        #expect(other == 0, "futures of a closed cycle completed otherwise")
    }

    /// Only links made on threads, which each may be shared.
    @Test(arguments: [2, 3, 4, 8, 50])
    func onlyConcurrentLinks(length: Int) {
        var pending = 0
        var other = 0
        for round in 0..<Self.rounds {
            let futures = Self.closeOneCycle(
                length: length, seed: UInt64(length * 7_000_000 + round),
                links: [.direct, .map, .flatMapOfNext, .deferred, .flatMapTrigger, .timeout])
            for future in futures {
                if future.outcome == nil { pending += 1 } else if !isCycle(future.outcome) { other += 1 }
            }
        }
        #expect(pending == 0, "futures of a closed cycle still pending")
        #expect(other == 0, "futures of a closed cycle completed otherwise")
    }

    /// Two recursive loops, each `flatMap` level returning the next (merged into one state),
    /// driven by two threads at once, while a third registers consumers on levels the loops made
    /// and merged (each splits a set) and cancels every other one (the split level still has its
    /// adopter as a consumer, so nothing is cancelled upward), and, with `cancelOuter`, one loop's outer
    /// future is cancelled half way: every consumer settles, with the loop's value unless it
    /// (or the outer future) was cancelled.
    @Test(arguments: [false, true])
    func twoDeepLoopsWithLateConsumers(cancelOuter: Bool) {
        #if DEBUG
        let depth = DepthMatrixTests.sanitized ? 2_000 : 20_000
        #else
        let depth = DepthMatrixTests.sanitized ? 2_000 : 100_000
        #endif
        let made = (0..<2).map { _ in Made() }
        let fresh = (0..<2).map { _ in Made() }  // the level just made, until its adopter took it
        let steps = (0..<2).map { _ in (0..<depth).map { _ in Promise<Int>() } }
        @Sendable func level(_ loop: Int, _ index: Int) -> Future<Int> {
            if index == depth { return Future(value: depth) }
            let future = steps[loop][index].future.flatMap(on: .immediate) { _ in level(loop, index + 1) }
            if index % 97 == 0 { fresh[loop].futures.withLock { $0.append(future) } }
            return future
        }
        let outers = (0..<2).map { level($0, 0) }
        let outerConsumers = outers.map { $0.map(on: .immediate) { $0 } }  // so that no other consumer is the outer's last
        let consumers = Locked<[(future: Future<Int>, cancelled: Bool)]>([])
        let driving = Atomic<Int>(2)
        DispatchQueue.concurrentPerform(iterations: 3) { thread in
            if thread < 2 {
                for index in 0..<depth {
                    _ = steps[thread][index].succeed(index)
                    // Only now has level index + 1 been adopted (merged into the loop's state): a
                    // consumer leaving a level that nothing adopted yet would rightly cancel it.
                    let adopted = fresh[thread].futures.withLock { taken in defer { taken = [] }; return taken }
                    if !adopted.isEmpty { made[thread].futures.withLock { $0 += adopted } }
                    if cancelOuter, thread == 1, index == depth / 2 { _ = outers[1].cancel() }
                }
                driving.subtract(1, ordering: .sequentiallyConsistent)
            } else {
                var taken = [0, 0]
                var turn = 0
                while driving.load(ordering: .sequentiallyConsistent) > 0 {
                    let loop = turn % 2
                    turn += 1
                    guard let future = made[loop].futures.withLock({ taken[loop] < $0.count ? $0[taken[loop]] : nil }) else { continue }
                    taken[loop] += 1
                    let consumer = future.map(on: .immediate) { $0 }
                    let cancelled = turn % 4 < 2 && consumer.cancel()
                    consumers.withLock { $0.append((consumer, cancelled)) }
                }
            }
        }
        let all = consumers.withLock { $0 }
        var unsettled = 0
        var wrong = 0
        for (future, cancelled) in all {
            guard let outcome = future.outcome else { unsettled += 1; continue }
            if cancelled { if !outcome.isCancelled { wrong += 1 } }
            else if outcome.value != depth && !(cancelOuter && outcome.isCancelled) { wrong += 1 }
        }
        #expect(unsettled == 0)
        #expect(wrong == 0)
        #expect(outers[0].outcome?.value == depth)
        #expect(outerConsumers[0].outcome?.value == depth)
        if cancelOuter {
            #expect(outers[1].outcome?.isCancelled == true)
            #expect(outerConsumers[1].outcome?.isCancelled == true)
        } else {
            #expect(outers[1].outcome?.value == depth)
            #expect(outerConsumers[1].outcome?.value == depth)
        }
    }
}
