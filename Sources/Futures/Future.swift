/// A value that will be ready later: it ends once, with a value, an error, or cancellation.
///
/// A future is the read side; its ``Promise`` writes it. Attach work with transforms, which return a
/// new future (``map(on:file:line:_:)-(_,_,_,(Value)->NewValue)``, ``flatMap(on:file:line:_:)-(Executor,_,_,_)``,
/// ``recover(on:file:line:_:)-(Executor,_,_,_)``, ...), or with observers, which return nothing
/// (``whenSuccess(on:_:)-(Executor,_)``, ``whenComplete(on:_:)-(Executor,_)``, ...); or `await` it.
///
/// ```swift
/// loadPerson()
///     .flatMap { person in person.loadPicture() }
///     .whenComplete { outcome in
///         switch outcome {
///         case .success(let picture): show(picture)
///         case .failure(let error): report(error)   // any step's error falls through to here
///         case .cancelled: break
///         }
///     }
/// ```
///
/// Every closure runs on the executor given as `on:`; the default, ``Executor/current``, keeps it
/// where the registering code runs. Callbacks never run inside the call that registers them, except
/// on ``Executor/immediate`` and ``MainActorExecutor/mainImmediate``.
///
/// `Future` is a cheap handle (one reference) and `Sendable` when its value is.
public struct Future<Value: Sendable>: Sendable {
    @usableFromInline let storage: FutureStorage<Value>

    @inlinable init(storage: FutureStorage<Value>) {
        self.storage = storage
    }

    /// A future that has already succeeded with `value`.
    ///
    /// - Parameter value: the value.
    @inlinable
    public init(value: Value) {
        storage = FutureStorage(outcome: .success(value))
    }

    /// A future that has already failed with `error` (cancelled if it means cancellation: a
    /// `CancellationError`, or see ``CancellationIndicating``).
    ///
    /// - Parameter error: the error.
    @inlinable
    public init(error: any Error) {
        storage = FutureStorage(outcome: Outcome(failure: error))
    }

    /// A future that has already ended with `outcome`.
    ///
    /// - Parameter outcome: the outcome.
    @inlinable
    public init(outcome: Outcome<Value>) {
        storage = FutureStorage(outcome: outcome.normalized)
    }

    /// A future that is already cancelled. Returned from a `flatMap` closure, it stops the chain:
    /// later success and failure handlers do not run, completion handlers do.
    @inlinable
    public static var cancelled: Future<Value> {
        Future(storage: FutureStorage(outcome: .cancelled))
    }

    /// A future that never completes and stores nothing: callbacks given to it are dropped at once,
    /// and ``cancel()`` returns `false`. Futures derived from it are ordinary pending futures.
    @inlinable
    public static var never: Future<Value> {
        Future(storage: FutureStorage(never: ()))
    }

    /// Runs `body` now with a new promise and returns its future; an error thrown by `body` fails it.
    ///
    /// This wraps callback-based APIs:
    ///
    /// ```swift
    /// let data = Future<Data> { promise in
    ///     legacyLoad(url) { data, error in promise.complete(value: data, error: error) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - body: receives the promise; runs inline, before the initialiser returns.
    public init(file: StaticString = #fileID, line: UInt = #line, _ body: (Promise<Value>) throws -> Void) {
        let promise = Promise<Value>(file: file, line: line)
        do {
            try body(promise)
        } catch {
            promise.fail(error)
        }
        self = promise.future
    }

    /// Runs `work` on `executor` and completes with what it returns or throws.
    ///
    /// ```swift
    /// let checksum = Future(on: .global(qos: .utility)) { try hashFile(at: path) }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: where `work` runs.
    ///   - work: the work; throwing `CancellationError` (or see ``CancellationIndicating``) cancels
    ///     the future.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    public init(on executor: some Executor, file: StaticString = #fileID, line: UInt = #line, _ work: @escaping @Sendable () throws -> Value) {
        self.init(hop: Hop(executor), file: file, line: line, work)
    }

    init(hop: Hop, file: StaticString = #fileID, line: UInt = #line, _ work: @escaping @Sendable () throws -> Value) {
        // A promise, so that an executor that drops the job breaks the future instead of leaving
        // it pending forever.
        let promise = Promise<Value>(file: file, line: line)
        hop.run { promise.complete(Outcome(catching: work)) }
        self = promise.future.made("run", file, line)
    }

    /// Runs `work` on the main actor and completes with what it returns or throws.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - work: `@MainActor` work; throwing `CancellationError` (or see
    ///     ``CancellationIndicating``) cancels the future.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    public init(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ work: @escaping @MainActor @Sendable () throws -> Value
    ) {
        let isolated = onMainActor { (_: Void) in try work() }
        self.init(hop: Hop(executor), file: file, line: line) { try isolated(()) }
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @_disfavoredOverload
    public init(on executor: some MainActorExecutor, _ work: @escaping @MainActor @Sendable () throws -> Value) {
        let isolated = onMainActor { (_: Void) in try work() }
        self.init(hop: Hop(executor)) { try isolated(()) }
    }

    /// Whether the future has not completed yet.
    public var isPending: Bool { storage.outcome == nil }

    /// The outcome if the future has completed, else `nil`; never waits.
    public var outcome: Outcome<Value>? { storage.observedOutcome }

    /// Cancels the future if it is pending: it completes `.cancelled` at once, its success and
    /// failure callbacks are released unrun, its completion callbacks run, futures derived from it
    /// are cancelled, and its producer is told (``Promise/isCancelled``, ``Promise/onCancel(_:)``).
    ///
    /// - Returns: `true` if this call cancelled the future; `false` if it had already completed,
    ///   and always for ``never``.
    @discardableResult
    public func cancel() -> Bool {
        storage.cancel()
    }
}

extension Future: CustomStringConvertible {
    /// `Future<T>(pending)`, `Future<T>(never)` for ``never``, or `Future<T>(<outcome>)`.
    public var description: String {
        let (outcome, isNever) = storage.outcomeOrNever
        let state = isNever ? "never" : outcome.map(String.init(describing:)) ?? "pending"
        if let name = diagnosticName { return "Future<\(Value.self)>(\(state), \"\(name)\")" }
        return "Future<\(Value.self)>(\(state))"
    }
}
