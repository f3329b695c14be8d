extension Future {
    /// A future that completes like this one, unless `token` is cancelled first: then it is
    /// cancelled (and, as a consumer of this future, withdraws from it).
    ///
    /// An already-cancelled token wins even over an already-completed future. When the result
    /// completes, its registration on the token is removed, so a long-lived token collects nothing.
    ///
    /// ```swift
    /// let screen = CancellationSource()
    /// loadPicture().cancellable(by: screen.token).whenSuccess(on: .main) { show($0) }
    /// // when the screen closes:
    /// screen.cancel()
    /// ```
    ///
    /// - Parameters:
    ///   - token: the token that cancels the result.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future derived from this one.
    public func cancellable(by token: CancellationToken, file: StaticString = #fileID, line: UInt = #line) -> Future<Value> {
        cancelled(by: token).made("cancellable", file, line)
    }

    /// ``cancellable(by:file:line:)`` without the call site, kept so that code naming this form
    /// still compiles; a call chooses the form above.
    @_disfavoredOverload
    public func cancellable(by token: CancellationToken) -> Future<Value> {
        cancelled(by: token)
    }

    func cancelled(by token: CancellationToken) -> Future<Value> {
        if token.isCancelled {
            Cancellation.withdraw(from: storage, .uncounted, key: nil)
            return .cancelled
        }
        let derived = FutureStorage<Value>()
        storage.register({ outcome in
            _ = derived.finish(outcome, origin: derived)
        }, derived: derived, carryingContext: false)  // runs no user code: passes the outcome on
        derived.cancel(when: token)
        return Future(storage: derived)
    }
}
