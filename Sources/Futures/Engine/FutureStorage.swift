/// The lifecycle of a future.
///
/// ```
///            complete / cancel           drain loop ran the last callback
/// pending ─────────────────▶ completed ◀──────────────────────────────┐
///    │                       (draining) ──────────────────────────────┘ (idle; a registration on an
///    │ adopted, with no consumer of its own, by another future           idle completed future runs
///    └──────────────▶ linked: every call is forwarded to `link`          at once, or, inside a drain
///                                                                        loop, starts draining again)
/// never: immortal; stores no callbacks, cannot complete or be cancelled.
/// ```
///
/// Every edge, and the one function that performs it, is listed in `Transitions.swift`.
@usableFromInline
enum Phase: UInt8 {
    case pending, completed, linked, never
}

/// The rarely used parts of a pending future, allocated on first use.
@usableFromInline
final class Extras<Value: Sendable> {
    // Every field is guarded by the stripe lock of the future that owns the box (or touched in
    // that future's deinit), like the future's own fields, so the runtime exclusivity check is
    // turned off here too.

    /// Who may complete the future: `nil` for itself (its promise or internal completer), else the
    /// identity of the object it handed that right to (the future it adopted, a timer), which must
    /// also still be alive (`completerObject`): an identity alone could be reused by a new object at
    /// the same address. `Extras.nobody` means nothing may complete it (it adopted `never`).
    /// Cancellation is always allowed.
    @exclusivity(unchecked) @usableFromInline var completer: ObjectIdentifier?
    @exclusivity(unchecked) @usableFromInline weak var completerObject: AnyObject?

    /// The completer of a future that adopted `never`: a metatype's identity, which no heap object
    /// (and so no origin) can ever have.
    @usableFromInline static var nobody: ObjectIdentifier { ObjectIdentifier(Never.self) }

    /// Hands the right to complete to `object` (caller holds the owner's lock).
    @inlinable
    func handCompletion(to object: AnyObject) {
        completer = ObjectIdentifier(object)
        completerObject = object
    }
    /// The producers' `onCancel` handlers, each with the depth of the future whose producer added
    /// it (see ``MergeForwards``).
    @exclusivity(unchecked) @usableFromInline var cancelHandlers: [CancelHandler] = []
    /// Callbacks registered on a completed future while its drain runs (see
    /// ``FutureStorage/drain()``); the drain owner takes them after its current batch.
    @exclusivity(unchecked) @usableFromInline var lateCallbacks = CallbackList<Value>()
    /// The index of a long callback list, for removals (see ``CallbackList/remove(_:index:)``).
    @exclusivity(unchecked) @usableFromInline var registrationIndex: RegistrationIndex?
    /// The key of this future's registration on its `upstream`, when it is not this future's own:
    /// after a merge the adopter consumes the target's source through the target's registration.
    @exclusivity(unchecked) @usableFromInline var upstreamKey: RegistrationKey?
    /// The future this one waits for after adopting it without merging, or, compressed by cycle
    /// detection, a future further along the same waits (see ``CycleDetection``).
    @exclusivity(unchecked) @usableFromInline weak var waitingOn: (any CycleNode)?
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
    /// Where the futures merged into this one keep their state since a consumer arrived on one of
    /// them (see ``FutureStorage/split()`` and ``MergeForwards``); kept after completion.
    @exclusivity(unchecked) @usableFromInline var forward: MergeForwards<Value>?
    /// The depth of the deepest future merged into this one (0: none).
    @exclusivity(unchecked) @usableFromInline var depth: Int32 = 0
    /// Observers (callbacks nobody takes off again: `whenFailure` and the like) that were
    /// registered on futures before they were merged into this one, each with the depth of its
    /// future, in order of depth. A future whose only registrants are such observers still merges,
    /// so a recursive loop that observes every level keeps one future, not one per level; they run
    /// when this one completes, the deepest first, as they would have had each level waited on the
    /// next; a split hands those of its depths to the new future.
    @exclusivity(unchecked) @usableFromInline var mergedObservers: MergedObservers<Value>?

    @usableFromInline init() {}

    /// Whether freeing this box may free a chain of futures (see ``FutureStorage``'s deinit).
    @inlinable var mayHoldChain: Bool {
        forward != nil || !cancelHandlers.isEmpty || onDemand != nil || onProgressDemand != nil
            || completionToken != nil || mergedObservers != nil
    }
}

/// An observer carried by a merge set, with the depth of the future it was registered on, less
/// its list's `base` (see ``Extras/mergedObservers``).
@usableFromInline
struct MergedObserver<Value: Sendable> {
    @usableFromInline let depth: Int32
    @usableFromInline let entry: CallbackEntry<Value>

    @inlinable init(depth: Int32, entry: CallbackEntry<Value>) {
        self.depth = depth
        self.entry = entry
    }
}

/// The observers a merge set carries, in order of depth. Each depth is stored less `base`, so that
/// a split hands the larger part over without rewriting a depth, and copies only the smaller one:
/// splitting an observed set level by level, in any order, costs what it costs unobserved.
///
/// The storage is a slice: entries cut off its ends stay in the buffer until the buffer is freed,
/// which happens with the extras box that holds it, after its future's lock (never under it, as a
/// closure's last reference may be among them).
@usableFromInline
struct MergedObservers<Value: Sendable> {
    @usableFromInline var base: Int32 = 0
    @usableFromInline var items: ArraySlice<MergedObserver<Value>> = []

    @usableFromInline init() {}

    var count: Int { items.count }

    mutating func append(_ entry: CallbackEntry<Value>, depth: Int32) {
        items.append(MergedObserver(depth: depth - base, entry: entry))
    }

    /// Each observer and its depth, in order.
    var all: [(depth: Int32, entry: CallbackEntry<Value>)] { items.map { ($0.depth + base, $0.entry) } }

    /// Takes off the observers of the depths from `depth` down and returns them, their depths
    /// counted from `depth`.
    mutating func cut(at depth: Int32) -> MergedObservers {
        var low = items.startIndex, high = items.endIndex
        while low < high {
            let middle = low + (high - low) / 2
            if items[middle].depth + base >= depth { high = middle } else { low = middle + 1 }
        }
        var below = MergedObservers()
        below.base = base - depth
        if low - items.startIndex < items.endIndex - low {
            // The part above is the smaller: it is copied, and the buffer goes below.
            below.items = items[low...]
            items = ArraySlice(Array(items[..<low]))
        } else {
            below.items = ArraySlice(Array(items[low...]))
            items = items[..<low]
        }
        return below
    }

    /// Takes off the observers of the first depth if it is 0.
    mutating func takeDepthZero() -> [CallbackEntry<Value>] {
        var taken: [CallbackEntry<Value>] = []
        while let first = items.first, first.depth + base == 0 {
            taken.append(first.entry)
            items = items.dropFirst()
        }
        return taken
    }
}

/// A producer cancellation handler, with the depth (below the future that holds the state) of the
/// future whose producer added it.
@usableFromInline
struct CancelHandler {
    @usableFromInline var depth: Int32
    @usableFromInline let run: @Sendable () -> Void

    @inlinable init(depth: Int32, run: @escaping @Sendable () -> Void) {
        self.depth = depth
        self.run = run
    }
}

/// Where the futures merged into a split future keep their state: a table of thresholds, each with
/// the future that holds the state of the futures merged at that depth and deeper (relative to the
/// future holding this table), up to the next threshold. A walk that reaches the owner at depth `d`
/// continues at the entry with the largest threshold not above `d`, `d` minus that threshold below
/// it; a walk shallower than every threshold stays at the owner.
///
/// Entries come two ways:
/// - a split of the owner itself, at a depth shallower than every threshold it has (a walk only
///   stops at the owner above them), goes first (`shallow`, kept deepest first);
/// - a split further down, reached from the owner through its forwards by a walk under the
///   adoption lock: the new future goes into the owner's table too, at the walk's depth there, if
///   it holds everything from there to the end of the owner's entry the walk took (no entry on the
///   way ended sooner; see ``FutureStorage/recordSplit(_:path:at:depth:)``). Most of these are
///   deeper than every threshold (a set split from the top down) and go last (`deep`, kept
///   shallowest first); others go between two, moving the entries after them.
///
/// A walk from the owner then takes one forward, or a few, found by binary search, whatever order
/// the set was split in, instead of a walk through every earlier split. Targets are
/// stored as `AnyObject` (always `FutureStorage<Value>`): the walk runs unspecialised in clients,
/// and an array of a generic class would ask the runtime for its metadata.
@usableFromInline
final class MergeForwards<Value: Sendable> {
    @usableFromInline var shallowDepths: [Int32]
    @usableFromInline var shallowTargets: [AnyObject]
    @usableFromInline var deepDepths: [Int32] = []
    @usableFromInline var deepTargets: [AnyObject] = []

    @usableFromInline init(depth: Int32, target: FutureStorage<Value>) {
        shallowDepths = [depth]
        shallowTargets = [target]
    }

    /// The same table `shift` deeper (a future that adopts the owner by merging takes it over).
    @usableFromInline init(shifting other: MergeForwards<Value>, by shift: Int32) {
        shallowDepths = other.shallowDepths.map { $0 + shift }
        shallowTargets = other.shallowTargets
        deepDepths = other.deepDepths.map { $0 + shift }
        deepTargets = other.deepTargets
    }

    /// The shallowest threshold.
    @inlinable var shallowest: Int32 { shallowDepths.last ?? deepDepths[0] }
    /// The deepest threshold.
    @inlinable var deepest: Int32 { deepDepths.last ?? shallowDepths[0] }

    /// The entry a walk at `depth` below the owner follows: its target, the walk's depth below it,
    /// and the next deeper threshold (`Int32.max` if it is the deepest entry), where the entry's
    /// range ends; `nil` if `depth` is shallower than every threshold.
    @inlinable
    func entry(at depth: Int32) -> (target: FutureStorage<Value>, depth: Int32, next: Int32)? {
        if let first = deepDepths.first, first <= depth {
            // The last threshold not above `depth` among the deep ones, which ascend.
            var low = 0, high = deepDepths.count - 1
            while low < high {
                let middle = (low + high + 1) / 2
                if deepDepths[middle] <= depth { low = middle } else { high = middle - 1 }
            }
            let target = unsafeDowncast(deepTargets[low], to: FutureStorage<Value>.self)
            let next = low + 1 < deepDepths.count ? deepDepths[low + 1] : Int32.max
            return (target, depth - deepDepths[low], next)
        }
        guard let shallowest = shallowDepths.last, shallowest <= depth else { return nil }
        // The first threshold not above `depth` among the shallow ones, which descend.
        var low = 0, high = shallowDepths.count - 1
        while low < high {
            let middle = (low + high) / 2
            if shallowDepths[middle] <= depth { high = middle } else { low = middle + 1 }
        }
        let target = unsafeDowncast(shallowTargets[low], to: FutureStorage<Value>.self)
        let next = low > 0 ? shallowDepths[low - 1] : deepDepths.first ?? Int32.max
        return (target, depth - shallowDepths[low], next)
    }

    /// Records a split of the owner at `depth`, shallower than every threshold.
    @usableFromInline
    func addSplit(at depth: Int32, target: FutureStorage<Value>) {
        precondition(depth < shallowest, "a split below a threshold of the future that splits")
        shallowDepths.append(depth)
        shallowTargets.append(target)
        _checkInvariants()
    }

    /// Records that `target`, split off further down, holds the state from `depth` on, up to the
    /// next threshold (the caller checked that); ignored if the table has that threshold already.
    @usableFromInline
    func addSplitBelow(at depth: Int32, target: FutureStorage<Value>) {
        defer { _checkInvariants() }
        if depth > deepest {
            deepDepths.append(depth)
            deepTargets.append(target)
            return
        }
        guard depth > shallowest else { return }
        if let first = deepDepths.first, depth >= first {
            // The first deep threshold not below `depth` (there is one: `depth` is not the deepest).
            var low = 0, high = deepDepths.count - 1
            while low < high {
                let middle = (low + high) / 2
                if deepDepths[middle] >= depth { high = middle } else { low = middle + 1 }
            }
            guard deepDepths[low] != depth else { return }
            deepDepths.insert(depth, at: low)
            deepTargets.insert(target, at: low)
        } else {
            // The first shallow threshold not above `depth` (there is one: the shallowest).
            var low = 0, high = shallowDepths.count - 1
            while low < high {
                let middle = (low + high) / 2
                if shallowDepths[middle] <= depth { high = middle } else { low = middle + 1 }
            }
            guard shallowDepths[low] != depth else { return }
            shallowDepths.insert(depth, at: low)
            shallowTargets.insert(target, at: low)
        }
    }

    /// In debug builds, traps unless the thresholds are in order: the shallow ones descend, the
    /// deep ones ascend, every shallow one is above every deep one, and there is at least one. (A
    /// table longer than 64 entries has only its ends checked, each change adding at an end: a
    /// full check per split would make splitting quadratic in debug builds.)
    @inlinable @inline(__always)
    func _checkInvariants() {
        #if DEBUG
        precondition(shallowDepths.count == shallowTargets.count && deepDepths.count == deepTargets.count)
        precondition(!shallowDepths.isEmpty || !deepDepths.isEmpty, "an empty forward table")
        func ordered(_ depths: [Int32], _ before: (Int32, Int32) -> Bool) -> Bool {
            let checked = depths.count <= 64 ? depths[...] : depths.suffix(2)
            return zip(checked, checked.dropFirst()).allSatisfy { before($0, $1) }
        }
        precondition(ordered(shallowDepths, >), "shallow thresholds out of order")
        precondition(ordered(deepDepths, <), "deep thresholds out of order")
        if let shallow = shallowDepths.first, let deep = deepDepths.first { precondition(shallow < deep, "a shallow threshold below a deep one") }
        precondition(shallowest > 0, "a threshold at the owner's own depth")
        #endif
    }
}

/// The forwards a walk under the adoption lock followed after its last link: the future where it
/// took the first (`head`), its depth there, where that entry's range ends (`headEnd`, in the
/// head's depths; `Int64.max` for the deepest entry), how deep every entry taken since still
/// reaches (`reach`, the same way), and how many it took. Not generic: the walk runs unspecialised.
@usableFromInline
struct ForwardPath {
    @usableFromInline var head: AnyObject? = nil
    @usableFromInline var headDepth: Int32 = 0
    @usableFromInline var headEnd = Int64.max
    @usableFromInline var reach = Int64.max
    @usableFromInline var forwards = 0

    @usableFromInline init() {}
}

/// Holds a future's outcome. It is a generic base class whose parameter is the outcome's own type
/// (`Outcome<Value>`) so that freeing a future needs no type-metadata lookup: a deinit always runs
/// unspecialised, and destroying a field of type `Outcome<Value>` declared in `FutureStorage<Value>`
/// asks the runtime for `Outcome<Value>`'s metadata (a hash-table lookup, about 10% of a
/// `.immediate` map step), whereas a field whose type is a generic parameter finds its metadata in
/// the class's own metadata.
@usableFromInline
class OutcomeSlot<Stored> {
    /// The outcome, meaningful only once the future is completed (read it through
    /// ``FutureStorage/result``); guarded like every field of ``FutureStorage``.
    @exclusivity(unchecked) @usableFromInline final var storedOutcome: Stored

    @inlinable init(storedOutcome: Stored) { self.storedOutcome = storedOutcome }
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

    /// Whether `deinit` may have a chain of futures to release (pending callbacks or a link).
    @exclusivity(unchecked) @usableFromInline final var mayHoldChain = false
    @exclusivity(unchecked) @usableFromInline final var phase: Phase
    /// Whether a drain loop owns the callbacks of this completed future (then only that loop
    /// touches `callbacks`; see ``drain()``).
    @exclusivity(unchecked) @usableFromInline final var draining = false
    /// The bits of ``StorageFlags`` (`immortal`, `consumesUpstream`, ...), packed into the byte left
    /// free before `consumers` (separate fields cost the object 8 more bytes of padding).
    @exclusivity(unchecked) @usableFromInline final var flags: UInt8 = StorageFlags.consumesUpstream
    /// Futures derived from this one and tasks awaiting it (observers are not consumers). In a
    /// linked future, which has none, its depth below its `link` instead (``linkDepth``).
    @exclusivity(unchecked) @usableFromInline final var consumers: Int32 = 0
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
    /// once path compression skipped futures between them. Shares its slot with `consumers`.
    @inlinable final var linkDepth: Int32 {
        get {
            assert(phase == .linked, "only a linked future has a link depth")
            return consumers
        }
        set { consumers = newValue }
    }
    @exclusivity(unchecked) @usableFromInline final var extras: Extras<Value>?
    /// The future this one consumes (its source, or the future it waits on after adopting it), to
    /// withdraw from when this one is cancelled; released when this one completes.
    ///
    /// Strong, except behind a ``WeakSource`` when the source is `immortal`. The source holds its
    /// consumers through its callbacks, so this is a cycle while both are pending; it is garbage
    /// only if nothing can ever complete the source, which is exactly when the source is immortal
    /// (rooted in `never`). A promise-rooted chain always completes or breaks.
    ///
    /// In a linked future, the slot holds its `link` instead.
    @exclusivity(unchecked) @usableFromInline final var upstream: (any ConsumerSource)?
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

    /// A pending future.
    @inlinable init() {
        phase = .pending
        super.init(storedOutcome: .cancelled)
    }

    /// A completed future.
    @inlinable init(outcome: Outcome<Value>) {
        phase = .completed
        super.init(storedOutcome: outcome)
    }

    /// The immortal future.
    @inlinable init(never: Void) {
        phase = .never
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
        let extrasMayHoldChain = extras?.mayHoldChain ?? false
        guard mayHoldChain || extrasMayHoldChain else { return }
        DeferredRelease.release {
            var next: (any ConsumerSource)? = nil  // the link, or the upstream of a pending future
            swap(&next, &upstream)
            var box: AnyObject? = nil  // the extras box, with what it holds
            if extrasMayHoldChain {
                box = extras
                extras = nil
            }
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
    @inlinable
    final func accepts(_ origin: AnyObject) -> Bool {
        guard let extras, let completer = extras.completer else { return origin === self }
        return completer == ObjectIdentifier(origin) && extras.completerObject != nil
    }

    /// The extras box, created if needed (caller holds the lock).
    @inlinable final var ensureExtras: Extras<Value> {
        if let extras { return extras }
        let created = Extras<Value>()
        extras = created
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
}
