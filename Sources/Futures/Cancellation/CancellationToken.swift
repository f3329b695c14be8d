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
        _ = core.add(handler)
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
        guard let core else { return }
        guard let otherCore = other.core else {
            onCancel(handler)
            return
        }
        if otherCore.phase == .cancelled { return }
        if otherCore === core {
            // Cancelled "unless cancelled first": the condition always wins.
            return
        }
        // Each side removes the other's registration, so neither token keeps garbage.
        let pair = RegistrationPair()
        let mine = core.add { [pair] in
            if let theirs = pair.take(.mine) { otherCore.remove(theirs) }
            handler()
        }
        guard let mine else { return }  // ran inline (already cancelled) or dropped (immortal)
        let theirs = otherCore.add { [pair] in
            if let mine = pair.take(.theirs) { core.remove(mine) }
        }
        if let theirs {
            if !pair.store(mine: mine, theirs: theirs) {
                // One side fired while we were registering the other: undo what is left (removing
                // the side that fired is a no-op).
                otherCore.remove(theirs)
                core.remove(mine)
            }
        } else {
            core.remove(mine)  // `other` was cancelled meanwhile (its handler ran) or is immortal
            if otherCore.phase != .cancelled {
                // `other` can no longer be cancelled: the plain registration is what remains.
                _ = core.add(handler)
            }
        }
    }

    /// A token cancelled as soon as either `first` or `second` is.
    ///
    /// - Returns: the earlier of the two cancellations.
    public static func either(_ first: CancellationToken, _ second: CancellationToken) -> CancellationToken {
        if first.isCancelled || second.isCancelled { return .cancelled }
        if !first.canBeCancelled { return second.canBeCancelled ? second : .never }
        if !second.canBeCancelled { return first }
        let source = CancellationSource()
        let token = source.token
        first.onCancel(unless: token) { source.cancel() }
        second.onCancel(unless: token) { source.cancel() }
        return token
    }

    /// A token cancelled once both `first` and `second` are.
    ///
    /// - Returns: the later of the two cancellations.
    public static func both(_ first: CancellationToken, _ second: CancellationToken) -> CancellationToken {
        if first.isCancelled { return second }
        if second.isCancelled { return first }
        if !first.canBeCancelled || !second.canBeCancelled { return .never }
        let source = CancellationSource()
        let remaining = RemainingCount(2)
        first.onCancel { if remaining.decrement() { source.cancel() } }
        second.onCancel { if remaining.decrement() { source.cancel() } }
        return source.token
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

    /// Cancels the token and runs its handlers on the calling thread.
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

/// The shared state of a token: its phase and its handlers.
@usableFromInline
final class TokenCore: @unchecked Sendable {
    // Safety: `storedPhase`, `handlers` and `nextID` are only touched under
    // `LockTable.withLock(self)`; handlers run, and removed handlers are released, after the lock
    // is released.
    enum Phase { case active, cancelled, immortal }

    private var storedPhase: Phase
    private var handlers: [Int: @Sendable () -> Void] = [:]
    private var nextID = 0

    init(phase: Phase) { storedPhase = phase }

    var phase: Phase { LockTable.withLock(self) { storedPhase } }

    /// How many handlers are registered (for tests of the no-garbage rule).
    var handlerCount: Int { LockTable.withLock(self) { handlers.count } }

    /// Registers `handler`. Runs it inline if already cancelled; drops it if immortal.
    ///
    /// - Returns: the registration's id, or `nil` if it was run or dropped.
    func add(_ handler: @escaping @Sendable () -> Void) -> Int? {
        let (id, runNow): (Int?, Bool) = LockTable.withLock(self) {
            switch storedPhase {
            case .cancelled: return (nil, true)
            case .immortal: return (nil, false)
            case .active:
                let id = nextID
                nextID += 1
                handlers[id] = handler
                return (id, false)
            }
        }
        if runNow { handler() }
        return id
    }

    /// Removes a registration; its handler is released at once (outside the lock).
    func remove(_ id: Int) {
        let removed = LockTable.withLock(self) { handlers.removeValue(forKey: id) }
        _ = removed
    }

    /// Cancels: runs the handlers in registration order, on this thread.
    func cancel() -> Bool {
        let taken: [Int: @Sendable () -> Void]? = LockTable.withLock(self) {
            guard storedPhase == .active else { return nil }
            storedPhase = .cancelled
            defer { handlers = [:] }
            return handlers
        }
        guard let taken else { return false }
        for id in taken.keys.sorted() { taken[id]!() }
        return true
    }

    /// The source went away: the token can never cancel; its handlers are released unrun.
    func makeImmortal() {
        let dropped: [Int: @Sendable () -> Void] = LockTable.withLock(self) {
            guard storedPhase == .active else { return [:] }
            storedPhase = .immortal
            defer { handlers = [:] }
            return handlers
        }
        _ = dropped
    }
}

/// The two registrations of `onCancel(unless:)`: whichever side fires first takes the other's id.
final class RegistrationPair: @unchecked Sendable {
    // Safety: fields are only touched under `LockTable.withLock(self)`.
    enum Side { case mine, theirs }
    private var mine: Int?
    private var theirs: Int?
    private var fired = false

    /// Records both ids. Returns `false` if a side already fired (nothing to record).
    func store(mine: Int, theirs: Int) -> Bool {
        LockTable.withLock(self) {
            guard !fired else { return false }
            self.mine = mine
            self.theirs = theirs
            return true
        }
    }

    /// Called by the side that fires; returns the other side's id to remove (once).
    func take(_ side: Side) -> Int? {
        LockTable.withLock(self) {
            guard !fired else { return nil }
            fired = true
            return side == .mine ? theirs : mine
        }
    }
}

/// A countdown shared by the handlers of `both(_:_:)`.
final class RemainingCount: @unchecked Sendable {
    // Safety: `count` is only touched under `LockTable.withLock(self)`.
    private var count: Int
    init(_ count: Int) { self.count = count }

    /// Returns `true` for the call that reaches zero.
    func decrement() -> Bool {
        LockTable.withLock(self) {
            count -= 1
            return count == 0
        }
    }
}
