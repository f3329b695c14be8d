/// The transitions of a future: each function below performs one event of ``FutureState``'s
/// machine (its table lists every pair of state and event, and which function performs it).
///
/// Each of them runs with the future's stripe lock held (two locks for the adoption edges), takes
/// no lock, runs no user code and releases nothing: it asks the state machine for the action, moves
/// the data that goes with the state (callbacks, outcome, extras) as the action says, and returns
/// what is left to do, which the caller (registration, completion, withdrawal, adoption) does
/// after the lock. The caller reaches them through ``FutureStorage/withState(_:then:)``,
/// `withOwnState` or `withStateAndDepth`, which follow merge links to the future holding the state,
/// so none of them ever sees a linked future: a pair the machine calls impossible traps here with
/// its name.
extension FutureStorage {

    // MARK: Registration

    /// Stores `entry` (taking it out of the caller's optional), counting a consumer if `counted`;
    /// unless `observes` is false (the library's own housekeeping), the outcome counts as observed.
    @inlinable @inline(__always)
    final func registerLocked(_ entry: inout CallbackEntry<Value>?, counted: Bool, observes: Bool = true) -> RegisterStep {
        assertLocked()
        defer { checkInvariants() }
        if observes { flags |= StorageFlags.observed }
        switch state.register(counted: counted) {
        case .impossible:
            linkedFutureTrap()
        case .drop:
            // Immortal: the callback can never run, so it is not kept. It stays in the caller's
            // `entry`, untouched here, and is destroyed with it after the lock.
            return .done
        case .append:
            callbacks.append(entry.take()!)
            mayHoldChain = true
            return extras?.onDemand == nil ? .done : .demand
        case .runNow:
            return .idle  // every callback registered before this one has run
        case .appendLate:
            // The drain owner reads `callbacks` without the lock; it takes these next.
            ensureCompletedExtras.lateCallbacks.append(entry.take()!)
            return .done
        }
    }

    /// ``registerLocked(_:counted:)`` for a future derived from this one, which records
    /// this future as its upstream now, before the callback can run: weakly if this future is
    /// immortal. A future derived from `never` is immortal, but for a timeout, which its timer may
    /// still fail. (`derived` is not shared yet: only this lock guards it.)
    @inlinable
    final func registerLocked<Derived>(
        _ entry: inout CallbackEntry<Value>?,
        derived: FutureStorage<Derived>
    ) -> RegisterStep {
        let step = registerLocked(&entry, counted: derived.consumesUpstream)
        switch phase {
        case .pending:
            if immortal && !derived.flag(StorageFlags.completesOtherwise) {
                derived.immortal = true
                derived.upstream = WeakSource(self)
            } else {
                derived.upstream = self
            }
        case .never:
            if !derived.flag(StorageFlags.completesOtherwise) { derived.immortal = true }
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
        switch state.restartDrain() {
        case .impossible:
            unexpected("restarted the drain of a future that is not completed")
        case .appendLate:
            ensureCompletedExtras.lateCallbacks.append(callback)
            return false
        case .appendAndDrain:
            callbacks.append(callback)  // registrations after this one, from any thread, queue behind it
            return true
        }
    }

    /// Stores a producer cancellation handler on a pending future, or says what to do with it; the
    /// producer's future is `depth` below this one (see ``CancelHandler``).
    @inlinable
    final func addCancelHandlerLocked(_ handler: @escaping @Sendable () -> Void, depth: Int32) -> HandlerStep {
        assertLocked()
        defer { checkInvariants() }
        switch state.addCancelHandler(cancelled: result?.isCancelled == true) {
        case .impossible: linkedFutureTrap()
        case .drop: return .drop
        case .runNow: return .runNow
        case .store:
            ensureExtras.merge.cancelHandlers.add(depth: depth, run: handler)
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
        switch state.completionToken() {
        case .impossible: linkedFutureTrap()
        case .cancelledToken: return (.cancelled, nil)
        case .neverToken: return (.never, nil)
        case .pendingToken:
            if let token = extras?.completionToken { return (token, nil) }
            let source = CancellationSource()
            ensureExtras.completionToken = source.token
            entry = .outcome({ _ in source.cancel() }, owner: nil)
            return (source.token, registerLocked(&entry, counted: false, observes: false))  // reads no failure for anyone
        }
    }

    /// Takes the work of a `Future.deferred` that has not started, if this future is pending.
    @inlinable
    final func takeDeferredWorkLocked() -> (@Sendable (FutureStorage<Value>) -> Void)? {
        assertLocked()
        guard state.takeDeferredWork(), let extras, let work = extras.onDemand else { return nil }
        extras.onDemand = nil
        return work
    }

    // MARK: Completion

    /// Completes this future with `outcome` if it is pending and `origin` may complete it (`nil`:
    /// cancellation, always allowed), recording in `work` what is left to do after the lock.
    @inlinable @inline(__always)
    final func completeLocked(_ outcome: Outcome<Value>, from origin: AnyObject?, into work: inout CompletionWork) -> CompleteStep {
        assertLocked()
        let accepted = if let origin { accepts(origin) } else { true }
        switch state.complete(accepted: accepted, hasCallbacks: hasCallbacksToRun) {
        case .impossible: linkedFutureTrap()
        case .rejected: return .rejected
        case .won:
            enterCompleted(outcome, into: &work)
            // A producer that ended its future as a withdrawal would (it adopted a cancelled
            // future) has used its right, which the outcome alone does not tell apart.
            if origin != nil, !outcome.isSuccess, Self.endsAsWithdrawal(outcome) {
                setFlag(StorageFlags.producerEnded, true)
            }
            return .won
        }
    }

    /// Whether completing now leaves callbacks to run: this future's own, or the observers of the
    /// futures merged into it. Only a pending future's count: a completed one's `callbacks` may
    /// belong to the owner of its drain, which reads them without the lock (a cancel or a
    /// withdrawal that arrives as the future completes is rejected whatever this says).
    @inlinable @inline(__always)
    final var hasCallbacksToRun: Bool {
        phase == .pending && (!callbacks.isEmpty || (extras?.merge.observerCount ?? 0) > 0)
    }

    /// The data that goes with the edge from pending to completed, which the state machine just
    /// took (``completeLocked(_:from:into:)``, ``withdrawLocked(_:depth:into:)``): callbacks go to
    /// the drain (taken by the caller's drain loop), the upstream, the extras box and the progress
    /// observers move into `work`.
    @inlinable @inline(__always)
    final func enterCompleted(_ outcome: Outcome<Value>, into work: inout CompletionWork) {
        assert(phase == .completed, "completed a future the state machine did not complete")
        storedOutcome = outcome
        mayHoldChain = false
        // Left in the extras box, released after the lock with it.
        if extras?.merge.observers != nil { runMergedObserversFirst() }
        work.drain = draining
        assert(work.drain == !callbacks.isEmpty, "a drain decided on other callbacks than those to run")
        work.cancelled = outcome.isCancelled
        if work.cancelled, upstream != nil { (work.withdrawal, work.key) = departure }
        swap(&work.upstream, &upstream)
        if let extras {
            work.extras = rare.take()  // moved out: released after the unlock
            let keepsCompleter = extras.completer != nil && !outcome.isSuccess && Self.endsAsWithdrawal(outcome)
            if keepsCompleter || extras.merge.forward != nil { keepLocked(extras, completer: keepsCompleter) }
        }
        if let progress {
            work.progress = progress.complete(success: outcome.isSuccess)
            work.unfollow = progress.forwarding
        }
        checkInvariants()
    }

    /// Puts the observers of the futures merged into this one before its own callbacks, as one
    /// entry that runs them from the merge set's buffer (see ``MergedObservers/run(with:)``): no
    /// copy of a loop's observers, however many levels it observed. The entry holds the extras box,
    /// which the completion detaches, so that nothing else changes the set meanwhile.
    @usableFromInline @inline(never)
    final func runMergedObserversFirst() {
        guard let extras, let observers = extras.merge.observers, !observers.isEmpty else { return }
        var list = CallbackList<Value>()
        list.append(.carried(extras))
        list.append(contentsOf: callbacks)
        callbacks = list
    }

    /// Whether `outcome` is one a withdrawing adopter ends with (cancelled, or failed as a member
    /// of a cycle): the outcomes after which ``refusal(from:)`` asks who had the right to
    /// complete the future.
    @usableFromInline @inline(never)
    static func endsAsWithdrawal(_ outcome: Outcome<Value>) -> Bool {
        switch outcome {
        case .cancelled, .failure(FutureError.cycle): true
        default: false
        }
    }

    /// What a completed future keeps of its pending rare state, in a ``CompletedExtras``, made on
    /// these rare paths only:
    /// - ended cancelled (or failed as a member of a cycle) after its producer handed the right to
    ///   complete on (an adopter waiting on a future with other consumers, then cancelled), it
    ///   keeps who held that right (`completer`). A later `complete(with:)` from the producer is
    ///   then a second completion, refused, and leaves the future it brings alone (see
    ///   ``refusal(from:)``);
    /// - split, it keeps its forward: the producer of a future merged into it still completes
    ///   through its link.
    @usableFromInline @inline(never)
    final func keepLocked(_ old: PendingExtras<Value>, completer: Bool) {
        let kept = CompletedExtras<Value>()
        if completer { kept.takeCompleter(of: old) }
        kept.forward = old.merge.forward
        rare = kept
    }

    /// Between two batches of this future's drain: takes the callbacks registered while the last
    /// batch ran into `batch` (returns `true`), or ends the drain (returns `false`).
    @inlinable
    final func takeLateCallbacksLocked(into batch: inout CallbackList<Value>) -> Bool {
        assertLocked()
        defer { checkInvariants() }
        switch state.endBatch(hasLate: !(completedExtras?.lateCallbacks.isEmpty ?? true)) {
        case .impossible: unexpected("a drain batch of a future nobody drains")
        case .idle: return false
        case .nextBatch:
            swap(&batch, &completedExtras!.lateCallbacks)
            return true
        }
    }

    /// Hands the right to complete this pending future from `origin` to `newCompleter` and detaches
    /// its upstream into `detached`, in one step (a timeout that fires). Returns `nil` if `origin`
    /// may not complete the future, else the registration on the upstream to leave (`nil` inside if
    /// there is none).
    @inlinable
    final func handOverLocked(
        to newCompleter: CompleterToken,
        from origin: AnyObject,
        detaching detached: inout ConsumerSource?,
        unfollow: inout Bool
    ) -> UpstreamLink?? {
        assertLocked()
        defer { checkInvariants() }
        switch state.handOver(accepted: phase == .pending && accepts(origin)) {
        case .impossible: linkedFutureTrap()
        case .refuse: return nil
        case .handOver:
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
    /// A withdrawal from a future merged into this one (`depth` below it) cancels nothing: that
    /// future is still consumed by its adopter. (Only an adopter that withdrew as it arrived leaves
    /// that way: every other registrant on a merged future splits the set first, see ``split()``.)
    @inlinable
    final func withdrawLocked(
        _ withdrawal: Withdrawal,
        depth: Int32,
        into work: inout CompletionWork
    ) -> WithdrawStep {
        assertLocked()
        defer { checkInvariants() }
        switch state.withdraw(withdrawal, merged: depth > 0, hasCallbacks: hasCallbacksToRun) {
        case .impossible:
            if depth > 0 { preconditionFailure("a registrant left a merged future it never registered on") }
            linkedFutureTrap()
        case .kept: return .kept
        case .stillPending: return .stillPending
        case .cancelled:
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
        switch state.remove() {
        case .impossible: linkedFutureTrap()
        case .nothing: return  // its callbacks run (or ran) anyway
        case .remove:
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

    // MARK: Adoption (both futures' locks held, inside the adoption gate)

    /// Makes `target` (see ``isMergeableLocked``) a link to this pending adopter, `depth` below it,
    /// and this future takes over its right to complete, upstream, cancel handlers, progress and
    /// forward; nothing else depends on the target as a separate future. The references the merge
    /// drops are moved into `released` and `keepAlive`, for the caller to release after the locks.
    final func absorbLocked(
        _ target: FutureStorage<Value>,
        depth: Int32,
        released: inout AnyObject?,
        keepAlive: inout [AnyObject],
        keepUpstream: inout ConsumerSource?
    ) -> ProgressChange? {
        assertLocked()
        target.assertLocked()
        // An adopter was never split: its producer handed the right to complete to whatever it
        // adopted first, so a split set's root refuses every adoption.
        guard target.isMergeableLocked, extras?.merge.forward == nil, state.adopterEdge() == .proceed,
            target.state.mergeInto(depth: depth) == .proceed
        else {
            unexpected("merged a future that has registrants, or into one that is not pending")
        }
        let extras = ensureExtras
        if let targetExtras = target.extras, targetExtras.completer != nil {
            extras.takeCompleter(of: targetExtras)
        } else {
            extras.handCompletion(to: target)
        }
        // As strong as the target held it: a compressed pointer stays weak.
        let waitingOn = target.extras?.waitingOn
        let weakly = target.immortal || (target.extras?.waitsWeakly ?? false)
        if let old = extras.wait(on: waitingOn, weakly: weakly) { keepAlive.append(old) }  // released after the locks
        if let waitingOn { keepAlive.append(waitingOn) }
        // (A merged join only ever adopts `never`: an adopter has no demand of its own to replace,
        // and none is released here.)
        if extras.onProgressDemand == nil, let demand = target.extras?.onProgressDemand {
            extras.onProgressDemand = demand
        }
        assert(currentRelation.factors.count == Int(depth) - 1, "a merge set's weights, one per depth above the adopter")
        extras.merge.absorb(target.extras, callbacks: &target.callbacks, at: depth, key: RegistrationKey(target))
        let progressChange = composeProgressOnMerge(with: target)
        consumesUpstream = target.consumesUpstream
        setFlag(StorageFlags.waitMayChange, target.flag(StorageFlags.waitMayChange))  // its source is this one's now
        // The target's registration on its source stays as it is: withdraw by its key (the set
        // took it over).
        swap(&upstream, &target.upstream)  // the adopter's own source has completed
        swap(&keepUpstream, &target.upstream)  // released after the lock
        immortal = target.immortal
        released = target.extras
        target.extras = nil
        target.link = self
        target.mayHoldChain = true
        checkInvariants()
        target.checkInvariants()
        return progressChange
    }

    /// Splits this pending future's merge set at `depth` (both futures' locks held, inside the
    /// exclusive adoption gate): `state`, new, takes over what belongs to the futures merged at `depth` and below (the
    /// right to complete, the future waited on, upstream, their cancel handlers, a join's progress
    /// source, the progress relation below `depth`), and this future waits
    /// on it, as if it had never merged them. Walks that come through links from `depth` or below
    /// follow the forward recorded here to `state`. The old upstream moves into `keepUpstream`.
    final func splitLocked(
        at depth: Int32,
        into state: FutureStorage<Value>,
        keepUpstream: inout ConsumerSource?,
        keepAlive: inout [AnyObject]
    ) -> ProgressChange? {
        assertLocked()
        state.assertLocked()
        guard self.state.adopterEdge() == .proceed, let extras, depth > 0, depth <= extras.merge.depth,
            state.state.adopterEdge() == .proceed
        else {
            unexpected("split a future that is not pending, or below its deepest merged future")
        }
        let moved = state.ensureExtras
        moved.takeCompleter(of: extras)
        // (The new future held nothing; what is read here may be the last reference when it is
        // read weakly, and is released after the locks.)
        let waitingOn = extras.waitingOn
        _ = moved.wait(on: waitingOn, weakly: immortal || extras.waitsWeakly)
        if let waitingOn { keepAlive.append(waitingOn) }
        // The observers registered on the future `state` now is become its own callbacks.
        moved.merge = extras.merge.split(at: depth, key: RegistrationKey(self), own: &state.callbacks)
        // Moved by hand: `swap` of an optional closure is a generic call, which unspecialised
        // looks up the optional's metadata.
        moved.onProgressDemand = extras.onProgressDemand
        extras.onProgressDemand = nil
        state.consumesUpstream = consumesUpstream
        state.setFlag(StorageFlags.waitMayChange, flag(StorageFlags.waitMayChange))
        state.immortal = immortal
        swap(&state.upstream, &upstream)
        state.mayHoldChain = true
        // Progress: the new future is driven as this one was, with the weights of the depths from
        // `depth` down; this one keeps those above and then waits on it, its value unchanged.
        let (above, below) = takeCurrentRelation().split(at: Int(depth))
        var unfollow: (source: ConsumerSource, follower: ObjectIdentifier)? = nil
        if let progress {
            let split = ProgressState(relation: below)
            split.version = progress.version
            _ = split.update()
            state.progress = split
            progress.relation = above
            if progress.forwarding, let source = state.upstream { unfollow = (source, ObjectIdentifier(self)) }
            progress.followed = nil  // reports still on their way from the upstream `state` took over are dropped
        } else {
            moved.progressRelation = below
            extras.progressRelation = above
        }
        if let forward = extras.merge.forward {
            forward.addSplit(at: depth, target: state)
        } else {
            extras.merge.forward = MergeForwards(depth: depth, target: state)
        }
        extras.merge._checkInvariants()
        let change = waitLocked(
            on: state, token: CompleterToken(), finishing: depth - 1, keepUpstream: &keepUpstream, keepAlive: &keepAlive)
        if let unfollow { return (change?.changed, change?.observers ?? [], change?.refollow ?? false, unfollow) }
        return change
    }

    /// Makes this pending adopter wait on `target` (pending, with consumers or deferred work) as
    /// its consumer: registers on it the callback that completes this future, holding `token`,
    /// the only completer this future accepts from now on. The old upstream (completed) moves into
    /// `keepUpstream`, for the caller to release after the locks. The callback completes the future
    /// `finishing` below this one (see ``finish(_:origin:below:)``): this one, unless it waits for
    /// the part of its own set that a split moved to `target`.
    final func waitLocked(
        on target: FutureStorage<Value>,
        token: CompleterToken,
        finishing depth: Int32 = 0,
        keepUpstream: inout ConsumerSource?,
        keepAlive: inout [AnyObject]
    ) -> ProgressChange? {
        assertLocked()
        target.assertLocked()
        guard state.adopterEdge() == .proceed, target.state.gainWaiter() == .proceed else {
            unexpected("an adopter waits on a future that is not pending")
        }
        let extras = ensureExtras
        extras.handCompletion(to: token)
        if let replaced = extras.wait(on: target, weakly: target.immortal) { keepAlive.append(replaced) }
        extras.merge.upstreamKey = nil  // it registers on the target itself, below
        setFlag(StorageFlags.waitMayChange, false)  // it waits on the target until a split
        immortal = target.immortal
        consumesUpstream = true
        let progressChange = composeProgressOnWait(innerProgress: target.progress?.value ?? 0)
        let link: ConsumerSource = target.immortal ? WeakSource(target) : target
        swap(&upstream, &keepUpstream)
        upstream = link
        // Registered here, with the count and the upstream, so that a cancellation of the adopter
        // right after the locks finds its entry to remove. The callback holds the token (which
        // holds nothing), so the adopter's right-to-complete check never depends on the target's
        // lifetime, and no reference cycle forms.
        if target.immortal {
            // The adopter holds an immortal target weakly, but a split root also holds it through
            // its forward: the callback must not hold the adopter, or neither is ever freed.
            target.callbacks.append(.outcome({ [weak self, token] outcome in
                _ = self?.finish(outcome, origin: token, below: depth)
            }, owner: ObjectIdentifier(self)))
        } else {
            target.callbacks.append(.outcome({ [self, token] outcome in
                _ = self.finish(outcome, origin: token, below: depth)
            }, owner: ObjectIdentifier(self)))
        }
        target.mayHoldChain = true
        checkInvariants()
        target.checkInvariants()
        return progressChange
    }

    /// Whether a future that adopts this one may merge it (caller holds the lock): it is pending,
    /// has no registrant (no consumer, callback, progress observer or completion token: everything
    /// registered on a merge set belongs to its root, see ``split()``) and is not a deferred future
    /// that has yet to start. A future already merged into another is split off before a second
    /// adopter waits on it.
    final var isMergeableLocked: Bool {
        assertLocked()
        // An empty list, the usual case, is decided inline: unspecialised, looking through the
        // entries costs type-metadata lookups of the list and its entries at every adoption.
        return phase == .pending && consumers == 0 && (callbacks.isEmpty || callbacks.holdsOnlyObservers)
            && progress?.observers.isEmpty ?? true && extras?.onDemand == nil && extras?.completionToken == nil
    }

    /// This pending adopter adopted `never`: nothing but cancellation completes it now.
    final func adoptNeverLocked() {
        assertLocked()
        guard state.adopterEdge() == .proceed else { unexpected("adopted never into a future that is not pending") }
        ensureExtras.completer = RareState.nobody
        immortal = true
        checkInvariants()
    }

    /// This pending adopter closes a cycle: from now on only `token` completes it (cancellation
    /// aside), so nothing comes between this decision and the cycle's failures.
    final func handToTokenLocked(_ token: CompleterToken) {
        assertLocked()
        guard state.adopterEdge() == .proceed else { unexpected("closed a cycle from a future that is not pending") }
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
        precondition(consumers >= 0, "a future counts fewer than zero consumers")
        switch phase {
        case .pending:
            precondition(!(rare?.ofCompleted ?? false), "a pending future holds a completed future's rare state")
            if let extras {
                extras.merge._checkInvariantsNow()
                // One weight per depth of the merge set, and one more in a future whose deepest
                // level waits on the future a split made of the levels below it.
                let weights = currentRelation.factors.count
                precondition(
                    weights == Int(extras.merge.depth) || weights == Int(extras.merge.depth) + 1,
                    "a merge set keeps \(weights) weights for \(extras.merge.depth) depths"
                )
            }
        case .completed:
            precondition(rare?.ofCompleted ?? true, "a completed future holds a pending future's rare state")
            precondition(upstream == nil, "a completed future keeps its upstream")
            precondition(!mayHoldChain, "a completed future may hold a chain")
            // While draining, `callbacks` belongs to the drain owner: not read here.
            if !draining {
                precondition(callbacks.isEmpty, "an idle completed future holds callbacks")
                precondition(completedExtras?.lateCallbacks.isEmpty ?? true, "an idle completed future holds late callbacks")
            }
        case .linked:
            precondition(upstream != nil, "a linked future has no link")
            precondition(callbacks.isEmpty && rare == nil, "a linked future keeps state of its own")
            precondition(state.linkDepth > 0, "a linked future has no depth below its link")
        case .never:
            precondition(callbacks.isEmpty && upstream == nil && !draining && rare == nil, "never holds state")
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
