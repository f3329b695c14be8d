extension Promise {
    /// Creates a promise whose future is cancelled when `token` is (CollapsingFutures'
    /// `futureSourceUntil:`): the producer sees it through ``isCancelled`` and ``onCancel(_:)``.
    ///
    /// ```swift
    /// let screen = CancellationSource()
    /// let promise = Promise<Data>(cancelledBy: screen.token)
    /// promise.onCancel { request.stop() }
    /// // when the screen closes:
    /// screen.cancel()
    /// ```
    ///
    /// An already-cancelled token cancels the future at once. Once the future completes, its
    /// registration on the token is removed, so a long-lived token collects nothing.
    ///
    /// - Parameters:
    ///   - token: the token that cancels the future.
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    public convenience init(cancelledBy token: CancellationToken, file: StaticString = #fileID, line: UInt = #line) {
        self.init(file: file, line: line)
        guard let core = token.core else { return }  // `CancellationToken.never`
        let storage = self.storage
        if let registration = core.add({ _ = storage.cancel() }) {
            storage.register({ _ in core.remove(registration) }, asConsumer: false)
        }
    }
}

extension Future {
    /// A token cancelled when this future completes, whatever the outcome (CollapsingFutures'
    /// `cancelledOnCompletionToken`): hand it to work that should stop once the result is in.
    ///
    /// ```swift
    /// let search = runSearch(query)
    /// pollSuggestions(until: search.completionToken)
    /// ```
    ///
    /// Every read of a pending future's token returns the same token. A token of a completed future
    /// is already cancelled; one of a future that can never complete (``never``) can never be
    /// cancelled.
    public var completionToken: CancellationToken {
        var created: CancellationSource? = nil
        let token: CancellationToken = storage.withState { node in
            switch node.phase {
            case .linked: node.linkedFutureTrap()
            case .completed: return .cancelled
            case .never: return .never
            case .pending:
                if let token = node.extras?.completionToken { return token }
                let source = CancellationSource()
                node.ensureExtras.completionToken = source.token
                created = source
                return source.token
            }
        }
        // The first reader registers the source (after the lock: registering takes it again).
        if let created { storage.register({ _ in created.cancel() }, asConsumer: false) }
        return token
    }
}
