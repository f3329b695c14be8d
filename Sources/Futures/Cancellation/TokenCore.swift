/// What a token does for one registration: run a handler, or tell an internal listener (a composed
/// token, an `onCancel(unless:)` pair) which of its inputs this token is.
enum TokenHandler: Sendable {
    /// A handler: runs when the token is cancelled; released unrun if the token can no longer be.
    case run(@Sendable () -> Void)
    /// A listener: told when the token is cancelled, and also when it can no longer be (so that it
    /// can drop what it keeps on its other inputs at once).
    case notify(any TokenListener, input: Int)

    /// The token was cancelled.
    func cancelled() {
        switch self {
        case .run(let handler): handler()
        case .notify(let listener, let input): listener.inputCancelled(input)
        }
    }

    /// The token can never be cancelled any more.
    func abandoned() {
        if case .notify(let listener, let input) = self { listener.inputAbandoned(input) }
    }

    /// The token is being cancelled; ``cancelled()`` follows, maybe after other handlers.
    func willCancel() {
        if case .notify(let listener, let input) = self { listener.inputWillCancel(input) }
    }
}

/// Library code that listens to several tokens and must know when one of them can no longer fire.
protocol TokenListener: AnyObject, Sendable {
    /// Input `input` was cancelled (runs on the cancelling thread, outside every lock).
    func inputCancelled(_ input: Int)
    /// Input `input` can never be cancelled now: its source was released (outside every lock).
    func inputAbandoned(_ input: Int)
    /// Input `input` is being cancelled, now; ``inputCancelled(_:)`` follows once its turn comes
    /// (outside every lock).
    func inputWillCancel(_ input: Int)
}

extension TokenListener {
    func inputWillCancel(_ input: Int) {}
}

/// The shared state of a token: its phase and its registrations.
///
/// ```
///            CancellationSource.cancel()             (handlers run, in registration order)
///   active ─────────────────────────────▶ cancelled
///     │
///     │ the source was released, or a composed token's inputs can no longer fire
///     └──────────────────────────────────▶ immortal   (handlers released unrun; listeners told)
/// ```
///
/// A source-owned token lives as long as its source or anyone holding the token. A composed token
/// (`either`, `both`) has no source: its ``composition`` listens on its inputs and holds it weakly,
/// so a composed token that nobody holds and nothing waits on is freed and takes its registrations
/// off its inputs. While it has registrations of its own it keeps itself alive (`keepAlive`), so a
/// handler registered on a composed token still runs after the caller drops the token.
@usableFromInline
final class TokenCore: @unchecked Sendable {
    // Safety: `storedPhase`, `handlers`, `nextID` and `keepAlive` are only touched under
    // `LockTable.withLock(self)`. Handlers run, and removed registrations are released, after that
    // lock is released (see `releaseOutsideLock`). `composition` is set in `init` and never changes.
    enum Phase { case active, cancelled, immortal }

    private var storedPhase: Phase
    private var handlers: [Int: TokenHandler] = [:]
    private var nextID = 0
    /// A composed token's reference to itself while it is active and has registrations.
    private var keepAlive: TokenCore?
    /// For a composed token: what listens on its inputs.
    let composition: TokenComposition?

    init(phase: Phase, composition: TokenComposition? = nil) {
        storedPhase = phase
        self.composition = composition
    }

    deinit {
        #if DEBUG
        LockChecks.checkNotFreedUnderStripe("a cancellation token")
        #endif
        // Nobody holds this composed token and nothing is registered on it: stop listening.
        composition?.detach()
    }

    var phase: Phase { LockTable.withLock(self) { storedPhase } }

    /// How many registrations are stored (for tests of the no-garbage rule).
    var handlerCount: Int { LockTable.withLock(self) { handlers.count } }

    /// Registers a handler. Runs it inline if the token is already cancelled; releases it unrun if
    /// the token can no longer be cancelled.
    ///
    /// - Returns: the registration's id, or `nil` if it was run or dropped.
    func add(_ handler: @escaping @Sendable () -> Void) -> Int? {
        add(.run(handler))
    }

    /// Registers `handler`; a listener is told at once (inline) if the token is already cancelled or
    /// can no longer be.
    ///
    /// - Returns: the registration's id, or `nil` if it already ran or was dropped.
    func add(_ handler: TokenHandler) -> Int? {
        let (id, phase): (Int?, Phase) = LockTable.withLock(self) {
            guard storedPhase == .active else { return (nil, storedPhase) }
            let id = nextID
            nextID += 1
            handlers[id] = handler
            if composition != nil, keepAlive == nil { keepAlive = self }
            return (id, .active)
        }
        switch phase {
        case .active: break
        case .cancelled:
            // Behind the handlers of a cancellation still queued on this thread, if any.
            handler.willCancel()
            TokenWork.run { handler.cancelled() }
        case .immortal: TokenWork.run { handler.abandoned() }
        }
        return id
    }

    /// Removes a registration; it is released at once, outside the lock. Removing one that already
    /// ran or was dropped does nothing.
    func remove(_ id: Int) {
        let (removed, released): (TokenHandler?, TokenCore?) = LockTable.withLock(self) {
            let removed = handlers.removeValue(forKey: id)
            shrinkIfSparseLocked()
            var released: TokenCore?
            if handlers.isEmpty { swap(&released, &keepAlive) }
            return (removed, released)
        }
        // Freeing a composed token detaches it from its inputs, which may free the next one: a loop,
        // not a recursion as deep as the nesting.
        DeferredRelease.release { (removed, released) }
    }

    /// Gives back most of the table's room once it is three quarters empty, so that a long-lived
    /// token keeps nothing of a burst of registrations that came and went (caller holds the lock).
    /// Halving at a quarter full keeps the copying amortised constant per removal. Every handler
    /// moves to the new table, so dropping the old one releases no handler.
    private func shrinkIfSparseLocked() {
        guard handlers.capacity > 64, handlers.count < handlers.capacity / 4 else { return }
        var smaller: [Int: TokenHandler] = Dictionary(minimumCapacity: handlers.count * 2)
        for (id, handler) in handlers { smaller[id] = handler }
        handlers = smaller
    }

    /// How many registrations the table has room for (for tests).
    var handlerCapacity: Int { LockTable.withLock(self) { handlers.capacity } }

    /// Cancels: runs the handlers in registration order, on this thread.
    ///
    /// - Returns: `true` if this call cancelled the token.
    func cancel() -> Bool {
        guard let (taken, released) = end(as: .cancelled) else { return false }
        // Listeners note, as the token is cancelled, what was already cancelled before it.
        for handler in taken.values { handler.willCancel() }
        TokenWork.run {
            for id in taken.keys.sorted() { taken[id]!.cancelled() }
            withExtendedLifetime(released) {}
        }
        return true
    }

    /// The token can never be cancelled (its source went away, or its inputs can no longer fire):
    /// its handlers are released unrun and its listeners told.
    func makeImmortal() {
        guard let (taken, released) = end(as: .immortal) else { return }
        TokenWork.run {
            for id in taken.keys.sorted() { taken[id]!.abandoned() }
            withExtendedLifetime(released) {}
        }
    }

    /// The one transition out of `active`: to `cancelled` or `immortal`. Moves the registrations
    /// (and a composed token's reference to itself) out of the lock for the caller to run and
    /// release; `nil` if the token had already left `active`.
    private func end(as phase: Phase) -> ([Int: TokenHandler], TokenCore?)? {
        LockTable.withLock(self) {
            guard storedPhase == .active else { return nil }
            storedPhase = phase
            var taken: [Int: TokenHandler] = [:]
            swap(&taken, &handlers)
            var released: TokenCore?
            swap(&released, &keepAlive)
            return (taken, released)
        }
    }
}

/// Runs token handlers without nesting: a handler that cancels another token (or makes one
/// immortal) queues that token's handlers behind its own, on the same thread, so chains of linked
/// or composed tokens of any depth run in a loop, not in a recursion as deep as the chain. The
/// token's phase changes at once; only its handlers wait for the running ones, and run before the
/// outermost call returns.
enum TokenWork {
    /// Runs `work` now, or, if token work is already running on this thread, after it. The queue
    /// owns `work` and releases it inside the loop, so whatever its release frees (sources, composed
    /// tokens) queues its own work instead of recursing.
    static func run(_ work: consuming @escaping () -> Void) {
        let context = ThreadContext.current.takeUnretainedValue()
        context.tokenWork.append(work)
        guard !context.isRunningTokenWork else { return }
        context.isRunningTokenWork = true
        while context.tokenWorkHead < context.tokenWork.count {
            var next: (() -> Void)?
            swap(&next, &context.tokenWork[context.tokenWorkHead])
            context.tokenWorkHead += 1
            next!()
            next = nil  // released here, while the loop still runs: nested work only queues
        }
        context.tokenWork.removeAll()  // every slot is empty: this frees nothing but the buffer
        context.tokenWorkHead = 0
        context.isRunningTokenWork = false
    }

    /// Whether token work is running on this thread.
    static var isRunning: Bool { ThreadContext.existing?.isRunningTokenWork == true }
}
