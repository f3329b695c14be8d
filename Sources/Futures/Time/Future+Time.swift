extension Future {
    /// A future that succeeds with `value` once `duration` has passed on `clock`.
    ///
    /// ```swift
    /// let reminder = Future.after(.seconds(5), value: "stand up")
    /// ```
    ///
    /// Cancelling it stops the timer and releases `value` at once.
    ///
    /// - Parameters:
    ///   - duration: how long to wait, from now.
    ///   - value: the value to succeed with.
    ///   - clock: the clock to measure on; a manual clock in tests.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: the delayed future.
    public static func after<C: Clock>(
        _ duration: C.Duration,
        value: Value,
        clock: C = ContinuousClock(),
        file: StaticString = #fileID,
        line: UInt = #line
    ) -> Future<Value> {
        let promise = Promise<Value>(file: file, line: line)
        let timer = Timer.start(after: duration, clock: clock) { promise.succeed(value) }
        promise.storage.onCancel { timer.cancel() }  // runs no user code: carries no context
        return promise.future.made("after", file, line)
    }

    /// A future that completes like this one, `duration` after it does (successes and failures are
    /// delayed; cancellation passes at once).
    ///
    /// - Parameters:
    ///   - duration: the delay after this future completes.
    ///   - clock: the clock to measure on.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a delayed future derived from this one (one of its consumers).
    public func delayed<C: Clock>(by duration: C.Duration, clock: C = ContinuousClock(), file: StaticString = #fileID, line: UInt = #line) -> Future<Value> {
        let derived = FutureStorage<Value>()
        storage.register({ outcome in
            if case .cancelled = outcome {
                _ = derived.finish(.cancelled, origin: derived)
                return
            }
            let timer = Timer.start(after: duration, clock: clock) {
                _ = derived.finish(outcome, origin: derived)
            }
            derived.onCancel { timer.cancel() }
        }, derived: derived, carryingContext: false)  // runs no user code: passes the outcome on
        return Future(storage: derived).made("delayed", file, line)
    }

    /// A future that completes like this one, or fails with ``FutureError/timedOut`` if this one
    /// has not completed after `duration`; then it withdraws from this future (which is cancelled
    /// if that leaves it with no consumer).
    ///
    /// ```swift
    /// let picture = loadPicture().timeout(after: .seconds(10))
    /// ```
    ///
    /// A future that has completed before the deadline passes never times out, whatever the
    /// duration (zero and negative included). A duration too long to sleep (over a century) never
    /// fires.
    ///
    /// - Parameters:
    ///   - duration: how long to wait, from now.
    ///   - clock: the clock to measure on.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future derived from this one (one of its consumers).
    public func timeout<C: Clock>(after duration: C.Duration, clock: C = ContinuousClock(), file: StaticString = #fileID, line: UInt = #line) -> Future<Value> {
        let derived = FutureStorage<Value>()
        derived.setFlag(StorageFlags.completesOtherwise, true)  // the timer may fail it
        let source = storage
        // Listen first, then arm: a source that has already completed completes `derived` before
        // the timer exists (or, inside a drain loop, just after the running callback returns).
        storage.register({ outcome in
            _ = derived.finish(outcome, origin: derived)
        }, derived: derived, carryingContext: false)  // runs no user code: passes the outcome on
        if derived.outcome != nil { return Future(storage: derived).made("timeout", file, line) }
        let timer = Timer.start(after: duration, clock: clock) {
            // A source that completed before the deadline passed never times out, even if its
            // outcome has not reached `derived` yet.
            if let outcome = source.outcome {
                _ = derived.finish(outcome, origin: derived)
                return
            }
            // Take the right to complete `derived` first, so the source's cancellation caused by
            // withdrawing cannot reach it, and its registration on the source with it, so cancelling
            // `derived` meanwhile cannot withdraw a second time; then withdraw; then fail. Whoever
            // awaits the result sees the source already withdrawn from.
            let timedOut = CompleterToken()
            guard let upstream = derived.reserveLeavingUpstream(for: timedOut, from: derived) else { return }
            if let upstream { Cancellation.withdraw(from: upstream) }
            _ = derived.finish(.failure(FutureError.timedOut), origin: timedOut)
        }
        derived.register({ _ in timer.cancel() }, asConsumer: false, carryingContext: false, observes: false)
        return Future(storage: derived).made("timeout", file, line)
    }
}
