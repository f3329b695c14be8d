extension Sequence {
    /// Runs `handler` with each future's index and outcome as that future completes (FutureKit's
    /// `FutureBatch.onEachComplete`). On a serial executor the calls come in the order the futures
    /// completed; on a concurrent one they may overlap.
    ///
    /// ```swift
    /// let downloads = urls.map { download($0) }
    /// downloads.whenEachComplete(on: .main) { index, outcome in
    ///     rows[index].show(outcome)
    /// }
    /// ```
    ///
    /// The handler is an observer of each future, like ``Future/whenComplete(on:_:)-(Executor,_)``: it
    /// neither keeps a future from being cancelled nor cancels it.
    ///
    /// - Parameters:
    ///   - executor: where `handler` runs.
    ///   - handler: runs once per future, with its position in this sequence and its outcome.
    public func whenEachComplete<Value>(
        on executor: some Executor = .current,
        _ handler: @escaping @Sendable (_ index: Int, _ outcome: Outcome<Value>) -> Void
    ) where Element == Future<Value> {
        let hop = Hop(executor)
        for (index, future) in enumerated() {
            future.whenComplete(hop: hop) { outcome in handler(index, outcome) }
        }
    }
}
