/// The progress of one future, allocated the first time anyone sets or observes it: futures that
/// never use progress pay one nil field for it.
///
/// A future's progress is its producer's (``Promise/progress``), or follows its upstream:
/// unchanged for `map`, `recover`, `always`, `observe()` and the like, weighted for
/// `flatMap(progressWeight:)`. Following is set up lazily, when someone observes progress
/// downstream, by subscribing each future to its upstream, up to the producer.
@usableFromInline
final class ProgressState {
    // Guarded by the owning future's stripe lock.

    /// The progress this future reports.
    var value: Double = 0
    /// Observers, in registration order: user handlers (coalescing, on their executors) and the
    /// forwarding listeners of downstream futures.
    var observers: [@Sendable (Double) -> Void] = []
    /// Whether this future follows its upstream's progress (subscribed).
    var forwarding = false

    // The *subject* is the future whose progress drives this one: itself, or, after merges, the
    // adopted future it was merged with. Its progress is `ownPart` (its producer's, or its
    // upstream's), weighted by `weight` for a flatMap, or `weight + (1 - weight) * innerPart` once
    // the subject has adopted a future it waits on.
    var weight: Double?
    var ownPart = 0.0
    var innerPart = 0.0
    var adopted = false

    // Merges compose: value = offset + scale * (the subject's progress).
    var offset = 0.0
    var scale = 1.0

    init() {}

    private var subjectProgress: Double {
        if adopted {
            let w = weight ?? 0
            return w + (1 - w) * innerPart
        }
        return (weight ?? 1) * ownPart
    }

    /// Recomputes the value; returns it if it changed. Combined progress never goes backwards; a
    /// producer's own progress may.
    private func update() -> Double? {
        let raw = offset + scale * subjectProgress
        let combined = weight != nil || offset != 0 || scale != 1
        let next = combined ? max(value, raw) : raw
        guard next != value else { return nil }
        value = next
        return next
    }

    /// The subject's producer reported progress (directly, or through a link after a merge).
    func receiveOwn(_ incoming: Double) -> Double? {
        ownPart = incoming
        return update()
    }

    /// Progress arrived from the future this one follows: its upstream, or after a waiting
    /// adoption the adopted future.
    func receiveFollowed(_ incoming: Double) -> Double? {
        if adopted { innerPart = incoming } else { ownPart = incoming }
        return update()
    }

    /// The subject adopted a future it waits on, which already had `innerProgress`.
    func adoptWaiting(innerProgress: Double) -> Double? {
        adopted = true
        innerPart = innerProgress
        return update()
    }

    /// This future adopted `target` by merging: fold this future's weight into the composition
    /// and make the target the subject (its state, or a plain flatMap's default weight).
    func absorb(_ target: ProgressState?, targetCombines: Bool) -> Double? {
        let w = weight ?? 0
        offset += scale * w
        scale *= 1 - w
        if let target {
            offset += scale * target.offset
            scale *= target.scale
            weight = target.weight
            adopted = target.adopted
            ownPart = target.ownPart
            innerPart = target.innerPart
            observers.append(contentsOf: target.observers)
            target.observers = []
        } else {
            weight = targetCombines ? 0.5 : nil
            adopted = false
            ownPart = 0
            innerPart = 0
        }
        return update()
    }

    /// The future completed (caller holds the lock): success reports 1.0; failure and cancellation
    /// add nothing. Returns the observers, moved out to be told 1.0 (if `notify`) and released
    /// after the lock.
    @usableFromInline
    func complete(success: Bool) -> (observers: [@Sendable (Double) -> Void], notify: Bool) {
        let taken = observers
        observers = []
        guard success, value != 1 else { return (taken, false) }
        value = 1
        return (taken, true)
    }
}

/// A future seen from its downstream, for progress (type-erased: value types differ along a chain).
@usableFromInline
protocol ProgressNode: AnyObject, Sendable {
    /// Marks this future as following its upstream; returns the upstream if it must subscribe now.
    func beginForwarding() -> (any ProgressNode)?
    /// Adds an observer; returns the current progress.
    func addProgressObserver(_ observer: @escaping @Sendable (Double) -> Void) -> Double
    /// Progress arrived from the upstream this future follows.
    func receiveUpstreamProgress(_ value: Double)
}

extension FutureStorage: ProgressNode {
    /// The progress state, created if needed (caller holds the lock).
    @usableFromInline var ensureProgress: ProgressState {
        if let progress { return progress }
        let created = ProgressState()
        if combinesProgress { created.weight = 0.5 }
        progress = created
        return created
    }

    /// Gives a new, not yet shared, flatMap-derived future its progress weight.
    @usableFromInline
    func setProgressWeight(_ weight: Double) {
        LockTable.withLock(self) { ensureProgress.weight = weight }
    }

    /// The producer reports progress: clamped to 0...1, NaN ignored, ignored once the future is
    /// complete or when `origin` may no longer complete it. Progress from the producer of a merged
    /// inner future (through its link) is this future's inner part.
    @usableFromInline
    func setProgress(_ raw: Double, from origin: AnyObject) {
        guard !raw.isNaN else { return }
        let incoming = min(max(raw, 0), 1)
        var node = self
        while true {
            let (linked, changed, observers): (Bool, Double?, [@Sendable (Double) -> Void]) = LockTable.withLock(node) {
                guard node.phase != .linked else { return (true, nil, []) }
                guard node.phase == .pending, node.accepts(origin) else { return (false, nil, []) }
                let changed = node.ensureProgress.receiveOwn(incoming)
                return (false, changed, changed == nil ? [] : node.progress!.observers)
            }
            if linked {
                node = node.root()
                continue
            }
            if let changed { for observer in observers { observer(changed) } }
            return
        }
    }

    /// The current progress: 1 after success; the last value otherwise. Reading it sets up
    /// following, so it is current from then on.
    @usableFromInline
    var currentProgress: Double {
        Self.startFollowing(self.root())
        let node = root()
        return LockTable.withLock(node) {
            if node.phase == .completed, node.result?.isSuccess == true { return 1 }
            return node.progress?.value ?? 0
        }
    }

    /// Adds a progress observer and makes this future follow its upstream if it does not yet.
    @usableFromInline
    func observeProgress(_ observer: @escaping @Sendable (Double) -> Void) {
        let node = root()
        let current = node.addProgressObserver(observer)
        if current > 0 { observer(current) }
        Self.startFollowing(node)
    }

    /// Subscribes `start` to its upstream's progress, that one to its own upstream, and so on, up
    /// to a future that already follows its upstream or has none (in a loop).
    static func startFollowing(_ start: any ProgressNode) {
        var node = start
        while let upstream = node.beginForwarding() {
            let follower = node
            let current = upstream.addProgressObserver { value in
                // Through the drain loop, so a long following chain does not recurse.
                Drain.schedule(DrainEntry(node: follower, run: { follower in
                    (follower as! any ProgressNode).receiveUpstreamProgress(value)
                }))
            }
            follower.receiveUpstreamProgress(current)
            node = upstream
        }
    }

    @usableFromInline
    func beginForwarding() -> (any ProgressNode)? {
        LockTable.withLock(self) { () -> (any ProgressNode)? in
            guard phase == .pending, let upstream = upstream?.resolved as? any ProgressNode else { return nil }
            let state = ensureProgress
            guard !state.forwarding else { return nil }
            state.forwarding = true
            return upstream
        }
    }

    @usableFromInline
    func addProgressObserver(_ observer: @escaping @Sendable (Double) -> Void) -> Double {
        var node = self
        while true {
            let (linked, current): (Bool, Double) = LockTable.withLock(node) {
                switch node.phase {
                case .linked: return (true, 0)
                case .never: return (false, 0)
                case .completed: return (false, node.result?.isSuccess == true ? 1 : node.progress?.value ?? 0)
                case .pending:
                    let state = node.ensureProgress
                    state.observers.append(observer)
                    return (false, state.value)
                }
            }
            if !linked { return current }
            node = node.root()
        }
    }

    /// After adopting (waiting on) an inner future: later progress from it is the inner part,
    /// starting with the progress it already had; a future that follows its upstream re-subscribes
    /// to the new one.
    @usableFromInline
    func adoptedForProgress(innerProgress: Double) {
        let (changed, observers, refollow): (Double?, [@Sendable (Double) -> Void], Bool) = LockTable.withLock(self) {
            guard phase == .pending, let state = progress else { return (nil, [], false) }
            let changed = state.adoptWaiting(innerProgress: innerProgress)
            let refollow = state.forwarding
            state.forwarding = false
            return (changed, changed == nil ? [] : state.observers, refollow)
        }
        if let changed { for observer in observers { observer(changed) } }
        if refollow { Self.startFollowing(self) }
    }

    /// After a merge changed the upstream: re-subscribe if following, and tell observers.
    func mergedForProgress(changed: Double?) {
        let (observers, refollow): ([@Sendable (Double) -> Void], Bool) = LockTable.withLock(self) {
            guard phase == .pending, let state = progress else { return ([], false) }
            let refollow = state.forwarding
            state.forwarding = false
            return (changed == nil ? [] : state.observers, refollow)
        }
        if let changed { for observer in observers { observer(changed) } }
        if refollow { Self.startFollowing(self) }
    }

    @usableFromInline
    func receiveUpstreamProgress(_ incoming: Double) {
        let (changed, observers): (Double?, [@Sendable (Double) -> Void]) = LockTable.withLock(self) {
            guard phase == .pending, let state = progress else { return (nil, []) }
            let changed = state.receiveFollowed(incoming)
            return (changed, changed == nil ? [] : state.observers)
        }
        if let changed { for observer in observers { observer(changed) } }
    }
}
