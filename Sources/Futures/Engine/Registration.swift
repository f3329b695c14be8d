/// Registering on a future: callbacks of observers, consumers, derived futures and join members;
/// producer cancellation handlers; the start of deferred work.
extension FutureStorage {
    /// Adds a callback, run once with the outcome (through the drain loop if already complete).
    ///
    /// - Parameters:
    ///   - callback: the callback; it decides itself whether to hop to an executor.
    ///   - asConsumer: whether the registrant consumes the value (an awaiting task) rather than
    ///     merely observing it. Derived futures use ``register(_:derived:consumer:)``.
    ///   - owner: the registrant, if it will withdraw (its entry is then removed; see
    ///     ``RegistrationKey``).
    ///   - carryingContext: whether the callback runs with the context current now (see
    ///     ``FutureContext``); `false` only for callbacks that run no user code (resuming a task),
    ///     or whose user code carries the context itself (a callback on an executor, which restores
    ///     it in the job rather than around the hand-off).
    ///   - observes: whether the callback reads the outcome for someone (see
    ///     ``FutureDiagnostics``'s unobserved failures); `false` only for the library's own
    ///     housekeeping on a future it returns (cancelling its timer, keeping its registration on a
    ///     token alive), which reads no failure for anyone.
    @inlinable
    final func register(
        _ callback: @escaping Callback<Value>, asConsumer: Bool, owner: AnyObject? = nil, carryingContext: Bool = true,
        observes: Bool = true
    ) {
        let made = CallbackEntry<Value>.outcome(callback, owner: owner.map(ObjectIdentifier.init))
        var entry: CallbackEntry<Value>? = carryingContext ? made.carryingContext() : made
        withOwnState({ $0.registerLocked(&entry, counted: asConsumer, observes: observes) }, then: { node, step in node.registered(step, &entry) })
    }

    /// Adds an observer's success or failure handler (a `.success` or `.failure` entry) that runs
    /// inline in the drain loop (`.immediate`), stored without a wrapping closure.
    @inlinable
    final func registerInlineObserver(_ made: CallbackEntry<Value>) {
        var entry: CallbackEntry<Value>? = made.carryingContext()
        withOwnState({ $0.registerLocked(&entry, counted: false) }, then: { node, step in node.registered(step, &entry) })
    }

    /// Registers `callback` for a future derived from this one: its consumer (or, for an
    /// `observe()` branch, `consumer: false`, a follower that never withdraws as a consumer), which
    /// records this future as its upstream before the callback can run. The one way an operator
    /// derives a future; the callback completes `derived` with ``complete(_:from:)``,
    /// ``finish(_:origin:)`` or ``adopt(_:from:)``.
    ///
    /// With `carryingContext: false`, the callback carries no context: it runs no user code, or its
    /// user code carries its own (a step on an executor, which restores it in the job).
    @inlinable
    final func register<Derived>(
        _ callback: @escaping Callback<Value>,
        derived: FutureStorage<Derived>,
        consumer: Bool = true,
        carryingContext: Bool = true
    ) {
        derived.consumesUpstream = consumer
        let made = CallbackEntry<Value>.outcome(callback, owner: ObjectIdentifier(derived))
        var entry: CallbackEntry<Value>? = carryingContext ? made.carryingContext() : made
        withOwnState({ $0.registerLocked(&entry, derived: derived) }, then: { node, step in node.registered(step, &entry) })
    }

    /// What registering a join's member found (see ``registerMember(_:index:)``).
    @usableFromInline
    enum MemberRegistration {
        /// The member was complete already: nothing was registered, here is its outcome.
        case completed(Outcome<Value>)
        /// The sink is registered; `neverLike`: nothing but cancellation can complete the member,
        /// so the join holds it weakly; `startsWork`: the member is a deferred future whose work
        /// this registration demanded, for the join to start (``startIfDeferred()``) unless it was
        /// decided meanwhile.
        case registered(neverLike: Bool, startsWork: Bool)
    }

    /// Registers a join's member sink as a consumer of this future, with the member's index, unless
    /// the future is complete already: then nothing is registered and its outcome is returned, read
    /// in the same critical region, so that the members complete before the join was made decide it
    /// in input order (a registration on a complete future still running its callbacks on another
    /// thread would queue behind them).
    @inlinable
    final func registerMember(_ sink: MemberSink<Value>, index: Int) -> MemberRegistration {
        var entry: CallbackEntry<Value>? = .member(sink, index: index)
        return withOwnState({ node -> (RegisterStep, MemberRegistration) in
            if let outcome = node.result {
                node.flags |= StorageFlags.observed  // the join read it: a failure is not unobserved
                return (.done, .completed(outcome))  // `entry` dropped after the lock
            }
            // A completed future is never never-like, even if it was immortal (a cancelled future
            // derived from `never`): its outcome reaches the join, if later than this call.
            let neverLike = node.phase == .never || (node.phase == .pending && node.immortal)
            let step = node.registerLocked(&entry, counted: true)
            return (step, .registered(neverLike: neverLike, startsWork: step == .demand))
        }, then: { node, step in
            if step.0 != .demand { node.registered(step.0, &entry) }  // a deferred member starts from the join
            return step.1
        })
    }

    /// The rest of a registration, after the lock: starts deferred work, or runs the callback of
    /// an idle completed future. An entry left in `entry` (dropped by `never`) is released here.
    @inlinable
    final func registered(_ step: RegisterStep, _ entry: inout CallbackEntry<Value>?) {
        switch step {
        case .done: break
        case .demand: startIfDeferred()
        case .idle: runOnIdle(entry.take()!)
        }
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
        let start = LockTable.withLock(self) { restartDrainLocked(callback) }
        // Behind the running callback, as a drain of this future without affinity: registered after
        // the completion, its callbacks must not overtake one for the same executor registered
        // before it and still waiting in that executor's queue.
        if start {
            Drain.schedule(self, { node in
                Drain.closingAffinity { unsafeDowncast(node, to: FutureStorage<Value>.self).drain() }
            })
        }
    }

    /// Gives a new, not yet shared, future the work of a `Future.deferred`: it starts (once) when
    /// the first callback registers or a future adopts this one, and gets the future to complete.
    @usableFromInline
    final func startsOnDemand(_ work: @escaping @Sendable (FutureStorage<Value>) -> Void) {
        let work = FutureContext.carrying(work)  // the context where the deferred future is made
        LockTable.withLock(self) { ensureExtras.onDemand = work }
    }

    /// Starts the work of a `Future.deferred` that has not started yet (outside any lock), through
    /// the drain loop: a deferred future whose work starts another one (a recursive deferred chain)
    /// runs in a loop, not by recursion.
    @usableFromInline
    final func startIfDeferred() {
        guard let work = LockTable.withLock(self, { takeDeferredWorkLocked() }) else { return }
        Drain.schedule(self, { work(unsafeDowncast($0, to: FutureStorage<Value>.self)) })
    }

    /// Adds a producer cancellation handler; runs it now if the future is already cancelled.
    @inlinable
    final func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let step = withStateAndDepth({ $0.addCancelHandlerLocked(handler, depth: $1) }, then: { $1 })
        switch step {
        case .runNow: handler()
        case .stored: break
        case .drop: withExtendedLifetime(handler) {}  // released by the caller, after the lock
        }
    }

    /// The token this future's completion cancels (see `Future.completionToken`): made, stored and
    /// registered in one transition, so no reader gets it before the future holds the callback
    /// that cancels it.
    final func completionToken() -> CancellationToken {
        var entry: CallbackEntry<Value>? = nil
        return withOwnState({ $0.completionTokenLocked(registering: &entry) }, then: { node, made in
            if let step = made.registered { node.registered(step, &entry) }
            return made.token
        })
    }
}
