import Dispatch
import Foundation
import Futures

/// A clock that moves only when told to, whose sleepers can be waited for without `async`: the
/// model runs on a thread of its own, and `Timer` sleeps on custom clocks in tasks.
public final class StepClock: Clock, @unchecked Sendable {
    // Safety: `offset`, `sleepers`, `cancelledEarly` and `nextID` are only touched while holding
    // `condition`'s lock.
    public struct Instant: InstantProtocol, Hashable, Sendable {
        public var offset: Duration
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var id: Int
        var deadline: Duration
        var continuation: CheckedContinuation<Void, any Error>
    }

    private let condition = NSCondition()
    private var offset: Duration = .zero
    private var sleepers: [Sleeper] = []
    private var cancelledEarly: Set<Int> = []
    private var nextID = 0

    public init() {}

    private func takeID() -> Int {
        condition.lock()
        defer { condition.unlock() }
        nextID += 1
        return nextID
    }

    public var now: Instant {
        condition.lock()
        defer { condition.unlock() }
        return Instant(offset: offset)
    }

    public var minimumResolution: Duration { .zero }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = takeID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                condition.lock()
                if cancelledEarly.remove(id) != nil {
                    condition.unlock()
                    return continuation.resume(throwing: CancellationError())
                }
                if deadline.offset <= offset {
                    condition.unlock()
                    return continuation.resume()
                }
                sleepers.append(Sleeper(id: id, deadline: deadline.offset, continuation: continuation))
                condition.broadcast()
                condition.unlock()
            }
        } onCancel: {
            condition.lock()
            let index = sleepers.firstIndex { $0.id == id }
            let sleeper = index.map { sleepers.remove(at: $0) }
            if sleeper == nil { cancelledEarly.insert(id) }
            condition.unlock()
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Blocks until at least `count` tasks sleep on this clock; `false` if `deadline` came first.
    public func waitForSleepers(count: Int, until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while sleepers.count < count {
            if !condition.wait(until: deadline) { return sleepers.count >= count }
        }
        return true
    }

    /// Wakes the sleeper due first by `target` (the one that went to sleep first, of two due at
    /// once) and moves the time to its deadline; `false` if none is due.
    public func wakeNext(upTo target: Duration) -> Bool {
        condition.lock()
        guard let index = sleepers.indices.filter({ sleepers[$0].deadline <= target })
            .min(by: { (sleepers[$0].deadline, sleepers[$0].id) < (sleepers[$1].deadline, sleepers[$1].id) })
        else {
            condition.unlock()
            return false
        }
        let sleeper = sleepers.remove(at: index)
        offset = max(offset, sleeper.deadline)
        condition.unlock()
        sleeper.continuation.resume()
        return true
    }

    /// Moves time forward and wakes the sleepers whose deadline has passed.
    public func advance(by duration: Duration) {
        condition.lock()
        offset += duration
        let now = offset
        let due = sleepers.filter { $0.deadline <= now }
        sleepers.removeAll { $0.deadline <= now }
        condition.unlock()
        for sleeper in due { sleeper.continuation.resume() }
    }
}

/// An executor that runs each job on one of several queues, chosen at random: callbacks of one
/// future land on different threads, in no particular order between queues.
public struct HoppingExecutor: Executor {
    let queues: [DispatchQueue]

    public func execute(_ work: @escaping @Sendable () -> Void) {
        queues[Int.random(in: 0..<queues.count)].async(execute: work)
    }
}

/// A value behind a lock.
public final class Locked<Value>: @unchecked Sendable {
    // Safety: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// What the callbacks of one run saw, with a condition to wait on.
final class Board: @unchecked Sendable {
    // Safety: every property is only touched while holding `condition`'s lock.
    private let condition = NSCondition()
    private var completions: [Int: Int] = [:]
    private var closureRuns: [Int: Int] = [:]
    private var progress: [Int: [Double]] = [:]
    private var cancelsHeard: [Int: Int] = [:]

    func heardCancel(_ id: Int) { update { $0.cancelsHeard[id, default: 0] += 1 } }
    func completed(_ id: Int) { update { $0.completions[id, default: 0] += 1 } }
    func ran(_ id: Int) { update { $0.closureRuns[id, default: 0] += 1 } }
    func reported(_ id: Int, _ value: Double) { update { $0.progress[id, default: []].append(value) } }

    private func update(_ body: (Board) -> Void) {
        condition.lock()
        body(self)
        condition.broadcast()
        condition.unlock()
    }

    struct Snapshot {
        var completions: [Int: Int]
        var closureRuns: [Int: Int]
        var progress: [Int: [Double]]
        var cancelsHeard: [Int: Int]
    }

    var snapshot: Snapshot {
        condition.lock()
        defer { condition.unlock() }
        return Snapshot(completions: completions, closureRuns: closureRuns, progress: progress, cancelsHeard: cancelsHeard)
    }

    /// Blocks until `done` holds for the snapshot, re-checking at least every few milliseconds (for
    /// what no callback announces, like a future no observer watches); `false` at `deadline`.
    func wait(until deadline: Date, _ done: (Snapshot) -> Bool) -> Bool {
        while true {
            if done(snapshot) { return true }
            if Date() >= deadline { return false }
            condition.lock()
            _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.005)))
            condition.unlock()
        }
    }
}
