/// Adoption: a future that completes with another future's outcome (collapsing), by merging the
/// other into itself or by waiting on it, with cycle detection across both (see `CycleDetection`).
extension FutureStorage {
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
    /// consumer that withdrew (cancelled, or failed as a member of a cycle) before `origin` used
    /// its right to complete it withdraws from `target` too, since nothing needs it any more. A
    /// second completion from an origin that already used its right is refused and leaves
    /// `target` alone: the adopter never was its consumer.
    /// (Such a future keeps who held the right to complete it, see ``keepCompleterLocked(_:)``,
    /// or whether its producer ended it, ``StorageFlags/producerEnded``, so it can still tell.)
    final func refusal(of target: FutureStorage<Value>, from origin: AnyObject) -> AdoptionPlan? {
        assertLocked()
        let allowed = accepts(origin)
        guard phase != .pending || !allowed else { return nil }
        switch result {
        case .cancelled?, .failure(FutureError.cycle)?:
            return allowed && !flag(StorageFlags.producerEnded) ? .withdrawn(target) : .rejected
        default: return .rejected
        }
    }

    /// Makes this future complete with `inner`'s outcome (collapsing), if `origin` may complete it.
    ///
    /// If `inner` has no consumer of its own (a future that adopted it earlier is one), it is merged
    /// into this future (it becomes a link to it, and its callbacks and handlers move here), so
    /// chains of adoptions, like a recursive `flatMap` loop, never grow. Otherwise (or if `inner` is
    /// a deferred future not started yet, which it then starts) this future waits on `inner` as its
    /// consumer: counted apart if `inner` was merged into another future. Either way the two join
    /// one union-find set; adopting a future of one's own set closes a cycle, and the future fails
    /// with ``FutureError/cycle``.
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
        var progressChange: ProgressChange?  // to report after the locks
        let plan: AdoptionPlan = adoptionLock.withLock {
            root = self.root(collecting: &keepAlive)
            let target = inner.root(collecting: &keepAlive)
            let adopter = root
            let members: [any CycleNode]?
            if target === adopter {
                members = []
            } else if LockTable.withLock(target, { target.phase == .pending }) {
                members = Self.cycleMembers(adopting: target, into: adopter, keepAlive: &keepAlive)
            } else {
                members = nil  // a completed target closes no cycle (most adoptions): no walk
            }
            if let members {
                // Accepted only if the adopter is pending and `origin` may complete it; the right
                // to complete moves to a token at once, so that no completion (but a cancellation)
                // can come between the decision and the failures.
                return LockTable.withLock(adopter) { () -> AdoptionPlan in
                    if let refusal = adopter.refusal(of: target, from: origin) { return refusal }
                    let token = CompleterToken()
                    adopter.handToTokenLocked(token)
                    return .cycle(members, token: token)
                }
            }
            return LockTable.withLocks(adopter, target) { () -> AdoptionPlan in
                if let refusal = adopter.refusal(of: target, from: origin) { return refusal }
                switch target.phase {
                case .linked:
                    preconditionFailure("links only change under the adoption lock")
                case .completed:
                    return .complete(target.result!)
                case .never:
                    adopter.adoptNeverLocked()
                    return .accepted
                case .pending where target === inner && target.isMergeableLocked:
                    progressChange = adopter.absorbLocked(
                        target, released: &released, keepAlive: &keepAlive, keepUpstream: &keepUpstream)
                    return .accepted
                case .pending:
                    // Also a deferred target that has not started: it keeps its own identity (its
                    // work completes it) and starts once the adopter has registered on it.
                    progressChange = adopter.waitLocked(
                        on: target, throughLink: target !== inner, token: CompleterToken(), keepUpstream: &keepUpstream)
                    return .wait(target, startsDeferred: target.extras?.onDemand != nil)
                }
            }
        }
        releaseOutsideLock(released)
        releaseOutsideLock(keepAlive)
        releaseOutsideLock(keepUpstream)
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
            // From `inner` itself: if it was merged into another future, that one's adopter still
            // consumes it.
            Cancellation.withdraw(from: inner, .uncounted, key: nil)
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

/// Serialises adoptions, so finding a set's representative and joining two sets is atomic.
/// Taken before any stripe lock, never while holding one, and no user code runs under it.
let adoptionLock = Lock()
