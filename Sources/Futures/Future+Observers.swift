extension Hop {
    /// Runs a callback's `body(argument)` here or on the executor (see ``runsHere``; no allocation
    /// when it runs here). `body` carries its registration's context itself: the hand-off captures
    /// none.
    @inlinable
    func runCallback<Argument: Sendable>(_ argument: Argument, _ body: @escaping @Sendable (Argument) -> Void) {
        if runsHere { body(argument) } else { handOff { body(argument) } }
    }
}

extension Future {
    /// Runs `body` with the value if the future succeeds.
    ///
    /// Observers are not consumers: they neither keep the future from being cancelled nor cancel it.
    ///
    /// - Parameters:
    ///   - executor: where `body` runs; the default keeps it where this call is made.
    ///   - body: runs at most once; released unrun on failure or cancellation.
    @inlinable
    public func whenSuccess(on executor: some Executor = .current, _ body: @escaping @Sendable (Value) -> Void) {
        whenSuccess(hop: Hop(executor), body)
    }

    @inlinable @inline(__always)  // so that `.immediate` folds to the inline path: no `Hop` to copy
    func whenSuccess(hop: Hop, _ body: @escaping @Sendable (Value) -> Void) {
        if case .inline = hop { return storage.registerInlineObserver(.success(body)) }  // no wrapper to allocate
        // On an executor, `body` restores the context in the job, not around the hand-off. (Checked
        // here, so that without carriers `body` is passed through no generic function at all: its
        // conversions would cost allocations.)
        let body = FutureContext.isInstalled ? FutureContext.carryingInstalled(body) : body
        storage.register({ outcome in
            if case .success(let value) = outcome { hop.runCallback(value, body) }
        }, asConsumer: false, carryingContext: false)
    }

    /// Runs `body` with the error if the future fails (not if it is cancelled).
    ///
    /// - Parameters:
    ///   - executor: where `body` runs.
    ///   - body: runs at most once.
    @inlinable
    public func whenFailure(on executor: some Executor = .current, _ body: @escaping @Sendable (any Error) -> Void) {
        whenFailure(hop: Hop(executor), body)
    }

    @inlinable @inline(__always)  // so that `.immediate` folds to the inline path: no `Hop` to copy
    func whenFailure(hop: Hop, _ body: @escaping @Sendable (any Error) -> Void) {
        if case .inline = hop { return storage.registerInlineObserver(.failure(body)) }  // no wrapper to allocate
        let body = FutureContext.isInstalled ? FutureContext.carryingInstalled(body) : body  // restored in the job
        storage.register({ outcome in
            if case .failure(let error) = outcome { hop.runCallback(error, body) }
        }, asConsumer: false, carryingContext: false)
    }

    /// Runs `body` if the future is cancelled.
    ///
    /// - Parameters:
    ///   - executor: where `body` runs.
    ///   - body: runs at most once.
    @inlinable
    public func whenCancelled(on executor: some Executor = .current, _ body: @escaping @Sendable () -> Void) {
        whenCancelled(hop: Hop(executor), body)
    }

    @inlinable
    func whenCancelled(hop: Hop, _ body: @escaping @Sendable () -> Void) {
        let body = FutureContext.isInstalled ? FutureContext.carryingInstalled(body) : body  // restored in the job
        storage.register({ outcome in
            guard case .cancelled = outcome else { return }
            hop.runCallback(body)
        }, asConsumer: false, carryingContext: false)
    }

    /// Runs `body` with the outcome, whatever it is: the place for cleanup that must always happen.
    ///
    /// ```swift
    /// showSpinner()
    /// upload().whenComplete(on: .main) { _ in hideSpinner() }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: where `body` runs.
    ///   - body: runs exactly once.
    @inlinable
    public func whenComplete(on executor: some Executor = .current, _ body: @escaping @Sendable (Outcome<Value>) -> Void) {
        whenComplete(hop: Hop(executor), body)
    }

    @inlinable @inline(__always)  // so that `.immediate` folds to the inline path: no `Hop` to copy
    func whenComplete(hop: Hop, _ body: @escaping @Sendable (Outcome<Value>) -> Void) {
        if case .inline = hop { return storage.register(body, asConsumer: false) }  // no wrapper
        let body = FutureContext.isInstalled ? FutureContext.carryingInstalled(body) : body  // restored in the job
        storage.register({ outcome in hop.runCallback(outcome, body) }, asConsumer: false, carryingContext: false)
    }
}
