/// Completing a future: the one completion path (a value, an error, cancellation), what it leaves to
/// do after the lock, and the drain of the future's callbacks.
extension FutureStorage {
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

    /// Completes the future with an already normalised outcome (`origin == nil`: cancellation,
    /// always allowed while pending). A cancelled future withdraws from its upstream, which is
    /// cancelled in turn if that leaves it with no consumer, and so on up (in a loop, not by
    /// recursion).
    @inlinable
    final func finish(_ outcome: Outcome<Value>, origin: AnyObject?) -> Bool {
        var work = CompletionWork()
        return withState({ $0.completeLocked(outcome, from: origin, into: &work) }) { node, step in
            switch step {
            case .rejected: return false
            case .won:
                if let link = node.afterCompletion(&work) { Cancellation.withdraw(from: link) }
                return true
            }
        }
    }

    /// ``finish(_:origin:)`` for the future `depth` below this one in its merge set, wherever its
    /// state is kept: the callback of a future that waits on the part of its set that was split
    /// off (see ``splitLocked(at:into:keepUpstream:)``) completes that future, which a later split
    /// may move again.
    @usableFromInline @inline(never)
    final func finish(_ outcome: Outcome<Value>, origin: AnyObject?, below depth: Int32) -> Bool {
        if depth == 0 { return finish(outcome, origin: origin) }
        var work = CompletionWork()
        let (node, _) = lockedRoot(startingAt: depth)
        return withExtendedLifetime(node) {
            let step = node.completeLocked(outcome, from: origin, into: &work)
            LockTable.release(LockTable.lock(at: LockTable.index(of: node)))
            switch step {
            case .rejected: return false
            case .won:
                if let link = node.afterCompletion(&work) { Cancellation.withdraw(from: link) }
                return true
            }
        }
    }

    /// How this pending future leaves its upstream (caller holds the lock, `extras` still attached):
    /// as a consumer, or, for an `observe()` branch, only taking its entry off; and the key of that
    /// entry.
    @inlinable
    final var departure: (withdrawal: Withdrawal, key: RegistrationKey) {
        (consumesUpstream ? .counted : .observer,
         extras?.merge.upstreamKey ?? RegistrationKey(self))
    }

    /// The work after a completion, outside the lock: producer cancellation handlers, progress
    /// observers, the drain of the callbacks. Returns the upstream to withdraw from, if the future
    /// was cancelled.
    @inlinable
    final func afterCompletion(_ work: inout CompletionWork) -> UpstreamLink? {
        // The extras box was detached under the lock, so nothing else reaches it now.
        if work.cancelled, let extras = work.extras {
            for handler in unsafeDowncast(extras, to: PendingExtras<Value>.self).merge.cancelHandlers { handler.run() }
        }
        if let (observers, final) = work.progress, let (value, version) = final {
            observers.tell(value, version)
        }
        if work.unfollow, let upstream = work.upstream { stopFollowing(upstream) }
        if work.drain { scheduleDrain() }
        guard let withdrawal = work.withdrawal, let upstream = work.upstream else { return nil }
        return UpstreamLink(source: upstream, withdrawal: withdrawal, key: work.key)
    }

    /// This completed future followed `upstream`'s progress: its listener there goes, so a
    /// long-lived upstream keeps nothing of the followers that completed before it.
    @usableFromInline @inline(never)
    final func stopFollowing(_ upstream: ConsumerSource) {
        (upstream.resolved as? any ProgressNode)?.removeProgressFollower(ObjectIdentifier(self))
    }

    /// Hands the right to complete this pending future from `origin` to `newCompleter`, so that
    /// completions from `origin` are rejected from now on, and detaches its upstream, atomically: a
    /// timeout uses it to withdraw from its source before failing, without the source's cancellation
    /// reaching it first, and without a cancellation of this future withdrawing a second time.
    ///
    /// - Returns: `nil` if the future is not pending or `origin` may not complete it; otherwise the
    ///   registration on the upstream to withdraw (`nil` inside if there is none).
    @usableFromInline
    final func reserveLeavingUpstream(for newCompleter: CompleterToken, from origin: AnyObject) -> UpstreamLink?? {
        var detached: ConsumerSource? = nil  // released after the lock, unless returned
        defer { releaseOutsideLock(detached) }
        var unfollow = false
        return withState({ $0.handOverLocked(to: newCompleter, from: origin, detaching: &detached, unfollow: &unfollow) }) {
            node, link in
            if unfollow, let detached { node.stopFollowing(detached) }
            return link
        }
    }

    // MARK: The drain

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
        // Each batch's entries are released as it ends, outside the lock; the list is left empty.
        batch.runAndEmpty(with: outcome)
        while true {
            let more = LockTable.withLock(self) { takeLateCallbacksLocked(into: &batch) }
            guard more else { return }
            // Registered after the completion: never in the running job by affinity (an earlier
            // callback for the same executor may be waiting in its queue).
            Drain.closingAffinity { batch.runAndEmpty(with: outcome) }
        }
    }
}

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
    @usableFromInline var upstream: ConsumerSource?
    /// The extras box (with the producer's cancellation handlers), detached to be used and released
    /// after the lock.
    @usableFromInline var extras: AnyObject?
    /// Progress observers, moved out: told the final value and version (if any), then released.
    @usableFromInline var progress: (observers: ProgressObservers, final: (Double, UInt64)?)?
    /// Whether the future followed its upstream's progress: its listener there is taken off.
    @usableFromInline var unfollow = false

    @inlinable init() {}
}

/// An object whose only job is to be a completer's identity (a timeout's, for instance, or an
/// adopter's while it waits).
@usableFromInline
final class CompleterToken: Sendable {
    @usableFromInline init() {}
}
