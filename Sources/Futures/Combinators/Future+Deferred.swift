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
    /// `timeout`…), join, `await`, or adoption by another future. What does not: reading
    /// ``outcome``, ``isPending`` or ``progress``, observing progress, or cancelling it; a deferred
    /// future cancelled before it starts never runs `body`.
    ///
    /// `body` runs on the thread that made the first demand, right after that call registered
    /// (outside every lock), so it must not block; hand slow work to an executor inside it.
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
        storage.ensureExtras.onDemand = { storage in
            Promise(completing: storage, file: file, line: line).complete(with: body())
        }
        return Future(storage: storage)
    }
}
