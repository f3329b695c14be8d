/// The state of a future, as one value whose cases carry what only they have, and the machine that
/// changes it: one `mutating` function per event, which takes no lock, touches nothing but the
/// value and returns the action left to do.
///
/// ```
///            complete / cancel / last consumer left
/// pending ─────────────────────────────────────────▶ completed(draining: true)
///   │ consumers                                        │   ▲ a registration inside a drain loop
///   │                                                  ▼   │ on an idle completed future
///   │                                                completed(draining: false)
///   │ merged, with no registrant, into an adopter
///   └──────────────▶ linked(depth): every call is forwarded to the adopter
///
/// never: immortal; stores no callbacks, cannot complete or be cancelled.
/// ```
///
/// The table below is every (state, event) pair; `impossible` is a pair the engine never produces
/// (a transition on a linked future, whose callers follow its link first, or a drain batch on a
/// future nobody drains), which ``FutureStorage`` turns into a trap with the pair's name. The
/// storage performs each event in the `…Locked` function named on its right, under the future's
/// stripe lock: it asks the machine, then moves the data (callbacks, outcome, extras) as the action
/// says. `FutureStateTests` checks the table pair by pair.
///
/// ```
///   event                state                      next state                      action          storage
///   ───────────────────  ─────────────────────────  ──────────────────────────────  ──────────────  ─────────────────────────
///   register             pending(c)                 pending(c + 1 if counted)       append          registerLocked
///                        completed(draining: true)  (unchanged)                     appendLate
///                        completed(draining: false) (unchanged)                     runNow
///                        never                      (unchanged)                     drop
///   restartDrain         completed(draining: false) completed(draining: true)       appendAndDrain  restartDrainLocked
///                        completed(draining: true)  (unchanged)                     appendLate
///                        pending, never             (unchanged)                     impossible
///   complete             pending, origin accepted   completed(draining: callbacks)  won             completeLocked
///                        pending, refused           (unchanged)                     rejected
///                        completed, never           (unchanged)                     rejected
///   withdraw             pending, a merged level    (unchanged)                     stillPending    withdrawLocked
///                          (uncounted only)
///                        pending(c), an observer    (unchanged)                     stillPending
///                        pending(c), counted        pending(c - 1) if c > 1,        stillPending,
///                                                   else completed (cancelled)      or cancelled
///                        pending(0), uncounted      completed (cancelled)           cancelled
///                        completed, never           (unchanged)                     kept
///   remove               pending                    (unchanged)                     remove          removeLocked
///                        completed, never           (unchanged)                     nothing
///   endBatch             completed(draining: true)  (unchanged) if late callbacks,  nextBatch,      takeLateCallbacksLocked
///                                                   else completed(draining: false) or idle
///                        pending, idle, never       (unchanged)                     impossible
///   addCancelHandler     pending                    (unchanged)                     store           addCancelHandlerLocked
///                        completed (cancelled)      (unchanged)                     runNow
///                        completed (otherwise),     (unchanged)                     drop
///                          never
///   handOver             pending, origin accepted   (unchanged)                     handOver        handOverLocked
///                        pending refused, completed (unchanged)                     refuse
///                          never
///   takeDeferredWork     pending                    (unchanged)                     take            takeDeferredWorkLocked
///                        completed, never, linked   (unchanged)                     none
///   completionToken      pending                    (unchanged)                     pendingToken    completionTokenLocked
///                        completed                  (unchanged)                     cancelledToken
///                        never                      (unchanged)                     neverToken
///   mergeInto(depth)     pending(0)                 linked(depth)                   link            absorbLocked (the target)
///                        pending(c > 0), completed, (unchanged)                     impossible
///                          never
///   adopterEdge          pending                    (unchanged)                     proceed         absorbLocked, splitLocked,
///                        completed, never           (unchanged)                     impossible      waitLocked, adoptNeverLocked,
///                                                                                                   handToTokenLocked (the adopter)
///   gainWaiter           pending(c)                 pending(c + 1)                  proceed         waitLocked (the target)
///                        completed, never           (unchanged)                     impossible
///   relink(depth)        linked(_)                  linked(depth)                   proceed         path compression (MergeLinks)
///                        pending, completed, never  (unchanged)                     impossible
///   any event but        linked                     (unchanged)                     impossible
///     takeDeferredWork, relink
/// ```
///
/// `linked` and `never` are final; a completed future never becomes pending again.
@usableFromInline
enum FutureState: Equatable, Sendable {
    /// Waiting for its outcome, with the number of its consumers: futures derived from it and
    /// tasks awaiting it (observers are not consumers).
    case pending(consumers: Int32)
    /// Has its outcome; `draining` while a drain loop owns its callbacks (see
    /// ``FutureStorage/drain()``).
    case completed(draining: Bool)
    /// Merged into an adopter, `depth` below the future its link points at: 1 for the future its
    /// link adopted, more once path compression skipped the futures between them.
    case linked(depth: Int32)
    /// Immortal: nothing but a cancellation of a consumer ever touches it.
    case never

    /// The case without its data.
    @inlinable @inline(__always) var phase: Phase {
        switch self {
        case .pending: .pending
        case .completed: .completed
        case .linked: .linked
        case .never: .never
        }
    }

    /// The number of consumers: 0 unless pending.
    @inlinable var consumers: Int32 {
        if case .pending(let consumers) = self { return consumers }
        return 0
    }

    /// Whether a drain loop owns the callbacks.
    @inlinable var draining: Bool { self == .completed(draining: true) }

    /// The depth below its link of a linked future; 0 otherwise.
    @inlinable var linkDepth: Int32 {
        if case .linked(let depth) = self { return depth }
        return 0
    }

    // MARK: Events

    /// What a registration does with its entry.
    @usableFromInline enum Registration: Equatable, Sendable { case append, appendLate, runNow, drop, impossible }

    /// A callback registers (a consumer if `counted`).
    @inlinable @inline(__always)
    mutating func register(counted: Bool) -> Registration {
        switch self {
        case .pending(let consumers):
            if counted { self = .pending(consumers: consumers + 1) }
            return .append
        case .completed(let draining): return draining ? .appendLate : .runNow
        case .never: return .drop
        case .linked: return .impossible
        }
    }

    /// What a registration inside a drain loop, on a completed future, does with its entry.
    @usableFromInline enum Restart: Equatable, Sendable { case appendAndDrain, appendLate, impossible }

    /// A callback registers inside a drain loop on a completed future.
    @inlinable
    mutating func restartDrain() -> Restart {
        switch self {
        case .completed(draining: false):
            self = .completed(draining: true)  // registrations after this one queue behind it
            return .appendAndDrain
        case .completed(draining: true): return .appendLate
        case .pending, .linked, .never: return .impossible
        }
    }

    /// Whether a completion won.
    @usableFromInline enum Completion: Equatable, Sendable { case won, rejected, impossible }

    /// An outcome arrives from someone the future `accepted` (or not); `hasCallbacks` says whether
    /// anything is left to drain.
    @inlinable @inline(__always)
    mutating func complete(accepted: Bool, hasCallbacks: Bool) -> Completion {
        switch self {
        case .pending:
            guard accepted else { return .rejected }
            self = .completed(draining: hasCallbacks)
            return .won
        case .completed, .never: return .rejected
        case .linked: return .impossible
        }
    }

    /// What a withdrawal leaves.
    @usableFromInline enum Departure: Equatable, Sendable { case kept, stillPending, cancelled, impossible }

    /// A registrant leaves: `kind` is what it was, `merged` says it registered on a future merged
    /// into this one (only an adopter that withdrew as it arrived leaves that way, uncounted),
    /// `hasCallbacks` whether a cancellation has anything to drain.
    @inlinable
    mutating func withdraw(_ kind: Withdrawal, merged: Bool, hasCallbacks: Bool) -> Departure {
        switch self {
        case .pending(var consumers):
            if merged { return kind == .uncounted ? .stillPending : .impossible }
            switch kind {
            case .observer: return .stillPending
            case .counted: if consumers > 0 { consumers -= 1 }
            case .uncounted: break
            }
            if consumers > 0 {
                self = .pending(consumers: consumers)
                return .stillPending
            }
            self = .completed(draining: hasCallbacks)
            return .cancelled
        case .completed, .never: return .kept
        case .linked: return .impossible
        }
    }

    /// Whether an entry comes off.
    @usableFromInline enum Removal: Equatable, Sendable { case remove, nothing, impossible }

    /// A registrant's entry is taken off.
    @inlinable
    mutating func remove() -> Removal {
        switch self {
        case .pending: return .remove
        case .completed, .never: return .nothing  // its callbacks run (or ran) anyway
        case .linked: return .impossible
        }
    }

    /// What the end of a drain batch leads to.
    @usableFromInline enum Batch: Equatable, Sendable { case nextBatch, idle, impossible }

    /// A drain batch ends; `hasLate` says whether callbacks were registered while it ran.
    @inlinable
    mutating func endBatch(hasLate: Bool) -> Batch {
        guard self == .completed(draining: true) else { return .impossible }
        if hasLate { return .nextBatch }
        self = .completed(draining: false)
        return .idle
    }

    /// What becomes of a producer cancellation handler.
    @usableFromInline enum Handler: Equatable, Sendable { case store, runNow, drop, impossible }

    /// A producer adds a cancellation handler; `cancelled` says whether a completed future was
    /// cancelled.
    @inlinable
    mutating func addCancelHandler(cancelled: Bool) -> Handler {
        switch self {
        case .pending: return .store
        case .completed: return cancelled ? .runNow : .drop
        case .never: return .drop
        case .linked: return .impossible
        }
    }

    /// Whether a hand-over of the right to complete goes ahead.
    @usableFromInline enum HandOver: Equatable, Sendable { case handOver, refuse, impossible }

    /// The completer hands its right on (a timeout that fires), if the future `accepted` it.
    @inlinable
    mutating func handOver(accepted: Bool) -> HandOver {
        switch self {
        case .pending: return accepted ? .handOver : .refuse
        case .completed, .never: return .refuse
        case .linked: return .impossible
        }
    }

    /// Whether a deferred future's work may be taken (it changes no state: the work leaves the
    /// storage, once).
    @inlinable
    func takeDeferredWork() -> Bool { self.phase == .pending }

    /// Which completion token a reader gets.
    @usableFromInline enum Token: Equatable, Sendable { case pendingToken, cancelledToken, neverToken, impossible }

    /// `Future.completionToken` is read.
    @inlinable
    mutating func completionToken() -> Token {
        switch self {
        case .pending: return .pendingToken
        case .completed: return .cancelledToken
        case .never: return .neverToken
        case .linked: return .impossible
        }
    }

    /// Whether an edge of adoption goes ahead.
    @usableFromInline enum Edge: Equatable, Sendable { case proceed, impossible }

    /// This future is merged into an adopter, `depth` below it (it has no consumer: see
    /// ``FutureStorage/isMergeableLocked``).
    @inlinable
    mutating func mergeInto(depth: Int32) -> Edge {
        guard self == .pending(consumers: 0), depth > 0 else { return .impossible }
        self = .linked(depth: depth)
        return .proceed
    }

    /// This future, as an adopter, merges, splits, waits, adopts `never` or closes a cycle: its
    /// state stays pending (the data moves in the storage).
    @inlinable
    mutating func adopterEdge() -> Edge {
        self.phase == .pending ? .proceed : .impossible
    }

    /// An adopter starts waiting on this future as its consumer.
    @inlinable
    mutating func gainWaiter() -> Edge {
        guard case .pending(let consumers) = self else { return .impossible }
        self = .pending(consumers: consumers + 1)
        return .proceed
    }

    /// Path compression points this linked future further along, `depth` below its new link.
    @inlinable
    mutating func relink(depth: Int32) -> Edge {
        guard case .linked = self, depth > 0 else { return .impossible }
        self = .linked(depth: depth)
        return .proceed
    }
}

/// A future's state without its data (see ``FutureState``).
@usableFromInline
enum Phase: UInt8 {
    case pending, completed, linked, never
}
