import Dispatch
import Synchronization
import Testing
@testable import Futures

/// Consumers arriving on and leaving random levels of a merged chain (whose producers all carry
/// cancellation handlers) from several threads, while another thread ends the chain: whatever
/// the interleaving, every future settles, and a level's producer hears a cancellation exactly
/// when its future was cancelled.
@Suite("Merged chain under concurrent consumers")
struct MergedChainRaceTests {
    enum End: String, CaseIterable, Sendable {
        case succeedBottom, cancelTop, cancelBottom, cancelMiddle
    }

    /// What each worker made: it keeps its own list and hands it over once, when it is done.
    final class Box: Sendable {
        let consumers: Mutex<[[(future: Future<Int>, withdrawn: Bool)]]>
        init(workers: Int) { consumers = Mutex(Array(repeating: [], count: workers)) }
        func hand(_ made: [(future: Future<Int>, withdrawn: Bool)], from worker: Int) {
            consumers.withLock { $0[worker] = made }
        }
    }

    final class Heard: Sendable {
        let counts: Mutex<[Int]>
        init(levels: Int) { counts = Mutex(Array(repeating: 0, count: levels)) }
        func add(_ level: Int) { counts.withLock { $0[level] += 1 } }
        subscript(level: Int) -> Int { counts.withLock { $0[level] } }
    }

    static let levels = 200
    static let workers = 3
    static let rounds = 300

    @Test(arguments: End.allCases)
    func everyFutureSettlesAndEveryProducerHearsItsOwnCancellation(_ end: End) {
        for seed in 0..<4 {
            let heard = Heard(levels: Self.levels + 1)
            let promises = (0...Self.levels).map { _ in Promise<Int>() }
            for level in 0...Self.levels {
                promises[level].onCancel { heard.add(level) }
            }
            for level in 0..<Self.levels { #expect(promises[level].complete(with: promises[level + 1].future)) }
            let box = Box(workers: Self.workers)
            let registered = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: Self.workers + 1) { worker in
                if worker == Self.workers {
                    // The ender waits until the consumers are under way, then ends the chain.
                    while registered.load(ordering: .acquiring) < Self.rounds { }
                    switch end {
                    case .succeedBottom: promises[Self.levels].succeed(7)
                    case .cancelTop: promises[0].future.cancel()
                    case .cancelBottom: promises[Self.levels].cancel()
                    case .cancelMiddle: promises[Self.levels / 2].future.cancel()
                    }
                    return
                }
                var state = UInt64(seed * 31 + worker + 1)
                var made: [(future: Future<Int>, withdrawn: Bool)] = []
                defer { box.hand(made, from: worker) }
                for round in 0..<Self.rounds {
                    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    let level = Int(state >> 33) % Self.levels + 1
                    let consumer = promises[level].future.map(on: .immediate) { $0 }
                    // Withdrawn: cancelled by this call (not once the chain had ended).
                    let withdrawn = (state >> 20) & 1 == 1 && consumer.cancel()
                    made.append((consumer, withdrawn))
                    if round % 8 == 0, let earlier = made.indices.randomElement(), !made[earlier].withdrawn {
                        made[earlier].withdrawn = made[earlier].future.cancel()
                    }
                    registered.add(1, ordering: .releasing)
                }
            }
            // Whatever is still pending ends now.
            promises[Self.levels].succeed(7)
            for (level, promise) in promises.enumerated() {
                let outcome = promise.future.outcome
                #expect(outcome != nil, "level \(level) still pending after \(end), seed \(seed)")
                let cancelled = outcome?.isCancelled == true
                #expect(heard[level] == (cancelled ? 1 : 0),
                        "level \(level) (\(String(describing: outcome))) heard \(heard[level]) cancellations after \(end), seed \(seed)")
                if case .success(let value) = outcome { #expect(value == 7) }
            }
            for (future, withdrawn) in box.consumers.withLock({ $0 }).joined() {
                let outcome = future.outcome
                #expect(outcome != nil, "a consumer still pending after \(end), seed \(seed)")
                if withdrawn { #expect(outcome?.isCancelled == true) }
                if case .success(let value) = outcome { #expect(value == 7) }
            }
        }
    }
}
