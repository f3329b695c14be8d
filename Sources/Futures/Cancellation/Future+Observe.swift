extension Future {
    /// A branch that follows this future (its outcome and progress) but is not one of its consumers: cancelling
    /// the branch, or anything derived from it, never reaches this future.
    ///
    /// OAPromise's view-controller case: the screen observes an upload it did not start; leaving the
    /// screen cancels the screen's chain, the upload goes on.
    ///
    /// ```swift
    /// let upload = uploader.upload(picture)
    /// let label = upload.observe().map { _ in "Done." }
    /// label.cancel()                 // the screen went away
    /// // `upload` is still running; cancelling `upload` would cancel `label` too.
    /// ```
    ///
    /// - Parameters:
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future that completes like this one.
    public func observe(file: StaticString = #fileID, line: UInt = #line) -> Future<Value> {
        branch().made("observe", file, line)
    }

    /// ``observe(file:line:)`` without the call site, kept so that code naming this form still
    /// compiles; a call chooses the form above.
    @_disfavoredOverload
    public func observe() -> Future<Value> {
        branch()
    }

    func branch() -> Future<Value> {
        let branch = FutureStorage<Value>()
        storage.register({ outcome in
            _ = branch.finish(outcome, origin: branch)
        }, derived: branch, consumer: false, carryingContext: false)  // runs no user code
        return Future(storage: branch)
    }
}
