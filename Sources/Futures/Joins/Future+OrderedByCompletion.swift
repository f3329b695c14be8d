extension Sequence {
    /// The same futures' outcomes, reordered so that the k-th future to complete is in slot k
    /// (CollapsingFutures' `orderedByCompletion`).
    ///
    /// ```swift
    /// for future in downloads.orderedByCompletion() {
    ///     future.whenSuccess { show($0) }   // in the order they finish
    /// }
    /// ```
    ///
    /// The slots observe the inputs; they are not consumers of them.
    ///
    /// - Parameters:
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: one future per input, completed in completion order.
    public func orderedByCompletion<Value>(file: StaticString = #fileID, line: UInt = #line) -> [Future<Value>]
    where Element == Future<Value> {
        let members = Array(self)
        let slots = members.map { _ in Promise<Value>(file: file, line: line) }
        for slot in slots { _ = slot.future.made("orderedByCompletion", file, line) }
        let counter = Guarded(0)
        for member in members {
            member.storage.register({ outcome in
                slots[counter.next()].complete(outcome)
            }, asConsumer: false, carryingContext: false)  // runs no user code: passes the outcome on
        }
        return slots.map(\.future)
    }

    /// ``orderedByCompletion(file:line:)`` without the call site, kept so that code naming this
    /// form still compiles; a call chooses the form above.
    @_disfavoredOverload
    public func orderedByCompletion<Value>() -> [Future<Value>] where Element == Future<Value> {
        orderedByCompletion(file: #fileID, line: #line)
    }

    /// The futures' outcomes as an `AsyncSequence`, in the order the futures complete, each with
    /// the index of its future; it ends after the last one.
    ///
    /// ```swift
    /// for await (index, outcome) in downloads.outcomesInCompletionOrder() {
    ///     print("download \(index): \(outcome)")
    /// }
    /// ```
    ///
    /// - Returns: a sequence of `(index, outcome)` pairs.
    public func outcomesInCompletionOrder<Value>() -> AsyncStream<(index: Int, outcome: Outcome<Value>)>
    where Element == Future<Value> {
        let members = Array(self)
        let (stream, continuation) = AsyncStream<(index: Int, outcome: Outcome<Value>)>.makeStream()
        guard !members.isEmpty else {
            continuation.finish()
            return stream
        }
        let counter = Guarded(0)
        for (index, member) in members.enumerated() {
            member.storage.register({ outcome in
                continuation.yield((index, outcome))
                if counter.next() == members.count - 1 { continuation.finish() }
            }, asConsumer: false, carryingContext: false)  // resumes a task, which has its own context
        }
        return stream
    }
}

extension Guarded where State == Int {
    /// Hands out 0, 1, 2, ... to completions racing from many threads.
    func next() -> Int {
        withLock { count in
            defer { count += 1 }
            return count
        }
    }
}
