import Foundation
import Futures

/// An executor that runs nothing until you tell it to: deterministic tests for future-based code.
///
/// Callbacks given `on: executor` queue up; ``runNext()`` runs the oldest, ``runAll()`` runs until
/// the queue is empty (including work queued by the work it runs). No sleeps, no waiting.
///
/// ```swift
/// let executor = ManualExecutor()
/// let promise = Promise<Int>()
/// var seen: [Int] = []
/// promise.future.map(on: executor) { $0 * 2 }.whenSuccess(on: .immediate) { seen.append($0) }
/// promise.succeed(21)
/// #expect(seen.isEmpty)          // the map is queued, not run
/// executor.runAll()
/// #expect(seen == [42])
/// ```
public final class ManualExecutor: Executor, @unchecked Sendable {
    // Safety: `jobs` and `ran` are only touched while holding `lock`; jobs run, and are released,
    // after it is released (a job may hold the last reference to a promise, whose release runs
    // callbacks that queue more jobs here).
    private let lock = NSLock()
    private var jobs: [(@Sendable () -> Void)?] = []
    private var head = 0
    private var ran = 0

    /// Creates an executor with an empty queue.
    public init() {}

    /// Queues `work`; it runs when the test calls ``runNext()`` or ``runAll()``.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        lock.lock()
        jobs.append(work)
        lock.unlock()
    }

    /// How many jobs are queued and not yet run.
    public var queuedCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return jobs.count - head
    }

    /// How many jobs have run so far.
    public var runCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return ran
    }

    /// Runs the oldest queued job on the calling thread.
    ///
    /// - Returns: `false` if the queue was empty.
    @discardableResult
    public func runNext() -> Bool {
        lock.lock()
        guard head < jobs.count else {
            lock.unlock()
            return false
        }
        var job: (@Sendable () -> Void)?
        swap(&job, &jobs[head])  // the slot keeps nothing of a job that ran
        head += 1
        ran += 1
        if head == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            head = 0
        }
        lock.unlock()
        job?()
        withExtendedLifetime(job) {}  // released here, after the unlock
        return true
    }

    /// Runs queued jobs, oldest first, until none is left (jobs they queue run too).
    ///
    /// - Returns: how many jobs ran.
    @discardableResult
    public func runAll() -> Int {
        var count = 0
        while runNext() { count += 1 }
        return count
    }
}
