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
        storage.cancel(when: token)
    }
}

extension FutureStorage {
    /// Cancels this future when `token` fires, at once if it has (even inside a token's handler,
    /// where a registration would be queued). The token holds this future weakly, and the
    /// registration is taken off when the future completes or is freed (a future that adopted
    /// `never` may be freed pending), so a long-lived token keeps nothing.
    func cancel(when token: CancellationToken) {
        guard let core = token.core else { return }  // `CancellationToken.never`
        if core.phase == .cancelled {
            cancel()
            return
        }
        guard let id = core.add({ [weak self] in _ = self?.cancel() }) else { return }
        let registration = TokenRegistration(core: core, id: id)
        register({ _ in withExtendedLifetime(registration) {} }, asConsumer: false, carryingContext: false, observes: false)
    }
}

/// A registration on a token, taken off when this object goes: with the callbacks of the future it
/// belongs to, once they have run, or with the future itself.
final class TokenRegistration: Sendable {
    let core: TokenCore
    let id: Int

    init(core: TokenCore, id: Int) {
        self.core = core
        self.id = id
    }

    deinit { core.remove(id) }
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
    /// cancelled. Reading it registers on the future, so it starts a ``deferred(file:line:_:)``
    /// future's work.
    public var completionToken: CancellationToken {
        storage.completionToken()
    }
}
