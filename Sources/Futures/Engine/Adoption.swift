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
        // decide, without the adoption lock that every other adoption on every thread takes.
        if let outcome = inner.observedOutcome { return finish(outcome, origin: origin) }
        var root = self
        var target = inner  // the future holding `inner`'s state, once found
        var released: AnyObject? = nil  // the target's extras, after a merge
        // Strong references taken under the adoption lock; released after it, because releasing
        // the last one could free a pending future and run user code (a broken promise's callbacks).
        var keepAlive: [AnyObject] = []
        var keepUpstream: (any ConsumerSource)?  // the adopter's old upstream, released after the lock
        var progressChange: ProgressChange?  // to report after the locks
        // A set split to wait on `inner`'s state: its root, and what that changed in its progress.
        var splitRoot: FutureStorage<Value>?
        var splitChange: ProgressChange?
        let plan: AdoptionPlan = adoptionLock.withLock {
            let (adopter, adopterDepth) = self.rootAndDepth(startingAt: 0, collecting: &keepAlive)
            root = adopter
            var targetDepth: Int32
            var path = ForwardPath()
            (target, targetDepth) = inner.rootAndDepth(startingAt: 0, collecting: &keepAlive, path: &path)
            if target !== adopter, targetDepth > 0 {
                // A refused adoption splits nothing (checked again below, under both locks).
                let lock = LockTable.acquire(adopter)
                let refusal = adopter.refusal(from: origin)
                LockTable.release(lock)
                if let refusal { return refusal }
            }
            if target !== adopter, targetDepth > 0, let (state, change) = Self.split(target, at: targetDepth, keepAlive: &keepAlive) {
                Self.recordSplit(state, path: path, at: target, depth: targetDepth)
                splitRoot = target
                splitChange = change
                target = state
                targetDepth = 0
            }
            let members: [any CycleNode]?
            if target === adopter {
                members = []
            } else if LockTable.withLock(target, { target.phase == .pending }) {
                // Only a future that something waits on can be reached from the target: every
                // future waiting on the adopter (derived from it, or adopting it) has an entry in its
                // callbacks with its key, made atomically with that wait. An adopter with no such
                // entry (a new promise, or a loop's future that only observers watch: the usual
                // cases) closes no cycle, and the walk, as long as the chain behind the target, is
                // skipped.
                let waitedOn = LockTable.withLock(adopter) { adopter.callbacks.mayHoldWaiter }
                members = waitedOn ? Self.cycleMembers(adopting: target, into: adopter, keepAlive: &keepAlive) : nil
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
            return LockTable.withLocks(adopter, target) { () -> AdoptionPlan in
                if let refusal = adopter.refusal(from: origin) { return refusal }
                switch target.phase {
                case .linked:
                    preconditionFailure("links only change under the adoption lock")
                case .completed:
                    target.flags |= StorageFlags.observed
                    return .complete  // its outcome is read after the locks: it no longer changes
                case .never:
                    adopter.adoptNeverLocked()
                    return .accepted
                case .pending where targetDepth == 0 && target.isMergeableLocked
                    && Int64(adopterDepth) + 1 + Int64(target.extras?.merge.depth ?? 0) < Int64(Int32.max):
                    // (A set as deep as `Int32` counts is not made deeper: the adopter waits, and the
                    // target's set goes on from there.)
                    progressChange = adopter.absorbLocked(
                        target, depth: adopterDepth + 1, released: &released, keepAlive: &keepAlive,
                        keepUpstream: &keepUpstream)
                    return .accepted
                case .pending:
                    // Also a deferred target that has not started: it keeps its own identity (its
                    // work completes it) and starts once the adopter has registered on it.
                    progressChange = adopter.waitLocked(on: target, token: CompleterToken(), finishing: adopterDepth, keepUpstream: &keepUpstream)
                    return .wait(startsDeferred: target.extras?.onDemand != nil)
                }
            }
        }
        releaseOutsideLock(released)
        releaseOutsideLock(keepAlive)
        releaseOutsideLock(keepUpstream)
        if let splitRoot, let splitChange { splitRoot.progressSplit(splitChange) }
        if let progressChange {
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
            // Final once completed, and read after the lock that saw it completed.
            return self.finish(target.storedOutcome, origin: origin)
        case .cycle(let members, let token):
            // Every member fails with `.cycle`, from the target on, before the adopter's failure
            // could reach them through their transforms (a `recover` would see it as an error).
            for member in members { member.failAsCycle() }
            if Tracking.reporting { Tracking.reportCycle(closedBy: self, members: members) }
            return self.finish(.failure(FutureError.cycle), origin: token)
        case .wait(let startsDeferred):
            if startsDeferred { target.startIfDeferred() }
            return true
        }
    }
}

/// Serialises adoptions, so finding a set's representative and joining two sets is atomic.
/// Taken before any stripe lock, never while holding one, and no user code runs under it.
let adoptionLock = Lock()

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
        var keepAlive: [AnyObject] = []
        let split: (FutureStorage<Value>, FutureStorage<Value>, ProgressChange?)? = adoptionLock.withLock {
            var path = ForwardPath()
            let (root, depth) = rootAndDepth(startingAt: 0, collecting: &keepAlive, path: &path)
            guard depth > 0, let (state, change) = Self.split(root, at: depth, keepAlive: &keepAlive) else { return nil }
            Self.recordSplit(state, path: path, at: root, depth: depth)
            return (root, state, change)
        }
        releaseOutsideLock(keepAlive)
        guard let (root, state, change) = split else { return nil }
        if let change { root.progressSplit(change) }
        return state
    }

    /// Splits `root`'s set at `depth` if `root` is pending (caller holds the adoption lock): returns
    /// the future that holds the state of the futures at `depth` and below, and what the split
    /// changed in `root`'s progress. References to release go into `keepAlive`.
    static func split(
        _ root: FutureStorage<Value>,
        at depth: Int32,
        keepAlive: inout [AnyObject]
    ) -> (FutureStorage<Value>, ProgressChange?)? {
        let state = FutureStorage<Value>()
        var keepUpstream: (any ConsumerSource)?
        let change: ProgressChange?? = LockTable.withLocks(root, state) {
            guard root.phase == .pending else { return nil }
            return .some(root.splitLocked(at: depth, into: state, keepUpstream: &keepUpstream))
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
