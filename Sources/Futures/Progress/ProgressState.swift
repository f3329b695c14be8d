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
    /// `flatMap(progressWeight:)`: the share of the upstream; the adopted future has the rest.
    var weight: Double?
    var upstreamPart = 0.0
    var innerPart = 0.0
    /// Whether the flatMap has adopted its inner future (later progress is the inner part).
    var adopted = false

    init() {}

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

    /// Applies progress arriving from the upstream (or, once adopted, from the inner future) and
    /// returns the new value if it changed. Weighted progress never goes backwards.
    func receive(_ incoming: Double, asInner: Bool) -> Double? {
        let next: Double
        if let weight {
            if asInner || adopted {
                innerPart = incoming
                next = max(value, weight + (1 - weight) * innerPart)
            } else {
                upstreamPart = incoming
                next = max(value, weight * upstreamPart)
            }
        } else {
            next = incoming
        }
        guard next != value else { return nil }
        value = next
        return next
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
                let state = node.ensureProgress
                let changed: Double?
                if origin === node {
                    changed = incoming != state.value ? incoming : nil
                    if let changed { state.value = changed }
                } else {
                    changed = state.receive(incoming, asInner: true)
                }
                return (false, changed, changed == nil ? [] : state.observers)
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

    /// After adopting `inner`: later progress (from the inner future, through the new upstream or
    /// a link) is the inner part, starting with the progress `inner` already had; a future that
    /// follows its upstream re-subscribes to the new one.
    @usableFromInline
    func adoptedForProgress(innerProgress: Double) {
        let (changed, observers, refollow): (Double?, [@Sendable (Double) -> Void], Bool) = LockTable.withLock(self) {
            guard phase == .pending, let state = progress else { return (nil, [], false) }
            state.adopted = true
            let changed = state.receive(innerProgress, asInner: true)
            let refollow = state.forwarding
            state.forwarding = false
            return (changed, changed == nil ? [] : state.observers, refollow)
        }
        if let changed { for observer in observers { observer(changed) } }
        if refollow { Self.startFollowing(self) }
    }

    @usableFromInline
    func receiveUpstreamProgress(_ incoming: Double) {
        let (changed, observers): (Double?, [@Sendable (Double) -> Void]) = LockTable.withLock(self) {
            guard phase == .pending, let state = progress else { return (nil, []) }
            let changed = state.receive(incoming, asInner: false)
            return (changed, changed == nil ? [] : state.observers)
        }
        if let changed { for observer in observers { observer(changed) } }
    }
}
