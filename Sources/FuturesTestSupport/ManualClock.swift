import Foundation

/// A clock whose time moves only when you say: deterministic tests of timeouts, delays and retries.
///
/// Sleepers wake when ``advance(by:)`` moves time past their deadline, in deadline order; a sleeping
/// task that is cancelled wakes at once with `CancellationError`.
///
/// ```swift
/// let clock = ManualClock()
/// let slow = Promise<Int>()
/// let guarded = slow.future.timeout(after: .seconds(5), clock: clock)
/// clock.advance(by: .seconds(5))
/// let outcome = await guarded.result   // failure(FutureError.timedOut)
/// ```
public final class ManualClock: Clock, @unchecked Sendable {
    // Safety: `offset`, `sleepers`, `nextID`, `cancelledEarly` and `watchers` are only touched
    // while holding `lock`; continuations are resumed after it is released.

    /// A point in a manual clock's time: the offset from the clock's start.
    public struct Instant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
        /// Time since the clock started.
        public var offset: Duration

        /// Creates an instant at `offset` from the start.
        public init(offset: Duration) { self.offset = offset }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }

        /// The duration from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }

        /// Orders instants by offset.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }

        /// `+<offset>`.
        public var description: String { "+\(offset)" }
    }

    private struct Sleeper {
        let id: Int
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let lock = NSLock()
    private var offset = Duration.zero
    private var sleepers: [Sleeper] = []
    private var nextID = 0
    /// Sleepers cancelled before they stored their continuation.
    private var cancelledEarly: Set<Int> = []
    /// Tasks waiting in ``waitForSleepers(count:)``.
    private var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    /// Creates a clock at offset zero.
    public init() {}

    /// The current time.
    public var now: Instant {
        lock.lock()
        defer { lock.unlock() }
        return Instant(offset: offset)
    }

    /// Zero: any duration can be slept.
    public var minimumResolution: Duration { .zero }

    /// How many tasks are asleep on this clock.
    public var sleeperCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return sleepers.count
    }

    /// Suspends until time reaches `deadline` (returns at once if it has), or throws
    /// `CancellationError` when the task is cancelled.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id: Int = {
            lock.lock()
            defer { lock.unlock() }
            nextID += 1
            return nextID
        }()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                lock.lock()
                if cancelledEarly.remove(id) != nil {
                    lock.unlock()
                    continuation.resume(throwing: CancellationError())
                    return
                }
                if deadline.offset <= offset {
                    lock.unlock()
                    continuation.resume()
                    return
                }
                sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                let ready = takeReadyWatchers()
                lock.unlock()
                for watcher in ready { watcher.resume() }
            }
        } onCancel: {
            lock.lock()
            let index = sleepers.firstIndex { $0.id == id }
            let sleeper = index.map { sleepers.remove(at: $0) }
            if sleeper == nil { cancelledEarly.insert(id) }
            lock.unlock()
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Suspends until at least `count` tasks are asleep on this clock: a deterministic way to know
    /// that code under test has started waiting (and fixed its deadline) before you advance time.
    ///
    /// - Parameter count: how many sleepers to wait for.
    public func waitForSleepers(count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            if sleepers.count >= count {
                lock.unlock()
                continuation.resume()
                return
            }
            watchers.append((count, continuation))
            lock.unlock()
        }
    }

    /// Removes and returns the watchers now satisfied (caller holds `lock`).
    private func takeReadyWatchers() -> [CheckedContinuation<Void, Never>] {
        let ready = watchers.filter { sleepers.count >= $0.count }.map(\.continuation)
        watchers.removeAll { sleepers.count >= $0.count }
        return ready
    }

    /// Moves time forward by `duration` and wakes every sleeper whose deadline has passed.
    ///
    /// - Parameter duration: how far to move (not negative).
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock cannot go back")
        lock.lock()
        offset += duration
        let now = offset
        let due = sleepers.filter { $0.deadline.offset <= now }.sorted { $0.deadline < $1.deadline }
        sleepers.removeAll { $0.deadline.offset <= now }
        lock.unlock()
        for sleeper in due { sleeper.continuation.resume() }
    }
}
