import Dispatch
import Foundation

/// Where a registered callback's user code runs, resolved once at registration.
///
/// `.inline` is ``ImmediateExecutor``: the code runs in the drain loop on the completing thread.
/// Everything else is handed to an executor that records itself as the running executor, so that
/// ``CurrentExecutor`` registered inside the callback sticks to it; a built-in executor also has an
/// ``Affinity``, so that a callback for it that a job on it makes ready runs in that job.
@usableFromInline
enum Hop: Sendable {
    case inline
    case executor(any Executor, affinity: Affinity?)

    @inlinable
    init<E: Executor>(_ executor: E) {
        // Metatype comparisons and casts fold away once specialised; no dynamic cast on the hot path.
        if E.self == ImmediateExecutor.self {
            self = .inline
        } else if E.self == CurrentExecutor.self {
            self = CurrentExecutor.resolveHop()
        } else if let builtIn = executor as? any RecordsItself {
            self = .executor(executor, affinity: builtIn.affinity)
        } else {
            self = .executor(RecordingExecutor(base: executor), affinity: nil)
        }
    }

    /// Runs `work` inline or on the executor: for work started by a call (`Future(on:)`), which
    /// must never run inside that call unless `.immediate`. On the executor, `work` runs with the
    /// context current now, the call's (see ``FutureContext``).
    @inlinable
    func run(_ work: @escaping @Sendable () -> Void) {
        switch self {
        case .inline: work()
        case .executor: handOff(FutureContext.carrying(work))
        }
    }

    /// Runs `work` inline or on the executor, as it is: for a callback's job, whose user code
    /// carries the context of its registration itself (captured once, when it was registered), so
    /// that the hand-off captures nothing (the completing thread's context is not the callback's).
    @inlinable
    func handOff(_ work: @escaping @Sendable () -> Void) {
        switch self {
        case .inline: work()
        case .executor(let executor, let affinity):
            // Dispatch queues never drop or repeat a job; other executors' jobs run at most once.
            if let affinity, !affinity.mayDropJobs { return executor.execute(work) }
            Self.runGuarded(work, on: executor, failingIfDropped: nil)
        }
    }

    /// Runs `work`, the job that completes the derived future `target`, inline or on the executor.
    /// A job for an executor that may drop or repeat jobs (a custom one, or an operation queue,
    /// whose cancelled operations never run) is guarded (see ``GuardedJob``): released without
    /// running, it fails `target` with ``FutureError/droppedJob`` rather than leave it pending
    /// forever; run twice, it runs once (debug builds trap). Like ``handOff(_:)``, it captures no
    /// context: the callback's user code carries its registration's.
    @inlinable
    func handOff(_ work: @escaping @Sendable () -> Void, failingIfDropped target: any DroppedJobTarget) {
        switch self {
        case .inline: work()
        case .executor(let executor, let affinity):
            // Dispatch queues never drop or repeat a job: they pay nothing for the guard.
            if let affinity, !affinity.mayDropJobs { return executor.execute(work) }
            Self.runGuarded(work, on: executor, failingIfDropped: target)
        }
    }

    @usableFromInline @inline(never)
    static func runGuarded(_ work: @escaping @Sendable () -> Void, on executor: any Executor, failingIfDropped target: (any DroppedJobTarget)?) {
        let job = GuardedJob(work, target: target)
        if let recording = executor as? RecordingExecutor {
            recording.execute(job)  // one closure for both wrappers
        } else {
            executor.execute { job.run() }
        }
    }

    /// Whether a callback that a drain loop is running may run its user code right here instead of
    /// handing it to its executor: `.immediate`, or executor affinity is open for it (see
    /// ``Drain/isInJob(of:)``). Only for callbacks registered on a future.
    @inlinable
    var runsHere: Bool {
        switch self {
        case .inline: return true
        case .executor(_, let affinity): return affinity.map(Drain.isInJob(of:)) ?? false
        }
    }

    /// Runs a callback's user code, `work`, here if ``runsHere``, else on the executor; `work`
    /// carries its registration's context itself.
    @inlinable
    func runCallback(_ work: @escaping @Sendable () -> Void) {
        if runsHere { work() } else { handOff(work) }
    }
}

/// What a built-in executor runs its jobs on. When a chain step that ran in a job of an executor
/// completes the next future, that future's callbacks for the same executor run in the job, after the
/// step, instead of being handed over again: a chain on a serial queue runs in one job, not one job
/// per step (see ``Drain/completingInJob(_:)``).
@usableFromInline
enum Affinity: Equatable, Sendable {
    /// A dispatch queue, by identity (two wrappers of one queue, like two accesses of
    /// `DispatchQueue.global()` on Linux, count as two: their callbacks are handed over).
    case queue(ObjectIdentifier)
    /// A global concurrent queue.
    case global(DispatchQoS.QoSClass)
    /// The main queue.
    case main
    /// An operation queue, by identity: its cancelled operations never run, so its jobs are
    /// guarded (see ``Hop/handOff(_:failingIfDropped:)``).
    case operationQueue(ObjectIdentifier)

    /// Whether jobs handed to this executor may never run.
    @inlinable var mayDropJobs: Bool {
        if case .operationQueue = self { return true }
        return false
    }
}

/// The built-in executors, which record themselves (and their ``Affinity``) as the running executor
/// in their jobs.
@usableFromInline
protocol RecordsItself {
    var affinity: Affinity { get }
}

extension MainExecutor: RecordsItself {
    @usableFromInline var affinity: Affinity { .main }
}
extension MainImmediateExecutor: RecordsItself {
    @usableFromInline var affinity: Affinity { .main }
}
extension GlobalExecutor: RecordsItself {
    @usableFromInline var affinity: Affinity { .global(qos) }
}
extension QueueExecutor: RecordsItself {
    @usableFromInline var affinity: Affinity {
        MainQueue.isMain(queue) ? .main : .queue(ObjectIdentifier(queue))
    }
}
extension OperationQueueExecutor: RecordsItself {
    @usableFromInline var affinity: Affinity {
        operationQueue === OperationQueue.main ? .main : .operationQueue(ObjectIdentifier(operationQueue))
    }
}

/// Wraps a custom executor so its jobs record it as the running executor.
@usableFromInline
struct RecordingExecutor: Executor {
    @usableFromInline let base: any Executor

    @inlinable init(base: any Executor) { self.base = base }

    @inlinable
    func execute(_ work: @escaping @Sendable () -> Void) {
        let base = self.base
        base.execute { Drain.run(on: base, affinity: nil, work) }
    }

    /// Runs a guarded job, recorded like any other.
    @usableFromInline
    func execute(_ job: GuardedJob) {
        let base = self.base
        base.execute { Drain.run(on: base, affinity: nil) { job.run() } }
    }
}

/// Turns a `@MainActor` closure into a plain `@Sendable` one for an executor that runs on the main
/// queue (``MainActorExecutor``): it asserts, rather than assumes, that it runs on the main actor.
@inlinable
func onMainActor<Argument: Sendable, Result: Sendable>(
    _ body: @escaping @MainActor @Sendable (Argument) throws -> Result
) -> @Sendable (Argument) throws -> Result {
    { argument in try MainActor.assumeIsolated { try body(argument) } }
}

/// A future that a guarded job completes, failed when the job is dropped.
@usableFromInline
protocol DroppedJobTarget: AnyObject, Sendable {
    func jobWasDropped()
}

extension FutureStorage: DroppedJobTarget {
    @usableFromInline
    func jobWasDropped() {
        if finish(.failure(FutureError.droppedJob), origin: self), Tracking.reporting { Tracking.report(droppedJobOf: self) }
    }
}

/// A custom executor's job that must run exactly once: an executor that breaks its contract
/// (releases a job unrun, or runs it twice) cannot leave a future pending forever or run a
/// callback twice.
@usableFromInline
final class GuardedJob: @unchecked Sendable {
    // Safety: `work` is taken out under `LockTable.withLock(self)` (and released after the lock);
    // `deinit` reads it when no other reference exists. `target` never changes.
    private var work: (@Sendable () -> Void)?
    private let target: (any DroppedJobTarget)?

    @usableFromInline
    init(_ work: @escaping @Sendable () -> Void, target: (any DroppedJobTarget)?) {
        self.work = work
        self.target = target
    }

    @usableFromInline
    func run() {
        let work = LockTable.withLock(self) { () -> (@Sendable () -> Void)? in
            defer { self.work = nil }
            return self.work
        }
        guard let work else {
            assertionFailure("an executor ran a job twice: Executor.execute(_:) must run each job once")
            return
        }
        work()
    }

    deinit {
        // Released without running: the executor dropped the job. The future fails on a global
        // queue, not here: an executor may release its jobs while it holds a lock of its own, and
        // the failure runs callbacks that may hand it new jobs.
        guard work != nil, let target else { return }
        DispatchQueue.global().async { target.jobWasDropped() }
    }
}
