/// The lifecycle of a future.
///
/// ```
///            complete / cancel           drain loop ran the last callback
/// pending ─────────────────▶ completed ◀──────────────────────────────┐
///    │                       (draining) ──────────────────────────────┘ (idle; a registration on an
///    │ adopted, with no consumer of its own, by another future           idle completed future runs
///    └──────────────▶ linked: every call is forwarded to `link`          at once, or, inside a drain
///                                                                        loop, starts draining again)
/// never: immortal; stores no callbacks, cannot complete or be cancelled.
/// ```
@usableFromInline
enum Phase: UInt8 {
    case pending, completed, linked, never
}

/// The rarely used parts of a pending future, allocated on first use.
@usableFromInline
final class Extras<Value: Sendable> {
    /// Who may complete the future: `nil` for itself (its promise or internal completer), else the
    /// identity of the object it handed that right to (the future it adopted, a timer), which must
    /// also still be alive (`completerObject`): an identity alone could be reused by a new object at
    /// the same address. `Extras.nobody` means nothing may complete it (it adopted `never`).
    /// Cancellation is always allowed.
    @usableFromInline var completer: ObjectIdentifier?
    @usableFromInline weak var completerObject: AnyObject?

    /// The completer of a future that adopted `never`: a metatype's identity, which no heap object
    /// (and so no origin) can ever have.
    @usableFromInline static var nobody: ObjectIdentifier { ObjectIdentifier(Never.self) }

    /// Hands the right to complete to `object` (caller holds the owner's lock).
    @inlinable
    func handCompletion(to object: AnyObject) {
        completer = ObjectIdentifier(object)
        completerObject = object
    }
    /// The producer's `onCancel` handlers.
    @usableFromInline var cancelHandlers: [@Sendable () -> Void] = []
    /// Callbacks registered on a completed future while its drain runs (see
    /// ``FutureStorage/drain()``); the drain owner takes them after its current batch.
    @usableFromInline var lateCallbacks = CallbackList<Value>()
    /// The index of a long callback list, for removals (see ``CallbackList/remove(_:index:)``).
    @usableFromInline var registrationIndex: RegistrationIndex?
    /// The key of this future's registration on its `upstream`, when it is not this future's own:
    /// after a merge the adopter consumes the target's source through the target's registration.
    @usableFromInline var upstreamKey: RegistrationKey?
    /// The future this one waits for after adopting it without merging, or, compressed by cycle
    /// detection, a future further along the same waits (see ``CycleDetection``).
    @usableFromInline weak var waitingOn: (any CycleNode)?
    /// The progress relation recorded by adoptions while nobody used progress (see
    /// ``ProgressRelation``); it costs no allocation, since an adoption allocates this box anyway.
    var progressRelation: ProgressRelation?
    /// The work of a `Future.deferred`, started (once) by the first callback registration or
    /// adoption; it gets the future to complete.
    @usableFromInline var onDemand: (@Sendable (FutureStorage<Value>) -> Void)?
    /// A join's progress source, started (once) when someone first follows this future's
    /// progress; it gets the future to report to (see ``FutureStorage/setProgressDemand(_:)``).
    @usableFromInline var onProgressDemand: (@Sendable (FutureStorage<Value>) -> Void)?

    @usableFromInline init() {}
}

/// Holds a future's outcome. It is a generic base class whose parameter is the outcome's own type
/// (`Outcome<Value>`) so that freeing a future needs no type-metadata lookup: a deinit always runs
/// unspecialised, and destroying a field of type `Outcome<Value>` declared in `FutureStorage<Value>`
/// asks the runtime for `Outcome<Value>`'s metadata (a hash-table lookup, about 10% of a
/// `.immediate` map step), whereas a field whose type is a generic parameter finds its metadata in
/// the class's own metadata.
@usableFromInline
class OutcomeSlot<Stored> {
    /// The outcome, meaningful only once the future is completed (read it through
    /// ``FutureStorage/result``); guarded like every field of ``FutureStorage``.
    @exclusivity(unchecked) @usableFromInline final var storedOutcome: Stored

    @inlinable init(storedOutcome: Stored) { self.storedOutcome = storedOutcome }
}

/// The shared state of a future and its promise.
///
/// Rules that keep it correct: every field is only touched under the future's stripe lock
/// (`LockTable.withLock(self)`, or both futures' locks for a merge), with one exception: while
/// `draining` is set, `callbacks` belongs to the drain owner, which reads it (and the final
/// outcome) without the lock (see ``drain()``); no user code runs and no last reference is released
/// under that lock (payloads are moved out first); a pending future's `completer` says who may
/// complete it.
@usableFromInline
class FutureStorage<Value: Sendable>: OutcomeSlot<Outcome<Value>>, @unchecked Sendable {
    // Safety: all fields are guarded by the stripe lock of `self` (see above), or accessed in
    // `deinit`, when no other reference exists. Stored callbacks and handlers are `@Sendable`.
    // The runtime exclusivity check is redundant under the lock and cost more than the lock, so
    // it is turned off field by field.

    /// Whether `deinit` may have a chain of futures to release (pending callbacks or a link).
    @exclusivity(unchecked) @usableFromInline final var mayHoldChain = false
    @exclusivity(unchecked) @usableFromInline final var phase: Phase
    /// Whether a drain loop owns the callbacks of this completed future (then only that loop
    /// touches `callbacks`; see ``drain()``).
    @exclusivity(unchecked) @usableFromInline final var draining = false
    /// `immortal`, `consumesUpstream` and `combinesProgress`, packed into the byte left free before
    /// `consumers` (separate fields cost the object 8 more bytes of padding).
    @exclusivity(unchecked) @usableFromInline final var flags: UInt8 = StorageFlags.consumesUpstream
    /// Futures derived from this one and tasks awaiting it (observers are not consumers).
    @exclusivity(unchecked) @usableFromInline final var consumers: Int32 = 0
    @exclusivity(unchecked) @usableFromInline final var callbacks = CallbackList<Value>()
    // The outcome is `storedOutcome`, in the base class (see ``OutcomeSlot``); it is not optional,
    // since `phase` says whether it is meaningful.
    /// The outcome, or `nil` unless completed (caller holds the lock).
    @inlinable final var result: Outcome<Value>? { phase == .completed ? storedOutcome : nil }
    /// The future this one was merged into; only while `phase == .linked`. It shares its slot with
    /// `upstream`: a linked future has none (its adopter took it over), a pending one no link.
    @inlinable final var link: FutureStorage<Value>? {
        get {
            assert(phase == .linked, "only a linked future has a link")
            return upstream.map { unsafeDowncast($0 as AnyObject, to: FutureStorage<Value>.self) }
        }
        set {
            assert(upstream == nil || phase == .linked, "a link would replace a pending future's upstream")
            upstream = newValue
        }
    }
    @exclusivity(unchecked) @usableFromInline final var extras: Extras<Value>?
    /// The future this one consumes (its source, or the future it waits on after adopting it), to
    /// withdraw from when this one is cancelled; released when this one completes.
    ///
    /// Strong, except behind a ``WeakSource`` when the source is `immortal`. The source holds its
    /// consumers through its callbacks, so this is a cycle while both are pending; it is garbage
    /// only if nothing can ever complete the source, which is exactly when the source is immortal
    /// (rooted in `never`). A promise-rooted chain always completes or breaks.
    ///
    /// In a linked future, the slot holds its `link` instead.
    @exclusivity(unchecked) @usableFromInline final var upstream: (any ConsumerSource)?
    /// Whether nothing but cancellation can ever complete this future: it is derived from, or
    /// adopted, `never` or another immortal future. Its consumers hold it weakly.
    @inlinable final var immortal: Bool {
        get { flag(StorageFlags.immortal) }
        set { setFlag(StorageFlags.immortal, newValue) }
    }
    /// Whether this future consumes its upstream (a derived future) or only follows it (an
    /// `observe()` branch, which never withdraws from it).
    @inlinable final var consumesUpstream: Bool {
        get { flag(StorageFlags.consumesUpstream) }
        set { setFlag(StorageFlags.consumesUpstream, newValue) }
    }
    /// A plain `flatMap`: its progress weighs its source and the adopted future equally.
    @inlinable final var combinesProgress: Bool {
        get { flag(StorageFlags.combinesProgress) }
        set { setFlag(StorageFlags.combinesProgress, newValue) }
    }
    @inlinable final func flag(_ bit: UInt8) -> Bool { flags & bit != 0 }
    @inlinable final func setFlag(_ bit: UInt8, _ on: Bool) { flags = on ? flags | bit : flags & ~bit }
    /// Progress, allocated on first use (see ``ProgressState``).
    @exclusivity(unchecked) @usableFromInline final var progress: ProgressState?

    /// A pending future.
    @inlinable init() {
        phase = .pending
        super.init(storedOutcome: .cancelled)
    }

    /// A completed future.
    @inlinable init(outcome: Outcome<Value>) {
        phase = .completed
        super.init(storedOutcome: outcome)
    }

    /// The immortal future.
    @inlinable init(never: Void) {
        phase = .never
        super.init(storedOutcome: .cancelled)
    }

    deinit {
        #if DEBUG
        LockChecks.checkNotFreedUnderStripe("a future")
        #endif
        // A pending future's callbacks may hold the next future of a long chain, and a link holds
        // the next link: release them in a loop, not by recursion.
        guard mayHoldChain else { return }
        DeferredRelease.release {
            var taken = CallbackList<Value>()
            swap(&taken, &callbacks)
            var next: (any ConsumerSource)? = nil  // the link, or the upstream of a pending future
            swap(&next, &upstream)
            return (taken, next) as Any
        }
    }

    /// Whether a completion coming from `origin` may complete this pending future (caller holds
    /// the lock). `origin` is alive (the caller holds it), so if the recorded completer is alive
    /// too and has the same identity, it is `origin`.
    @inlinable
    final func accepts(_ origin: AnyObject) -> Bool {
        guard let extras, let completer = extras.completer else { return origin === self }
        return completer == ObjectIdentifier(origin) && extras.completerObject != nil
    }

    /// The extras box, created if needed (caller holds the lock).
    @inlinable final var ensureExtras: Extras<Value> {
        if let extras { return extras }
        let created = Extras<Value>()
        extras = created
        return created
    }

    // MARK: Reading

    /// Follows links to the future that holds the state, shortening the path it walked.
    @usableFromInline
    final func root() -> FutureStorage<Value> {
        var garbage: [AnyObject] = []
        let root = root(collecting: &garbage)
        releaseOutsideLock(garbage)
        return root
    }

    /// ``root()``, handing the references the walk drops (links it rewrote, the futures it passed)
    /// to the caller in `garbage`: a caller holding the adoption lock releases them after it, since
    /// the last of them may free a future.
    @usableFromInline
    final func root(collecting garbage: inout [AnyObject]) -> FutureStorage<Value> {
        var node = self
        var visited: [FutureStorage<Value>] = []
        while let next = LockTable.withLock(node, { node.phase == .linked ? node.link : nil }) {
            visited.append(node)
            node = next
        }
        if visited.count > 1 {
            let root = node
            for step in visited.dropLast() {
                // Another compressor may have rewritten this link already, so the old target is not
                // necessarily in `visited`: release it after the lock, never under it.
                let old = LockTable.withLock(step) { () -> FutureStorage<Value>? in
                    var taken: FutureStorage<Value>? = root
                    swap(&taken, &step.link)
                    return taken
                }
                if let old { garbage.append(old) }
            }
        }
        // One by one: appending the array as a sequence would look up a witness table on every
        // call, linked or not (the compiler hoists it to the top).
        for passed in visited { garbage.append(passed) }
        return node
    }

    /// The outcome, or `nil` while pending.
    @inlinable
    final var outcome: Outcome<Value>? {
        var node = self
        while true {
            let (outcome, linked) = LockTable.withLock(node) { (node.result, node.phase == .linked) }
            if !linked { return outcome }
            node = node.root()
        }
    }

    /// Whether the future is pending and `origin` may still complete it.
    @usableFromInline
    final func isPendingFor(_ origin: AnyObject) -> Bool {
        var node = self
        while true {
            let (phase, accepts) = LockTable.withLock(node) { (node.phase, node.accepts(origin)) }
            switch phase {
            case .pending: return accepts
            case .completed, .never: return false
            case .linked: node = node.root()
            }
        }
    }

    // MARK: Completing

    /// Completes the future with `outcome` if `origin` may complete it and it is pending.
    ///
    /// - Returns: `true` if this call completed the future.
    @inlinable @discardableResult
    final func complete(_ outcome: Outcome<Value>, from origin: AnyObject) -> Bool {
        finish(outcome.normalized, origin: origin)
    }

    /// Cancels the future if it is pending.
    ///
    /// - Returns: `true` if this call cancelled the future.
    @inlinable @discardableResult
    final func cancel() -> Bool {
        finish(.cancelled, origin: nil)
    }

    /// Moves this pending future to `completed` (caller holds the lock and checked the phase),
    /// recording in `work` what is left to do once the lock is released.
    @inlinable
    final func completeLocked(_ outcome: Outcome<Value>, into work: inout CompletionWork) {
        phase = .completed
        storedOutcome = outcome
        mayHoldChain = false
        work.drain = !callbacks.isEmpty
        draining = work.drain
        work.cancelled = outcome.isCancelled
        if work.cancelled, upstream != nil { (work.withdrawal, work.key) = departure }
        swap(&work.upstream, &upstream)
        if extras != nil { work.extras = extras.take() }  // moved out: released after the unlock
        if let progress { work.progress = progress.complete(success: outcome.isSuccess) }
    }

    /// How this pending future leaves its upstream (caller holds the lock, `extras` still attached):
    /// as a consumer, or, for an `observe()` branch, only taking its entry off; and the key of that
    /// entry.
    @inlinable
    final var departure: (withdrawal: Withdrawal, key: RegistrationKey) {
        (consumesUpstream ? .counted : .observer, extras?.upstreamKey ?? RegistrationKey(self))
    }

    /// The work after a completion, outside the lock: producer cancellation handlers, callbacks.
    /// Returns the upstream to withdraw from, if the future was cancelled.
    @inlinable
    final func afterCompletion(_ work: inout CompletionWork) -> UpstreamLink? {
        // The extras box was detached under the lock, so nothing else reaches it now.
        if work.cancelled, let extras = work.extras {
            for handler in unsafeDowncast(extras, to: Extras<Value>.self).cancelHandlers { handler() }
        }
        if let (observers, final) = work.progress, let (value, version) = final {
            for observer in observers { observer(value, version) }
        }
        if work.drain { scheduleDrain() }
        guard let withdrawal = work.withdrawal, let upstream = work.upstream else { return nil }
        return UpstreamLink(source: upstream, withdrawal: withdrawal, key: work.key)
    }

    /// Completes the future (`origin == nil`: cancellation, always allowed while pending). A
    /// cancelled future withdraws from its upstream, which is cancelled in turn if that leaves it
    /// with no consumer, and so on up (in a loop, not by recursion).
    ///
    /// The first attempt is made on `self` without copying the reference (a loop variable would
    /// cost a retain and two releases per completion); a merged future follows its links.
    @inlinable
    final func finish(_ outcome: Outcome<Value>, origin: AnyObject?) -> Bool {
        var work = CompletionWork()
        switch attemptFinish(outcome, origin: origin, into: &work) {
        case .won: return finished(&work)
        case .rejected: return false
        case .follow: return root().finishFollowingLinks(outcome, origin: origin)
        }
    }

    /// ``finish(_:origin:)`` on a future that was merged into another.
    @inlinable
    final func finishFollowingLinks(_ outcome: Outcome<Value>, origin: AnyObject?) -> Bool {
        var node = self
        var work = CompletionWork()
        while true {
            switch node.attemptFinish(outcome, origin: origin, into: &work) {
            case .won: return node.finished(&work)
            case .rejected: return false
            case .follow: node = node.root()
            }
        }
    }

    /// One attempt to complete this future, under its lock.
    @inlinable
    final func attemptFinish(_ outcome: Outcome<Value>, origin: AnyObject?, into work: inout CompletionWork) -> FinishStep {
        LockTable.withLock(self) {
            switch phase {
            case .linked: return .follow
            case .completed, .never: return .rejected
            case .pending:
                if let origin, !accepts(origin) { return .rejected }
                completeLocked(outcome, into: &work)
                return .won
            }
        }
    }

    /// The rest of a completion, after the lock: see ``afterCompletion(_:)``; then withdraws from
    /// the upstream of a cancelled future.
    @inlinable
    final func finished(_ work: inout CompletionWork) -> Bool {
        if let link = afterCompletion(&work) { Cancellation.withdraw(from: link) }
        return true
    }

    /// Hands this completed future to the drain loop with its specialised drain function.
    @inlinable
    final func scheduleDrain() {
        Drain.schedule(self, { unsafeDowncast($0, to: FutureStorage<Value>.self).drain() })
    }

    /// Runs the callbacks, then any registered while they ran, until none are left.
    ///
    /// The caller owns the drain: it set `draining` on this thread and runs this on this thread,
    /// directly or through this thread's drain queue (`Drain.schedule` never hands work to
    /// another thread; handing a drain to an executor would break the lock-free reads below).
    /// While `draining` is set, `callbacks` belongs to the owner alone: registrations go to
    /// `extras.lateCallbacks` instead. So the owner takes the first batch and reads the (final)
    /// outcome without the lock, and locks once per batch only to take the late callbacks or to
    /// give up ownership.
    @inlinable
    final func drain() {
        var batch = CallbackList<Value>()
        swap(&batch, &callbacks)
        let outcome = storedOutcome
        batch.run(with: outcome)
        while true {
            batch = CallbackList()  // released here, outside the lock
            let more: Bool = LockTable.withLock(self) {
                guard let extras, !extras.lateCallbacks.isEmpty else {
                    draining = false
                    return false
                }
                swap(&batch, &extras.lateCallbacks)
                return true
            }
            guard more else { return }
            // Registered after the completion: never in the running job by affinity (an earlier
            // callback for the same executor may be waiting in its queue).
            Drain.closingAffinity { batch.run(with: outcome) }
        }
    }

    // MARK: Registering

    /// Adds a callback, run once with the outcome (through the drain loop if already complete).
    ///
    /// - Parameters:
    ///   - callback: the callback; it decides itself whether to hop to an executor.
    ///   - asConsumer: whether the registrant consumes the value (an awaiting task) rather than
    ///     merely observing it. Derived futures use ``register(_:derived:)``.
    ///   - owner: the registrant, if it will withdraw (its entry is then removed; see
    ///     ``RegistrationKey``).
    @inlinable
    final func register(_ callback: @escaping Callback<Value>, asConsumer: Bool, owner: AnyObject? = nil) {
        register(.outcome(callback, owner: owner.map(ObjectIdentifier.init)), whilePending: { node in
            if asConsumer { node.consumers += 1 }
        }, ifNever: {})
    }

    /// Adds an observer's success handler that runs inline in the drain loop (`.immediate`),
    /// stored without a wrapping closure.
    @inlinable
    final func registerInlineSuccess(_ body: @escaping @Sendable (Value) -> Void) {
        register(.success(body), whilePending: { _ in }, ifNever: {})
    }

    /// Registers `callback` for a future derived from this one: counts it as a consumer and, under
    /// this future's lock (so before the callback can run), records this future as its upstream,
    /// weakly if this future is immortal. A future derived from `never` is immortal.
    @inlinable
    final func register<Derived>(
        _ callback: @escaping Callback<Value>,
        derived: FutureStorage<Derived>,
        consumer: Bool = true
    ) {
        derived.consumesUpstream = consumer
        register(.outcome(callback, owner: ObjectIdentifier(derived)), whilePending: { node in
            if consumer { node.consumers += 1 }
            if node.immortal {
                derived.immortal = true
                derived.upstream = WeakSource(node)
            } else {
                derived.upstream = node
            }
        }, ifNever: {
            derived.immortal = true
        })
    }

    /// The registration loop: `whilePending` runs under the lock of the pending future that keeps
    /// the callback, `ifNever` under the lock of `never` (which drops it). The first attempt is made
    /// on `self` without copying the reference; a merged future follows its links.
    @inlinable
    final func register(
        _ callback: consuming CallbackEntry<Value>,
        whilePending: (FutureStorage<Value>) -> Void,
        ifNever: () -> Void
    ) {
        var entry: CallbackEntry<Value>? = consume callback  // moved into the list, not copied
        if attemptRegister(&entry, whilePending: whilePending, ifNever: ifNever) { return }
        registerFollowingLinks(&entry, whilePending: whilePending, ifNever: ifNever)
    }

    /// ``register(_:whilePending:ifNever:)`` on a future that was merged into another (out of
    /// line, which keeps the usual path small enough to inline).
    @inlinable @inline(never)
    final func registerFollowingLinks(
        _ entry: inout CallbackEntry<Value>?,
        whilePending: (FutureStorage<Value>) -> Void,
        ifNever: () -> Void
    ) {
        var node = root()
        while !node.attemptRegister(&entry, whilePending: whilePending, ifNever: ifNever) { node = node.root() }
    }

    /// One attempt of ``register(_:whilePending:ifNever:)``, under this future's lock.
    ///
    /// - Returns: `false` if this future is linked (`entry` is left as it was).
    @inlinable
    final func attemptRegister(
        _ entry: inout CallbackEntry<Value>?,
        whilePending: (FutureStorage<Value>) -> Void,
        ifNever: () -> Void
    ) -> Bool {
        let step: RegisterStep = LockTable.withLock(self) {
            switch phase {
            case .linked:
                return .follow
            case .never:
                ifNever()
                // Immortal: the callback can never run, so it is not kept. It stays in the caller's
                // `entry`, untouched here, and is destroyed with it after the lock.
                return .done
            case .pending:
                callbacks.append(entry.take()!)
                mayHoldChain = true
                whilePending(self)
                return extras?.onDemand == nil ? .done : .demand
            case .completed:
                if draining {
                    // The drain owner reads `callbacks` without the lock; it takes these next.
                    ensureExtras.lateCallbacks.append(entry.take()!)
                    return .done
                }
                return .idle  // every callback registered before this one has run
            }
        }
        switch step {
        case .follow: return false
        case .done: break
        case .demand: startIfDeferred()
        case .idle: runOnIdle(entry.take()!)
        }
        return true
    }

    /// Runs a callback registered on this completed, idle future, never with executor affinity.
    /// Off a drain loop it runs at once, as this thread's drain loop, without taking ownership of the
    /// list (so no second lock to give it back): registrations racing it are concurrent, so no order
    /// binds them. Inside a drain loop it queues behind the running callback, as a drain of its own
    /// (or behind a drain that started meanwhile). Out of line, so that the registration path stays
    /// small enough to inline.
    @inlinable @inline(never)
    final func runOnIdle(_ callback: CallbackEntry<Value>) {
        if !Drain.isRunningHere {
            let outcome = storedOutcome  // final once completed; read after the lock that saw it so
            Drain.runAsLoop { callback.run(with: outcome) }
            return
        }
        let start: Bool = LockTable.withLock(self) {
            if draining {
                ensureExtras.lateCallbacks.append(callback)
                return false
            }
            callbacks.append(callback)
            draining = true  // registrations after this one, from any thread, queue behind it
            return true
        }
        // Behind the running callback, as a drain of this future without affinity: registered after
        // the completion, its callbacks must not overtake one for the same executor registered
        // before it and still waiting in that executor's queue.
        if start {
            Drain.schedule(self, { node in
                Drain.closingAffinity { unsafeDowncast(node, to: FutureStorage<Value>.self).drain() }
            })
        }
    }

    /// Starts the work of a `Future.deferred` that has not started yet (outside any lock), through
    /// the drain loop: a deferred future whose work starts another one (a recursive deferred chain)
    /// runs in a loop, not by recursion.
    @usableFromInline
    final func startIfDeferred() {
        let work: (@Sendable (FutureStorage<Value>) -> Void)? = LockTable.withLock(self) {
            guard phase == .pending, let extras, let work = extras.onDemand else { return nil }
            extras.onDemand = nil
            return work
        }
        guard let work else { return }
        Drain.schedule(self, { work(unsafeDowncast($0, to: FutureStorage<Value>.self)) })
    }

    /// Adds a producer cancellation handler; runs it now if the future is already cancelled.
    @inlinable
    final func onCancel(_ handler: @escaping @Sendable () -> Void) {
        var node = self
        while true {
            let step: HandlerStep = LockTable.withLock(node) {
                switch node.phase {
                case .linked: return .follow
                case .never: return .drop
                case .completed: return node.result?.isCancelled == true ? .runNow : .drop
                case .pending:
                    node.ensureExtras.cancelHandlers.append(handler)
                    return .stored
                }
            }
            switch step {
            case .follow: node = node.root()
            case .runNow:
                handler()
                return
            case .stored: return
            case .drop:
                withExtendedLifetime(handler) {}  // released by the caller, after the lock
                return
            }
        }
    }

    /// Hands the right to complete this pending future from `origin` to `newCompleter`, so that
    /// completions from `origin` are rejected from now on, and detaches its upstream, atomically: a
    /// timeout uses it to withdraw from its source before failing, without the source's cancellation
    /// reaching it first, and without a cancellation of this future withdrawing a second time.
    ///
    /// - Returns: `nil` if the future is not pending or `origin` may not complete it; otherwise the
    ///   registration on the upstream to withdraw (`nil` inside if there is none).
    @usableFromInline
    final func reserveLeavingUpstream(for newCompleter: AnyObject, from origin: AnyObject) -> UpstreamLink?? {
        var node = self
        var detached: (any ConsumerSource)? = nil
        while true {
            let step: (phase: Phase, reserved: UpstreamLink??) = LockTable.withLock(node) {
                guard node.phase == .pending else { return (node.phase, nil) }
                guard node.accepts(origin) else { return (.pending, nil) }
                node.ensureExtras.handCompletion(to: newCompleter)
                swap(&detached, &node.upstream)
                guard let upstream = detached else { return (.pending, .some(nil)) }
                let (withdrawal, key) = node.departure
                return (.pending, UpstreamLink(source: upstream, withdrawal: withdrawal, key: key))
            }
            if step.phase != .linked { return step.reserved }
            node = node.root()
        }
    }

    // MARK: Withdrawing

    /// A registrant leaves this future (see ``Withdrawal``): its entry, named by `key`, is taken
    /// off; a consumer lowers the count, and if no consumer is left the future is cancelled,
    /// atomically with the decision.
    ///
    /// - Returns: this future's own upstream link if this cancelled the future, for the caller's loop.
    @usableFromInline
    final func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
        var node = self
        var work = CompletionWork()
        while true {
            let step: WithdrawStep = LockTable.withLock(node) {
                switch node.phase {
                case .linked: return .follow
                case .completed, .never: return .kept
                case .pending:
                    switch withdrawal {
                    case .observer: return .stillPending
                    case .counted: if node.consumers > 0 { node.consumers -= 1 }
                    case .uncounted: break
                    }
                    if node.consumers > 0 { return .stillPending }
                    // Cancelled: its callbacks, the leaving one's included, run (and are released) now.
                    node.completeLocked(.cancelled, into: &work)
                    return .cancelled
                }
            }
            switch step {
            case .follow: node = node.root()
            case .kept: return nil
            case .stillPending:
                if let key { node.removeRegistration(key) }
                return nil
            case .cancelled: return node.afterCompletion(&work)
            }
        }
    }

    /// Takes the entry registered under `key` off this future's callbacks if it is still pending
    /// (following merge links), and releases it after the lock. A function of its own, so that
    /// ``withdraw(_:key:)`` holds no callback-typed value on its usual paths: unspecialised code pays
    /// a type-metadata lookup for each such value.
    @usableFromInline @inline(never)
    final func removeRegistration(_ key: RegistrationKey) {
        var node = self
        var removed: CallbackEntry<Value>? = nil  // released after the lock
        defer { releaseOutsideLock(removed) }
        while true {
            let linked: Bool = LockTable.withLock(node) {
                switch node.phase {
                case .linked: return true
                case .completed, .never: return false  // its callbacks run (or ran) anyway
                case .pending:
                    if node.callbacks.isEmpty { return false }
                    if let extras = node.extras {
                        removed = node.callbacks.remove(key, index: &extras.registrationIndex)
                        return false
                    }
                    var index: RegistrationIndex? = nil
                    removed = node.callbacks.remove(key, index: &index)
                    if index != nil { node.ensureExtras.registrationIndex = index }
                    return false
                }
            }
            guard linked else { return }
            node = node.root()
        }
    }

    // MARK: Adopting

    enum AdoptionPlan {
        case rejected, accepted, complete(Outcome<Value>)
        /// Adopting closes a cycle: these futures on it fail, then the adopter, whose right to
        /// complete was handed to `token` as the adoption was accepted.
        case cycle([any CycleNode], token: CompleterToken)
        /// The adopter waits on the target (registered on it under the locks); only the callback
        /// holding the adopter's token may complete it. A deferred target starts after the locks.
        case wait(FutureStorage<Value>, startsDeferred: Bool)
        /// The adopter was cancelled first: it counts as a consumer of the target that withdrew.
        case withdrawn(FutureStorage<Value>)
    }

    /// ``CycleDetection/cycle(adopting:into:keepAlive:)`` out of line: the conversions to
    /// `any CycleNode` (a witness-table lookup, which the compiler would hoist to the top of
    /// `adopt`) stay off the usual adoption path.
    @usableFromInline @inline(never)
    static func cycleMembers(
        adopting target: FutureStorage<Value>,
        into adopter: FutureStorage<Value>,
        keepAlive: inout [AnyObject]
    ) -> [any CycleNode]? {
        CycleDetection.cycle(adopting: target, into: adopter, keepAlive: &keepAlive)
    }

    /// Why this adopter cannot adopt `target` for `origin`, or `nil` if it can (caller holds this
    /// future's lock): not pending, or `origin` may not complete it. An adopter that ended as a
    /// consumer that withdrew (cancelled, or failed as a member of a cycle) withdraws from `target`
    /// too, since nothing needs it any more.
    final func refusal(of target: FutureStorage<Value>, from origin: AnyObject) -> AdoptionPlan? {
        guard phase != .pending || !accepts(origin) else { return nil }
        switch result {
        case .cancelled?, .failure(FutureError.cycle)?: return .withdrawn(target)
        default: return .rejected
        }
    }

    /// Makes this future complete with `inner`'s outcome (collapsing), if `origin` may complete it.
    ///
    /// If `inner` has no consumer of its own, it is merged into this future (it becomes a link to
    /// it, and its callbacks and handlers move here), so chains of adoptions, like a recursive
    /// `flatMap` loop, never grow. Otherwise (or if `inner` is a deferred future not started yet,
    /// which it then starts) this future waits on `inner` as its consumer. Either
    /// way the two join one union-find set; adopting a future of one's own set closes a cycle, and
    /// the future fails with ``FutureError/cycle``.
    ///
    /// - Returns: `true` if this call was allowed to complete the future.
    @usableFromInline @discardableResult
    final func adopt(_ inner: FutureStorage<Value>, from origin: AnyObject) -> Bool {
        var root = self
        var released: (CallbackList<Value>, Extras<Value>?) = (CallbackList(), nil)
        // Strong references taken under the adoption lock; released after it, because releasing
        // the last one could free a pending future and run user code (a broken promise's callbacks).
        var keepAlive: [AnyObject] = []
        var keepUpstream: (any ConsumerSource)?  // the adopter's old upstream, released after the lock
        // Progress to report after the locks, if the adoption changed the adopter's progress.
        var progressChange: (changed: (Double, UInt64)?, observers: [ProgressObserver], refollow: Bool)?
        let plan: AdoptionPlan = adoptionLock.withLock {
            root = self.root(collecting: &keepAlive)
            let target = inner.root(collecting: &keepAlive)
            let members: [any CycleNode]?
            if target === root {
                members = []
            } else if LockTable.withLock(target, { target.phase == .pending }) {
                members = Self.cycleMembers(adopting: target, into: root, keepAlive: &keepAlive)
            } else {
                members = nil  // a completed target closes no cycle (most adoptions): no walk
            }
            if let members {
                // Accepted only if the adopter is pending and `origin` may complete it; the right
                // to complete moves to a token at once, so that no completion (but a cancellation)
                // can come between the decision and the failures.
                let adopter = root
                let token = CompleterToken()
                return LockTable.withLock(adopter) { () -> AdoptionPlan in
                    if let refusal = adopter.refusal(of: target, from: origin) { return refusal }
                    adopter.ensureExtras.handCompletion(to: token)
                    return .cycle(members, token: token)
                }
            }
            let adopter = root
            return LockTable.withLocks(adopter, target) { () -> AdoptionPlan in
                if let refusal = adopter.refusal(of: target, from: origin) { return refusal }
                switch target.phase {
                case .linked:
                    preconditionFailure("links only change under the adoption lock")
                case .completed:
                    return .complete(target.result!)
                case .never:
                    adopter.ensureExtras.completer = Extras<Value>.nobody  // nothing completes it now
                    adopter.immortal = true
                    return .accepted
                case .pending where target.consumers == 0 && target.extras?.onDemand == nil:
                    // Merge: `target` becomes a link to `adopter`, which takes over its state.
                    let extras = adopter.ensureExtras
                    if let targetExtras = target.extras, let completer = targetExtras.completer {
                        extras.completer = completer
                        extras.completerObject = targetExtras.completerObject
                    } else {
                        extras.handCompletion(to: target)
                    }
                    let waitingOn = target.extras?.waitingOn
                    extras.waitingOn = waitingOn
                    if let waitingOn { keepAlive.append(waitingOn) }  // released after the locks
                    if let moved = target.extras?.cancelHandlers { extras.cancelHandlers.append(contentsOf: moved) }
                    // (A merged join only ever adopts `never`: an adopter has no demand of its own to
                    // replace, and none is released here.)
                    if extras.onProgressDemand == nil, let demand = target.extras?.onProgressDemand {
                        extras.onProgressDemand = demand
                    }
                    // Progress: the target drives the merged node from now on (composed).
                    var relation = adopter.currentRelation
                    relation.absorb(target.currentRelation)
                    if adopter.progress != nil || target.progress != nil {
                        let state = adopter.ensureProgress
                        state.relation = relation
                        if let targetState = target.progress {
                            state.observers.append(contentsOf: targetState.observers)
                            targetState.observers = []
                            state.forwarding = state.forwarding || targetState.forwarding
                        }
                        let refollow = state.forwarding
                        state.forwarding = false  // the upstream changed: follow the new one
                        let changed = state.update()
                        progressChange = (changed, changed == nil ? [] : state.observers, refollow)
                    } else {
                        adopter.ensureExtras.progressRelation = relation
                    }
                    adopter.consumesUpstream = target.consumesUpstream
                    // The target's registration on its source stays as it is: withdraw by its key.
                    extras.upstreamKey = target.extras?.upstreamKey ?? RegistrationKey(target)
                    swap(&adopter.upstream, &target.upstream)  // the adopter's own source has completed
                    swap(&keepUpstream, &target.upstream)      // released after the lock
                    adopter.immortal = target.immortal
                    adopter.consumers += target.consumers
                    adopter.callbacks.append(contentsOf: target.callbacks)
                    adopter.mayHoldChain = adopter.mayHoldChain || !target.callbacks.isEmpty
                    swap(&released.0, &target.callbacks)
                    swap(&released.1, &target.extras)
                    target.phase = .linked
                    target.link = adopter
                    target.mayHoldChain = true
                    return .accepted
                case .pending:
                    // Also a deferred target that has not started: it keeps its own identity (its
                    // work completes it) and starts once the adopter has registered on it.
                    target.consumers += 1
                    let extras = adopter.ensureExtras
                    let token = CompleterToken()
                    extras.handCompletion(to: token)
                    extras.waitingOn = target
                    extras.upstreamKey = nil  // it registers on the target itself, below
                    adopter.immortal = target.immortal
                    adopter.consumesUpstream = true
                    var relation = adopter.currentRelation
                    relation.adoptWaiting(innerProgress: target.progress?.value ?? 0)
                    if let state = adopter.progress {
                        state.relation = relation
                        let refollow = state.forwarding
                        state.forwarding = false  // the upstream changes to the target: follow it
                        let changed = state.update()
                        progressChange = (changed, changed == nil ? [] : state.observers, refollow)
                    } else {
                        extras.progressRelation = relation
                    }
                    let link: any ConsumerSource = target.immortal ? WeakSource(target) : target
                    swap(&adopter.upstream, &keepUpstream)  // its old (completed) source: released later
                    adopter.upstream = link
                    // Registered here, with the count and the upstream, so that a cancellation of
                    // the adopter right after the locks finds its entry to remove. The callback
                    // holds the token (which holds nothing), so the adopter's right-to-complete
                    // check never depends on the target's lifetime, and no reference cycle forms.
                    target.callbacks.append(.outcome({ [adopter, token] outcome in
                        _ = adopter.finish(outcome, origin: token)
                    }, owner: ObjectIdentifier(adopter)))
                    target.mayHoldChain = true
                    return .wait(target, startsDeferred: target.extras?.onDemand != nil)
                }
            }
        }
        releaseOutsideLock(released)
        releaseOutsideLock(keepAlive)
        releaseOutsideLock(keepUpstream)
        if let progressChange {
            root.progressAdopted(changed: progressChange.changed, observers: progressChange.observers, refollow: progressChange.refollow)
        }
        switch plan {
        case .rejected:
            return false
        case .withdrawn(let target):
            Cancellation.withdraw(from: target, .uncounted, key: nil)
            return false
        case .accepted:
            return true
        case .complete(let outcome):
            return root.finish(outcome, origin: origin)
        case .cycle(let members, let token):
            // Every member fails with `.cycle`, from the target on, before the adopter's failure
            // could reach them through their transforms (a `recover` would see it as an error).
            for member in members { member.failAsCycle() }
            return root.finish(.failure(FutureError.cycle), origin: token)
        case .wait(let target, let startsDeferred):
            if startsDeferred { target.startIfDeferred() }
            return true
        }
    }
}

/// A future that consumers can withdraw from (type-erased, since a consumer's value type differs).
@usableFromInline
protocol ConsumerSource: AnyObject, Sendable {
    func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink?
    /// The future itself (for a ``WeakSource``: its target, if still alive).
    var resolved: (any ConsumerSource)? { get }
}

extension FutureStorage: ConsumerSource {
    @usableFromInline var resolved: (any ConsumerSource)? { self }
}

/// A weak reference to an immortal future, for its consumers: nothing else keeps an unreferenced
/// chain rooted in `never` from being freed.
@usableFromInline
final class WeakSource: ConsumerSource, @unchecked Sendable {
    // Safety: `target` is written once, in `init`; Swift's weak references are thread-safe to load.
    @usableFromInline weak var target: (any ConsumerSource)?

    @usableFromInline init(_ target: any ConsumerSource) { self.target = target }

    @usableFromInline
    func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
        target?.withdraw(withdrawal, key: key)
    }

    @usableFromInline var resolved: (any ConsumerSource)? { target }
}

/// The bits of ``FutureStorage/flags``.
@usableFromInline
enum StorageFlags {
    // Computed, not stored: constants that fold away, with no lazy-global check.
    @inlinable static var immortal: UInt8 { 1 }
    @inlinable static var consumesUpstream: UInt8 { 2 }
    @inlinable static var combinesProgress: UInt8 { 4 }
}

/// The next step of a registration loop, decided under a future's lock. Not nested in the generic
/// class: a nested type is generic too, and unspecialised code would look up its metadata.
@usableFromInline
enum RegisterStep { case follow, done, demand, idle }

/// The next step of adding a producer cancellation handler (see ``RegisterStep``).
@usableFromInline
enum HandlerStep { case follow, stored, runNow, drop }

/// The next step of a completion loop (see ``RegisterStep``).
@usableFromInline
enum FinishStep { case follow, rejected, won }

/// The next step of a withdrawal (see ``RegisterStep``): `stillPending` means the future was kept
/// and the leaving registrant's entry must come off.
@usableFromInline
enum WithdrawStep { case follow, kept, stillPending, cancelled }

/// What a completion leaves to do once the future's lock is released. Not generic, so copying or
/// destroying it needs no type metadata (a generic one went through value witnesses, about 10% of
/// a `.immediate` map step); the completing loop keeps one and passes it `inout`.
@usableFromInline
struct CompletionWork {
    /// Whether callbacks are waiting: this completion starts the drain.
    @usableFromInline var drain = false
    @usableFromInline var cancelled = false
    /// How to leave `upstream`, if the future was cancelled; decided under the lock.
    @usableFromInline var withdrawal: Withdrawal?
    /// The key of the future's registration on `upstream`.
    @usableFromInline var key: RegistrationKey?
    /// The upstream, taken out to be released after the lock (and withdrawn from if cancelled).
    @usableFromInline var upstream: (any ConsumerSource)?
    /// The extras box (with the producer's cancellation handlers), detached to be used and released
    /// after the lock.
    @usableFromInline var extras: AnyObject?
    /// Progress observers, moved out: told the final value and version (if any), then released.
    @usableFromInline var progress: (observers: [ProgressObserver], final: (Double, UInt64)?)?

    @inlinable init() {}
}

/// How a registrant leaves a future it registered on.
@usableFromInline
enum Withdrawal: Sendable {
    /// A consumer counted in `consumers`: its entry goes, and a future left with no consumer is
    /// cancelled.
    case counted
    /// A consumer that withdrew as it arrived (never counted, no entry, like an already-cancelled
    /// task): a future with no consumer is cancelled.
    case uncounted
    /// An observer, like an `observe()` branch: only its entry goes.
    case observer
}

/// A future's registration on the future it consumes or follows: what it withdraws from, how, and
/// the key of its entry there.
@usableFromInline
struct UpstreamLink {
    @usableFromInline let source: any ConsumerSource
    @usableFromInline let withdrawal: Withdrawal
    @usableFromInline let key: RegistrationKey?

    @inlinable init(source: any ConsumerSource, withdrawal: Withdrawal, key: RegistrationKey?) {
        self.source = source
        self.withdrawal = withdrawal
        self.key = key
    }
}

@usableFromInline
enum Cancellation {
    /// Withdraws a registrant from `source` (see ``Withdrawal``), and then each future that this
    /// cancels from its own upstream, in a loop.
    @usableFromInline
    static func withdraw(from source: any ConsumerSource, _ withdrawal: Withdrawal = .counted, key: RegistrationKey?) {
        var next = source.withdraw(withdrawal, key: key)
        while let link = next {
            next = link.source.withdraw(link.withdrawal, key: link.key)
        }
    }

    /// Withdraws along `link`, and on up.
    @inlinable
    static func withdraw(from link: UpstreamLink) {
        withdraw(from: link.source, link.withdrawal, key: link.key)
    }
}

/// Serialises adoptions, so finding a set's representative and joining two sets is atomic.
/// Taken before any stripe lock, never while holding one, and no user code runs under it.
let adoptionLock = Lock()

/// An object whose only job is to be a completer's identity (a timeout's, for instance).
final class CompleterToken: Sendable {}
