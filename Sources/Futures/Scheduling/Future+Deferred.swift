extension Future {
    /// A cold future: `body` runs once, when the future is first needed, and the future then
    /// completes as the future `body` returns (the blog's lazy promise).
    ///
    /// ```swift
    /// let settings = Future<String>.deferred { loadSettings() }
    /// // Nothing has loaded yet; the first observer starts the work:
    /// settings.whenSuccess { print("loaded", $0) }
    /// ```
    ///
    /// What starts it: the first callback (`when…`), transform (`map`, `flatMap`, `observe()`,
    /// `timeout`…), join, `await` (also through ``progressUpdates``, which awaits the outcome), or
    /// a successful adoption by another future. What does not: reading ``outcome``, ``isPending``
    /// or ``progress``, `whenProgress`, a rejected adoption, or cancelling it; a deferred future
    /// cancelled before it starts never runs `body`.
    ///
    /// `body` runs on the thread that made the first demand, outside every lock: inside that call,
    /// or, when the demand is made from inside a callback, right after that callback returns. It
    /// must not block; hand slow work to an executor inside it. A deferred
    /// future whose body starts another (a recursive deferred chain) runs in a loop, not by
    /// recursion. A future adopting a deferred one waits on it rather than merging with it, so
    /// such chains hold one future per level until they complete.
    ///
    /// - Parameters:
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - body: makes the future to follow; called at most once.
    /// - Returns: the cold future.
    public static func deferred(
        file: StaticString = #fileID,
        line: UInt = #line,
        _ body: @escaping @Sendable () -> Future<Value>
    ) -> Future<Value> {
        let storage = FutureStorage<Value>()
        // The work does not capture the storage (it is handed it), so an unused deferred future
        // is freed like any other.
        storage.startsOnDemand { storage in
            Promise(completing: storage, file: file, line: line).complete(with: body())
        }
        return Future(storage: storage).made("deferred", file, line)
    }
}

extension Future {
    /// Runs `body` with the outcome, inline, as `whenComplete(on: .immediate)` does, except that it
    /// does not count as a demand: a deferred future that has not started stays unstarted until
    /// something else starts it (an observer such as a tracing span around the future). If the
    /// future is cancelled first, `body` runs with the cancellation; if it is freed unstarted,
    /// `body` is released unrun, with its other callbacks.
    package func whenCompleteWithoutStarting(_ body: @escaping @Sendable (Outcome<Value>) -> Void) {
        // The context of this call, not of whatever completes or starts the future.
        var entry: CallbackEntry<Value>? = CallbackEntry.outcome(FutureContext.carrying(body), owner: nil)
        storage.withOwnState({ $0.registerLocked(&entry, counted: false) }) { node, step in
            // Stored like any observer; only the start its registration would make is left out.
            node.registered(step == .demand ? .done : step, &entry)
        }
    }
}
