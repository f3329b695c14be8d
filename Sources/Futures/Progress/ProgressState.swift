/// Receives a progress value and its version; versions only grow, so a receiver drops anything
/// older than what it already has (notifications are sent after the lock, and can overtake).
///
/// Stored as what it is rather than as a closure around it, so that registering a handler or
/// following an upstream allocates no closure, and telling a follower needs no dynamic cast. Each
/// case holds one object, so an observer is one word: copying the observers out of the lock for
/// each report costs a retain.
@usableFromInline
enum ProgressObserver: Sendable {
    /// A closure: a join's listener on a member, the feed of a `progressUpdates` sequence.
    case closure(ProgressClosure)
    /// A `whenProgress` handler.
    case delivery(ProgressDelivery)
    /// The listener of a downstream future that follows this one.
    case link(ProgressLink)

    @usableFromInline
    func callAsFunction(_ value: Double, _ version: UInt64) {
        switch self {
        case .closure(let closure): closure.body(value, version)
        case .delivery(let delivery): delivery.offer(value, version: version)
        case .link(let link): link.receive(value, version: version)
        }
    }

    /// The identity that takes this observer off: a follower's, a feed's or a join's.
    var follower: ObjectIdentifier? {
        switch self {
        case .closure(let closure): closure.follower
        case .delivery: nil
        case .link(let link): link.key
        }
    }
}

/// A closure that observes progress, with the identity that takes it off again (see
/// ``ProgressState/removeFollower(_:)``), if any.
@usableFromInline
final class ProgressClosure: Sendable {
    let body: @Sendable (_ value: Double, _ version: UInt64) -> Void
    let follower: ObjectIdentifier?

    init(_ body: @escaping @Sendable (_ value: Double, _ version: UInt64) -> Void, follower: ObjectIdentifier?) {
        self.body = body
        self.follower = follower
    }
}

/// A future's progress observers, in registration order: the first one inline, so that a future
/// with one observer (each future of a followed chain, whose follower listens) allocates no list.
@usableFromInline
struct ProgressObservers: Sequence, ExpressibleByArrayLiteral, Sendable {
    // The first observer; `rest` is empty whenever it is `nil`.
    @usableFromInline var first: ProgressObserver?
    @usableFromInline var rest: [ProgressObserver] = []

    init() {}

    @usableFromInline
    init(arrayLiteral observers: ProgressObserver...) {
        for observer in observers { append(observer) }
    }

    var isEmpty: Bool { first == nil }

    var count: Int { first == nil ? 0 : 1 + rest.count }

    mutating func append(_ observer: ProgressObserver) {
        if first == nil { first = observer } else { rest.append(observer) }
    }

    mutating func append(contentsOf other: ProgressObservers) {
        for observer in other { append(observer) }
    }

    static func + (lhs: ProgressObservers, rhs: ProgressObservers) -> ProgressObservers {
        var joined = lhs
        joined.append(contentsOf: rhs)
        return joined
    }

    /// Takes off the last observer that `follower` takes off, and returns it.
    mutating func removeLast(follower: ObjectIdentifier) -> ProgressObserver? {
        if let index = rest.lastIndex(where: { $0.follower == follower }) { return rest.remove(at: index) }
        guard let observer = first, observer.follower == follower else { return nil }
        first = rest.isEmpty ? nil : rest.removeFirst()
        return observer
    }

    /// Tells each observer, in order, `value` and its `version`.
    @inlinable
    func tell(_ value: Double, _ version: UInt64) {
        guard let first else { return }
        first(value, version)
        for observer in rest { observer(value, version) }
    }

    @usableFromInline
    struct Iterator: IteratorProtocol {
        @usableFromInline var first: ProgressObserver?
        @usableFromInline var rest: IndexingIterator<[ProgressObserver]>

        @inlinable init(first: ProgressObserver?, rest: IndexingIterator<[ProgressObserver]>) {
            self.first = first
            self.rest = rest
        }

        @inlinable
        mutating func next() -> ProgressObserver? {
            if let observer = first {
                first = nil
                return observer
            }
            return rest.next()
        }
    }

    @inlinable
    func makeIterator() -> Iterator { Iterator(first: first, rest: rest.makeIterator()) }
}

/// A downstream future's listener on the upstream it follows: a report from there is offered to
/// the follower, which applies it from this thread's drain loop, so a long following chain does
/// not recurse.
@usableFromInline
final class ProgressLink: Sendable {
    let follower: any ProgressNode
    /// The upstream followed, whose reports the follower accepts.
    let source: ObjectIdentifier
    /// The follower's identity, by which it takes this listener off.
    let key: ObjectIdentifier

    init(follower: any ProgressNode, source: ObjectIdentifier) {
        self.follower = follower
        self.source = source
        self.key = ObjectIdentifier(follower)
    }

    func receive(_ value: Double, version: UInt64) {
        guard follower.offerUpstreamProgress(value, version: version, from: source) else { return }
        // The entry holds the link, and so the follower; its type is known, so no cast is needed.
        Drain.schedule(self, { unsafeDowncast($0, to: ProgressLink.self).follower.applyOfferedProgress() })
    }
}

/// The progress of one future, allocated the first time anyone sets or observes it: futures that
/// never use progress pay one nil field for it.
///
/// A future's progress is its producer's (``Promise/progress``), or follows its upstream:
/// unchanged for `map`, `recover`, `always`, `observe()` and the like, weighted for
/// `flatMap(progressWeight:)`. Following is set up lazily, when someone observes progress
/// downstream, by subscribing each future to its upstream, up to the producer.
@usableFromInline
final class ProgressState {
    // Guarded by the owning future's stripe lock, like the future's own fields, so the runtime
    // exclusivity check is redundant (and cost more than the lock): it is turned off field by field.

    /// The progress this future reports, and its version (bumped on every change).
    @exclusivity(unchecked) var value: Double = 0
    @exclusivity(unchecked) var version: UInt64 = 0
    /// Observers, in registration order: user handlers (coalescing, on their executors), the
    /// following listeners of downstream futures and the feeds of `progressUpdates` sequences. A
    /// follower that completes, or a sequence whose consumer left, takes its listener off by its
    /// identity (see ``removeFollower(_:)``).
    @exclusivity(unchecked) private(set) var observers = ProgressObservers()
    /// Whether this future follows its upstream's progress, which upstream, and the newest version
    /// received from it.
    @exclusivity(unchecked) @usableFromInline var forwarding = false
    @exclusivity(unchecked) var followed: ObjectIdentifier?
    @exclusivity(unchecked) var followedVersion: UInt64 = 0
    /// The newest report from the upstream that a queued job has yet to apply: reports that arrive
    /// meanwhile replace it, so a follower applies a burst of reports once (and progress fed back
    /// around a cycle through a join settles instead of multiplying).
    @exclusivity(unchecked) var incoming: (value: Double, version: UInt64, source: ObjectIdentifier)?
    @exclusivity(unchecked) var relation: ProgressRelation

    init(relation: ProgressRelation) { self.relation = relation }

    /// Recomputes the value; returns it and its new version if it changed. Combined progress never
    /// goes below `floor` either (what the observers of a future merged into this one last saw).
    func update(atLeast floor: Double = 0) -> (Double, UInt64)? {
        let raw = relation.raw
        let next = relation.monotonic ? max(value, floor, raw) : raw
        guard next != value else { return nil }
        value = next
        version += 1
        return (next, version)
    }

    func add(_ observer: ProgressObserver) {
        observers.append(observer)
    }

    /// Takes the following listener of `follower` off, if it is here: returned, to be released
    /// after the lock (it holds the follower).
    func removeFollower(_ follower: ObjectIdentifier) -> ProgressObserver? {
        observers.removeLast(follower: follower)
    }

    /// Moves every observer of `other` (a future merged into this one) here, in order.
    func takeObservers(of other: ProgressState) {
        observers.append(contentsOf: other.observers)
        other.observers = ProgressObservers()
    }

    /// The future completed (caller holds the lock): success reports 1.0; failure and cancellation
    /// add nothing. Returns the observers, moved out to be told the final value (if any) and
    /// released after the lock.
    @usableFromInline
    func complete(success: Bool) -> (observers: ProgressObservers, final: (Double, UInt64)?) {
        var taken = ProgressObservers()
        swap(&taken, &observers)
        guard success, value != 1 else { return (taken, nil) }
        value = 1
        version += 1
        return (taken, (1, version))
    }
}

/// A future seen from its downstream, for progress (type-erased: value types differ along a chain).
@usableFromInline
protocol ProgressNode: AnyObject, Sendable {
    /// Marks this future as following its upstream; returns the upstream if it must subscribe now,
    /// and the start of this future's own progress source (a join's) if it has not started yet.
    func beginForwarding() -> (upstream: (any ProgressNode)?, demand: (@Sendable () -> Void)?)
    /// Adds the observer `make` returns, made only if this future is pending (a completed one is
    /// told nothing more); returns the current progress and its version.
    func addProgressObserver(making make: () -> ProgressObserver) -> (Double, UInt64)
    /// Takes the following listener of `follower` off, if it is still here.
    func removeProgressFollower(_ follower: ObjectIdentifier)
    /// Whether this future is pending and still follows `source` (a split hands its upstream to
    /// another future, which follows it instead).
    func stillFollows(_ source: ObjectIdentifier) -> Bool
    /// Progress arrived from the upstream `source` this future follows.
    func receiveUpstreamProgress(_ value: Double, version: UInt64, from source: ObjectIdentifier)
    /// A report from the upstream `source`, to apply from a queued job: returns whether the caller
    /// must queue that job (none is queued yet).
    func offerUpstreamProgress(_ value: Double, version: UInt64, from source: ObjectIdentifier) -> Bool
    /// The queued job: applies the newest report offered.
    func applyOfferedProgress()
}

extension ProgressNode {
    /// Adds `observer`; returns the current progress and its version.
    func addProgressObserver(_ observer: ProgressObserver) -> (Double, UInt64) {
        // Not stored (a completed future): released here, after the lock, pinned past it (a
        // handler's captures may break a promise when freed).
        let current = addProgressObserver { observer }
        withExtendedLifetime(observer) {}
        return current
    }

    /// Adds `body` as an observer, taken off again by `follower`, if not `nil`.
    func addProgressObserver(_ body: @escaping @Sendable (Double, UInt64) -> Void, follower: ObjectIdentifier?) -> (Double, UInt64) {
        addProgressObserver(.closure(ProgressClosure(body, follower: follower)))
    }
}

extension FutureStorage: ProgressNode {
    /// The relation in force (caller holds the lock): the live state's, or the one recorded by
    /// adoptions while nobody used progress, or a fresh one.
    var currentRelation: ProgressRelation {
        progress?.relation ?? extras?.progressRelation ?? .initial(combines: combinesProgress)
    }

    /// ``currentRelation``, leaving the stored one without its factors (its owner replaces it), so
    /// that a change to the factors writes in place instead of copying them.
    final func takeCurrentRelation() -> ProgressRelation {
        if let progress {
            defer { progress.relation.factors = DepthFactors() }
            return progress.relation
        }
        if let extras, let relation = extras.progressRelation {
            defer { extras.progressRelation?.factors = DepthFactors() }
            return relation
        }
        return .initial(combines: combinesProgress)
    }

    /// The progress state, created if needed (caller holds the lock).
    @usableFromInline var ensureProgress: ProgressState {
        if let progress { return progress }
        let created = ProgressState(relation: extras?.progressRelation ?? .initial(combines: combinesProgress))
        progress = created
        return created
    }

    /// Gives a new, not yet shared, flatMap-derived future its progress weight.
    @usableFromInline
    func setProgressWeight(_ weight: Double) {
        LockTable.withLock(self) { ensureProgress.relation.setWeight(weight) }
    }

    /// Gives a new, not yet shared, join future its progress source: `demand` runs once, outside
    /// any lock, when someone first follows this future's progress, and reports through
    /// ``setProgress(_:from:)`` with no origin. A join's progress never goes backwards. A join
    /// that completed while it registered its members needs none.
    @usableFromInline
    func setProgressDemand(_ demand: @escaping @Sendable (FutureStorage<Value>) -> Void) {
        LockTable.withLock(self) {
            guard phase == .pending else { return }
            let extras = ensureExtras
            var relation = extras.progressRelation ?? .initial(combines: combinesProgress)
            relation.monotonic = true
            extras.progressRelation = relation
            // It reports to this future, through its links if it was merged: whichever future holds
            // its state when it runs (a split may move it). Weakly: the join's members hold it.
            extras.onProgressDemand = { [weak self] _ in if let self { demand(self) } }
        }
    }

    /// The producer reports progress: clamped to 0...1, NaN ignored, ignored once the future is
    /// complete or when `origin` may no longer complete it (`nil`: the library's own progress
    /// source, always allowed). Progress from the producer of a merged future (through its link)
    /// is the subject's own progress.
    @usableFromInline
    func setProgress(_ raw: Double, from origin: AnyObject?) {
        guard !raw.isNaN else { return }
        let incoming = min(max(raw, 0), 1)
        let (changed, observers): ((Double, UInt64)?, ProgressObservers) = withState { node in
            guard node.phase == .pending else { return (nil, []) }
            if let origin, !node.accepts(origin) { return (nil, []) }
            let state = node.ensureProgress
            state.relation.ownPart = incoming
            let changed = state.update()
            return (changed, changed == nil ? [] : state.observers)
        }
        if let (value, version) = changed { observers.tell(value, version) }
    }

    /// The current progress: 1 after success; the last value otherwise. Reading it sets up
    /// following, so it is current from then on (read inside a progress handler deep in a nest of
    /// joins, the deepest joins' set-up may still be queued until the handler's caller returns; see
    /// ``ProgressNesting``).
    @usableFromInline
    var currentProgress: Double {
        Self.startFollowing(ownRoot())
        return withOwnState { node in
            if node.phase == .completed, node.result?.isSuccess == true { return 1 }
            return node.progress?.value ?? 0
        }
    }

    /// Adds a progress observer (told the current value now if it is above 0) and makes this future
    /// follow its upstream if it does not yet.
    ///
    /// A `follower` (a join following its members) names the observer, so that it can take it off
    /// again with ``removeProgressFollower(_:)``.
    @usableFromInline
    func observeProgress(follower: ObjectIdentifier? = nil, _ body: @escaping @Sendable (Double, UInt64) -> Void) {
        observeProgress(.closure(ProgressClosure(body, follower: follower)))
    }

    /// ``observeProgress(follower:_:)`` for an observer of any kind.
    func observeProgress(_ observer: ProgressObserver) {
        let node = ownRoot()
        let (current, version) = node.addProgressObserver(observer)
        if current > 0 { observer(current, version) }
        Self.startFollowing(node)
    }

    /// Subscribes `start` to its upstream's progress, that one to its own upstream, and so on, up
    /// to a future that already follows its upstream or has none (in a loop).
    static func startFollowing(_ start: any ProgressNode) {
        var node = start
        while true {
            let (next, demand) = node.beginForwarding()
            if let demand { runProgressDemand(demand) }
            guard let upstream = next else { return }
            let follower = node
            let source = ObjectIdentifier(upstream)
            // The listener is made only for a pending upstream: a completed one (a flatMap's inner
            // future that had completed when it was adopted) only gives its final value.
            var added = false
            let (current, version) = upstream.addProgressObserver {
                added = true
                return .link(ProgressLink(follower: follower, source: source))
            }
            // A follower that completes, is merged into another future or hands its upstream on in
            // a split takes its listener off the upstream; one that did so before the listener was
            // added does it here (either its removal came after the add, or this check sees it).
            if added, !follower.stillFollows(source) { upstream.removeProgressFollower(ObjectIdentifier(follower)) }
            follower.receiveUpstreamProgress(current, version: version, from: source)
            node = upstream
        }
    }

    /// Runs a join's progress set-up (it observes the join's members, which starts following in
    /// each, and a member that is a join starts its own), inline or, deep in a nest of joins,
    /// queued for the outermost set-up (see ``ProgressNesting``).
    static func runProgressDemand(_ demand: @escaping @Sendable () -> Void) {
        guard ProgressNesting.enter() else { return ProgressNesting.queue(demand) }
        demand()
        ProgressNesting.leave()
    }

    @usableFromInline
    func beginForwarding() -> (upstream: (any ProgressNode)?, demand: (@Sendable () -> Void)?) {
        // The closure's result names no type of `Value`, and only a future with rare state looks
        // for a demand (out of line): unspecialised, either would look type metadata up per call.
        LockTable.withLock(self) { () -> ((any ProgressNode)?, (@Sendable () -> Void)?) in
            guard phase == .pending else { return (nil, nil) }
            let demand = rare == nil ? nil : takeProgressDemandLocked()
            let state = ensureProgress
            guard !state.forwarding, let upstream = self.upstream?.resolved as? any ProgressNode else { return (nil, demand) }
            state.forwarding = true
            state.followed = ObjectIdentifier(upstream)
            state.followedVersion = 0
            return (upstream, demand)
        }
    }

    /// Takes this pending future's progress demand, if it has one, as work to run after the lock
    /// (caller holds the lock; the work is handed on, not released, here).
    @inline(never)
    private func takeProgressDemandLocked() -> (@Sendable () -> Void)? {
        guard let extras, let demand = extras.onProgressDemand else { return nil }
        extras.onProgressDemand = nil
        return { demand(self) }
    }

    @usableFromInline
    func addProgressObserver(making make: () -> ProgressObserver) -> (Double, UInt64) {
        withOwnState { node in
            switch node.phase {
            case .linked: node.linkedFutureTrap()
            case .never: return (0, 0)
            case .completed: return node.finalProgressLocked()
            case .pending:
                let state = node.ensureProgress
                state.add(make())
                return (state.value, state.version)
            }
        }
    }

    /// What a completed future reports to a new observer (caller holds the lock). Out of line: a
    /// function that reads the outcome looks its type metadata up where it starts, and the common
    /// case, a pending future, reads none.
    @inline(never)
    private func finalProgressLocked() -> (Double, UInt64) {
        let version = progress?.version ?? 0
        return (result?.isSuccess == true ? 1 : progress?.value ?? 0, version)
    }

    @usableFromInline
    func removeProgressFollower(_ follower: ObjectIdentifier) {
        let removed = withState { node in node.phase == .pending ? node.progress?.removeFollower(follower) : nil }
        withExtendedLifetime(removed) {}  // released after the lock
    }

    @usableFromInline
    func stillFollows(_ source: ObjectIdentifier) -> Bool {
        LockTable.withLock(self) { phase == .pending && progress?.forwarding == true && progress?.followed == source }
    }

    @usableFromInline
    func receiveUpstreamProgress(_ incoming: Double, version: UInt64, from source: ObjectIdentifier) {
        let (changed, observers) = LockTable.withLock(self) { applyUpstreamProgress(incoming, version: version, from: source) }
        if let (value, newVersion) = changed { observers.tell(value, newVersion) }
    }

    /// Applies a report from the upstream `source` (caller holds the lock): returns the new value
    /// and version, if it changed, and the observers to tell.
    private func applyUpstreamProgress(
        _ incoming: Double, version: UInt64, from source: ObjectIdentifier
    ) -> ((Double, UInt64)?, ProgressObservers) {
        guard phase == .pending, let state = progress, state.followed == source,
              version >= state.followedVersion else { return (nil, []) }
        state.followedVersion = version
        if state.relation.adopted { state.relation.innerPart = incoming } else { state.relation.ownPart = incoming }
        let changed = state.update()
        return (changed, changed == nil ? [] : state.observers)
    }

    @usableFromInline
    func offerUpstreamProgress(_ value: Double, version: UInt64, from source: ObjectIdentifier) -> Bool {
        LockTable.withLock(self) {
            guard phase == .pending, let state = progress, state.followed == source,
                  version >= state.followedVersion else { return false }
            if let queued = state.incoming {
                if version >= queued.version || queued.source != source { state.incoming = (value, version, source) }
                return false
            }
            state.incoming = (value, version, source)
            return true
        }
    }

    @usableFromInline
    func applyOfferedProgress() {
        // Taken and applied under one lock: a report offered meanwhile queues a job of its own.
        let (changed, observers) = LockTable.withLock(self) { () -> ((Double, UInt64)?, ProgressObservers) in
            guard let state = progress, let offered = state.incoming else { return (nil, []) }
            state.incoming = nil
            return applyUpstreamProgress(offered.value, version: offered.version, from: offered.source)
        }
        if let (value, version) = changed { observers.tell(value, version) }
    }

    /// After an adoption changed this future's relation (under the adoption's locks): tell the
    /// observers and, if it was following its upstream, follow the new one.
    func progressAdopted(changed: (Double, UInt64)?, observers: ProgressObservers, refollow: Bool) {
        if let (value, version) = changed { observers.tell(value, version) }
        // From the future that holds the state now: another adoption may have merged this one
        // since the locks were released, and taken over the upstream it is to follow.
        if refollow { Self.startFollowing(root()) }
    }
}

/// The trampoline for joins' progress work: a join followed for the first time observes its
/// members, and a member's report reaches the join's own observers, among them the join it is a
/// member of. A nest of joins would recurse once per level; past a few levels (the same bound as
/// withdrawals', ``Cancellation/inlineNesting``) the work queues instead, and the outermost piece
/// runs the queue, in order, before it returns: a nest thousands deep sets up and reports in a
/// loop, and the call that started it returns only once it is done.
@usableFromInline
enum ProgressNesting {
    /// Whether work may run inline now; if so, the caller runs it and then calls ``leave()``.
    @usableFromInline
    static func enter() -> Bool {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        guard context.progressNesting < Cancellation.inlineNesting else { return false }
        context.progressNesting += 1
        return true
    }

    /// Queues work that ``enter()`` refused, for the outermost piece to run.
    @usableFromInline
    static func queue(_ work: @escaping () -> Void) {
        ThreadContext.current.takeUnretainedValue().progressWork.append(work)
    }

    /// Ends a piece of work ``enter()`` allowed; the outermost runs what was queued meanwhile.
    @usableFromInline
    static func leave() {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        // Each queued piece is moved out of the queue first, and runs at the outermost level, so
        // what it does in turn may nest a few levels again before queueing.
        while context.progressNesting == 1, context.progressWorkHead < context.progressWork.count {
            let work = context.progressWork[context.progressWorkHead].take()!
            context.progressWorkHead += 1
            work()
        }
        if context.progressNesting == 1, !context.progressWork.isEmpty {
            context.progressWork.removeAll(keepingCapacity: context.progressWork.capacity <= 1024)
            context.progressWorkHead = 0
        }
        context.progressNesting -= 1
    }
}
