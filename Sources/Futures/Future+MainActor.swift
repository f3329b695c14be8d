// Overloads that take `@MainActor` closures when the executor is `.main` or `.mainImmediate`, so
// code on those executors may touch main-actor state without `MainActor.assumeIsolated`.

extension Future {
    /// ``map(on:file:line:_:)-(_,_,_,(Value)->NewValue)`` with a `@MainActor` transform, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - transform: main-actor work that maps the value.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the transformed value.
    @inlinable
    public func map<NewValue>(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (Value) throws -> NewValue
    ) -> Future<NewValue> {
        map(hop: Hop(executor), onMainActor(transform)).made("map", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func map<NewValue>(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (Value) throws -> NewValue
    ) -> Future<NewValue> {
        map(hop: Hop(executor), onMainActor(transform))
    }

    /// ``map(on:file:line:_:)-(_,_,_,(Value)->NewValue)`` with a `@MainActor` transform that returns a future: the result is a future of
    /// a future, which is rarely meant. Use ``flatMap(on:file:line:_:)-(Executor,_,_,_)`` to continue with the returned
    /// future.
    @available(*, deprecated, message: "this closure returns a Future, so map makes a Future<Future<T>>: use flatMap to continue with the returned future")
    @inlinable
    public func map<NewValue>(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<Future<NewValue>> {
        map(hop: Hop(executor), onMainActor(transform)).made("map", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @available(*, deprecated, message: "this closure returns a Future, so map makes a Future<Future<T>>: use flatMap to continue with the returned future")
    @inlinable
    @_disfavoredOverload
    public func map<NewValue>(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<Future<NewValue>> {
        map(hop: Hop(executor), onMainActor(transform))
    }

    /// ``flatMap(on:file:line:_:)-(Executor,_,_,_)`` with a `@MainActor` transform, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - transform: main-actor work that returns the next future.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the next step's value.
    @inlinable
    public func flatMap<NewValue>(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        flatMap(hop: Hop(executor), onMainActor(transform)).made("flatMap", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func flatMap<NewValue>(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        flatMap(hop: Hop(executor), onMainActor(transform))
    }

    /// ``mapError(on:file:line:_:)-(Executor,_,_,_)`` with a `@MainActor` transform, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - transform: main-actor work that maps the error.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future with the mapped error.
    @inlinable
    public func mapError(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (any Error) -> any Error
    ) -> Future<Value> {
        let isolated = onMainActor(transform)
        return mapError(hop: Hop(executor)) { error in
            do { return try isolated(error) } catch { return error }
        }.made("mapError", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func mapError(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (any Error) -> any Error
    ) -> Future<Value> {
        let isolated = onMainActor(transform)
        return mapError(hop: Hop(executor)) { error in
            do { return try isolated(error) } catch { return error }
        }
    }

    /// ``recover(on:file:line:_:)-(Executor,_,_,_)`` with a `@MainActor` transform, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - transform: main-actor work that maps the error to a value.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future that succeeds unless `transform` throws.
    @inlinable
    public func recover(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (any Error) throws -> Value
    ) -> Future<Value> {
        recover(hop: Hop(executor), onMainActor(transform)).made("recover", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func recover(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (any Error) throws -> Value
    ) -> Future<Value> {
        recover(hop: Hop(executor), onMainActor(transform))
    }

    /// ``flatMapError(on:file:line:_:)-(Executor,_,_,_)`` with a `@MainActor` transform, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - transform: main-actor work that maps the error to the next future.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of this value or of the recovery's.
    @inlinable
    public func flatMapError(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (any Error) throws -> Future<Value>
    ) -> Future<Value> {
        flatMapError(hop: Hop(executor), onMainActor(transform)).made("flatMapError", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func flatMapError(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (any Error) throws -> Future<Value>
    ) -> Future<Value> {
        flatMapError(hop: Hop(executor), onMainActor(transform))
    }

    /// ``always(on:file:line:_:)-(Executor,_,_,_)`` with a `@MainActor` side effect, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - body: main-actor work run with any outcome.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future that completes like this one, after `body` has run.
    @inlinable
    public func always(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ body: @escaping @MainActor @Sendable (Outcome<Value>) -> Void
    ) -> Future<Value> {
        let isolated = onMainActor(body)
        return always(hop: Hop(executor)) { outcome in try? isolated(outcome) }.made("always", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func always(
        on executor: some MainActorExecutor,
        _ body: @escaping @MainActor @Sendable (Outcome<Value>) -> Void
    ) -> Future<Value> {
        let isolated = onMainActor(body)
        return always(hop: Hop(executor)) { outcome in try? isolated(outcome) }
    }

    /// ``whenSuccess(on:_:)`` with a `@MainActor` closure, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - body: main-actor work run with the value.
    @inlinable
    public func whenSuccess(on executor: some MainActorExecutor, _ body: @escaping @MainActor @Sendable (Value) -> Void) {
        let isolated = onMainActor(body)
        whenSuccess(hop: Hop(executor)) { value in try? isolated(value) }
    }

    /// ``whenFailure(on:_:)`` with a `@MainActor` closure, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - body: main-actor work run with the error.
    @inlinable
    public func whenFailure(on executor: some MainActorExecutor, _ body: @escaping @MainActor @Sendable (any Error) -> Void) {
        let isolated = onMainActor(body)
        whenFailure(hop: Hop(executor)) { error in try? isolated(error) }
    }

    /// ``whenCancelled(on:_:)`` with a `@MainActor` closure, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - body: main-actor work run on cancellation.
    @inlinable
    public func whenCancelled(on executor: some MainActorExecutor, _ body: @escaping @MainActor @Sendable () -> Void) {
        let isolated = onMainActor { (_: Void) in body() }
        whenCancelled(hop: Hop(executor)) { try? isolated(()) }
    }

    /// ``whenComplete(on:_:)`` with a `@MainActor` closure, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - body: main-actor work run with the outcome.
    @inlinable
    public func whenComplete(
        on executor: some MainActorExecutor,
        _ body: @escaping @MainActor @Sendable (Outcome<Value>) -> Void
    ) {
        let isolated = onMainActor(body)
        whenComplete(hop: Hop(executor)) { outcome in try? isolated(outcome) }
    }

    /// ``mapOutcome(on:file:line:_:)-(Executor,_,_,_)`` with a `@MainActor` transform, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - transform: main-actor work that maps the outcome.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the transformed outcome.
    @inlinable
    public func mapOutcome<NewValue>(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (Outcome<Value>) throws -> NewValue
    ) -> Future<NewValue> {
        let isolated = onMainActor(transform)
        return derive(hop: Hop(executor), handles: .all, guarded: true) { outcome in
            .outcome(Outcome { try isolated(outcome) })
        }.made("mapOutcome", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func mapOutcome<NewValue>(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (Outcome<Value>) throws -> NewValue
    ) -> Future<NewValue> {
        let isolated = onMainActor(transform)
        return derive(hop: Hop(executor), handles: .all, guarded: true) { outcome in
            .outcome(Outcome { try isolated(outcome) })
        }
    }

    /// ``flatMapOutcome(on:file:line:_:)-(Executor,_,_,_)`` with a `@MainActor` transform, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - transform: main-actor work that returns the next future.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the next step's value.
    @inlinable
    public func flatMapOutcome<NewValue>(
        on executor: some MainActorExecutor,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ transform: @escaping @MainActor @Sendable (Outcome<Value>) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        let isolated = onMainActor(transform)
        return derive(hop: Hop(executor), handles: .all, guarded: true, combinesProgress: true, adopts: true) { outcome in
            do { return .adopt(try isolated(outcome)) } catch { return .outcome(Outcome(failure: error)) }
        }.made("flatMapOutcome", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @inlinable
    @_disfavoredOverload
    public func flatMapOutcome<NewValue>(
        on executor: some MainActorExecutor,
        _ transform: @escaping @MainActor @Sendable (Outcome<Value>) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        let isolated = onMainActor(transform)
        return derive(hop: Hop(executor), handles: .all, guarded: true, combinesProgress: true, adopts: true) { outcome in
            do { return .adopt(try isolated(outcome)) } catch { return .outcome(Outcome(failure: error)) }
        }
    }
}

extension Sequence {
    /// ``whenEachComplete(on:_:)`` with a `@MainActor` handler, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - handler: main-actor work run with each future's index and outcome.
    @inlinable
    public func whenEachComplete<Value>(
        on executor: some MainActorExecutor,
        _ handler: @escaping @MainActor @Sendable (_ index: Int, _ outcome: Outcome<Value>) -> Void
    ) where Element == Future<Value> {
        let isolated = onMainActor { (argument: (Int, Outcome<Value>)) in handler(argument.0, argument.1) }
        let hop = Hop(executor)
        for (index, future) in enumerated() {
            future.whenComplete(hop: hop) { outcome in try? isolated((index, outcome)) }
        }
    }
}
