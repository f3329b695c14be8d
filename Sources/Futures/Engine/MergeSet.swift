import CFuturesAtomicGlobals

/// What exists only because futures merge: a future's merge set, the futures merged into it by
/// depth (itself at 0), with what belongs to each level, and the types it is made of.
///
/// A set changes by two edges, each one function here, called by the storage under the locks of
/// both futures involved (inside the adoption gate): ``MergeSet/absorb(_:callbacks:at:key:)`` when an
/// adopter merges a target, and ``MergeSet/split(at:key:own:)`` when a registrant arrives on a
/// merged level. ``MergeSet/_checkInvariants()`` states the rules that hold between them; debug
/// builds check them after every transition of the future. Neither frees anything: what a merge
/// or a split lets go of stays in an extras box or a buffer released after the locks.
@usableFromInline
struct MergeSet<Value: Sendable> {
    /// The depth of the deepest future merged into this one (0: none).
    @usableFromInline var depth: Int32 = 0
    /// The producers' `onCancel` handlers, each with the depth of the future whose producer added
    /// it, in order of depth (each depth's in the order they were added).
    @usableFromInline var cancelHandlers = CancelHandlers()
    /// Observers (callbacks nobody takes off again: `whenFailure` and the like) that were
    /// registered on futures before they were merged into this one, each with the depth of its
    /// future, in order of depth. A future whose only registrants are such observers still merges,
    /// so a recursive loop that observes every level keeps one future, not one per level; they run
    /// when this one completes, the deepest first, as they would have had each level waited on the
    /// next; a split hands those of its depths to the new future.
    @usableFromInline var observers: MergedObservers<Value>?
    /// Where the futures merged into this one keep their state since a consumer arrived on one of
    /// them (see ``FutureStorage/split()`` and ``MergeForwards``); kept after completion.
    @usableFromInline var forward: MergeForwards<Value>?
    /// The key of this future's registration on its `upstream`, when it is not this future's own:
    /// after a merge the adopter consumes the target's source through the target's registration.
    @usableFromInline var upstreamKey: RegistrationKey?

    @usableFromInline init() {}

    /// Whether freeing the set may free a chain of futures (see ``FutureStorage``'s deinit).
    @inlinable var mayHoldChain: Bool { forward != nil || !cancelHandlers.isEmpty || observers != nil }

    /// How many observers the set carries.
    @inlinable @inline(__always) var observerCount: Int { observers?.count ?? 0 }

    /// Takes in the set of a target (the one in its extras box, `target`; none if it has no box),
    /// merged `depth` below this one: its levels, their handlers and observers (with `callbacks`,
    /// the observers registered on the target itself, which it gives up), its forwards and its
    /// registration (`key`, the target's own, if it borrowed none). Everything the target had
    /// moves `depth` deeper; the target's box keeps its copies, released with it after the locks.
    /// This set has no forward: a split set's root refuses every adoption.
    ///
    /// Always inlined into the storage's merge: the merge runs unspecialised in clients, where
    /// calling a method of a generic value type would look up the type's metadata at every call.
    @inline(__always)
    mutating func absorb(_ target: PendingExtras<Value>?, callbacks: inout CallbackList<Value>, at depth: Int32, key: RegistrationKey) {
        precondition(forward == nil, "merged into a split set")
        assert(depth == self.depth + 1, "a merge below the next level of the set")
        if let target {
            // Moved, not copied, whichever side is longer (see ``LevelDeque/absorb(_:shiftedBy:)``).
            cancelHandlers.absorb(&target.merge.cancelHandlers, shiftedBy: depth)
            if let targetForward = target.merge.forward {
                forward = targetForward.shifted(by: depth)
                // A walk that went through the target's table must not reuse what it saw there.
                swift_futures_forward_generation_raise_release()
            }
        }
        if !callbacks.isEmpty || target?.merge.observers != nil {
            var carried = observers.take() ?? MergedObservers()
            carried.append(contentsOf: callbacks, depth: depth)
            callbacks = CallbackList()
            if let target, var theirs = target.merge.observers.take() {
                // Moved, not copied, whichever side is longer: a set built from the bottom up, each
                // new future merging the set made so far, copies only the new level's observers.
                // What is left of the target's deque stays in its box, released after the locks.
                carried.absorb(&theirs, shiftedBy: depth)
                target.merge.observers = theirs
            }
            observers = carried
        }
        self.depth = depth + (target?.merge.depth ?? 0)
        upstreamKey = target?.merge.upstreamKey ?? key
        _checkInvariants()
    }

    /// Splits off the levels from `depth` down: returns their set, counted from `depth` (the new
    /// future's), with the registration this one borrowed (`key`, this future's own, if none); the
    /// observers registered on the level at `depth` itself are appended to `own`, the new future's
    /// callbacks. This set keeps the levels above; the caller records the forward to the new future.
    /// (Always inlined into the storage's split, as ``absorb(_:callbacks:at:key:)`` is.)
    @inline(__always)
    mutating func split(at depth: Int32, key: RegistrationKey, own: inout CallbackList<Value>) -> MergeSet<Value> {
        precondition(depth > 0 && depth <= self.depth, "split below the deepest level of a set")
        var below = MergeSet<Value>()
        below.cancelHandlers = cancelHandlers.cut(at: depth)
        if observers != nil {
            var cut = observers!.cut(at: depth)
            for entry in cut.takeDepthZero() { own.append(entry) }
            below.observers = cut.isEmpty ? nil : cut
        }
        // The new future holds the depths from `depth` down to this one's shallowest threshold, if
        // it has one: the deeper ones stay where this one's table sends them, and the table stays
        // here (see ``MergeForwards``).
        // (Not `forward.map`: a generic call, which unspecialised looks up the optional's metadata.)
        if let forward { below.depth = forward.shallowest - 1 - depth } else { below.depth = self.depth - depth }
        below.upstreamKey = upstreamKey ?? key
        self.depth = depth - 1
        below._checkInvariants()
        return below
    }

    /// In debug builds, traps unless the set keeps its rules: its depth is not negative; every
    /// handler is at a level of the set; the observers are at levels 1 through `depth` (0 is the
    /// future's own callbacks), in order; every forward's threshold lies below the set's levels.
    @inlinable @inline(__always)
    func _checkInvariants() {
        #if DEBUG
        _checkInvariantsNow()
        #endif
    }

    @usableFromInline
    func _checkInvariantsNow() {
        precondition(depth >= 0, "a merge set deeper than Int32")
        cancelHandlers._checkInvariants()
        if let first = cancelHandlers.first, let last = cancelHandlers.last {
            precondition(first.depth >= 0 && last.depth <= depth, "a cancel handler at no level of its set")
        }
        if let observers {
            observers._checkInvariants()
            if let first = observers.first, let last = observers.last {
                precondition(first.depth >= 1 && last.depth <= depth, "an observer at no merged level of its set")
            }
        }
        if let forward { precondition(forward.shallowest > depth, "a forward to levels the set still holds") }
    }
}

/// An observer carried by a merge set, with the depth of the future it was registered on (see
/// ``MergeSet/observers``). The depth comes second, so that it fills the padding after the entry:
/// 32 bytes an observer, not 40, in a loop that observes every level.
@usableFromInline
struct MergedObserver<Value: Sendable>: Leveled {
    @usableFromInline let entry: CallbackEntry<Value>
    @usableFromInline var depth: Int32

    @inlinable init(entry: CallbackEntry<Value>, depth: Int32) {
        self.entry = entry
        self.depth = depth
    }

    /// An entry whose closure captures nothing: no allocation.
    @inlinable static var filler: MergedObserver { MergedObserver(entry: .success { _ in }, depth: 0) }
}

/// The observers a merge set carries, in order of depth.
@usableFromInline
typealias MergedObservers<Value: Sendable> = LevelDeque<MergedObserver<Value>>

extension LevelDeque {
    /// Appends `entry` at `depth`, as deep as the deepest observer here or deeper.
    @inlinable
    mutating func append<Value>(_ entry: CallbackEntry<Value>, depth: Int32) where Element == MergedObserver<Value> {
        append(MergedObserver(entry: entry, depth: depth))
    }

    /// Appends the entries of `list` (not its holes) at `depth`.
    @inlinable
    mutating func append<Value>(contentsOf list: CallbackList<Value>, depth: Int32) where Element == MergedObserver<Value> {
        guard let first = list.first else { return }
        append(first, depth: depth)
        guard let rest = list.rest else { return }
        for entry in rest where entry != nil { append(entry!, depth: depth) }
    }

    /// Runs the observers with `outcome`, the deepest first, each depth's in the order they were
    /// registered: the order in which they would have run had each level waited on the next.
    @inlinable
    func run<Value>(with outcome: Outcome<Value>) where Element == MergedObserver<Value> {
        var end = buffer.endIndex
        while end > head {
            var start = end - 1
            let depth = buffer[start].depth
            while start > head, buffer[start - 1].depth == depth { start -= 1 }
            for index in start..<end { buffer[index].entry.run(with: outcome) }
            end = start
        }
    }

    /// Takes off the observers of the shallowest depth if it is 0 (the new future's own, after a
    /// split) and returns their entries.
    mutating func takeDepthZero<Value>() -> [CallbackEntry<Value>] where Element == MergedObserver<Value> {
        var taken: [CallbackEntry<Value>] = []
        while head < buffer.count, buffer[head].depth + base == 0 {
            taken.append(buffer[head].entry)
            buffer[head] = .filler  // the entry is in `taken`: nothing is released
            head += 1
        }
        return taken
    }
}

/// The producers' cancellation handlers of a merge set.
@usableFromInline
typealias CancelHandlers = LevelDeque<CancelHandler>

extension LevelDeque where Element == CancelHandler {
    /// Adds a handler at `depth`, after those of its depth (and before the deeper ones).
    @usableFromInline
    mutating func add(depth: Int32, run: @escaping @Sendable () -> Void) {
        insert(CancelHandler(depth: depth, run: run))
    }
}

/// What a merge set keeps per level, in order of depth (each depth's in the order added), each
/// depth stored less `base`: the producers' cancellation handlers, the observers it carries.
///
/// A deque: a merge moves the longer side's buffer and copies the shorter into it, at its end or
/// before its head, and a split copies the smaller part, so building or splitting a set level by
/// level, in any order, costs constant amortised time per level however many elements it holds;
/// and with depths stored less a base, a shift rewrites no element. Nothing here releases the
/// last reference to an element: every one removed from a buffer is in another buffer (the
/// copies), and the slots emptied hold a ``Leveled/filler``, which holds nothing. Buffers it lets
/// go of are released with the extras box that holds the deque, after its future's lock.
@usableFromInline
struct LevelDeque<Element: Leveled>: Sequence {
    /// The elements at `buffer[head...]`; the slots before `head` hold fillers.
    @usableFromInline var buffer: [Element] = []
    /// `head`, in 32 bits: with `base` it fills one word, so the deque costs one word more than an
    /// array would.
    @usableFromInline var storedHead: Int32 = 0
    @usableFromInline var base: Int32 = 0

    @inlinable var head: Int {
        get { Int(storedHead) }
        set { storedHead = Int32(newValue) }
    }

    @inlinable init() {}

    @inlinable var isEmpty: Bool { head == buffer.count }
    @inlinable var count: Int { buffer.count - head }

    /// The element with the smallest depth, its depth absolute.
    var first: Element? { isEmpty ? nil : absolute(buffer[head]) }
    /// The element with the largest depth, its depth absolute.
    var last: Element? { isEmpty ? nil : absolute(buffer[buffer.count - 1]) }

    @inlinable func absolute(_ element: Element) -> Element {
        var element = element
        element.depth += base
        return element
    }

    @usableFromInline
    struct Iterator: IteratorProtocol {
        @usableFromInline let deque: LevelDeque
        @usableFromInline var index: Int

        @inlinable init(deque: LevelDeque, index: Int) {
            self.deque = deque
            self.index = index
        }

        @inlinable mutating func next() -> Element? {
            guard index < deque.buffer.count else { return nil }
            defer { index += 1 }
            return deque.absolute(deque.buffer[index])
        }
    }

    /// The elements in order, their depths absolute.
    @inlinable func makeIterator() -> Iterator { Iterator(deque: self, index: head) }

    /// Appends `element` (its depth absolute), as deep as the deepest element here or deeper.
    @inlinable
    mutating func append(_ element: Element) {
        var stored = element
        stored.depth -= base
        assert(isEmpty || buffer[buffer.count - 1].depth <= stored.depth, "appended out of the order of depths")
        buffer.append(stored)
    }

    /// Inserts `element` (its depth absolute) after the elements of its depth and before the
    /// deeper ones.
    @usableFromInline
    mutating func insert(_ element: Element) {
        var stored = element
        stored.depth -= base
        if isEmpty || buffer[buffer.count - 1].depth <= stored.depth {
            buffer.append(stored)
            return
        }
        if stored.depth < buffer[head].depth {
            // Before every element (a producer adding its handler after its level merged into a
            // set built from the bottom up, or armed from the deepest level up): the slot before
            // the head, in constant amortised time.
            var single = LevelDeque()
            single.append(element)
            prepend(single)
            return
        }
        // The first element deeper than `depth`: the shorter side moves by one slot.
        var low = head, high = buffer.count - 1
        while low < high {
            let middle = (low + high) / 2
            if buffer[middle].depth > stored.depth { high = middle } else { low = middle + 1 }
        }
        if head > 0 && low - head < buffer.count - low {
            // The filler before the head moves up to `low - 1`, the elements before it down.
            for index in head..<low { buffer.swapAt(index - 1, index) }
            head -= 1
            buffer[low - 1] = stored
        } else {
            buffer.insert(stored, at: low)
        }
    }

    /// Takes in `other`'s elements, `shift` deeper than they were there (each as deep as every
    /// element here or deeper), and leaves `other` empty: the longer side's buffer is kept and the
    /// shorter side's elements are copied into it, at its end or before its head.
    @inline(__always)
    mutating func absorb(_ other: inout LevelDeque, shiftedBy shift: Int32) {
        if other.isEmpty { return }
        if other.count <= count {
            // (No `reserveCapacity`: reserving the exact count would reallocate at every merge.)
            for element in other {
                var moved = element
                moved.depth += shift
                append(moved)
            }
            other = LevelDeque()
            return
        }
        // The other side is longer: its buffer becomes this one's, these go before its head.
        var taken = LevelDeque()
        swap(&taken, &other)
        taken.base += shift
        taken.prepend(self)
        self = taken
    }

    /// Puts `front`'s elements (each as shallow as every element here or shallower) before the
    /// head, making room at the front (as much again as the deque holds) when there is not enough.
    mutating func prepend(_ front: LevelDeque) {
        let needed = front.count
        if needed == 0 { return }
        if head < needed {
            let room = needed + count
            var grown: [Element] = []
            grown.reserveCapacity(room + count)
            for _ in 0..<room { grown.append(Element.filler) }
            grown.append(contentsOf: buffer[head...])
            buffer = grown
            head = room
        }
        var index = head - needed
        for element in front {
            var stored = element
            stored.depth -= base
            buffer[index] = stored
            index += 1
        }
        head -= needed
    }

    /// Takes off the elements of the depths from `depth` down and returns them, their depths
    /// counted from `depth`; copies only the smaller part.
    mutating func cut(at depth: Int32) -> LevelDeque {
        var low = head, high = buffer.count
        while low < high {
            let middle = low + (high - low) / 2
            if buffer[middle].depth + base >= depth { high = middle } else { low = middle + 1 }
        }
        var below = LevelDeque()
        if low == buffer.count { return below }
        if low - head < buffer.count - low {
            // The part above is the smaller: it is copied, and the buffer goes below.
            var above = LevelDeque()
            above.base = base
            above.buffer.reserveCapacity(low - head)
            above.buffer.append(contentsOf: buffer[head..<low])
            for index in head..<low { buffer[index] = Element.filler }
            below.buffer = buffer
            below.head = low
            below.base = base - depth
            self = above
        } else {
            below.base = base - depth
            below.buffer.append(contentsOf: buffer[low...])
            buffer.removeSubrange(low...)
        }
        return below
    }

    /// In debug builds, traps unless the head lies in the buffer and the depths are in order (past
    /// 64 elements only the ends are checked: a full check per transition would make a long loop
    /// quadratic in debug builds).
    func _checkInvariants() {
        #if DEBUG
        precondition(head >= 0 && head <= buffer.count, "a level deque's head outside its buffer")
        // Plain loops over indices: the generic sequence adaptors' metadata is looked up on every
        // call, and under ThreadSanitizer each lookup takes a lock of the Swift runtime.
        let count = buffer.count - head
        func inOrder(_ first: Int, _ last: Int) -> Bool {
            var index = first
            while index < last {
                if buffer[index].depth > buffer[index + 1].depth { return false }
                index += 1
            }
            return true
        }
        let ordered =
            count <= 64
            ? inOrder(head, buffer.count - 1)
            : inOrder(head, head + 1) && buffer[head + 1].depth <= buffer[buffer.count - 2].depth
                && inOrder(buffer.count - 2, buffer.count - 1)
        precondition(ordered, "elements out of the order of their levels")
        #endif
    }
}

/// An element of a ``LevelDeque``: it belongs to a level of a merge set.
@usableFromInline
protocol Leveled {
    /// The depth of the element's level (less its deque's base, in the deque).
    var depth: Int32 { get set }
    /// What fills the slots of a buffer that hold no element: it holds no reference and costs no
    /// allocation.
    static var filler: Self { get }
}

/// A producer cancellation handler, with the depth (below the future that holds the state) of the
/// future whose producer added it.
@usableFromInline
struct CancelHandler: Leveled {
    @usableFromInline var depth: Int32
    @usableFromInline let run: @Sendable () -> Void

    @inlinable init(depth: Int32, run: @escaping @Sendable () -> Void) {
        self.depth = depth
        self.run = run
    }

    /// A closure that captures nothing: no allocation.
    @inlinable static var filler: CancelHandler { CancelHandler(depth: 0, run: {}) }
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
///   exclusive adoption gate: the new future goes into the owner's table too, at the walk's depth there, if
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
    // Every field is guarded by the stripe lock of the future that holds the table (splits happen
    // with the adoption gate held exclusively too), like that future's own fields, so the runtime
    // exclusivity check is turned off here too: it cost a walk more than its binary search.

    /// Splits of the owner itself, deepest first (one array of pairs: a table starts with one
    /// allocation, not one per field).
    @exclusivity(unchecked) @usableFromInline var shallow: [ForwardEntry]
    /// Splits recorded from further down, shallowest first.
    @exclusivity(unchecked) @usableFromInline var deep: [ForwardEntry] = []
    /// What every stored threshold is less: a future that adopts the owner by merging takes the
    /// table over, deeper by the depth it merged at, without rewriting a threshold (a chain built
    /// from the bottom up, split at every level as it grows, would otherwise copy the whole table
    /// at every merge).
    @exclusivity(unchecked) @usableFromInline var shift: Int32 = 0

    @usableFromInline init(depth: Int32, target: FutureStorage<Value>) {
        shallow = [ForwardEntry(depth: depth, target: target)]
    }

    /// Takes the table over `shift` deeper: the owner merged into a future that adopted it, and
    /// nothing else holds the table (a merged future gives up its extras box).
    @usableFromInline func shifted(by shift: Int32) -> MergeForwards<Value> {
        self.shift += shift
        return self
    }

    /// The shallowest threshold.
    @inlinable var shallowest: Int32 { (shallow.last ?? deep[0]).depth + shift }
    /// The deepest threshold.
    @inlinable var deepest: Int32 { (deep.last ?? shallow[0]).depth + shift }

    /// The entry a walk at `depth` below the owner follows: its target, the walk's depth below it,
    /// and the next deeper threshold (`Int32.max` if it is the deepest entry), where the entry's
    /// range ends; `nil` if `depth` is shallower than every threshold.
    @inlinable
    func entry(at absolute: Int32) -> (target: FutureStorage<Value>, depth: Int32, next: Int32)? {
        let depth = absolute - shift  // the stored thresholds' scale
        if let first = deep.first, first.depth <= depth {
            // The last threshold not above `depth` among the deep ones, which ascend.
            var low = 0, high = deep.count - 1
            while low < high {
                let middle = (low + high + 1) / 2
                if deep[middle].depth <= depth { low = middle } else { high = middle - 1 }
            }
            let target = unsafeDowncast(deep[low].target, to: FutureStorage<Value>.self)
            let next = low + 1 < deep.count ? deep[low + 1].depth + shift : Int32.max
            return (target, depth - deep[low].depth, next)
        }
        guard let shallowest = shallow.last, shallowest.depth <= depth else { return nil }
        // The first threshold not above `depth` among the shallow ones, which descend.
        var low = 0, high = shallow.count - 1
        while low < high {
            let middle = (low + high) / 2
            if shallow[middle].depth <= depth { high = middle } else { low = middle + 1 }
        }
        let target = unsafeDowncast(shallow[low].target, to: FutureStorage<Value>.self)
        let next = low > 0 ? shallow[low - 1].depth + shift : deep.first.map { $0.depth + shift } ?? Int32.max
        return (target, depth - shallow[low].depth, next)
    }

    /// Records a split of the owner at `depth`, shallower than every threshold.
    @usableFromInline
    func addSplit(at depth: Int32, target: FutureStorage<Value>) {
        precondition(depth < shallowest, "a split below a threshold of the future that splits")
        shallow.append(ForwardEntry(depth: depth - shift, target: target))
        _checkInvariants()
    }

    /// Records that `target`, split off further down, holds the state from `depth` on, up to the
    /// next threshold (the caller checked that); ignored if the table has that threshold already.
    @usableFromInline
    func addSplitBelow(at absolute: Int32, target: FutureStorage<Value>) {
        defer { _checkInvariants() }
        let depth = absolute - shift  // the stored thresholds' scale
        if absolute > deepest {
            deep.append(ForwardEntry(depth: depth, target: target))
            return
        }
        guard absolute > shallowest else { return }
        if let first = deep.first, depth >= first.depth {
            // The first deep threshold not below `depth` (there is one: `depth` is not the deepest).
            var low = 0, high = deep.count - 1
            while low < high {
                let middle = (low + high) / 2
                if deep[middle].depth >= depth { high = middle } else { low = middle + 1 }
            }
            guard deep[low].depth != depth else { return }
            deep.insert(ForwardEntry(depth: depth, target: target), at: low)
        } else {
            // The first shallow threshold not above `depth` (there is one: the shallowest).
            var low = 0, high = shallow.count - 1
            while low < high {
                let middle = (low + high) / 2
                if shallow[middle].depth <= depth { high = middle } else { low = middle + 1 }
            }
            guard shallow[low].depth != depth else { return }
            shallow.insert(ForwardEntry(depth: depth, target: target), at: low)
        }
    }

    /// In debug builds, traps unless the thresholds are in order: the shallow ones descend, the
    /// deep ones ascend, every shallow one is above every deep one, and there is at least one. (A
    /// table longer than 64 entries has only its ends checked, each change adding at an end: a
    /// full check per split would make splitting quadratic in debug builds.)
    @inlinable @inline(__always)
    func _checkInvariants() {
        #if DEBUG
        precondition(!shallow.isEmpty || !deep.isEmpty, "an empty forward table")
        // A plain loop over indices, as in `LevelDeque._checkInvariants()`.
        func ordered(_ entries: [ForwardEntry], _ before: (Int32, Int32) -> Bool) -> Bool {
            var index = entries.count <= 64 ? 0 : entries.count - 2
            while index < entries.count - 1 {
                if !before(entries[index].depth, entries[index + 1].depth) { return false }
                index += 1
            }
            return true
        }
        precondition(ordered(shallow, >), "shallow thresholds out of order")
        precondition(ordered(deep, <), "deep thresholds out of order")
        if let shallow = shallow.first, let deep = deep.first { precondition(shallow.depth < deep.depth, "a shallow threshold below a deep one") }
        precondition(shallowest > 0, "a threshold at the owner's own depth")
        #endif
    }
}

/// An entry of a ``MergeForwards`` table: a threshold (less the table's `shift`) and the future
/// that holds the state from there. Not nested in the generic table: a nested type is generic too,
/// and the walk, which runs unspecialised, would look up the metadata of an array of it.
@usableFromInline
struct ForwardEntry {
    @usableFromInline var depth: Int32
    @usableFromInline var target: AnyObject

    @inlinable init(depth: Int32, target: AnyObject) {
        self.depth = depth
        self.target = target
    }
}

/// The forwards a walk followed after its last link, for a split inside the exclusive adoption
/// gate to record where it put the state it split off: the future where the walk took the first
/// (`head`), its depth there, where that entry's range ends (`headEnd`, in the head's depths;
/// `Int64.max` for the deepest entry), how deep every entry taken since still reaches (`reach`,
/// the same way), and how many it took. Not generic: the walk runs unspecialised.
///
/// The head is not retained. The walk's start, which its caller holds, holds it through links
/// (a link is strong, and path compression never skips a future that holds a table), for as long
/// as it holds a table: until it merges into another future, which raises the count of
/// ``swift_futures_forward_generation_load_acquire()``. So the head is alive wherever the path is
/// used, inside the gate held exclusively with that count unchanged since the walk began; and a
/// path dropped under a stripe lock never frees a future.
@usableFromInline
struct ForwardPath {
    @usableFromInline unowned(unsafe) var head: AnyObject? = nil
    @usableFromInline var headDepth: Int32 = 0
    @usableFromInline var headEnd = Int64.max
    @usableFromInline var reach = Int64.max
    @usableFromInline var forwards = 0

    @usableFromInline init() {}
}

