/// What a transform's closure produced: an outcome, or a future to adopt.
@usableFromInline
enum Continuation<Value: Sendable> {
    case outcome(Outcome<Value>)
    case adopt(Future<Value>)
}

/// Which outcomes make a transform run user code (on its executor); the others pass through inline.
@usableFromInline
enum Handles: Sendable {
    case success, failure, all

    @inlinable
    func matches<Value>(_ outcome: Outcome<Value>) -> Bool {
        switch (self, outcome) {
        case (.all, _), (.success, .success), (.failure, .failure): true
        default: false
        }
    }
}

/// A future derived by an `.immediate` ``Future/map(on:file:line:_:)-(_,_,_,(Value)->NewValue)``, which keeps the transform itself
/// until it runs.
///
/// The source's callback then captures this one object and nothing else, and Swift uses a lone
/// captured object as the closure's context instead of allocating one: a map step allocates one
/// object, not two.
@usableFromInline
final class MappedStorage<Source: Sendable, Value: Sendable>: FutureStorage<Value>, @unchecked Sendable {
    // Safety: `transform` is `@Sendable`; it is read and cleared only by `receive`, which the
    // source's callback calls exactly once, and otherwise only destroyed by `deinit`. The rest is
    // ``FutureStorage``'s.
    @exclusivity(unchecked) @usableFromInline var transform: (@Sendable (Source) throws -> Value)?

    @inlinable
    init(_ transform: @escaping @Sendable (Source) throws -> Value) {
        self.transform = transform
        super.init()
    }

    /// Completes this future with the transformed outcome (as its own completer), releasing the
    /// transform (and what it captured) once it has run, as a callback is.
    @inlinable
    func receive(_ outcome: Outcome<Source>) {
        let result = outcome.then(transform!)
        transform = nil  // (borrowed above, not moved out: a move costs a retain)
        _ = finish(result, origin: self)  // normalised already (see ``settle(_:)``)
    }
}

/// A future derived by an `.immediate` transform that may adopt a future (``Future/flatMap(on:file:line:_:)-(Executor,_,_,_)``
/// and the like), which keeps the transform itself until it runs, for the reason
/// ``MappedStorage`` gives.
@usableFromInline
final class DerivedStorage<Source: Sendable, Value: Sendable>: FutureStorage<Value>, @unchecked Sendable {
    // Safety: as ``MappedStorage``'s `transform`.
    @exclusivity(unchecked) @usableFromInline var body: (@Sendable (Outcome<Source>) -> Continuation<Value>)?

    @inlinable
    init(_ body: @escaping @Sendable (Outcome<Source>) -> Continuation<Value>) {
        self.body = body
        super.init()
    }

    /// Completes this future with what `body` makes of the source's outcome, releasing `body` once
    /// it has run.
    @inlinable
    func receive(_ outcome: Outcome<Source>) {
        let continuation = body!(outcome)
        body = nil
        settle(continuation)
    }

    /// ``receive(_:)``, unless this future has completed already (its consumer cancelled it): then
    /// `body` is released unrun.
    @inlinable
    func receiveIfPending(_ outcome: Outcome<Source>) {
        guard isPendingFor(self) else {
            body = nil
            return
        }
        receive(outcome)
    }
}

/// A future derived by a ``Future/map(on:file:line:_:)-(_,_,_,(Value)->NewValue)`` on an executor,
/// which keeps the transform and where it runs itself until it runs, for the reason
/// ``MappedStorage`` gives: the source's callback captures this one object, so a step allocates no
/// closure context beside it. (A separate class, so that an `.immediate` map's future does not
/// carry an executor it never uses; generic over the kind of executor, so that a built-in one is
/// kept in one word and a half, not in an existential.)
@usableFromInline
final class HoppingMappedStorage<Source: Sendable, Value: Sendable, Target: HopTarget>: FutureStorage<Value>, @unchecked Sendable {
    // Safety: as ``MappedStorage``'s `transform`, which `receive` clears before it hands the
    // transform to a job of its own; `target` never changes.
    @exclusivity(unchecked) @usableFromInline var transform: (@Sendable (Source) throws -> Value)?
    /// Where the transform runs.
    @usableFromInline let target: Target

    @inlinable
    init(_ transform: @escaping @Sendable (Source) throws -> Value, target: Target) {
        self.transform = transform
        self.target = target
        super.init()
    }

    /// Completes this future with the transformed outcome: a value is transformed in the job
    /// running now if it is this executor's (see ``Hop/runsHere``), else in a job handed to it;
    /// a failure or a cancellation passes through inline.
    @inlinable
    func receive(_ outcome: Outcome<Source>) {
        let value: Source
        switch outcome {
        case .success(let success): value = success
        case .failure(let error):
            transform = nil
            _ = finish(.failure(error), origin: self)
            return
        case .cancelled:
            transform = nil
            _ = finish(.cancelled, origin: self)
            return
        }
        if let affinity = target.affinity, Drain.isInJob(of: affinity) {  // as `Hop.runsHere`
            let result = Outcome { try self.transform!(value) }
            transform = nil  // (borrowed above, not moved out: a move costs a retain)
            _ = finish(result, origin: self)  // in the running job: no job to allocate
            return
        }
        let work = transform!
        transform = nil
        target.handOff({
            let result = Outcome { try work(value) }
            Drain.completingInJob { _ = self.finish(result, origin: self) }
        }, failingIfDropped: self)
    }
}

extension FutureStorage {
    /// Sets up a derived future's progress before anyone else can see it (so without the lock).
    @inlinable
    func configure(progressWeight: Double?, combinesProgress: Bool, adopts: Bool) {
        if let progressWeight { setProgressWeight(progressWeight) }
        if combinesProgress { self.combinesProgress = true }
        if adopts { setFlag(StorageFlags.waitMayChange, true) }
    }

    /// Completes this (derived) future as its own completer.
    ///
    /// The outcome needs no normalising: a transform's outcome is made by `Outcome { }` or
    /// `Outcome(failure:)`, which map an error that means cancellation to `.cancelled`, and one
    /// passed through was normalised when its future completed. (Normalising again would test every
    /// error of a failing chain for a protocol conformance at every step.)
    @inlinable
    func settle(_ continuation: Continuation<Value>) {
        switch continuation {
        case .outcome(let outcome): _ = finish(outcome, origin: self)
        case .adopt(let future): adopt(future.storage, from: self)
        }
    }
}

extension Future {
    /// Makes a future derived from this one (a consumer of it), completed from `body`.
    ///
    /// With `guarded`, `body` never runs once the derived future has completed (cancelled by its
    /// consumer, typically, which may cancel this future in turn and so run its callbacks): for
    /// transforms that see a cancellation, and would otherwise run for a result nobody wants.
    @inlinable
    func derive<NewValue>(
        hop: Hop,
        handles: Handles,
        guarded: Bool = false,
        progressWeight: Double? = nil,
        combinesProgress: Bool = false,
        adopts: Bool = false,
        _ body: @escaping @Sendable (Outcome<Value>) -> Continuation<NewValue>
    ) -> Future<NewValue> {
        switch hop {
        case .inline:
            // The callback captures the derived future alone (see ``DerivedStorage``).
            let derived = DerivedStorage<Value, NewValue>(body)
            derived.configure(progressWeight: progressWeight, combinesProgress: combinesProgress, adopts: adopts)
            if guarded {
                storage.register({ outcome in derived.receiveIfPending(outcome) }, derived: derived)
            } else {
                storage.register({ outcome in derived.receive(outcome) }, derived: derived)
            }
            return Future<NewValue>(storage: derived)
        case .builtIn, .custom:
            let derived = FutureStorage<NewValue>()
            derived.configure(progressWeight: progressWeight, combinesProgress: combinesProgress, adopts: adopts)
            // The context is captured once, here, and restored where `body` runs: in the job, not
            // around the hand-off (see ``FutureContext``).
            let body = FutureContext.isInstalled ? FutureContext.carryingInstalled(body) : body
            storage.register({ outcome in
                if handles.matches(outcome) {
                    if hop.runsHere {
                        // In the running job: no job to allocate.
                        if guarded, !derived.isPendingFor(derived) { return }
                        derived.settle(body(outcome))
                    } else {
                        hop.handOff({
                            if guarded, !derived.isPendingFor(derived) { return }
                            let continuation = body(outcome)
                            Drain.completingInJob { derived.settle(continuation) }
                        }, failingIfDropped: derived)
                    }
                } else {
                    derived.settle(body(outcome))
                }
            }, derived: derived, carryingContext: false)
            return Future<NewValue>(storage: derived)
        }
    }

    /// Transforms the value; errors and cancellation pass through.
    ///
    /// ```swift
    /// let name = loadPerson().map { $0.name }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: where `transform` runs; the default keeps it where this call is made.
    ///   - transform: runs once with the value; a thrown error fails the result (a thrown
    ///     `CancellationError` cancels it).
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the transformed value.
    @inlinable
    public func map<NewValue>(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (Value) throws -> NewValue
    ) -> Future<NewValue> {
        map(hop: Hop(executor), transform).made("map", file, line)
    }

    /// A future derived from this one that completes like it: a consumer for a bridge. Its step
    /// runs no user code, so it captures no context (see ``FutureContext``).
    @inlinable
    package func consumer(file: StaticString = #fileID, line: UInt = #line) -> Future<Value> {
        map(hop: .inline, carryingContext: false) { $0 }.made("map", file, line)
    }

    /// With `carryingContext: false`, for the library's own conversions that run no user code
    /// (`.inline` only), the step captures no context.
    @inlinable
    func map<NewValue>(
        hop: consuming Hop,
        carryingContext: Bool = true,
        _ transform: @escaping @Sendable (Value) throws -> NewValue
    ) -> Future<NewValue> {
        switch consume hop {
        case .inline:
            // The callback captures the derived future alone (see ``MappedStorage``).
            let derived = MappedStorage<Value, NewValue>(transform)
            storage.register({ outcome in derived.receive(outcome) }, derived: derived, carryingContext: carryingContext)
            return Future<NewValue>(storage: derived)
        case .builtIn(let target):
            return map(hoppingTo: target, transform)
        case .custom(let target):
            return map(hoppingTo: target, transform)
        }
    }

    /// A map step whose transform runs on `target`.
    @inlinable
    func map<NewValue, Target: HopTarget>(
        hoppingTo target: Target,
        _ transform: @escaping @Sendable (Value) throws -> NewValue
    ) -> Future<NewValue> {
        let transform = FutureContext.isInstalled ? FutureContext.carryingThrowingInstalled(transform) : transform  // restored in the job
        let derived = HoppingMappedStorage<Value, NewValue, Target>(transform, target: target)
        storage.register({ outcome in derived.receive(outcome) }, derived: derived, carryingContext: false)
        return Future<NewValue>(storage: derived)
    }

    /// Continues with another asynchronous step and adopts its future (collapsing: the result is
    /// never a future of a future).
    ///
    /// ```swift
    /// let picture = loadPerson().flatMap { person in person.loadPicture() }
    /// ```
    ///
    /// Returning ``Future/cancelled`` stops the chain: later success and failure handlers do not
    /// run, completion handlers do.
    ///
    /// Progress weighs the two steps equally, like `flatMap(progressWeight: 0.5)`, and never goes
    /// backwards.
    ///
    /// - Parameters:
    ///   - executor: where `transform` runs.
    ///   - transform: runs once with the value and returns the next future.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the next step's value.
    @inlinable
    public func flatMap<NewValue>(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        flatMap(hop: Hop(executor), transform).made("flatMap", file, line)
    }

    @inlinable
    func flatMap<NewValue>(
        hop: Hop,
        progressWeight: Double? = nil,
        _ transform: @escaping @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        derive(hop: hop, handles: .success, progressWeight: progressWeight, combinesProgress: true, adopts: true) { outcome in
            switch outcome {
            case .success(let value):
                do { return .adopt(try transform(value)) } catch { return .outcome(Outcome(failure: error)) }
            case .failure(let error): return .outcome(.failure(error))
            case .cancelled: return .outcome(.cancelled)
            }
        }
    }

    /// Replaces the error of a failure; values and cancellation pass through.
    ///
    /// - Parameters:
    ///   - executor: where `transform` runs.
    ///   - transform: maps the error (returning `CancellationError` cancels the result).
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future with the mapped error.
    @inlinable
    public func mapError(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (any Error) -> any Error
    ) -> Future<Value> {
        mapError(hop: Hop(executor), transform).made("mapError", file, line)
    }

    @inlinable
    func mapError(hop: Hop, _ transform: @escaping @Sendable (any Error) -> any Error) -> Future<Value> {
        derive(hop: hop, handles: .failure) { outcome in
            if case .failure(let error) = outcome { return .outcome(Outcome(failure: transform(error))) }
            return .outcome(outcome)
        }
    }

    /// Turns a failure into a value; values and cancellation pass through.
    ///
    /// ```swift
    /// let avatar = loadPicture().recover { _ in .placeholder }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: where `transform` runs.
    ///   - transform: maps the error to a value, or throws to keep failing.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future that succeeds unless `transform` throws or this one is cancelled.
    @inlinable
    public func recover(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (any Error) throws -> Value
    ) -> Future<Value> {
        recover(hop: Hop(executor), transform).made("recover", file, line)
    }

    @inlinable
    func recover(hop: Hop, _ transform: @escaping @Sendable (any Error) throws -> Value) -> Future<Value> {
        derive(hop: hop, handles: .failure) { outcome in
            if case .failure(let error) = outcome { return .outcome(Outcome { try transform(error) }) }
            return .outcome(outcome)
        }
    }

    /// Turns a failure into another asynchronous attempt and adopts its future.
    ///
    /// ```swift
    /// let person = loadFromDisk().flatMapError { _ in loadFromServer() }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: where `transform` runs.
    ///   - transform: maps the error to the next future, or throws to keep failing.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of this value or of the recovery's.
    @inlinable
    public func flatMapError(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (any Error) throws -> Future<Value>
    ) -> Future<Value> {
        flatMapError(hop: Hop(executor), transform).made("flatMapError", file, line)
    }

    @inlinable
    func flatMapError(hop: Hop, _ transform: @escaping @Sendable (any Error) throws -> Future<Value>) -> Future<Value> {
        derive(hop: hop, handles: .failure, adopts: true) { outcome in
            guard case .failure(let error) = outcome else { return .outcome(outcome) }
            do { return .adopt(try transform(error)) } catch { return .outcome(Outcome(failure: error)) }
        }
    }

    /// Runs a side effect on any outcome, then passes the outcome on unchanged (a `finally`).
    ///
    /// ```swift
    /// upload().always { _ in spinner.stop() }.whenSuccess { showThanks() }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: where `body` runs.
    ///   - body: runs once with the outcome, cancellation included.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future that completes like this one, after `body` has run.
    @inlinable
    public func always(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ body: @escaping @Sendable (Outcome<Value>) -> Void
    ) -> Future<Value> {
        always(hop: Hop(executor), body).made("always", file, line)
    }

    @inlinable
    func always(hop: Hop, _ body: @escaping @Sendable (Outcome<Value>) -> Void) -> Future<Value> {
        derive(hop: hop, handles: .all) { outcome in
            body(outcome)
            return .outcome(outcome)
        }
    }

    /// Transforms the whole outcome: the value, the error or the cancellation (FutureKit's
    /// `onComplete` returning a completion, CollapsingFutures' `finally`). With
    /// ``flatMapOutcome(on:file:line:_:)-(Executor,_,_,_)``, the only transform that sees this future's cancellation,
    /// whoever cancelled it, and may turn it into a value.
    ///
    /// ```swift
    /// let status = upload().mapOutcome { outcome -> String in
    ///     switch outcome {
    ///     case .success: "sent"
    ///     case .failure(let error): "failed: \(error)"
    ///     case .cancelled: "cancelled"
    ///     }
    /// }
    /// ```
    ///
    /// The result is a consumer of this future, like ``map(on:file:line:_:)-(_,_,_,(Value)->NewValue)``: cancelling it
    /// withdraws, and if it is cancelled before `transform` starts (by its consumer, or with this future
    /// when it was the last consumer), `transform` never runs. A cancellation that races the start of
    /// `transform` cannot stop it; its result is then discarded.
    ///
    /// - Parameters:
    ///   - executor: where `transform` runs.
    ///   - transform: runs once with the outcome; a thrown error fails the result (an error that
    ///     means cancellation cancels it).
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the transformed outcome.
    @inlinable
    public func mapOutcome<NewValue>(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (Outcome<Value>) throws -> NewValue
    ) -> Future<NewValue> {
        derive(hop: Hop(executor), handles: .all, guarded: true) { outcome in
            .outcome(Outcome { try transform(outcome) })
        }.made("mapOutcome", file, line)
    }

    /// Continues with another asynchronous step whatever the outcome, the cancellation included,
    /// and adopts its future (see ``mapOutcome(on:file:line:_:)-(Executor,_,_,_)``).
    ///
    /// ```swift
    /// let picture = loadPicture().flatMapOutcome { outcome in
    ///     outcome.isCancelled ? loadPlaceholder() : Future(outcome: outcome)
    /// }
    /// ```
    ///
    /// Progress weighs the two steps equally, as ``flatMap(on:file:line:_:)-(Executor,_,_,_)`` does.
    ///
    /// - Parameters:
    ///   - executor: where `transform` runs.
    ///   - transform: runs once with the outcome and returns the next future; a thrown error fails
    ///     the result.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the next step's value.
    @inlinable
    public func flatMapOutcome<NewValue>(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (Outcome<Value>) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        derive(hop: Hop(executor), handles: .all, guarded: true, combinesProgress: true, adopts: true) { outcome in
            do { return .adopt(try transform(outcome)) } catch { return .outcome(Outcome(failure: error)) }
        }.made("flatMapOutcome", file, line)
    }

    /// Flattens a future of a future into the inner future's outcome (collapsing, like
    /// ``flatMap(on:file:line:_:)-(Executor,_,_,_)``).
    ///
    /// ```swift
    /// let nested: Future<Future<Int>> = Future(value: Future(value: 1))
    /// let flat: Future<Int> = nested.flatten()
    /// ```
    ///
    /// - Parameter file: the file of the call, for diagnostics; leave the default.
    /// - Parameter line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the inner future's value.
    @inlinable
    public func flatten<Inner>(file: StaticString = #fileID, line: UInt = #line) -> Future<Inner> where Value == Future<Inner> {
        flatMap(hop: .inline) { $0 }.made("flatten", file, line)
    }

    /// `map` whose closure returns a future: the result is a future of a future, which is rarely
    /// meant. Use ``flatMap(on:file:line:_:)-(Executor,_,_,_)`` to continue with the returned future.
    @available(*, deprecated, message: "this closure returns a Future, so map makes a Future<Future<T>>: use flatMap to continue with the returned future")
    @inlinable
    public func map<NewValue>(
        on executor: some Executor = .current,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<Future<NewValue>> {
        map(hop: Hop(executor), transform).made("map", file, line)
    }
}
