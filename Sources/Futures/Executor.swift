import CFuturesAtomicGlobals
import Dispatch
import Foundation

/// Something that runs callbacks: a dispatch queue, an operation queue, the main queue, the
/// completing thread, or anything you write.
///
/// Every method of ``Future`` that takes a closure has an `on executor:` parameter, which says where
/// that closure runs. The default, ``CurrentExecutor/current``, keeps callbacks where the code that
/// registered them was running. The provided executors:
///
/// | Executor | Runs the callback |
/// |---|---|
/// | ``CurrentExecutor/current`` | on the main queue if registered there, else on the executor running the registering callback, else on `.global()` |
/// | ``MainExecutor/main`` | asynchronously on the main queue; the closure may be `@MainActor` |
/// | ``MainImmediateExecutor/mainImmediate`` | inline if already on the main queue, else asynchronously there; the closure may be `@MainActor` |
/// | ``ImmediateExecutor/immediate`` | synchronously on the thread that completes the future, or inline if it is already complete |
/// | ``GlobalExecutor/global(qos:)`` | on a global concurrent queue |
/// | ``QueueExecutor/queue(_:)`` | on the given dispatch queue |
/// | ``OperationQueueExecutor/operationQueue(_:)`` | as an operation on the given operation queue |
///
/// To write your own, implement ``execute(_:)``:
///
/// ```swift
/// struct InlineLogger: Executor {
///     func execute(_ work: @escaping @Sendable () -> Void) {
///         print("running a callback")
///         work()
///     }
/// }
/// future.whenSuccess(on: InlineLogger()) { print($0) }
/// ```
///
/// Callbacks registered on one future are handed to their executors in registration order, so on a
/// serial executor they run in registration order.
public protocol Executor: Sendable {
    /// Runs `work`, now or later, on this executor. Called once per callback.
    ///
    /// Run every job exactly once. The library guards against an executor that does not: a job
    /// run a second time does nothing (debug builds trap, to point at the executor), and a job
    /// released without running, if it would have completed a derived future (`map`, `flatMap`,
    /// `recover`, ...), fails that future with ``FutureError/droppedJob`` (soon after, on a global
    /// queue) rather than leave it pending forever. A dropped observer's job only means the
    /// observer never runs.
    func execute(_ work: @escaping @Sendable () -> Void)
}

// MARK: - The executors

/// Runs callbacks synchronously on the thread that completes the future, or inline when the future
/// is already complete (``Executor/immediate``).
///
/// Use it for cheap, non-blocking transforms. It is the only executor (with
/// ``MainImmediateExecutor``) that may run a callback inside the call that registers it. Chains of
/// any length run in a loop, not by recursion: a callback that completes another future on this
/// thread queues that future's `.immediate` callbacks to run right after it returns.
public struct ImmediateExecutor: Executor {
    /// Creates the immediate executor; prefer ``Executor/immediate``.
    public init() {}

    /// Runs `work` now, on the calling thread.
    public func execute(_ work: @escaping @Sendable () -> Void) { work() }
}

/// Runs callbacks where the registering code runs (``Executor/current``), the default everywhere.
///
/// Resolved when the callback is registered: to the main queue if the registering code runs on the
/// main queue (CollapsingFutures' "sticky main thread"); else to the executor running the current
/// callback, so a chain started on a queue stays on it; else to `.global()`.
///
/// > Warning: Code that blocks the main thread waiting for a future whose callbacks were registered
/// > there (with this default) deadlocks: the callbacks wait for the main queue you are blocking.
/// > Wait with `await future.value`; code that must block registers on an explicit executor.
public struct CurrentExecutor: Executor {
    /// Creates the current executor; prefer ``Executor/current``.
    public init() {}

    /// The executor that ``CurrentExecutor`` stands for on the calling thread right now.
    public static func resolve() -> any Executor {
        if MainQueue.isCurrent { return MainExecutor() }
        if let context = ThreadContext.existing {
            if let builtIn = context.currentBuiltIn { return builtIn.executor }
            if let custom = context.currentCustom { return custom.base }
        }
        return GlobalExecutor(qos: .default)
    }

    /// ``resolve()``, with the resolved executor's affinity.
    @usableFromInline
    static func resolveHop() -> Hop {
        if MainQueue.isCurrent { return .builtIn(.main) }
        guard let pointer = ThreadContext.existingPointer else { return .builtIn(.global(.default)) }
        // Borrowed: the thread keeps its context alive.
        return Unmanaged<ThreadContext>.fromOpaque(pointer)._withUnsafeGuaranteedRef { context in
            if let builtIn = context.currentBuiltIn { return .builtIn(builtIn) }
            if let custom = context.currentCustom { return .custom(custom) }
            return .builtIn(.global(.default))
        }
    }

    /// Resolves the current executor and runs `work` on it (a custom executor's job records it, as
    /// a callback's does, so that ``Executor/current`` inside `work` stays there).
    public func execute(_ work: @escaping @Sendable () -> Void) {
        switch Self.resolveHop() {
        case .inline: work()
        case .builtIn(let builtIn): builtIn.execute(work)
        case .custom(let recording): recording.execute(work)
        }
    }
}

/// Runs callbacks asynchronously on the main queue (``MainActorExecutor/main``).
///
/// Closures given `on: .main` are `@MainActor` and may touch main-actor state directly.
public struct MainExecutor: MainActorExecutor {
    /// Creates the main executor; prefer ``MainActorExecutor/main``.
    public init() {}

    /// Schedules `work` on the main queue.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        BuiltInExecutor.main.execute(work)
    }
}

/// Runs callbacks inline when already on the main queue, else asynchronously on it
/// (``MainActorExecutor/mainImmediate``, FutureKit's `.MainImmediate`).
///
/// Like ``ImmediateExecutor``, it may run a callback inside the registering call (when that call is
/// made on the main queue and the future is complete). Closures given to it are `@MainActor`.
public struct MainImmediateExecutor: MainActorExecutor {
    /// Creates the main-immediate executor; prefer ``MainActorExecutor/mainImmediate``.
    public init() {}

    /// Runs `work` now if on the main queue, else schedules it there.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        BuiltInExecutor.mainImmediate.execute(work)
    }
}

/// Runs callbacks on a global concurrent dispatch queue (``Executor/global(qos:)``).
public struct GlobalExecutor: Executor {
    /// The quality of service of the queue.
    public let qos: DispatchQoS.QoSClass

    /// Creates an executor for the global queue of the given quality of service.
    public init(qos: DispatchQoS.QoSClass = .default) { self.qos = qos }

    /// Schedules `work` on the global queue.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        builtIn.execute(work)
    }
}

/// Runs callbacks on a dispatch queue of yours (``Executor/queue(_:)``).
public struct QueueExecutor: Executor {
    /// The queue callbacks run on.
    public let queue: DispatchQueue

    /// Creates an executor for `queue`.
    public init(_ queue: DispatchQueue) { self.queue = queue }

    /// Schedules `work` on the queue.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        builtIn.execute(work)
    }
}

/// Runs callbacks as operations on an `OperationQueue` (``Executor/operationQueue(_:)``).
public struct OperationQueueExecutor: Executor {
    /// The operation queue callbacks run on.
    public let operationQueue: OperationQueue

    /// Creates an executor for `operationQueue`.
    public init(_ operationQueue: OperationQueue) { self.operationQueue = operationQueue }

    /// Adds `work` to the operation queue.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        builtIn.execute(work)
    }
}

/// An executor whose callbacks run on the main actor: ``MainExecutor`` and ``MainImmediateExecutor``.
///
/// Methods given one of these take `@MainActor` closures:
///
/// ```swift
/// @MainActor final class Screen { var title = "" }
/// let screen = Screen()
/// loadName().whenSuccess(on: .main) { name in
///     screen.title = name   // main-actor state, no `assumeIsolated` needed
/// }
/// ```
///
/// Write `.main` or `.mainImmediate` at the call site: a value of an opaque `some Executor` type
/// selects the nonisolated overload.
public protocol MainActorExecutor: Executor {}

// MARK: - Static members, so call sites read `on: .main`

extension MainActorExecutor where Self == MainExecutor {
    /// Asynchronously on the main queue; closures may be `@MainActor`.
    public static var main: MainExecutor { MainExecutor() }
}

extension MainActorExecutor where Self == MainImmediateExecutor {
    /// Inline if already on the main queue, else asynchronously there; closures may be `@MainActor`.
    public static var mainImmediate: MainImmediateExecutor { MainImmediateExecutor() }
}

extension Executor where Self == CurrentExecutor {
    /// Where the registering code runs: the main queue, the current callback's executor, or `.global()`.
    public static var current: CurrentExecutor { CurrentExecutor() }
}

extension Executor where Self == ImmediateExecutor {
    /// Synchronously on the completing thread, or inline if the future is already complete.
    public static var immediate: ImmediateExecutor { ImmediateExecutor() }
}

extension Executor where Self == GlobalExecutor {
    /// On the global concurrent queue of quality of service `qos`.
    public static func global(qos: DispatchQoS.QoSClass = .default) -> GlobalExecutor {
        GlobalExecutor(qos: qos)
    }
}

extension Executor where Self == QueueExecutor {
    /// On `queue`.
    public static func queue(_ queue: DispatchQueue) -> QueueExecutor { QueueExecutor(queue) }
}

extension Executor where Self == OperationQueueExecutor {
    /// As an operation on `operationQueue`.
    public static func operationQueue(_ operationQueue: OperationQueue) -> OperationQueueExecutor {
        OperationQueueExecutor(operationQueue)
    }
}

// MARK: - Main queue detection

/// Tells whether the calling code runs on the main dispatch queue.
///
/// Detected by queue, not by `Thread.isMainThread`: on Linux an async `main` drains the main queue on
/// a thread that is not the process's first thread.
enum MainQueue {
    private static let key: DispatchSpecificKey<UInt8> = {
        let key = DispatchSpecificKey<UInt8>()
        DispatchQueue.main.setSpecific(key: key, value: 1)
        return key
    }()

    /// (libdispatch's `dispatch_get_specific`, called directly: the overlay's generic
    /// `getSpecific(key:)` wraps it in a box lookup that costs more than the call.)
    static var isCurrent: Bool { swift_futures_dispatch_specific_is_set(Unmanaged.passUnretained(key).toOpaque()) }

    /// Whether `queue` is the main queue (by its specific value: on Linux, `DispatchQueue.main`
    /// makes a new wrapper object on each access, so identity cannot tell).
    static func isMain(_ queue: DispatchQueue) -> Bool { queue.getSpecific(key: key) != nil }
}
