/// A callback stored on a future, run once with its outcome by a drain loop.
@usableFromInline
typealias Callback<Value> = @Sendable (Outcome<Value>) -> Void

/// Callbacks in registration order; the first is stored inline, so a future with one callback
/// allocates no list (SwiftNIO's `CallbackList` idea).
@usableFromInline
struct CallbackList<Value: Sendable> {
    @usableFromInline var first: Callback<Value>?
    @usableFromInline var rest: [Callback<Value>] = []

    @inlinable init() {}

    @inlinable init(_ callback: @escaping Callback<Value>) { first = callback }

    @inlinable var isEmpty: Bool { first == nil }

    @inlinable
    mutating func append(_ callback: @escaping Callback<Value>) {
        if first == nil { first = callback } else { rest.append(callback) }
    }

    @inlinable
    mutating func append(contentsOf other: CallbackList<Value>) {
        guard let otherFirst = other.first else { return }
        append(otherFirst)
        rest.append(contentsOf: other.rest)
    }

    @inlinable
    func run(with outcome: Outcome<Value>) {
        guard let first else { return }
        first(outcome)
        for callback in rest { callback(outcome) }
    }
}

/// The shared state of a future and its promise.
///
/// ```
///            complete / cancel                       drain loop took the last callback
/// pending ───────────────────────▶ completed(draining) ───────────────────────▶ completed(idle)
///    │  adopted by another future with no other consumer (merge)       ▲  registration on an idle
///    └──────────────▶ linked(root): every call is forwarded to root    │  completed future restarts
///                                                                      └─ draining
/// never: immortal; stores no callbacks, cannot complete or be cancelled.
/// ```
///
/// Rules that keep it correct: the state is only touched under the future's stripe lock; no user
/// code runs and no last reference is released under that lock (payloads are moved out first); a
/// pending future's `completer` says who may complete it (itself, or the future it adopted).
@usableFromInline
final class FutureStorage<Value: Sendable>: @unchecked Sendable {
    // Safety: `state` is only read or written while holding `LockTable.withLock(self)` (or, for a
    // merge, both futures' locks through `LockTable.withLocks`), or in `deinit`, when no other
    // reference exists. Callbacks and handlers it holds are `@Sendable`.

    @usableFromInline
    struct Pending {
        /// Callbacks waiting for the outcome.
        @usableFromInline var callbacks = CallbackList<Value>()
        /// Who may complete this future: `nil` for itself (its promise or its internal completer),
        /// else the identity of the future it adopted. Cancellation is always allowed.
        @usableFromInline var completer: ObjectIdentifier?
        /// Futures derived from this one and tasks awaiting it (observers are not consumers).
        @usableFromInline var consumers = 0
        /// The producer's `onCancel` handlers.
        @usableFromInline var cancelHandlers: [@Sendable () -> Void] = []
        /// The future this one waits for after adopting it without merging: the union-find parent
        /// used to detect adoption cycles (compressed as it is walked).
        @usableFromInline weak var waitingOn: FutureStorage<Value>?

        @inlinable init() {}

        /// Whether a completion coming from `origin` may complete `node`, whose pending state this is.
        @inlinable
        func accepts(_ origin: ObjectIdentifier, for node: FutureStorage<Value>) -> Bool {
            origin == (completer ?? ObjectIdentifier(node))
        }
    }

    @usableFromInline
    enum State {
        case pending(Pending)
        case linked(FutureStorage<Value>)
        case completed(Outcome<Value>, callbacks: CallbackList<Value>, draining: Bool)
        case never
    }

    /// Whether `deinit` may have a chain of futures to release (pending callbacks or a link).
    /// Declared before `state` so unspecialised code reads it at a fixed offset, without metadata.
    // Both are guarded by the stripe lock, so the runtime exclusivity check is redundant; it cost
    // more than the lock itself on the hot path.
    @exclusivity(unchecked) @usableFromInline var mayHoldChain = false

    @exclusivity(unchecked) @usableFromInline var state: State

    // Results of one locked step; the work they call for happens after the lock is released.
    @usableFromInline enum ReadStep { case outcome(Outcome<Value>?), answer(Bool), follow }
    @usableFromInline enum FinishStep { case follow, rejected, won(Pending, drain: Bool) }
    @usableFromInline enum RegisterStep { case follow, done, drain }
    @usableFromInline enum HandlerStep { case follow, stored, runNow, drop }
    enum AdoptionPlan { case rejected, accepted, complete(Outcome<Value>), cycle, wait(FutureStorage<Value>) }

    @inlinable init(state: State) { self.state = state }

    @inlinable convenience init() { self.init(state: .pending(Pending())) }

    @inlinable var identity: ObjectIdentifier { ObjectIdentifier(self) }

    deinit {
        // A pending future's callbacks may hold the next future of a long chain, and a link holds
        // the next link: release them in a loop, not by recursion.
        guard mayHoldChain else { return }
        DeferredRelease.release {
            let payload = state
            state = .never
            return payload
        }
    }

    // MARK: Reading

    /// Follows links to the future that holds the state, shortening the path it walked.
    @usableFromInline
    func root() -> FutureStorage<Value> {
        var node = self
        var visited: [FutureStorage<Value>] = []
        while true {
            let next: FutureStorage<Value>? = LockTable.withLock(node) {
                if case .linked(let next) = node.state { return next }
                return nil
            }
            guard let next else { break }
            visited.append(node)
            node = next
        }
        if visited.count > 1 {
            let root = node
            for link in visited.dropLast() {
                // The old target stays alive in `visited` until after the lock is released.
                LockTable.withLock(link) {
                    if case .linked = link.state { link.state = .linked(root) }
                }
            }
        }
        return node
    }

    /// The outcome, or `nil` while pending.
    @inlinable
    var outcome: Outcome<Value>? {
        var node = self
        while true {
            let read: ReadStep = LockTable.withLock(node) {
                switch node.state {
                case .completed(let outcome, _, _): .outcome(outcome)
                case .pending, .never: .outcome(nil)
                case .linked: .follow
                }
            }
            switch read {
            case .outcome(let outcome): return outcome
            case .answer: preconditionFailure()
            case .follow: node = node.root()
            }
        }
    }

    // MARK: Completing

    /// Completes the future with `outcome` if `origin` may complete it and it is pending.
    ///
    /// - Returns: `true` if this call completed the future.
    @inlinable @discardableResult
    func complete(_ outcome: Outcome<Value>, from origin: ObjectIdentifier) -> Bool {
        finish(outcome.normalized, origin: origin)
    }

    /// Cancels the future if it is pending.
    ///
    /// - Returns: `true` if this call cancelled the future.
    @inlinable @discardableResult
    func cancel() -> Bool {
        finish(.cancelled, origin: nil)
    }

    /// Completes the future (`origin == nil`: cancellation, always allowed while pending).
    @inlinable
    func finish(_ outcome: Outcome<Value>, origin: ObjectIdentifier?) -> Bool {
        var node = self
        while true {
            let step: FinishStep = LockTable.withLock(node) {
                switch node.state {
                case .linked: return .follow
                case .completed, .never: return .rejected
                case .pending(let pending):
                    if let origin, !pending.accepts(origin, for: node) { return .rejected }
                    let drain = !pending.callbacks.isEmpty
                    node.mayHoldChain = false
                    node.state = .completed(outcome, callbacks: pending.callbacks, draining: drain)
                    return .won(pending, drain: drain)
                }
            }
            switch step {
            case .follow:
                node = node.root()
            case .rejected:
                return false
            case .won(let pending, let drain):
                if case .cancelled = outcome {
                    for handler in pending.cancelHandlers { handler() }
                }
                if drain { node.scheduleDrain() }
                return true
            }
        }
    }

    /// Hands this completed future to the drain loop with its specialised drain function.
    @inlinable
    func scheduleDrain() {
        Drain.schedule(DrainEntry(node: self, run: { unsafeDowncast($0, to: FutureStorage<Value>.self).drain() }))
    }

    /// Runs the stashed callbacks, then any registered while they ran, until none are left.
    @inlinable
    func drain() {
        while true {
            let batch: (Outcome<Value>, CallbackList<Value>)? = LockTable.withLock(self) {
                guard case .completed(let outcome, let callbacks, _) = state else {
                    preconditionFailure("draining a future that is not complete")
                }
                state = .completed(outcome, callbacks: CallbackList(), draining: !callbacks.isEmpty)
                return callbacks.isEmpty ? nil : (outcome, callbacks)
            }
            guard let (outcome, callbacks) = batch else { return }
            callbacks.run(with: outcome)
        }
    }

    // MARK: Registering

    /// Adds a callback, run once with the outcome (inline through the drain loop if complete).
    ///
    /// - Parameters:
    ///   - callback: the callback; it decides itself whether to hop to an executor.
    ///   - asConsumer: whether the registrant consumes the value (a derived future or an awaiting
    ///     task) rather than merely observing it.
    @inlinable
    func register(_ callback: @escaping Callback<Value>, asConsumer: Bool) {
        var node = self
        while true {
            let step: RegisterStep = LockTable.withLock(node) {
                switch node.state {
                case .linked:
                    return .follow
                case .never:
                    return .done  // immortal: the callback can never run, so it is not kept
                case .pending(var pending):
                    node.state = .never  // make `pending` unique so the append does not copy
                    pending.callbacks.append(callback)
                    if asConsumer { pending.consumers += 1 }
                    node.mayHoldChain = true
                    node.state = .pending(pending)
                    return .done
                case .completed(let outcome, var callbacks, let draining):
                    node.state = .never
                    callbacks.append(callback)
                    node.state = .completed(outcome, callbacks: callbacks, draining: true)
                    return draining ? .done : .drain
                }
            }
            switch step {
            case .follow: node = node.root()
            case .done: return
            case .drain:
                node.scheduleDrain()
                return
            }
        }
    }

    /// Adds a producer cancellation handler; runs it now if the future is already cancelled.
    @inlinable
    func onCancel(_ handler: @escaping @Sendable () -> Void) {
        var node = self
        while true {
            let step: HandlerStep = LockTable.withLock(node) {
                switch node.state {
                case .linked: return .follow
                case .never: return .drop
                case .completed(let outcome, _, _): return outcome.isCancelled ? .runNow : .drop
                case .pending(var pending):
                    node.state = .never
                    pending.cancelHandlers.append(handler)
                    node.state = .pending(pending)
                    return .stored
                }
            }
            switch step {
            case .follow: node = node.root()
            case .runNow:
                handler()
                return
            case .stored, .drop: return
            }
        }
    }

    // MARK: Adopting

    /// Makes this future complete with `inner`'s outcome (collapsing), if `origin` may complete it.
    ///
    /// If `inner` has no consumer of its own, it is merged into this future (it becomes a link to
    /// it, and its callbacks and handlers move here), so chains of adoptions, like a recursive
    /// `flatMap` loop, never grow. Otherwise this future waits on `inner` as its consumer. Either
    /// way the two join one union-find set; adopting a future of one's own set closes a cycle, and
    /// the future fails with ``FutureError/cycle``.
    ///
    /// - Returns: `true` if this call was allowed to complete the future.
    @usableFromInline @discardableResult
    func adopt(_ inner: FutureStorage<Value>, from origin: ObjectIdentifier) -> Bool {
        var root = self
        let plan: AdoptionPlan = adoptionLock.withLock {
            root = self.root()
            let target = inner.root()
            if target === root {
                let accepted = LockTable.withLock(root) { () -> Bool in
                    if case .pending(let pending) = root.state { return pending.accepts(origin, for: root) }
                    return false
                }
                return accepted ? .cycle : .rejected
            }
            if Self.waitChainReaches(root, from: target) { return .cycle }
            let adopter = root
            return LockTable.withLocks(adopter, target) { () -> AdoptionPlan in
                guard case .pending(var pending) = adopter.state, pending.accepts(origin, for: adopter) else {
                    return .rejected
                }
                switch target.state {
                case .linked:
                    preconditionFailure("links only change under the adoption lock")
                case .completed(let outcome, _, _):
                    return .complete(outcome)
                case .never:
                    adopter.state = .never
                    pending.completer = target.identity  // nothing ever completes it through `never`
                    adopter.state = .pending(pending)
                    return .accepted
                case .pending(let adopted) where adopted.consumers == 0:
                    adopter.state = .never
                    pending.callbacks.append(contentsOf: adopted.callbacks)
                    pending.cancelHandlers.append(contentsOf: adopted.cancelHandlers)
                    pending.completer = adopted.completer ?? target.identity
                    pending.waitingOn = adopted.waitingOn
                    adopter.mayHoldChain = !pending.callbacks.isEmpty
                    adopter.state = .pending(pending)
                    target.mayHoldChain = true
                    target.state = .linked(adopter)
                    return .accepted
                case .pending(var adopted):
                    target.state = .never
                    adopted.consumers += 1
                    target.state = .pending(adopted)
                    adopter.state = .never
                    pending.completer = target.identity
                    pending.waitingOn = target
                    adopter.state = .pending(pending)
                    return .wait(target)
                }
            }
        }
        switch plan {
        case .rejected:
            return false
        case .accepted:
            return true
        case .complete(let outcome):
            return root.finish(outcome, origin: origin)
        case .cycle:
            return root.finish(.failure(FutureError.cycle), origin: origin)
        case .wait(let target):
            let targetIdentity = target.identity
            target.register({ [root] outcome in
                _ = root.finish(outcome, origin: targetIdentity)
            }, asConsumer: false)  // counted as a consumer above, atomically with the decision
            return true
        }
    }

    /// Whether following `waitingOn` parents from `start` reaches `goal` (called under the adoption
    /// lock). Compresses the walked path to its end, so long chains stay cheap.
    private static func waitChainReaches(_ goal: FutureStorage<Value>, from start: FutureStorage<Value>) -> Bool {
        var node = start
        var visited: [FutureStorage<Value>] = []
        while true {
            let parent: FutureStorage<Value>? = LockTable.withLock(node) {
                if case .pending(let pending) = node.state { return pending.waitingOn }
                return nil
            }
            guard let parent else { break }
            let next = parent.root()
            if next === goal { return true }
            visited.append(node)
            node = next
        }
        if visited.count > 1 {
            let end = node
            for waiting in visited {
                LockTable.withLock(waiting) {
                    guard case .pending(var pending) = waiting.state else { return }
                    waiting.state = .never
                    pending.waitingOn = end
                    waiting.state = .pending(pending)
                }
            }
        }
        return false
    }
}

/// Serialises adoptions, so finding a set's representative and joining two sets is atomic.
/// Taken before any stripe lock, never while holding one, and no user code runs under it.
let adoptionLock = Lock()
