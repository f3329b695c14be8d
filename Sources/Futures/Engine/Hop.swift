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
    /// A built-in executor, kept as a ``BuiltInExecutor``: copying one is at most a retain, where
    /// an `any Executor` is copied through its type's value witnesses.
    case builtIn(BuiltInExecutor)
    /// Any other executor, wrapped so that its jobs record it.
    case custom(RecordingExecutor)

    @inlinable
    init<E: Executor>(_ executor: E) {
        // Metatype comparisons and casts fold away once specialised; no dynamic cast on the hot path.
        if E.self == ImmediateExecutor.self {
            self = .inline
        } else if E.self == CurrentExecutor.self {
            self = CurrentExecutor.resolveHop()
        } else if let builtIn = executor as? any RecordsItself {
            self = .builtIn(builtIn.builtIn)
        } else {
            self = .custom(RecordingExecutor(base: executor))
        }
    }

    /// Runs `work` inline or on the executor: for work started by a call (`Future(on:)`), which
    /// must never run inside that call unless `.immediate`. On the executor, `work` runs with the
    /// context current now, the call's (see ``FutureContext``).
    @inlinable
    func run(_ work: @escaping @Sendable () -> Void) {
        switch self {
        case .inline: work()
        case .builtIn, .custom: handOff(FutureContext.carrying(work))
        }
    }

    /// Runs `work` inline or on the executor, as it is: for a callback's job, whose user code
    /// carries the context of its registration itself (captured once, when it was registered), so
    /// that the hand-off captures nothing (the completing thread's context is not the callback's).
    @inlinable
    func handOff(_ work: @escaping @Sendable () -> Void) {
        switch self {
        case .inline: work()
        case .builtIn(let builtIn): builtIn.handOff(work, failingIfDropped: nil)
        case .custom(let recording): recording.handOff(work, failingIfDropped: nil)
        }
    }

    /// Runs `work`, the job that completes the derived future `target`, inline or on the executor.
    /// A job for an executor that may drop or repeat jobs (a custom one, or an operation queue
    /// other than the main one, whose cancelled operations never run) is guarded (see ``GuardedJob``): released without
    /// running, it fails `target` with ``FutureError/droppedJob`` rather than leave it pending
    /// forever; run twice, it runs once (debug builds trap). Like ``handOff(_:)``, it captures no
    /// context: the callback's user code carries its registration's.
    @inlinable
    func handOff(_ work: @escaping @Sendable () -> Void, failingIfDropped target: any DroppedJobTarget) {
        switch self {
        case .inline: work()
        case .builtIn(let builtIn): builtIn.handOff(work, failingIfDropped: target)
        case .custom(let recording): recording.handOff(work, failingIfDropped: target)
        }
    }

    /// Whether a callback that a drain loop is running may run its user code right here instead of
    /// handing it to its executor: `.immediate`, or executor affinity is open for it (see
    /// ``Drain/isInJob(of:)``). Only for callbacks registered on a future.
    @inlinable
    var runsHere: Bool {
        switch self {
        case .inline: return true
        case .builtIn(let builtIn): return Drain.isInJob(of: builtIn.jobAffinity)
        case .custom: return false
        }
    }

    /// Runs a callback's user code, `work`, here if ``runsHere``, else on the executor; `work`
    /// carries its registration's context itself.
    @inlinable
    func runCallback(_ work: @escaping @Sendable () -> Void) {
        if runsHere { work() } else { handOff(work) }
    }
}

/// Where a derived future's job runs, kept in the future itself (see ``HoppingMappedStorage``).
@usableFromInline
protocol HopTarget: Sendable {
    /// The executor's affinity, if it has one (a built-in executor).
    var affinity: Affinity? { get }
    /// Hands `work` to the executor, guarded if the executor may drop or repeat jobs (see
    /// ``Hop/handOff(_:failingIfDropped:)``).
    func handOff(_ work: @escaping @Sendable () -> Void, failingIfDropped target: (any DroppedJobTarget)?)
}

/// What a built-in executor runs its jobs on. When a chain step that ran in a job of an executor
/// completes the next future, that future's callbacks for the same executor run in the job, after the
/// step, instead of being handed over again: a chain on a serial queue runs in one job, not one job
/// per step (see ``Drain/completingInJob(_:)``).
///
/// Compared field by field, with no switch: a kind, the queue's identity, and the global queue's
/// quality of service. A dispatch queue counts by identity: two wrappers of one queue, like two
/// accesses of `DispatchQueue.global()` on Linux, count as two, and their callbacks are handed
/// over. An operation queue, by identity too.
@usableFromInline
struct Affinity: Equatable, Sendable {
    @usableFromInline enum Kind: UInt8, Sendable { case main, global, queue, operationQueue }

    /// The queue's address (0 for the main and the global queues).
    @usableFromInline let identity: UInt
    @usableFromInline let kind: Kind
    /// The global queue's quality of service (`.default` for the other kinds).
    @usableFromInline let qos: DispatchQoS.QoSClass

    @inlinable init(_ kind: Kind, identity: UInt = 0, qos: DispatchQoS.QoSClass = .default) {
        self.identity = identity
        self.kind = kind
        self.qos = qos
    }

    /// The main queue (and the main operation queue, whose operations run there).
    @inlinable static var main: Affinity { Affinity(.main) }
    /// A global concurrent queue.
    @inlinable static func global(_ qos: DispatchQoS.QoSClass) -> Affinity { Affinity(.global, qos: qos) }

    /// Whether this is a global concurrent queue's.
    @inlinable var isGlobal: Bool { kind == .global }
}

/// A built-in executor, as the engine keeps it: the queue it runs on (no existential around it,
/// so copying one is one retain) and its kind, from which its affinity follows.
///
/// `QueueExecutor` of the main queue is kept as `MainExecutor`: the two run their jobs the same way.
@usableFromInline
struct BuiltInExecutor: HopTarget {
    @usableFromInline enum Kind: UInt8, Sendable {
        case main, mainImmediate, global, queue, operationQueue, mainOperationQueue
    }

    @usableFromInline let kind: Kind
    /// The global queue's quality of service (`.default` for the other kinds).
    @usableFromInline let qos: DispatchQoS.QoSClass
    /// The `DispatchQueue` of `.queue`, or the `OperationQueue` of the operation queue kinds.
    @usableFromInline let queue: (any AnyObject & Sendable)?

    @inlinable init(_ kind: Kind, qos: DispatchQoS.QoSClass = .default, queue: (any AnyObject & Sendable)? = nil) {
        self.kind = kind
        self.qos = qos
        self.queue = queue
    }

    @inlinable static var main: BuiltInExecutor { BuiltInExecutor(.main) }
    @inlinable static var mainImmediate: BuiltInExecutor { BuiltInExecutor(.mainImmediate) }
    @inlinable static func global(_ qos: DispatchQoS.QoSClass) -> BuiltInExecutor { BuiltInExecutor(.global, qos: qos) }
    @inlinable static func queue(_ queue: DispatchQueue) -> BuiltInExecutor { BuiltInExecutor(.queue, queue: queue) }
    @inlinable static func operationQueue(_ queue: OperationQueue, isMain: Bool) -> BuiltInExecutor {
        BuiltInExecutor(isMain ? .mainOperationQueue : .operationQueue, queue: queue)
    }

    /// The dispatch queue of `.queue`.
    @inlinable var dispatchQueue: DispatchQueue {
        unsafeDowncast(queue.unsafelyUnwrapped as AnyObject, to: DispatchQueue.self)
    }
    /// The operation queue of the operation queue kinds.
    @inlinable var operationQueue: OperationQueue {
        unsafeDowncast(queue.unsafelyUnwrapped as AnyObject, to: OperationQueue.self)
    }

    /// What the executor runs its jobs on.
    @inlinable var affinity: Affinity? { jobAffinity }

    /// ``affinity``, which a built-in executor always has.
    @inlinable var jobAffinity: Affinity {
        switch kind {
        case .main, .mainImmediate, .mainOperationQueue: .main
        case .global: .global(qos)
        case .queue: Affinity(.queue, identity: queueAddress)
        case .operationQueue: Affinity(.operationQueue, identity: queueAddress)
        }
    }

    /// The address of the queue (which this value holds, so no other object can have it).
    @inlinable var queueAddress: UInt {
        UInt(bitPattern: ObjectIdentifier(queue.unsafelyUnwrapped as AnyObject))
    }

    /// The public executor this stands for.
    var executor: any Executor {
        switch kind {
        case .main: MainExecutor()
        case .mainImmediate: MainImmediateExecutor()
        case .global: GlobalExecutor(qos: qos)
        case .queue: QueueExecutor(dispatchQueue)
        case .operationQueue, .mainOperationQueue: OperationQueueExecutor(operationQueue)
        }
    }

    /// Runs `work` in a job of the executor, recorded as running there (see
    /// ``Drain/run(on:_:)-(BuiltInExecutor,_)``).
    @usableFromInline
    func execute(_ work: @escaping @Sendable () -> Void) {
        switch kind {
        case .main:
            DispatchQueue.main.async { Drain.run(on: self, work) }
        case .mainImmediate:
            if MainQueue.isCurrent {
                work()
            } else {
                DispatchQueue.main.async { Drain.run(on: self, work) }
            }
        case .global:
            DispatchQueue.global(qos: qos).async { Drain.run(on: self, work) }
        case .queue:
            dispatchQueue.async { Drain.run(on: self, work) }
        case .operationQueue, .mainOperationQueue:
            operationQueue.addOperation { Drain.run(on: self, work) }
        }
    }

    @inlinable
    func handOff(_ work: @escaping @Sendable () -> Void, failingIfDropped target: (any DroppedJobTarget)?) {
        // Dispatch queues never drop or repeat a job: they pay nothing for the guard. An operation
        // queue's cancelled operations never run. (The main operation queue's jobs are not guarded:
        // they count as the main queue's, whose jobs always run.)
        if kind == .operationQueue {
            let job = GuardedJob(work, target: target)
            return execute { job.run() }
        }
        execute(work)
    }
}

/// What a built-in executor's job records as running (see
/// ``Drain/run(on:_:)-(BuiltInExecutor,_)``): each gives its ``BuiltInExecutor``.
@usableFromInline
protocol RecordsItself {
    var builtIn: BuiltInExecutor { get }
}

extension MainExecutor: RecordsItself {
    @usableFromInline var builtIn: BuiltInExecutor { .main }
}
extension MainImmediateExecutor: RecordsItself {
    @usableFromInline var builtIn: BuiltInExecutor { .mainImmediate }
}
extension GlobalExecutor: RecordsItself {
    @usableFromInline var builtIn: BuiltInExecutor { .global(qos) }
}
extension QueueExecutor: RecordsItself {
    @usableFromInline var builtIn: BuiltInExecutor {
        MainQueue.isMain(queue) ? .main : .queue(queue)
    }
}
extension OperationQueueExecutor: RecordsItself {
    @usableFromInline var builtIn: BuiltInExecutor {
        .operationQueue(operationQueue, isMain: operationQueue === OperationQueue.main)
    }
}

/// Wraps a custom executor so its jobs record it as the running executor.
@usableFromInline
struct RecordingExecutor: Executor, HopTarget {
    @usableFromInline let base: any Executor

    @inlinable init(base: any Executor) { self.base = base }

    /// A custom executor has no affinity: every callback for it is a job of its own.
    @inlinable var affinity: Affinity? { nil }

    @inlinable
    func execute(_ work: @escaping @Sendable () -> Void) {
        let recording = self
        base.execute { Drain.run(on: recording, work) }
    }

    /// Hands `work` over guarded: a custom executor may drop or repeat jobs.
    @usableFromInline @inline(never)
    func handOff(_ work: @escaping @Sendable () -> Void, failingIfDropped target: (any DroppedJobTarget)?) {
        let job = GuardedJob(work, target: target)
        let recording = self
        base.execute { Drain.run(on: recording) { job.run() } }  // one closure for both wrappers
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
