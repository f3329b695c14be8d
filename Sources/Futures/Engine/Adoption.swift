import CFuturesAtomicGlobals

/// Adoption: a future that completes with another future's outcome (collapsing), by merging the
/// other into itself or by waiting on it, with cycle detection across both (see `CycleDetection`).
/// What an adoption decided under the locks, for ``FutureStorage/adopt(_:from:)`` to carry out
/// after them. Not generic, and declared outside `FutureStorage`: adoption runs unspecialised in
/// clients, where every use of a generic enum would ask the runtime for its type metadata.
enum AdoptionPlan {
    case rejected, accepted
    /// The target has completed: the adopter completes with its outcome.
    case complete
    /// Adopting closes a cycle: these futures on it fail, then the adopter, whose right to
    /// complete was handed to `token` as the adoption was accepted.
    case cycle([any CycleNode], token: CompleterToken)
    /// The adopter waits on the target (registered on it under the locks); only the callback
    /// holding the adopter's token may complete it. A deferred target starts after the locks.
    case wait(startsDeferred: Bool)
    /// The adopter was cancelled first: it counts as a consumer of the target that withdrew.
    case withdrawn
}

extension FutureStorage {
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

    /// Why this adopter cannot adopt a future for `origin`, or `nil` if it can (caller holds this
    /// future's lock): not pending, or `origin` may not complete it. An adopter that ended as a
    /// consumer that withdrew (cancelled, or failed as a member of a cycle) before `origin` used
    /// its right to complete it withdraws from the adopted future too (`.withdrawn`), since
    /// nothing needs it any more. A second completion from an origin that already used its right
    /// is refused and leaves the adopted future alone: the adopter never was its consumer.
    /// (Such a future keeps who held the right to complete it, see ``keepLocked(_:completer:)``,
    /// or whether its producer ended it, ``StorageFlags/producerEnded``, so it can still tell.)
    @inline(__always)
    final func refusal(from origin: AnyObject) -> AdoptionPlan? {
        assertLocked()
        let allowed = accepts(origin)
        guard phase != .pending || !allowed else { return nil }
        return refusalOfEnded(allowed: allowed)
    }

    /// ``refusal(from:)`` once it is refused, out of line: reading the outcome asks the runtime for
    /// its type's metadata, which the usual accepted adoption does not need.
    @inline(never)
    final func refusalOfEnded(allowed: Bool) -> AdoptionPlan {
        switch result {
        case .cancelled?, .failure(FutureError.cycle)?:
            return allowed && !flag(StorageFlags.producerEnded) ? .withdrawn : .rejected
        default: return .rejected
        }
    }

    /// Makes this future complete with `inner`'s outcome (collapsing), if `origin` may complete it.
    ///
    /// If `inner` has no registrant (see ``isMergeableLocked``), it is merged into this future (it
    /// becomes a link to it, and its handlers and progress move here), so chains of adoptions, like
    /// a recursive `flatMap` loop, never grow. Otherwise (or if `inner` is a deferred future not
    /// started yet, which it then starts) this future waits on `inner` as its consumer; if `inner`
    /// was merged into another future, that set is split first (see ``split()``), and this one
    /// waits on `inner`'s own state. Adopting a future of one's own set (merged, or waited on)
    /// closes a cycle, and the future fails with ``FutureError/cycle``.
    ///
    /// - Returns: `true` if this call was allowed to complete the future.
    @usableFromInline @discardableResult
    final func adopt(_ inner: FutureStorage<Value>, from origin: AnyObject) -> Bool {
        // A completed future (the usual case: `Future(value:)` returned from a `flatMap`) closes no
        // cycle and merges nothing: this future completes with its outcome, as the plan below would
        // decide, without the adoption gate.
        if let holder = inner.observedCompletedHolder { return finish(withOutcomeOf: holder, origin: origin) }
        var root = self  // the adopter's root, once found
        var target = inner  // the future holding `inner`'s state, once found
        var effects = AdoptionEffects()
        // A set split to wait on `inner`'s state: its root, and what that changed in its progress.
        var splitRoot: FutureStorage<Value>?
        var splitChange: ProgressChange?
        var decided: AdoptionPlan? = nil
        if let slot = AdoptionGate.enterShared() {
            decided = adoptShared(inner, from: origin, root: &root, effects: &effects)
            AdoptionGate.leaveShared(slot)
            if decided == nil { ThreadContext.current.takeUnretainedValue().adoptionsNeedingExclusivity &+= 1 }
        } else {
            ThreadContext.current.takeUnretainedValue().adoptionsKeptFromSharing &+= 1
        }
        if decided == nil {
            AdoptionGate.enterExclusive()
            decided = adoptExclusively(
                inner, from: origin, root: &root, target: &target, splitRoot: &splitRoot, splitChange: &splitChange,
                effects: &effects)
            AdoptionGate.leaveExclusive()
        }
        let plan = decided!
        releaseOutsideLock(effects.released)
        releaseOutsideLock(effects.keepAlive)
        releaseOutsideLock(effects.keepUpstream)
        if let splitRoot, let splitChange { splitRoot.progressSplit(splitChange) }
        if let progressChange = effects.progressChange {
            if let (source, follower) = progressChange.unfollow {
                (source.resolved as? any ProgressNode)?.removeProgressFollower(follower)
            }
            root.progressAdopted(changed: progressChange.changed, observers: progressChange.observers, refollow: progressChange.refollow)
        }
        switch plan {
        case .rejected:
            return false
        case .withdrawn:
            // From `inner` itself: if it is merged into another future, that one's adopter still
            // consumes it, and this cancels nothing.
            Cancellation.withdraw(from: inner, .uncounted, key: nil)
            return false
        case .accepted:
            return true
        case .complete:
            return self.finish(withOutcomeOf: target, origin: origin)
        case .cycle(let members, let token):
            // Every member fails with `.cycle`, from the target on, before the adopter's failure
            // could reach them through their transforms (a `recover` would see it as an error).
            for member in members { member.failAsCycle() }
            if Tracking.reporting { Tracking.reportCycle(closedBy: self, members: members) }
            return self.finishAsCycle(origin: token)
        case .wait(let startsDeferred):
            if startsDeferred { target.startIfDeferred() }
            return true
        }
    }

    // Out of line, the two below: an outcome's type metadata, which unspecialised code looks up
    // where the function that copies the outcome starts, is not needed to adopt a pending future.

    /// Completes this future with the outcome of `holder`, a completed future: final once
    /// completed, and read after the lock that saw it completed.
    @inline(never)
    final func finish(withOutcomeOf holder: FutureStorage<Value>, origin: AnyObject) -> Bool {
        finish(holder.storedOutcome, origin: origin)
    }

    /// Fails this future as the adopter that closed a cycle, on behalf of the cycle's `token`.
    @inline(never)
    final func finishAsCycle(origin token: AnyObject) -> Bool {
        finish(.failure(FutureError.cycle), origin: token)
    }

    /// An adoption that needs no walk, made with ``AdoptionGate`` held shared; `nil` if it needs
    /// the gate exclusively: `inner` or the adopter's root no longer holds the state the walk
    /// found (another adoption merged it meanwhile), `inner` was merged into another future (it
    /// must be split off), or adopting `inner` could close a cycle.
    ///
    /// A cycle needs a wait into the adopter's root and a path of waits out of `inner` back to it.
    /// Without the first, or if `inner` waits on nothing, or on a future that waits on nothing (a
    /// loop's next level, waiting on its step's promise), this adoption closes none, seen under the
    /// locks of every future named: if the missing wait comes later, that adoption walks (see
    /// ``AdoptionGate``).
    @inline(__always)
    final func adoptShared(
        _ inner: FutureStorage<Value>,
        from origin: AnyObject,
        root: inout FutureStorage<Value>,
        effects: inout AdoptionEffects
    ) -> AdoptionPlan? {
        let (adopter, adopterDepth) = rootAndDepth(startingAt: 0, collecting: &effects.keepAlive)
        guard adopter !== inner else { return nil }  // a cycle: the walk names its members
        root = adopter
        var link: AnyObject?  // `inner`'s upstream as it stores it
        var next: ConsumerSource?  // the future it waits on, if it may close a cycle through it
        let plan = LockTable.withLocks(adopter, inner) { () -> AdoptionPlan? in
            guard adopter.holdsStateLocked(depth: adopterDepth), inner.holdsStateLocked(depth: 0) else { return nil }
            if let refusal = adopter.refusal(from: origin) { return refusal }
            if inner.phase == .pending, adopter.callbacks.mayHoldWaiter, inner.waitsLocked {
                effects.adopterWaitedOn = true
                guard !(inner.extras?.waitsOnSomething ?? false), let upstream = inner.upstream, let source = upstream.resolved,
                    source !== adopter
                else { return nil }
                link = upstream
                next = source  // (a weak link's target: this reference is released after the locks)
                return nil
            }
            return adopter.decideLocked(adopting: inner, adopterDepth: adopterDepth, targetDepth: 0, effects: &effects)
        }
        guard plan == nil, let link, let next else { return plan }
        return LockTable.withLocks(adopter, inner, next) { () -> AdoptionPlan? in
            guard adopter.holdsStateLocked(depth: adopterDepth), inner.holdsStateLocked(depth: 0) else { return nil }
            if let refusal = adopter.refusal(from: origin) { return refusal }
            // Checked whether anything waits on the adopter or not: this one may have come since.
            if inner.phase == .pending {
                guard !(inner.extras?.waitsOnSomething ?? false), inner.upstream.map({ $0 === link }) == true, next.endsEveryWalkLocked
                else { return nil }
            }
            return adopter.decideLocked(adopting: inner, adopterDepth: adopterDepth, targetDepth: 0, effects: &effects)
        }
    }

    /// Whether this future holds the state of the futures `depth` below it, with nothing to
    /// follow (caller holds its lock): it is not linked, and no split moved that depth elsewhere.
    @inline(__always)
    final func holdsStateLocked(depth: Int32) -> Bool {
        assertLocked()
        if phase == .linked { return false }
        guard depth > 0, let forward = splitForwards else { return true }
        return forward.entry(at: depth) == nil
    }

    /// Whether this pending future may wait on another (caller holds its lock): it has a source or
    /// a future it waits on (one that has completed counts too, as the cycle walk would pass it).
    final var waitsLocked: Bool {
        assertLocked()
        return upstream != nil || extras?.waitsOnSomething ?? false
    }

    /// An adoption made with ``AdoptionGate`` held exclusively: finds both roots, splits the set
    /// `inner` was merged into, walks the waits for a cycle, then decides under both locks.
    final func adoptExclusively(
        _ inner: FutureStorage<Value>,
        from origin: AnyObject,
        root: inout FutureStorage<Value>,
        target: inout FutureStorage<Value>,
        splitRoot: inout FutureStorage<Value>?,
        splitChange: inout ProgressChange?,
        effects: inout AdoptionEffects
    ) -> AdoptionPlan {
        let (adopter, adopterDepth) = self.rootAndDepth(startingAt: 0, collecting: &effects.keepAlive)
        root = adopter
        var targetDepth: Int32
        var path = ForwardPath()
        (target, targetDepth) = inner.rootAndDepth(startingAt: 0, collecting: &effects.keepAlive, path: &path)
        if target !== adopter, targetDepth > 0 {
            // A refused adoption splits nothing (checked again below, under both locks).
            let lock = LockTable.acquire(adopter)
            let refusal = adopter.refusal(from: origin)
            LockTable.release(lock)
            if let refusal { return refusal }
        }
        if target !== adopter, targetDepth > 0,
            let (state, change) = Self.split(target, at: targetDepth, keepAlive: &effects.keepAlive)
        {
            Self.recordSplit(state, path: path, at: target, depth: targetDepth)
            splitRoot = target
            splitChange = change
            target = state
            targetDepth = 0
        }
        let members: [any CycleNode]?
        let found = target
        if found === adopter {
            members = []
        } else if LockTable.withLock(found, { found.phase == .pending }) {
            // Only a future that something waits on can be reached from the target: every
            // future waiting on the adopter (derived from it, or adopting it) has an entry in its
            // callbacks with its key, made atomically with that wait. An adopter with no such
            // entry (a new promise, or a loop's future that only observers watch: the usual
            // cases) closes no cycle, and the walk, as long as the chain behind the target, is
            // skipped.
            // (Known already if an attempt with the gate shared saw it: walking when nothing
            // waits any more only finds no cycle.)
            // (A completed adopter's callbacks may belong to its drain's owner: not read.)
            let waitedOn =
                effects.adopterWaitedOn
                || LockTable.withLock(adopter) { adopter.phase == .pending && adopter.callbacks.mayHoldWaiter }
            members = waitedOn ? Self.cycleMembers(adopting: found, into: adopter, keepAlive: &effects.keepAlive) : nil
        } else {
            members = nil  // a completed target closes no cycle (most adoptions): no walk
        }
        if let members {
            // Accepted only if the adopter is pending and `origin` may complete it; the right
            // to complete moves to a token at once, so that no completion (but a cancellation)
            // can come between the decision and the failures.
            return LockTable.withLock(adopter) { () -> AdoptionPlan in
                if let refusal = adopter.refusal(from: origin) { return refusal }
                let token = CompleterToken()
                adopter.handToTokenLocked(token)
                return .cycle(members, token: token)
            }
        }
        let depth = targetDepth
        return LockTable.withLocks(adopter, found) { () -> AdoptionPlan in
            if let refusal = adopter.refusal(from: origin) { return refusal }
            if found.phase == .linked { preconditionFailure("links only change while the adoption gate is held") }
            return adopter.decideLocked(adopting: found, adopterDepth: adopterDepth, targetDepth: depth, effects: &effects)
        }
    }

    /// Merges `target` into this adopter's set, or makes this adopter wait on it, or completes
    /// or ends it as `target` did (both futures' locks held, the adoption gate too, `target` not
    /// linked, and this adopter pending with `origin` allowed to complete it).
    @inline(__always)
    final func decideLocked(
        adopting target: FutureStorage<Value>,
        adopterDepth: Int32,
        targetDepth: Int32,
        effects: inout AdoptionEffects
    ) -> AdoptionPlan {
        switch target.phase {
        case .linked:
            linkedFutureTrap()
        case .completed:
            target.flags |= StorageFlags.observed
            return .complete  // its outcome is read after the locks: it no longer changes
        case .never:
            adoptNeverLocked()
            return .accepted
        case .pending where targetDepth == 0 && target.isMergeableLocked
            && Int64(adopterDepth) + 1 + Int64(target.extras?.merge.depth ?? 0) < Int64(Int32.max):
            // (A set as deep as `Int32` counts is not made deeper: the adopter waits, and the
            // target's set goes on from there.)
            effects.progressChange = absorbLocked(
                target, depth: adopterDepth + 1, released: &effects.released, keepAlive: &effects.keepAlive,
                keepUpstream: &effects.keepUpstream)
            return .accepted
        case .pending:
            // Also a deferred target that has not started: it keeps its own identity (its
            // work completes it) and starts once the adopter has registered on it.
            effects.progressChange = waitLocked(
                on: target, token: CompleterToken(), finishing: adopterDepth, keepUpstream: &effects.keepUpstream,
                keepAlive: &effects.keepAlive)
            return .wait(startsDeferred: target.extras?.onDemand != nil)
        }
    }
}

/// What an adoption's decision hands back for after the locks and the gate: references to release
/// (the last of them may free a pending future and run user code, a broken promise's callbacks),
/// and what the merge or wait changed in progress.
struct AdoptionEffects {
    /// The target's extras, after a merge.
    var released: AnyObject?
    /// Strong references taken along the walks.
    var keepAlive: [AnyObject] = []
    /// The adopter's old upstream.
    var keepUpstream: ConsumerSource?
    /// To report after the locks.
    var progressChange: ProgressChange?
    /// Whether an attempt with the gate held shared found a wait into the adopter's root.
    var adopterWaitedOn = false
}

/// Splitting a merge set: a registrant arrives on a future merged into another that is still
/// pending. It must not share that future's fate (cancelling the adopter would cancel it too), so
/// the futures merged at its depth and below get a state of their own again, which the adopter
/// waits on (see ``FutureStorage/splitLocked(at:into:keepUpstream:)``).
extension FutureStorage {
    /// Splits the set this future is merged into, at this future's depth, unless it holds its own
    /// state already or the set has completed.
    ///
    /// - Returns: the future that holds this one's state at depth 0 from now on, if this call split
    ///   the set (a future's depth 0 never moves again); `nil` if it found nothing to split.
    @usableFromInline @inline(never) @discardableResult
    final func split() -> FutureStorage<Value>? {
        var found: FutureStorage<Value>? = nil
        return split(reusing: &found, depth: 0, path: ForwardPath(), generation: 0)
    }

    /// ``split()``, reusing what a walk outside the gate found, if `found` is set: the future that
    /// held this one's state `depth` below it, with the forwards the walk took (`path`) after it
    /// read `generation` (see ``lockedOwnRoot()``). Inside the gate the walk counts if no table of
    /// forwards changed since (the count is the same) and `found` still holds this future's state
    /// (it has not merged into another meanwhile); otherwise this walks again. Takes the reference
    /// in `found` (left `nil`), released after the gate.
    @usableFromInline @inline(never)
    final func split(
        reusing handed: inout FutureStorage<Value>?,
        depth foundDepth: Int32,
        path foundPath: ForwardPath,
        generation: UInt64
    ) -> FutureStorage<Value>? {
        let found = handed
        handed = nil  // (not `take()`: a generic call, which unspecialised looks up the optional's metadata)
        var keepAlive: [AnyObject] = []
        let split: (FutureStorage<Value>, FutureStorage<Value>, ProgressChange?)? = AdoptionGate.exclusively {
            var root: FutureStorage<Value>
            var depth = foundDepth
            var path = foundPath
            if let found, swift_futures_forward_generation_load_acquire() == generation,
                LockTable.withLock(found, { found.nextInWalkLocked(depth: foundDepth) == nil })
            {
                root = found
            } else {
                path = ForwardPath()
                (root, depth) = rootAndDepth(startingAt: 0, collecting: &keepAlive, path: &path)
            }
            guard depth > 0, let (state, change) = Self.split(root, at: depth, keepAlive: &keepAlive) else { return nil }
            Self.recordSplit(state, path: path, at: root, depth: depth)
            return (root, state, change)
        }
        releaseOutsideLock(keepAlive)
        guard let (root, state, change) = split else { return nil }
        if let change { root.progressSplit(change) }
        return state
    }

    /// Splits `root`'s set at `depth` if `root` is pending (caller holds the adoption gate exclusively): returns
    /// the future that holds the state of the futures at `depth` and below, and what the split
    /// changed in `root`'s progress. References to release go into `keepAlive`.
    static func split(
        _ root: FutureStorage<Value>,
        at depth: Int32,
        keepAlive: inout [AnyObject]
    ) -> (FutureStorage<Value>, ProgressChange?)? {
        let state = FutureStorage<Value>()
        var keepUpstream: ConsumerSource?
        let change: ProgressChange?? = LockTable.withLocks(root, state) {
            guard root.phase == .pending else { return nil }
            return .some(root.splitLocked(at: depth, into: state, keepUpstream: &keepUpstream, keepAlive: &keepAlive))
        }
        if let keepUpstream { keepAlive.append(keepUpstream as AnyObject) }
        guard let change else { return nil }
        return (state, change)
    }

    /// After a split, outside the locks: `root` stops following the progress of the upstream the
    /// new future took over, and follows that future instead, if it followed progress.
    final func progressSplit(_ change: ProgressChange) {
        if let (source, follower) = change.unfollow {
            (source.resolved as? any ProgressNode)?.removeProgressFollower(follower)
        }
        progressAdopted(changed: change.changed, observers: change.observers, refollow: change.refollow)
    }
}
