/// What a future keeps beside its fields on rare paths, allocated on first need: the state of its
/// phase that most futures never have. A pending future's is a ``PendingExtras``, a completed
/// future's a ``CompletedExtras``; a linked future and `never` keep none. Both kinds share who may
/// complete the future, which a completed future still needs to refuse a late adoption.
@usableFromInline
class RareState {
    // Every field is guarded by the stripe lock of the future that owns the box (or touched in
    // that future's deinit), like the future's own fields, so the runtime exclusivity check is
    // turned off here too.

    /// Whether this is a completed future's box (a ``CompletedExtras``).
    @usableFromInline let ofCompleted: Bool

    /// Who may complete the future: `nil` for itself (its promise or internal completer), else the
    /// identity of the object it handed that right to (the future it adopted, a timer's or a
    /// waiting adopter's token), which must also still be alive: an identity alone could be reused
    /// by a new object at the same address. A future is held weakly (`completerObject`: it may hold
    /// this one); a ``CompleterToken`` strongly (`completerToken`: it holds nothing, and a weak
    /// reference would give it a side table, an allocation and slower reference counting).
    /// `RareState.nobody` means nothing may complete it (it adopted `never`). Cancellation is
    /// always allowed.
    @exclusivity(unchecked) @usableFromInline final var completer: ObjectIdentifier?
    @exclusivity(unchecked) @usableFromInline final weak var completerObject: AnyObject?
    @exclusivity(unchecked) @usableFromInline final var completerToken: CompleterToken?

    /// The completer of a future that adopted `never`: a metatype's identity, which no heap object
    /// (and so no origin) can ever have.
    @usableFromInline static var nobody: ObjectIdentifier { ObjectIdentifier(Never.self) }

    @usableFromInline init(ofCompleted: Bool) { self.ofCompleted = ofCompleted }

    /// Hands the right to complete to `object`, held weakly (caller holds the owner's lock).
    @inlinable
    final func handCompletion(to object: AnyObject) {
        completer = ObjectIdentifier(object)
        completerObject = object
        completerToken = nil
    }

    /// Hands the right to complete to `token`, held strongly (caller holds the owner's lock).
    @inlinable
    final func handCompletion(to token: CompleterToken) {
        completer = ObjectIdentifier(token)
        completerToken = token
        completerObject = nil  // assigned, not read: reading a weak reference retains its object
    }

    /// Takes over who may complete the future from `other` (caller holds both owners' locks).
    @inlinable
    final func takeCompleter(of other: RareState) {
        completer = other.completer
        completerObject = other.completerObject
        completerToken = other.completerToken
    }

    /// Whether the object that may complete the future (if it is not the future itself) is alive.
    @inlinable final var completerIsAlive: Bool { completerToken != nil || completerObject != nil }

    /// Whether freeing this box may free a chain of futures (see ``FutureStorage``'s deinit).
    @usableFromInline var mayHoldChain: Bool { false }
}

/// The rare state of a pending future: what it is waiting for besides its upstream, what it starts
/// on demand, and its merge set. Detached when the future completes.
@usableFromInline
final class PendingExtras<Value: Sendable>: RareState {
    /// The index of a long callback list, for removals (see ``CallbackList/remove(_:index:)``).
    @exclusivity(unchecked) @usableFromInline var registrationIndex: RegistrationIndex?
    /// The future this one waits for after adopting it without merging, or, compressed by cycle
    /// detection, a future further along the same waits (see ``CycleDetection``); set through
    /// ``wait(on:weakly:)``.
    @inlinable var waitingOn: (any CycleNode)? { waitsWeakly ? waitingOnWeakly : waitingOnStrongly }
    /// ``waitingOn``, held strongly when it is the future this one waits on, which is its upstream
    /// too and held as strongly already (a weak reference would give every future waited on a side
    /// table: an allocation, and every retain and release of that future through it from then on).
    /// A merge or a split moves it with its strength.
    @exclusivity(unchecked) @usableFromInline var waitingOnStrongly: (any CycleNode)?
    /// ``waitingOn``, held weakly: by an immortal future (like its upstream, what it waits on may
    /// hold it through callbacks that nothing will ever release), and as a pointer that cycle
    /// detection compressed further along the waits (the path may pass a future that became
    /// immortal later and holds what it waits on only weakly).
    @exclusivity(unchecked) @usableFromInline weak var waitingOnWeakly: (any CycleNode)?
    /// Which of the two holds ``waitingOn``.
    @exclusivity(unchecked) @usableFromInline var waitsWeakly = false
    /// Whether ``waitingOn`` was set, without reading it (a weak read retains, and the release that
    /// follows could be the last one, under the owner's lock): `true` also for a future held weakly
    /// that is gone, which only sends an adoption the way that walks.
    @inlinable var waitsOnSomething: Bool { waitsWeakly || waitingOnStrongly != nil }
    /// The progress relation recorded by adoptions while nobody used progress (see
    /// ``ProgressRelation``); it costs no allocation, since an adoption allocates this box anyway.
    @exclusivity(unchecked) var progressRelation: ProgressRelation?
    /// The work of a `Future.deferred`, started (once) by the first callback registration or
    /// adoption; it gets the future to complete.
    @exclusivity(unchecked) @usableFromInline var onDemand: (@Sendable (FutureStorage<Value>) -> Void)?
    /// A join's progress source, started (once) when someone first follows this future's
    /// progress; it gets the future to report to (see ``FutureStorage/setProgressDemand(_:)``).
    @exclusivity(unchecked) @usableFromInline var onProgressDemand: (@Sendable (FutureStorage<Value>) -> Void)?
    /// The token this future's completion cancels, made by the first read of
    /// `Future.completionToken`: later reads share it, so reading it often costs one registration.
    @exclusivity(unchecked) @usableFromInline var completionToken: CancellationToken?
    /// This future's merge set: the futures merged into it, by depth, with what belongs to each
    /// (its producer's cancel handlers, its observers), the forwards of the splits made of it, and
    /// the registration it borrowed on its upstream. A future that merged nothing is a set of one.
    @exclusivity(unchecked) @usableFromInline var merge = MergeSet<Value>()

    @usableFromInline init() { super.init(ofCompleted: false) }

    /// Records what this future waits on (caller holds the owner's lock), weakly if asked to (an
    /// immortal owner, a compressed pointer, or a weak one moved by a merge or a split: see
    /// ``waitingOnWeakly``). Returns the reference it held before, for the caller to release after
    /// the lock.
    @inlinable
    func wait(on node: (any CycleNode)?, weakly: Bool) -> (any CycleNode)? {
        let old = waitingOnStrongly
        if waitsWeakly { waitingOnWeakly = nil }  // assigned, not read: reading a weak reference retains
        waitsWeakly = weakly && node != nil
        if waitsWeakly {
            waitingOnStrongly = nil
            waitingOnWeakly = node
        } else {
            waitingOnStrongly = node
        }
        return old
    }

    @usableFromInline override var mayHoldChain: Bool {
        merge.mayHoldChain || onDemand != nil || onProgressDemand != nil || completionToken != nil
            || waitingOnStrongly != nil
    }
}

/// The rare state of a completed future, made on these paths only:
/// - callbacks registered while its drain runs (see ``FutureStorage/drain()``), which the drain
///   owner takes after its current batch;
/// - ended cancelled (or failed as a member of a cycle) after its producer handed the right to
///   complete on, it keeps who held that right (see ``FutureStorage/keepLocked(_:completer:)``);
/// - split, it keeps its forwards: the producer of a future merged into it still completes
///   through its link.
@usableFromInline
final class CompletedExtras<Value: Sendable>: RareState {
    @exclusivity(unchecked) @usableFromInline var lateCallbacks = CallbackList<Value>()
    @exclusivity(unchecked) @usableFromInline var forward: MergeForwards<Value>?

    @usableFromInline init() { super.init(ofCompleted: true) }

    @usableFromInline override var mayHoldChain: Bool { forward != nil }
}

/// Holds a future's outcome. It is a generic base class whose parameter is the outcome's own type
/// (`Outcome<Value>`) so that freeing a future needs no type-metadata lookup: a deinit always runs
/// unspecialised, and destroying a field of type `Outcome<Value>` declared in `FutureStorage<Value>`
/// asks the runtime for `Outcome<Value>`'s metadata (a hash-table lookup, about 10% of a
/// `.immediate` map step), whereas a field whose type is a generic parameter finds its metadata in
/// the class's own metadata.
@usableFromInline
class OutcomeSlot<Stored>: ConsumerSource, @unchecked Sendable {
    // Safety: as ``FutureStorage``'s fields.

    /// The outcome, meaningful only once the future is completed (read it through
    /// ``FutureStorage/result``); guarded like every field of ``FutureStorage``.
    @exclusivity(unchecked) @usableFromInline final var storedOutcome: Stored

    @inlinable init(storedOutcome: Stored) {
        self.storedOutcome = storedOutcome
        super.init()
    }
}

/// The shared state of a future and its promise.
///
/// Rules that keep it correct: every field is only touched under the future's stripe lock
/// (`LockTable.withLock(self)`, or both futures' locks for a merge), with one exception: while
/// `draining` is set, `callbacks` belongs to the drain owner, which reads it (and the final
/// outcome) without the lock (see ``drain()``); no user code runs and no last reference is released
/// under that lock (payloads are moved out first); a pending future's `completer` says who may
/// complete it.
@usableFromInline
class FutureStorage<Value: Sendable>: OutcomeSlot<Outcome<Value>>, @unchecked Sendable {
    // Safety: all fields are guarded by the stripe lock of `self` (see above), or accessed in
    // `deinit`, when no other reference exists. Stored callbacks and handlers are `@Sendable`.
    // The runtime exclusivity check is redundant under the lock and cost more than the lock, so
    // it is turned off field by field.

    /// The state, changed only by its own events (see ``FutureState``): five bytes, which share
    /// one word with the two fields below.
    @exclusivity(unchecked) @usableFromInline final var state: FutureState
    /// Whether `deinit` may have a chain of futures to release (pending callbacks or a link).
    @exclusivity(unchecked) @usableFromInline final var mayHoldChain = false
    /// The bits of ``StorageFlags`` (`immortal`, `consumesUpstream`, ...), packed into the byte left
    /// free after the state (separate fields cost the object 8 more bytes of padding).
    @exclusivity(unchecked) @usableFromInline final var flags: UInt8 = StorageFlags.consumesUpstream
    /// The state without its data.
    @inlinable @inline(__always) final var phase: Phase { state.phase }
    /// Whether a drain loop owns the callbacks of this completed future (then only that loop
    /// touches `callbacks`; see ``drain()``).
    @inlinable @inline(__always) final var draining: Bool { state.draining }
    /// Futures derived from this one and tasks awaiting it (observers are not consumers); 0 unless
    /// pending.
    @inlinable @inline(__always) final var consumers: Int32 { state.consumers }
    @exclusivity(unchecked) @usableFromInline final var callbacks = CallbackList<Value>()
    // The outcome is `storedOutcome`, in the base class (see ``OutcomeSlot``); it is not optional,
    // since `phase` says whether it is meaningful.
    /// The outcome, or `nil` unless completed (caller holds the lock).
    @inlinable final var result: Outcome<Value>? { phase == .completed ? storedOutcome : nil }
    /// The future this one was merged into; only while `phase == .linked`. It shares its slot with
    /// `upstream`: a linked future has none (its adopter took it over), a pending one no link.
    @inlinable final var link: FutureStorage<Value>? {
        get {
            assert(phase == .linked, "only a linked future has a link")
            guard let upstream else { return nil }
            return unsafeDowncast(upstream as AnyObject, to: FutureStorage<Value>.self)
        }
        set {
            assert(upstream == nil || phase == .linked, "a link would replace a pending future's upstream")
            upstream = newValue
        }
    }
    /// How far below its `link` this linked future is: 1 for the future its link adopted, more
    /// once path compression skipped futures between them.
    @inlinable final var linkDepth: Int32 {
        assert(phase == .linked, "only a linked future has a link depth")
        return state.linkDepth
    }
    /// The rare state of this future's phase, if it has any (see ``RareState``).
    @exclusivity(unchecked) @usableFromInline final var rare: RareState?
    /// The rare state of this pending future; `nil` if it has none, or is not pending. Set to a
    /// new box or `nil` only while pending, or to detach the box as the future completes.
    @inlinable final var extras: PendingExtras<Value>? {
        @inline(__always) get {
            guard let rare, !rare.ofCompleted else { return nil }
            return unsafeDowncast(rare, to: PendingExtras<Value>.self)
        }
        @inline(__always) set {
            assert(rare == nil || !rare!.ofCompleted, "replaced a completed future's rare state")
            rare = newValue
        }
    }
    /// The rare state of this completed future, if it has any.
    @inlinable final var completedExtras: CompletedExtras<Value>? {
        guard let rare, rare.ofCompleted else { return nil }
        return unsafeDowncast(rare, to: CompletedExtras<Value>.self)
    }
    /// The forwards of the splits made of this future's merge set, which it keeps once completed.
    @inlinable final var splitForwards: MergeForwards<Value>? {
        guard let rare else { return nil }
        if rare.ofCompleted { return unsafeDowncast(rare, to: CompletedExtras<Value>.self).forward }
        return unsafeDowncast(rare, to: PendingExtras<Value>.self).merge.forward
    }
    /// The future this one consumes (its source, or the future it waits on after adopting it), to
    /// withdraw from when this one is cancelled; released when this one completes.
    ///
    /// Strong, except behind a ``WeakSource`` when the source is `immortal`. The source holds its
    /// consumers through its callbacks, so this is a cycle while both are pending; it is garbage
    /// only if nothing can ever complete the source, which is exactly when the source is immortal
    /// (rooted in `never`). A promise-rooted chain always completes or breaks.
    ///
    /// In a linked future, the slot holds its `link` instead.
    @exclusivity(unchecked) @usableFromInline final var upstream: ConsumerSource?
    /// Whether nothing but cancellation can ever complete this future: it is derived from, or
    /// adopted, `never` or another immortal future. Its consumers hold it weakly.
    @inlinable final var immortal: Bool {
        get { flag(StorageFlags.immortal) }
        set { setFlag(StorageFlags.immortal, newValue) }
    }
    /// Whether this future consumes its upstream (a derived future) or only follows it (an
    /// `observe()` branch, which never withdraws from it).
    @inlinable final var consumesUpstream: Bool {
        get { flag(StorageFlags.consumesUpstream) }
        set { setFlag(StorageFlags.consumesUpstream, newValue) }
    }
    /// A plain `flatMap`: its progress weighs its source and the adopted future equally.
    @inlinable final var combinesProgress: Bool {
        get { flag(StorageFlags.combinesProgress) }
        set { setFlag(StorageFlags.combinesProgress, newValue) }
    }
    @inlinable final func flag(_ bit: UInt8) -> Bool { flags & bit != 0 }
    @inlinable final func setFlag(_ bit: UInt8, _ on: Bool) { flags = on ? flags | bit : flags & ~bit }
    /// Progress, allocated on first use (see ``ProgressState``).
    @exclusivity(unchecked) @usableFromInline final var progress: ProgressState?

    @usableFromInline
    override final func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
        leave(withdrawal, key: key)
    }

    @usableFromInline override final var resolved: ConsumerSource? { self }

    @usableFromInline override final var endsEveryWalkLocked: Bool { endsEveryWalkHere }

    /// A pending future.
    @inlinable init() {
        state = .pending(consumers: 0)
        super.init(storedOutcome: .cancelled)
    }

    /// A completed future.
    @inlinable init(outcome: Outcome<Value>) {
        state = .completed(draining: false)
        super.init(storedOutcome: outcome)
    }

    /// The immortal future.
    @inlinable init(never: Void) {
        state = .never
        super.init(storedOutcome: .cancelled)
    }

    deinit {
        #if DEBUG
        LockChecks.checkNotFreedUnderStripe("a future")
        #endif
        if flag(StorageFlags.tracked) { trackedFutureFreed() }
        // A pending future's callbacks may hold the next future of a long chain, a link holds the
        // next link, a split future's forward the next split-off state, and the closures in the
        // extras box (producer cancellation handlers, a deferred future's work, a join's progress
        // source) the futures they were made for, such as a join's members: release them in a
        // loop, not by recursion.
        let extrasMayHoldChain = rare?.mayHoldChain ?? false
        guard mayHoldChain || extrasMayHoldChain else { return }
        DeferredRelease.release {
            var next: ConsumerSource? = nil  // the link, or the upstream of a pending future
            swap(&next, &upstream)
            var box: AnyObject? = nil  // the rare state's box, with what it holds
            if extrasMayHoldChain { box = rare.take() }
            // Without generic types for a link (it has no callbacks, and is the usual case here):
            // boxing a tuple that holds a `CallbackList<Value>` asks the runtime for its metadata.
            if phase == .linked { return (next, box) as Any }
            var taken = CallbackList<Value>()
            swap(&taken, &callbacks)
            return (taken, next, box) as Any
        }
    }

    /// Whether a completion coming from `origin` may complete this pending future (caller holds
    /// the lock). `origin` is alive (the caller holds it), so if the recorded completer is alive
    /// too and has the same identity, it is `origin`.
    @inlinable @inline(__always)
    final func accepts(_ origin: AnyObject) -> Bool {
        // Inline and without a retain on the usual path: no rare state, so no completer.
        guard rare != nil else { return origin === self }
        return acceptsThroughCompleter(origin)
    }

    /// ``accepts(_:)`` for a future with rare state, out of line.
    @usableFromInline @inline(never)
    final func acceptsThroughCompleter(_ origin: AnyObject) -> Bool {
        guard let rare, let completer = rare.completer else { return origin === self }
        return completer == ObjectIdentifier(origin) && rare.completerIsAlive
    }

    /// The extras box, created if needed (caller holds the lock).
    @inlinable final var ensureExtras: PendingExtras<Value> {
        if let extras { return extras }
        // A completed future's box would be replaced (and its late callbacks or forwards lost).
        precondition(phase == .pending, "gave a future that is not pending a pending future's rare state")
        let created = PendingExtras<Value>()
        extras = created
        return created
    }

    /// The rare state of this completed future, created if needed (caller holds the lock).
    @inlinable final var ensureCompletedExtras: CompletedExtras<Value> {
        if let completedExtras { return completedExtras }
        assert(rare == nil, "a completed future kept a pending future's rare state")
        let created = CompletedExtras<Value>()
        rare = created
        return created
    }
}

/// The bits of ``FutureStorage/flags``.
@usableFromInline
enum StorageFlags {
    // Computed, not stored: constants that fold away, with no lazy-global check.
    @inlinable static var immortal: UInt8 { 1 }
    @inlinable static var consumesUpstream: UInt8 { 2 }
    @inlinable static var combinesProgress: UInt8 { 4 }
    /// The future's producer ended it as a withdrawal would (cancelled, or failed with `.cycle`):
    /// it has used its right to complete, and a later `complete(with:)` of its is refused.
    @inlinable static var producerEnded: UInt8 { 8 }
    /// What this pending future waits on may still change other than by a split: it derives from
    /// its source by a transform that may adopt a future later (`flatMap` and its kin), or it
    /// merged such a future and took over its source. Cycle detection compresses no path through it
    /// (see ``CycleDetection``).
    @inlinable static var waitMayChange: UInt8 { 16 }
    /// Diagnostics track this future (see ``Tracking``): its deinit tells them.
    @inlinable static var tracked: UInt8 { 32 }
    /// Someone registered on this future, adopted it or read its outcome: a failure freed without
    /// it went unobserved.
    @inlinable static var observed: UInt8 { 64 }
    /// Something other than its source may complete this derived future (a timeout's timer): it
    /// does not become immortal when it registers on an immortal source, and holds it strongly.
    @inlinable static var completesOtherwise: UInt8 { 128 }
}
