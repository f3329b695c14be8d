/// A signal that some work should stop: it is cancelled at most once, by its ``CancellationSource``.
///
/// Pass a token to an operation so the caller can cancel it later; the operation checks
/// ``isCancelled`` or registers ``onCancel(_:)`` handlers. A token whose source went away without
/// cancelling can never be cancelled any more (``canBeCancelled`` is `false`), and its handlers are
/// released unrun: waiting on a dead token holds nothing.
///
/// ```swift
/// let source = CancellationSource()
/// let download = fetch(url, cancelledBy: source.token)
/// cancelButton.action = { source.cancel() }
/// ```
///
/// Tokens compose: ``either(_:_:)`` is cancelled by the first of two tokens, ``both(_:_:)`` by the
/// last, and ``CancellationSource/init(linkedTo:)`` makes a child source that a parent token cancels.
public struct CancellationToken: Sendable, Hashable {
    /// `nil` is the token that never cancels.
    @usableFromInline let core: TokenCore?

    @usableFromInline init(core: TokenCore?) { self.core = core }

    /// A token that is already cancelled.
    public static let cancelled = CancellationToken(core: TokenCore(phase: .cancelled))

    /// A token that is never cancelled.
    public static let never = CancellationToken(core: nil)

    /// Whether the token has been cancelled.
    public var isCancelled: Bool { core?.phase == .cancelled }

    /// Whether the token can still be cancelled: `false` once it is cancelled, and for a token whose
    /// source was released without cancelling (and for ``never``).
    public var canBeCancelled: Bool { core?.phase == .active }

    /// Runs `handler` when the token is cancelled: now, inline, if it already is; never if the token
    /// can no longer be cancelled (the handler is then released at once).
    ///
    /// The handler runs on the thread that cancels the token.
    ///
    /// - Parameter handler: the work to do on cancellation.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        guard let core else { return }
        _ = core.add(FutureContext.carrying(handler))
    }

    /// Runs `handler` when this token is cancelled, unless `other` is cancelled first; once `other`
    /// is cancelled the registration is removed and the handler released at once.
    ///
    /// If `other` is already cancelled, `handler` never runs, even if this token is cancelled too.
    ///
    /// ```swift
    /// // Clean up the operation if the user cancels, unless it finished first.
    /// userCancel.onCancel(unless: finished) { operation.stop() }
    /// ```
    ///
    /// - Parameters:
    ///   - other: the token whose cancellation makes the handler unnecessary.
    ///   - handler: the work to do on cancellation.
    public func onCancel(unless other: CancellationToken, _ handler: @escaping @Sendable () -> Void) {
        onCancel(unless: other, carryingContext: true, handler)
    }

    /// ``onCancel(unless:_:)``; with `carryingContext: false`, for the library's own handlers that
    /// run no user code, the handler captures no context.
    func onCancel(unless other: CancellationToken, carryingContext: Bool, _ handler: @escaping @Sendable () -> Void) {
        guard let core else { return }
        let handler = carryingContext ? FutureContext.carrying(handler) : handler
        guard let otherCore = other.core else {
            _ = core.add(handler)
            return
        }
        // Cancelled "unless cancelled first": the condition always wins.
        if otherCore === core || otherCore.phase == .cancelled { return }
        UnlessRegistration.register(handler, on: core, unless: otherCore)
    }

    /// A token cancelled as soon as either `first` or `second` is.
    ///
    /// The result holds nothing on its inputs once it is no longer needed: when it is cancelled,
    /// when neither input can be cancelled any more (then neither can it), or when nobody holds it
    /// and nothing is registered on it. A handler registered on it still runs if the caller drops
    /// the token.
    ///
    /// - Returns: the earlier of the two cancellations.
    public static func either(_ first: CancellationToken, _ second: CancellationToken) -> CancellationToken {
        if first.isCancelled || second.isCancelled { return .cancelled }
        guard let firstCore = first.core, first.canBeCancelled else { return second.canBeCancelled ? second : .never }
        guard let secondCore = second.core, second.canBeCancelled else { return first }
        if firstCore === secondCore { return first }
        return TokenComposition.token(.any, of: [firstCore, secondCore])
    }

    /// A token cancelled once both `first` and `second` are.
    ///
    /// As soon as either input can no longer be cancelled, neither can the result, and it takes its
    /// registration off the other input.
    ///
    /// - Returns: the later of the two cancellations.
    public static func both(_ first: CancellationToken, _ second: CancellationToken) -> CancellationToken {
        if first.isCancelled { return second }
        if second.isCancelled { return first }
        guard let firstCore = first.core, let secondCore = second.core,
              first.canBeCancelled, second.canBeCancelled else { return .never }
        if firstCore === secondCore { return first }
        return TokenComposition.token(.all, of: [firstCore, secondCore])
    }

    /// Tokens are equal when they are the same token.
    public static func == (lhs: CancellationToken, rhs: CancellationToken) -> Bool {
        lhs.core === rhs.core
    }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(core.map(ObjectIdentifier.init))
    }
}

/// Creates and controls a ``CancellationToken``.
///
/// Keep the source where the decision to cancel is made, hand out its ``token``. Releasing the
/// source without cancelling makes the token unable ever to cancel, and releases its handlers.
public final class CancellationSource: Sendable {
    /// The token this source cancels.
    public let token: CancellationToken
    /// The registration on a parent token, for a linked source: removed when this source is
    /// cancelled or released, so a long-lived parent does not collect garbage.
    private let parentRegistration: (core: TokenCore, id: Int)?

    /// Creates a source with a new token.
    public init() {
        token = CancellationToken(core: TokenCore(phase: .active))
        parentRegistration = nil
    }

    /// Creates a source whose token is also cancelled when `parent` is (CollapsingFutures'
    /// `cancelTokenSourceUntil:`).
    ///
    /// - Parameter parent: the token that cancels this source's token too.
    public init(linkedTo parent: CancellationToken) {
        let core = TokenCore(phase: .active)
        token = CancellationToken(core: core)
        if let parentCore = parent.core, let id = parentCore.add({ _ = core.cancel() }) {
            parentRegistration = (parentCore, id)
        } else {
            parentRegistration = nil
        }
    }

    deinit {
        token.core?.makeImmortal()
        if let parentRegistration { parentRegistration.core.remove(parentRegistration.id) }
    }

    /// Cancels the token and runs its handlers on the calling thread, in registration order.
    ///
    /// Called from inside another token's handler, it cancels the token at once
    /// (``CancellationToken/isCancelled`` is `true` when it returns) and queues its handlers behind
    /// the running ones: they run, on this thread, before the outermost `cancel()` returns. So
    /// chains of tokens of any depth never deepen the stack; a handler must not block waiting for
    /// the handlers of a token it cancels.
    ///
    /// - Returns: `true` if this call cancelled the token; `false` if it already was.
    @discardableResult
    public func cancel() -> Bool {
        guard token.core?.cancel() == true else { return false }
        if let parentRegistration { parentRegistration.core.remove(parentRegistration.id) }
        return true
    }
}

// MARK: - Internals

/// The registrations of `onCancel(unless:)`: the handler runs if the main token (input 0) is
/// cancelled first; if `other` (input 1) is cancelled first, the handler is released at once. Each
/// side takes the other's registration off its token, and so does the main token's dying, so
/// neither token keeps garbage.
final class UnlessRegistration: TokenListener, @unchecked Sendable {
    // Safety: `handler`, `mine` and `theirs` are only touched under `LockTable.withLock(self)`; the
    // handler runs, and registrations are removed, after that lock is released.
    private var handler: (@Sendable () -> Void)?
    /// The token whose cancellation makes the handler unnecessary.
    private let other: TokenCore
    private var mine: (core: TokenCore, id: Int)?
    private var theirs: (core: TokenCore, id: Int)?
    /// `other` can no longer be cancelled: a registration on it is never stored.
    private var otherEnded = false
    /// `other` was already cancelled when the main token was: the handler must not run.
    private var otherWasFirst = false

    private init(_ handler: @escaping @Sendable () -> Void, unless other: TokenCore) {
        self.handler = handler
        self.other = other
    }

    static func register(_ handler: @escaping @Sendable () -> Void, on core: TokenCore, unless other: TokenCore) {
        let registration = UnlessRegistration(handler, unless: other)
        // `other` first: if it fires meanwhile, the handler is gone before `core` can run it.
        let theirs = other.add(.notify(registration, input: 1))
        let mine = core.add(.notify(registration, input: 0))
        let stale: [(core: TokenCore, id: Int)] = LockTable.withLock(registration) {
            var stale: [(core: TokenCore, id: Int)] = []
            // A side that already decided left `handler` nil: then neither id is worth keeping.
            let decided = registration.handler == nil
            if let theirs {
                if decided || registration.otherEnded {
                    stale.append((other, theirs))
                } else {
                    registration.theirs = (other, theirs)
                }
            }
            if let mine {
                if decided { stale.append((core, mine)) } else { registration.mine = (core, mine) }
            }
            return stale
        }
        for (core, id) in stale { core.remove(id) }
    }

    func inputCancelled(_ input: Int) {
        let (handler, mine, theirs) = takeAll()
        // Take the other side's registration off its token; this side's already ran.
        if input == 0, let theirs { theirs.core.remove(theirs.id) }
        if input == 1, let mine { mine.core.remove(mine.id) }
        // `other` may have been cancelled first and caused this cancellation (a token linked to it,
        // or composed from it): its notice has not reached this registration yet, but it won.
        if input == 0, !LockTable.withLock(self, { otherWasFirst }) { handler?() }
        releaseOutsideLock((handler, mine, theirs))
    }

    func inputWillCancel(_ input: Int) {
        guard input == 0, other.phase == .cancelled else { return }
        LockTable.withLock(self) { otherWasFirst = true }
    }

    func inputAbandoned(_ input: Int) {
        guard input == 0 else {
            // `other` can no longer cancel: the handler now simply waits for the main token.
            let taken = LockTable.withLock(self) { () -> (core: TokenCore, id: Int)? in
                otherEnded = true
                var taken: (core: TokenCore, id: Int)?
                swap(&taken, &self.theirs)
                return taken
            }
            releaseOutsideLock(taken)
            return
        }
        // The main token can no longer cancel: the handler can never run.
        let (handler, mine, theirs) = takeAll()
        if let theirs { theirs.core.remove(theirs.id) }
        releaseOutsideLock((handler, mine, theirs))
    }

    /// Moves the handler and both registrations out, for the caller to release after the unlock:
    /// the first side to decide takes them; the other side then finds nothing.
    private func takeAll() -> ((@Sendable () -> Void)?, (core: TokenCore, id: Int)?, (core: TokenCore, id: Int)?) {
        LockTable.withLock(self) {
            var taken: ((@Sendable () -> Void)?, (core: TokenCore, id: Int)?, (core: TokenCore, id: Int)?)
            swap(&taken.0, &handler)
            swap(&taken.1, &mine)
            swap(&taken.2, &theirs)
            return taken
        }
    }
}
