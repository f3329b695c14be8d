/// The state machine of a future: every change of a future's state is one of the functions below.
///
/// Each of them runs with the future's stripe lock held (two locks for the adoption edges), takes
/// no lock, runs no user code and releases nothing: it only moves state and returns what is left
/// to do, which the caller (registration, completion, withdrawal, adoption) does after the lock.
/// The caller reaches them through ``FutureStorage/withState(_:then:)``, the one loop that follows
/// merge links, so none of them ever sees a linked future.
///
/// ```
///   event                  from                          to                                 function
///   ─────────────────────  ────────────────────────────  ─────────────────────────────────  ──────────────────────────
///   register               pending                       pending, entry appended            registerLocked
///                          completed, draining           completed, entry queued as late    registerLocked
///                          completed, idle               (unchanged; the entry runs now)    registerLocked → .idle
///                          never                         (unchanged; the entry is dropped)  registerLocked
///   register inside a      completed, idle               completed, draining                restartDrainLocked
///     drain loop
///   complete, cancel       pending, origin accepted      completed (draining if callbacks)  completeLocked
///   withdraw               pending                       pending, one consumer fewer,       withdrawLocked
///                                                        or completed (cancelled) at zero
///   take an entry off      pending                       pending, entry removed             removeLocked
///   end of a drain batch   completed, draining           completed, idle or next batch      takeLateCallbacksLocked
///   add a cancel handler   pending                       pending, handler stored            addCancelHandlerLocked
///   hand over completion   pending, origin accepted      pending, new completer,            handOverLocked
///                                                        upstream detached
///   start deferred work    pending, work not started     pending, work taken                takeDeferredWorkLocked
///   read completion token  pending, no token yet         pending, token stored,             completionTokenLocked
///                                                        its callback appended
///   merge (adopt a future  adopter pending               adopter pending, target's state    absorbLocked
///     with no consumer)    target pending                target linked
///   wait (adopt another)   adopter pending               adopter pending, waiting on target waitLocked
///   adopt never            pending                       pending, completed by nobody       adoptNeverLocked
///   adopt into a cycle     pending                       pending, completer a token         handToTokenLocked
/// ```
///
/// `linked` and `never` are final; a completed future never becomes pending again. A pair not in
/// the table (a transition on a linked future, a drain batch on a future nobody drains) is a bug
/// in the engine and traps with a message.
extension FutureStorage {

    // MARK: Registration

    /// Stores `entry` (taking it out of the caller's optional), counting a consumer if `counted`:
    /// apart, if it came `throughLink` (it registered on a future merged into this one).
    @inlinable @inline(__always)
    final func registerLocked(_ entry: inout CallbackEntry<Value>?, counted: Bool, throughLink: Bool = false) -> RegisterStep {
        assertLocked()
        defer { checkInvariants() }
        switch phase {
        case .linked:
            linkedFutureTrap()
        case .never:
            // Immortal: the callback can never run, so it is not kept. It stays in the caller's
            // `entry`, untouched here, and is destroyed with it after the lock.
            return .done
        case .pending:
            callbacks.append(entry.take()!)
            mayHoldChain = true
            if counted {
                if throughLink { ensureExtras.linkedConsumers += 1 } else { consumers += 1 }
            }
            return extras?.onDemand == nil ? .done : .demand
        case .completed:
            guard draining else { return .idle }  // every callback registered before this one has run
            // The drain owner reads `callbacks` without the lock; it takes these next.
            ensureExtras.lateCallbacks.append(entry.take()!)
            return .done
        }
    }

    /// ``registerLocked(_:counted:throughLink:)`` for a future derived from this one, which records
    /// this future as its upstream now, before the callback can run: weakly if this future is
    /// immortal. A future derived from `never` is immortal. (`derived` is not shared yet: only this
    /// lock guards it.)
    @inlinable
    final func registerLocked<Derived>(
        _ entry: inout CallbackEntry<Value>?,
        derived: FutureStorage<Derived>,
        throughLink: Bool
    ) -> RegisterStep {
        let step = registerLocked(&entry, counted: derived.consumesUpstream, throughLink: throughLink)
        switch phase {
        case .pending:
            derived.consumedThroughLink = throughLink && derived.consumesUpstream
            if immortal {
                derived.immortal = true
                derived.upstream = WeakSource(self)
            } else {
                derived.upstream = self
            }
        case .never:
            derived.immortal = true
        case .completed, .linked:
            break
        }
        return step
    }

    /// Inside a drain loop, a callback registered on a completed, idle future: this future starts
    /// draining again with `callback` alone (returns `true`: the caller schedules the drain), or,
    /// if a drain started meanwhile, it queues behind that one's batch.
    @inlinable
    final func restartDrainLocked(_ callback: CallbackEntry<Value>) -> Bool {
        assertLocked()
        defer { checkInvariants() }
        guard phase == .completed else { unexpected("restarted the drain of a future that is not completed") }
        if draining {
            ensureExtras.lateCallbacks.append(callback)
            return false
        }
        callbacks.append(callback)
        draining = true  // registrations after this one, from any thread, queue behind it
        return true
    }

    /// Stores a producer cancellation handler on a pending future, or says what to do with it.
    @inlinable
    final func addCancelHandlerLocked(_ handler: @escaping @Sendable () -> Void) -> HandlerStep {
        assertLocked()
        defer { checkInvariants() }
        switch phase {
        case .linked: linkedFutureTrap()
        case .never: return .drop
        case .completed: return result?.isCancelled == true ? .runNow : .drop
        case .pending:
            ensureExtras.cancelHandlers.append(handler)
            return .stored
        }
    }

    /// The token this future's completion cancels: `.cancelled` once completed, `.never` for
    /// `never`; for a pending future, the one stored in the extras box, or a new one, stored, whose
    /// cancelling callback is registered now (it is then in `entry` no more, and the step says
    /// what is left to do after the lock).
    final func completionTokenLocked(
        registering entry: inout CallbackEntry<Value>?
    ) -> (token: CancellationToken, registered: RegisterStep?) {
        assertLocked()
        defer { checkInvariants() }
        switch phase {
        case .linked: linkedFutureTrap()
        case .completed: return (.cancelled, nil)
        case .never: return (.never, nil)
        case .pending:
            if let token = extras?.completionToken { return (token, nil) }
            let source = CancellationSource()
            ensureExtras.completionToken = source.token
            entry = .outcome({ _ in source.cancel() }, owner: nil)
            return (source.token, registerLocked(&entry, counted: false))
        }
    }

    /// Takes the work of a `Future.deferred` that has not started, if this future is pending.
    @inlinable
    final func takeDeferredWorkLocked() -> (@Sendable (FutureStorage<Value>) -> Void)? {
        assertLocked()
        guard phase == .pending, let extras, let work = extras.onDemand else { return nil }
        extras.onDemand = nil
        return work
    }

    // MARK: Completion

    /// Completes this future with `outcome` if it is pending and `origin` may complete it (`nil`:
    /// cancellation, always allowed), recording in `work` what is left to do after the lock.
    @inlinable @inline(__always)
    final func completeLocked(_ outcome: Outcome<Value>, from origin: AnyObject?, into work: inout CompletionWork) -> CompleteStep {
        assertLocked()
        switch phase {
        case .linked: linkedFutureTrap()
        case .completed, .never: return .rejected
        case .pending:
            if let origin, !accepts(origin) { return .rejected }
            enterCompleted(outcome, into: &work)
            // A producer that ended its future as a withdrawal would (it adopted a cancelled
            // future) has used its right, which the outcome alone does not tell apart.
            if origin != nil, !outcome.isSuccess, Self.endsAsWithdrawal(outcome) {
                setFlag(StorageFlags.producerEnded, true)
            }
            return .won
        }
    }

    /// The edge from pending to completed, for ``completeLocked(_:from:into:)`` and
    /// ``withdrawLocked(_:throughLink:into:)``: callbacks go to the drain (taken by the caller's drain loop), the
    /// upstream, the extras box and the progress observers move into `work`.
    @inlinable @inline(__always)
    final func enterCompleted(_ outcome: Outcome<Value>, into work: inout CompletionWork) {
        assert(phase == .pending, "completed a future that is not pending")
        phase = .completed
        storedOutcome = outcome
        mayHoldChain = false
        work.drain = !callbacks.isEmpty
        draining = work.drain
        work.cancelled = outcome.isCancelled
        if work.cancelled, upstream != nil { (work.withdrawal, work.key) = departure }
        swap(&work.upstream, &upstream)
        if let extras {
            work.extras = self.extras.take()  // moved out: released after the unlock
            if extras.completer != nil, !outcome.isSuccess, Self.endsAsWithdrawal(outcome) { keepCompleterLocked(extras) }
        }
        if let progress {
            work.progress = progress.complete(success: outcome.isSuccess)
            work.unfollow = progress.forwarding
        }
        checkInvariants()
    }

    /// Whether `outcome` is one a withdrawing adopter ends with (cancelled, or failed as a member
    /// of a cycle): the outcomes after which ``refusal(of:from:)`` asks who had the right to
    /// complete the future.
    @usableFromInline @inline(never)
    static func endsAsWithdrawal(_ outcome: Outcome<Value>) -> Bool {
        switch outcome {
        case .cancelled, .failure(FutureError.cycle): true
        default: false
        }
    }

    /// A future that ended cancelled (or failed as a member of a cycle) after its producer handed
    /// the right to complete on keeps who held it: a box of its own, allocated on this rare path
    /// only (an adopter waiting on a future with other consumers, then cancelled). A later
    /// `complete(with:)` from the producer is then a second completion, refused, and leaves the
    /// future it brings alone (see ``refusal(of:from:)``).
    @usableFromInline @inline(never)
    final func keepCompleterLocked(_ old: Extras<Value>) {
        let kept = Extras<Value>()
        kept.completer = old.completer
        kept.completerObject = old.completerObject
        extras = kept
    }

    /// Between two batches of this future's drain: takes the callbacks registered while the last
    /// batch ran into `batch` (returns `true`), or ends the drain (returns `false`).
    @inlinable
    final func takeLateCallbacksLocked(into batch: inout CallbackList<Value>) -> Bool {
        assertLocked()
        defer { checkInvariants() }
        guard phase == .completed, draining else { unexpected("a drain batch of a future nobody drains") }
        guard let extras, !extras.lateCallbacks.isEmpty else {
            draining = false
            return false
        }
        swap(&batch, &extras.lateCallbacks)
        return true
    }

    /// Hands the right to complete this pending future from `origin` to `newCompleter` and detaches
    /// its upstream into `detached`, in one step (a timeout that fires). Returns `nil` if `origin`
    /// may not complete the future, else the registration on the upstream to leave (`nil` inside if
    /// there is none).
    @inlinable
    final func handOverLocked(
        to newCompleter: AnyObject,
        from origin: AnyObject,
        detaching detached: inout (any ConsumerSource)?,
        unfollow: inout Bool
    ) -> UpstreamLink?? {
        assertLocked()
        defer { checkInvariants() }
        switch phase {
        case .linked: linkedFutureTrap()
        case .completed, .never: return nil
        case .pending:
            guard accepts(origin) else { return nil }
            ensureExtras.handCompletion(to: newCompleter)
            swap(&detached, &upstream)
            if detached != nil, let progress, progress.forwarding {
                progress.forwarding = false  // its listener on the detached upstream goes (after the lock)
                unfollow = true
            }
            guard let upstream = detached else { return .some(nil) }
            let (withdrawal, key) = departure
            return UpstreamLink(source: upstream, withdrawal: withdrawal, key: key)
        }
    }

    // MARK: Withdrawal

    /// A registrant leaves (see ``Withdrawal``): a consumer lowers the count, and a future left
    /// with no consumer is cancelled here, atomically with that decision. The registrant's entry
    /// is taken off separately (``removeLocked(_:)``), only when the future stays pending.
    ///
    /// A consumer that came through a future merged into this one (`throughLink`, or
    /// `.countedThroughLink`) never cancels it by leaving: the merged future is still consumed by
    /// its adopter. Only when this future's own consumers have all left too is it cancelled.
    @inlinable
    final func withdrawLocked(
        _ withdrawal: Withdrawal,
        throughLink: Bool,
        into work: inout CompletionWork
    ) -> WithdrawStep {
        assertLocked()
        defer { checkInvariants() }
        switch phase {
        case .linked: linkedFutureTrap()
        case .completed, .never: return .kept
        case .pending:
            let throughLink = throughLink || withdrawal == .countedThroughLink
            switch withdrawal {
            case .observer: return .stillPending
            case .counted, .countedThroughLink:
                if throughLink {
                    if let extras, extras.linkedConsumers > 0 { extras.linkedConsumers -= 1 }
                } else if consumers > 0 {
                    consumers -= 1
                }
            case .uncounted: break
            }
            if consumers > 0 { return .stillPending }
            if throughLink {
                guard let extras, extras.ownConsumersLeft, extras.linkedConsumers == 0 else { return .stillPending }
            } else if let extras, extras.linkedConsumers > 0 {
                extras.ownConsumersLeft = true
                return .stillPending
            }
            // Cancelled: its callbacks, the leaving one's included, run (and are released) now.
            enterCompleted(.cancelled, into: &work)
            return .cancelled
        }
    }

    /// Takes the entry registered under `key` off a pending future's callbacks into `removed`, to
    /// be released after the lock.
    @inlinable
    final func removeLocked(_ key: RegistrationKey, into removed: inout CallbackEntry<Value>?) {
        assertLocked()
        defer { checkInvariants() }
        switch phase {
        case .linked: linkedFutureTrap()
        case .completed, .never: return  // its callbacks run (or ran) anyway
        case .pending:
            if callbacks.isEmpty { return }
            if let extras {
                removed = callbacks.remove(key, index: &extras.registrationIndex)
                return
            }
            var index: RegistrationIndex? = nil
            removed = callbacks.remove(key, index: &index)
            if index != nil { ensureExtras.registrationIndex = index }
        }
    }

    // MARK: Adoption (both futures' locks held, and the adoption lock)

    /// Makes `target`, pending with no consumer and no deferred work, a link to this pending
    /// adopter, which takes over its callbacks, consumers, upstream, right to complete, cancel
    /// handlers and progress. The references the merge drops are moved into `released` and
    /// `keepAlive`, for the caller to release after the locks.
    final func absorbLocked(
        _ target: FutureStorage<Value>,
        released: inout (CallbackList<Value>, Extras<Value>?),
        keepAlive: inout [AnyObject],
        keepUpstream: inout (any ConsumerSource)?
    ) -> ProgressChange? {
        assertLocked()
        target.assertLocked()
        guard phase == .pending, target.isMergeableLocked else {
            unexpected("merged a future that has consumers, or into one that is not pending")
        }
        let extras = ensureExtras
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
        if extras.completionToken == nil { extras.completionToken = target.extras?.completionToken }
        // (A merged join only ever adopts `never`: an adopter has no demand of its own to replace,
        // and none is released here.)
        if extras.onProgressDemand == nil, let demand = target.extras?.onProgressDemand {
            extras.onProgressDemand = demand
        }
        let progressChange = composeProgressOnMerge(with: target)
        consumesUpstream = target.consumesUpstream
        consumedThroughLink = target.consumedThroughLink
        // The target's registration on its source stays as it is: withdraw by its key.
        extras.upstreamKey = target.extras?.upstreamKey ?? RegistrationKey(target)
        swap(&upstream, &target.upstream)  // the adopter's own source has completed
        swap(&keepUpstream, &target.upstream)  // released after the lock
        immortal = target.immortal
        consumers += target.consumers
        callbacks.append(contentsOf: target.callbacks)
        mayHoldChain = mayHoldChain || !target.callbacks.isEmpty
        swap(&released.0, &target.callbacks)
        swap(&released.1, &target.extras)
        target.phase = .linked
        target.link = self
        target.mayHoldChain = true
        checkInvariants()
        target.checkInvariants()
        return progressChange
    }

    /// Makes this pending adopter wait on `target` (pending, with consumers or deferred work) as
    /// its consumer: registers on it the callback that completes this future, holding `token`,
    /// the only completer this future accepts from now on. The old upstream (completed) moves into
    /// `keepUpstream`, for the caller to release after the locks.
    final func waitLocked(
        on target: FutureStorage<Value>,
        throughLink: Bool,
        token: CompleterToken,
        keepUpstream: inout (any ConsumerSource)?
    ) -> ProgressChange? {
        assertLocked()
        target.assertLocked()
        guard phase == .pending, target.phase == .pending else { unexpected("an adopter waits on a future that is not pending") }
        if throughLink { target.ensureExtras.linkedConsumers += 1 } else { target.consumers += 1 }
        consumedThroughLink = throughLink
        let extras = ensureExtras
        extras.handCompletion(to: token)
        extras.waitingOn = target
        extras.upstreamKey = nil  // it registers on the target itself, below
        immortal = target.immortal
        consumesUpstream = true
        let progressChange = composeProgressOnWait(innerProgress: target.progress?.value ?? 0)
        let link: any ConsumerSource = target.immortal ? WeakSource(target) : target
        swap(&upstream, &keepUpstream)
        upstream = link
        // Registered here, with the count and the upstream, so that a cancellation of the adopter
        // right after the locks finds its entry to remove. The callback holds the token (which
        // holds nothing), so the adopter's right-to-complete check never depends on the target's
        // lifetime, and no reference cycle forms.
        target.callbacks.append(.outcome({ [self, token] outcome in
            _ = self.finish(outcome, origin: token)
        }, owner: ObjectIdentifier(self)))
        target.mayHoldChain = true
        checkInvariants()
        target.checkInvariants()
        return progressChange
    }

    /// Whether a future that adopts this one may merge it (caller holds the lock): it is pending,
    /// nothing consumes it (neither its own consumers nor any that came through a future merged
    /// into it) and it is not a deferred future that has yet to start. The adopter must also hold
    /// it directly, not through a link: a future already merged into one adopter is waited on by a
    /// second.
    @inlinable
    final var isMergeableLocked: Bool {
        assertLocked()
        return phase == .pending && consumers == 0
            && extras?.linkedConsumers ?? 0 == 0 && extras?.onDemand == nil
    }

    /// This pending adopter adopted `never`: nothing but cancellation completes it now.
    final func adoptNeverLocked() {
        assertLocked()
        guard phase == .pending else { unexpected("adopted never into a future that is not pending") }
        ensureExtras.completer = Extras<Value>.nobody
        immortal = true
        checkInvariants()
    }

    /// This pending adopter closes a cycle: from now on only `token` completes it (cancellation
    /// aside), so nothing comes between this decision and the cycle's failures.
    final func handToTokenLocked(_ token: CompleterToken) {
        assertLocked()
        guard phase == .pending else { unexpected("closed a cycle from a future that is not pending") }
        ensureExtras.handCompletion(to: token)
        checkInvariants()
    }

    // MARK: Checks

    /// Traps: transitions never see a linked future (``withState(_:then:)`` follows its link).
    @inlinable
    final func linkedFutureTrap() -> Never {
        preconditionFailure("a transition reached a linked future; callers follow links first")
    }

    /// Traps: `what` is a pair of state and event the machine does not have.
    @inlinable
    final func unexpected(_ what: StaticString) -> Never {
        preconditionFailure("impossible future transition: \(what)")
    }

    /// In debug builds, traps unless the caller holds this future's stripe lock.
    @inlinable @inline(__always)
    final func assertLocked() {
        #if DEBUG
        LockChecks.assertHolds(self)
        #endif
    }

    /// In debug builds, traps if the state breaks a rule that holds between transitions (caller
    /// holds the lock).
    @inlinable @inline(__always)
    final func checkInvariants() {
        #if DEBUG
        checkInvariantsNow()
        #endif
    }

    /// The rules ``checkInvariants()`` checks.
    @usableFromInline
    final func checkInvariantsNow() {
        LockChecks.assertHolds(self)
        precondition(consumers >= 0 && extras?.linkedConsumers ?? 0 >= 0, "a future counts fewer than zero consumers")
        switch phase {
        case .pending:
            precondition(!draining, "a pending future is draining")
        case .completed:
            precondition(upstream == nil, "a completed future keeps its upstream")
            precondition(!mayHoldChain, "a completed future may hold a chain")
            // While draining, `callbacks` belongs to the drain owner: not read here.
            if !draining {
                precondition(callbacks.isEmpty, "an idle completed future holds callbacks")
                precondition(extras?.lateCallbacks.isEmpty ?? true, "an idle completed future holds late callbacks")
            }
        case .linked:
            precondition(upstream != nil, "a linked future has no link")
            precondition(callbacks.isEmpty && extras == nil, "a linked future keeps state of its own")
            precondition(!draining && consumers == 0, "a linked future drains or counts consumers")
        case .never:
            precondition(callbacks.isEmpty && upstream == nil && !draining, "never holds state")
        }
    }
}

/// What a registration leaves to do after the lock. Not nested in the generic class: a nested type
/// is generic too, and unspecialised code would look up its metadata.
@usableFromInline
enum RegisterStep { case done, demand, idle }

/// What adding a producer cancellation handler leaves to do after the lock.
@usableFromInline
enum HandlerStep { case stored, runNow, drop }

/// Whether a completion won (its work is left to do after the lock) or was rejected.
@usableFromInline
enum CompleteStep { case rejected, won }

/// What a withdrawal leaves to do after the lock: `stillPending` means the future was kept and the
/// leaving registrant's entry must come off.
@usableFromInline
enum WithdrawStep { case kept, stillPending, cancelled }
