import CFuturesAtomicGlobals

/// Following merge links: a future merged into another (`linked`) forwards every call to the future
/// that now holds its state, found by walking its links (union-find, with path compression).
extension FutureStorage {
    /// Runs `transition` under the lock of the future that holds this one's state (this future, or
    /// the end of its merge links), then `action` after the lock, with that future and what
    /// `transition` returned. The one loop that follows links: `transition` never sees a linked
    /// future, and runs exactly once.
    ///
    /// The first attempt is made on `self` without copying the reference (a loop variable would
    /// cost a retain and a release per call); a merged future continues out of line.
    @inlinable @inline(__always)
    final func withState<Step, Result>(
        _ transition: (FutureStorage<Value>) -> Step,
        then action: (FutureStorage<Value>, Step) -> Result
    ) -> Result {
        // Locked and unlocked by hand: a closure around `transition` would not be inlined.
        let lock = LockTable.acquire(self)
        if phase != .linked {
            let step = transition(self)
            LockTable.release(lock)
            return action(self, step)
        }
        LockTable.release(lock)
        let root = lockedRoot().0
        // `root` stays alive past the unlock: its release must not fold into the critical region
        // (it cannot be the last reference while `self` links to it, but nothing needs that).
        return withExtendedLifetime(root) {
            let step = transition(root)
            LockTable.release(LockTable.lock(at: LockTable.index(of: root)))
            return action(root, step)
        }
    }

    /// The future that holds the state of this merged one, returned with its stripe lock held
    /// (see ``withState(_:then:)``), and this one's depth below it.
    @usableFromInline @inline(never)
    final func lockedRoot(startingAt start: Int32 = 0) -> (FutureStorage<Value>, depth: Int32) {
        var (node, depth) = rootAndDepth(startingAt: start)
        while true {
            let lock = LockTable.acquire(node)
            if node.nextInWalkLocked(depth: depth) == nil { return (node, depth) }
            LockTable.release(lock)
            (node, depth) = node.rootAndDepth(startingAt: depth)  // merged or split again meanwhile
        }
    }

    /// ``withState(_:then:)`` with nothing to do after the lock.
    @inlinable
    final func withState<Step>(_ transition: (FutureStorage<Value>) -> Step) -> Step {
        withState(transition, then: { _, step in step })
    }

    /// ``withState(_:then:)`` for a consumer's call (a registration, a progress read): if this
    /// future was merged into another that is still pending, the merge set is split first (see
    /// ``split(at:)``), so that the transition runs on the state of this future's own, at depth 0.
    @inlinable @inline(__always)
    final func withOwnState<Step, Result>(
        _ transition: (FutureStorage<Value>) -> Step,
        then action: (FutureStorage<Value>, Step) -> Result
    ) -> Result {
        let lock = LockTable.acquire(self)
        if phase != .linked {
            let step = transition(self)
            LockTable.release(lock)
            return action(self, step)
        }
        LockTable.release(lock)
        let root = lockedOwnRoot()
        return withExtendedLifetime(root) {
            let step = transition(root)
            LockTable.release(LockTable.lock(at: LockTable.index(of: root)))
            return action(root, step)
        }
    }

    /// ``withOwnState(_:then:)`` with nothing to do after the lock.
    @inlinable
    final func withOwnState<Step>(_ transition: (FutureStorage<Value>) -> Step) -> Step {
        withOwnState(transition, then: { _, step in step })
    }

    /// ``lockedRoot()`` for a consumer's call: splits the merge set until this future's state is
    /// its own (depth 0), or the future holding it has completed (it then has this one's outcome).
    ///
    /// Each walk notes the forwards it takes, so that the split it leads to, inside the gate held
    /// exclusively, walks again only if a table of forwards changed since the walk began or the
    /// future it found no longer holds this one's state.
    @usableFromInline @inline(never)
    final func lockedOwnRoot() -> FutureStorage<Value> {
        var path = ForwardPath()
        var (root, depth, generation) = lockedRootNotingForwards(&path)
        while depth > 0 && root.phase == .pending {
            LockTable.release(LockTable.lock(at: LockTable.index(of: root)))
            // Let go of the root now, under no lock: this may be its last reference (its chain
            // ended meanwhile), and its deinit must not run under the lock taken next. (The split
            // takes the reference it is handed, and lets go of it after the gate.)
            var found: FutureStorage<Value>? = root
            root = self
            // The future the split made holds this one's state at depth 0 for good (only a merge
            // could move it, and a future that something waits on is never merged).
            if let state = split(reusing: &found, depth: depth, path: path, generation: generation) {
                let stateLock = LockTable.acquire(state)
                if state.phase != .linked { return state }
                LockTable.release(stateLock)
            }
            (root, depth, generation) = lockedRootNotingForwards(&path)
        }
        return root
    }

    /// ``lockedRoot()`` from this future, with the forwards the walk took after its last link in
    /// `path` and the count of forward-table changes it read before it began (see
    /// ``split(reusing:depth:path:generation:)``).
    private final func lockedRootNotingForwards(_ path: inout ForwardPath) -> (FutureStorage<Value>, depth: Int32, generation: UInt64) {
        while true {
            let generation = swift_futures_forward_generation_load_acquire()
            path = ForwardPath()
            var garbage: [AnyObject] = []
            var (root, depth) = rootAndDepth(startingAt: 0, collecting: &garbage, path: &path)
            // Consumed, not copied: a copy would leave the array to be destroyed at the end of the
            // scope, under the lock taken below, with what may be the last reference to a future.
            releaseOutsideLock(consume garbage)
            #if DEBUG
            let context = ThreadContext.current.takeUnretainedValue()
            if let hook = context.afterConsumerWalk {
                context.afterConsumerWalk = nil
                hook()
            }
            #endif
            let lock = LockTable.acquire(root)
            if root.nextInWalkLocked(depth: depth) == nil { return (root, depth, generation) }
            // Merged or split again since the walk: walk again from the start. The root goes
            // first, under no lock (the walk may release its last other reference).
            LockTable.release(lock)
            root = self
            depth = 0
        }
    }

    /// The future that holds this one's state for a consumer's call (see ``lockedOwnRoot()``).
    @usableFromInline
    final func ownRoot() -> FutureStorage<Value> {
        if LockTable.withLock(self, { phase != .linked }) { return self }
        let root = lockedOwnRoot()
        LockTable.release(LockTable.lock(at: LockTable.index(of: root)))
        return root
    }

    /// ``withState(_:then:)`` for a call that depends on how deep below the future holding the
    /// state this one is (a cancellation handler records it; a withdrawal from a future that is
    /// still consumed by its adopter cancels nothing).
    @inlinable @inline(__always)
    final func withStateAndDepth<Step, Result>(
        _ transition: (FutureStorage<Value>, Int32) -> Step,
        then action: (FutureStorage<Value>, Step) -> Result
    ) -> Result {
        let lock = LockTable.acquire(self)
        if phase != .linked {
            let step = transition(self, 0)
            LockTable.release(lock)
            return action(self, step)
        }
        LockTable.release(lock)
        let (root, depth) = lockedRoot()
        return withExtendedLifetime(root) {
            let step = transition(root, depth)
            LockTable.release(LockTable.lock(at: LockTable.index(of: root)))
            return action(root, step)
        }
    }

    /// The next future of a walk that reached this one with the walk's start `depth` below it
    /// (caller holds the lock): its link, or, past a split, the future the forward names; `nil`
    /// if this future holds the start's state.
    @inlinable
    final func nextInWalkLocked(depth: Int32) -> (FutureStorage<Value>, depth: Int32)? {
        if phase == .linked { return (link!, depth + linkDepth) }
        guard let forward = splitForwards, let entry = forward.entry(at: depth) else { return nil }
        return (entry.target, entry.depth)
    }

    /// Follows links to the future that holds the state, shortening the path it walked.
    @usableFromInline
    final func root() -> FutureStorage<Value> {
        rootAndDepth().0
    }

    /// ``root()``, and this future's depth below it.
    @usableFromInline
    final func rootAndDepth(startingAt depth: Int32 = 0) -> (FutureStorage<Value>, depth: Int32) {
        var garbage: [AnyObject] = []
        let found = rootAndDepth(startingAt: depth, collecting: &garbage)
        releaseOutsideLock(garbage)
        return found
    }

    /// ``root()``, handing the references the walk drops (links it rewrote, the futures it passed)
    /// to the caller in `garbage`: a caller inside the adoption gate releases them after it, since
    /// the last of them may free a future. The caller holds this future, which is not collected.
    @usableFromInline
    final func root(collecting garbage: inout [AnyObject]) -> FutureStorage<Value> {
        rootAndDepth(startingAt: 0, collecting: &garbage).0
    }

    /// ``rootAndDepth(startingAt:)``, collecting what the walk drops (see ``root(collecting:)``).
    ///
    /// Path compression points each linked future it passed at the end of its run of links: the
    /// next future that is not linked, with the depths added up. It never skips a future that
    /// holds a forward: whether a walk follows it depends on the depth the walk started from.
    @usableFromInline
    final func rootAndDepth(
        startingAt startDepth: Int32,
        collecting garbage: inout [AnyObject]
    ) -> (FutureStorage<Value>, depth: Int32) {
        var path = ForwardPath()
        return rootAndDepth(startingAt: startDepth, collecting: &garbage, path: &path, tracking: false)
    }

    /// ``rootAndDepth(startingAt:collecting:)`` for a walk inside the exclusive gate that may split
    /// the future it reaches: `path` says which forwards it followed after its last link, so that
    /// ``recordSplit(_:path:at:depth:)`` can put the new future in the first one's table.
    @usableFromInline
    final func rootAndDepth(
        startingAt startDepth: Int32,
        collecting garbage: inout [AnyObject],
        path: inout ForwardPath
    ) -> (FutureStorage<Value>, depth: Int32) {
        rootAndDepth(startingAt: startDepth, collecting: &garbage, path: &path, tracking: true)
    }

    @inline(__always)
    private final func rootAndDepth(
        startingAt startDepth: Int32,
        collecting garbage: inout [AnyObject],
        path: inout ForwardPath,
        tracking: Bool
    ) -> (FutureStorage<Value>, depth: Int32) {
        // Most walks start at the future that holds the state: one lock, nothing else. (The walk
        // runs unspecialised in clients, so it keeps to locals of fixed layout and takes locks by
        // hand: an array of tuples or a generic closure would ask the runtime for type metadata
        // at every step.)
        var node = self
        var depth = startDepth
        var lock = LockTable.acquire(node)
        var linked = phase == .linked
        guard var next = nextInWalkLocked(depth: depth) else {
            LockTable.release(lock)
            return (node, depth)
        }
        // The linked futures passed since the last future that is not linked, and the walk's
        // depth below each: the first in locals, the others (a run that compression shortens) in
        // arrays, allocated only then.
        var first: AnyObject?
        var firstDepth: Int32 = 0
        var rest: [AnyObject] = []
        var restDepths: [Int32] = []
        var steps = 1
        if tracking, !linked { Self.noteForward(from: node, depth: depth, &path) }
        while true {
            LockTable.release(lock)
            if linked {
                if first == nil {
                    first = node
                    firstDepth = depth
                } else {
                    rest.append(node)
                    restDepths.append(depth)
                }
            } else if let passed = first {
                Self.compress(passed, firstDepth, rest, restDepths, to: node, depth: depth, garbage: &garbage)
                first = nil
                rest.removeAll()
                restDepths.removeAll()
            }
            // The caller holds the start; a future further on may lose its last other reference
            // to a concurrent compression, and is released after the caller's locks.
            if node !== self {
                if garbage.capacity == 0 { garbage.reserveCapacity(4) }  // one allocation for a short walk
                garbage.append(node)
            }
            node = next.0
            depth = next.depth
            lock = LockTable.acquire(node)
            linked = node.phase == .linked
            guard let step = node.nextInWalkLocked(depth: depth) else { break }
            steps += 1
            if tracking {
                if linked {
                    path = ForwardPath()
                } else {
                    Self.noteForward(from: node, depth: depth, &path)
                }
            }
            next = step
        }
        LockTable.release(lock)
        ThreadContext.current.takeUnretainedValue().mergeStepsWalked &+= steps
        if let passed = first {
            Self.compress(passed, firstDepth, rest, restDepths, to: node, depth: depth, garbage: &garbage)
        }
        return (node, depth)
    }

    /// A walk that tracks its path takes a forward from `node` (locked), `depth` below it.
    @inline(__always)
    private static func noteForward(from node: FutureStorage<Value>, depth: Int32, _ path: inout ForwardPath) {
        guard let entry = node.splitForwards?.entry(at: depth) else { return }
        let next = entry.next == Int32.max ? Int64.max : Int64(entry.next)
        if path.forwards == 0 {
            path.head = node
            path.headDepth = depth
            path.headEnd = next
            path.reach = next
        } else if next != Int64.max {
            // This node is `headDepth - depth` below the head.
            path.reach = min(path.reach, Int64(path.headDepth) - Int64(depth) + next)
        }
        path.forwards += 1
    }

    /// After `holder`, reached by a walk along `path`, split at `depth` into `state` (caller holds
    /// the adoption gate exclusively, inside which every split happens): records `state` in the table
    /// of the walk's first forward, if `state` holds everything from the walk's depth there to that
    /// entry's end (no entry on the way ended sooner), so that later walks go there directly. A set
    /// split in any order then keeps its head's table complete, and each walk takes one forward
    /// from it, or a few.
    static func recordSplit(_ state: FutureStorage<Value>, path: ForwardPath, at holder: FutureStorage<Value>, depth: Int32) {
        guard path.forwards > 0, let found = path.head else { return }
        let head = unsafeDowncast(found, to: FutureStorage<Value>.self)
        // Where `state`'s part ends: the holder's next threshold after `depth` (its shallowest
        // before this split), in the head's depths.
        let next = LockTable.withLock(holder) { holder.splitForwards?.entry(at: depth)?.next ?? Int32.max }
        var end = path.reach
        if next != Int32.max { end = min(end, Int64(path.headDepth) - Int64(depth) + Int64(next)) }
        guard end == path.headEnd else { return }
        let lock = LockTable.acquire(head)
        if head.phase != .linked, let forward = head.splitForwards { forward.addSplitBelow(at: path.headDepth, target: state) }
        LockTable.release(lock)
    }

    /// Points the linked futures of one run (`first`, then `rest`, each with the walk's depth
    /// below it) straight at `end`, which the walk reached `depth` below; the last already points
    /// there.
    private static func compress(
        _ first: AnyObject,
        _ firstDepth: Int32,
        _ rest: [AnyObject],
        _ restDepths: [Int32],
        to end: FutureStorage<Value>,
        depth: Int32,
        garbage: inout [AnyObject]
    ) {
        guard !rest.isEmpty else { return }
        point(first, at: end, depth: depth - firstDepth, garbage: &garbage)
        for index in 0..<(rest.count - 1) {
            point(rest[index], at: end, depth: depth - restDepths[index], garbage: &garbage)
        }
    }

    /// Points one linked future of a run at `end`, `depth` below it.
    private static func point(_ linked: AnyObject, at end: FutureStorage<Value>, depth: Int32, garbage: inout [AnyObject]) {
        let step = unsafeDowncast(linked, to: FutureStorage<Value>.self)
        // Another compressor may have rewritten this link already, so the old target is not
        // necessarily in the run: release it after the lock, never under it. Its depth below
        // `end` is the same whichever walk computes it.
        let lock = LockTable.acquire(step)
        let old = step.upstream
        step.upstream = end
        guard step.state.relink(depth: depth) == .proceed else {
            preconditionFailure("impossible future transition: path compression of a future that is not linked")
        }
        LockTable.release(lock)
        if let old { garbage.append(old as AnyObject) }
    }

    /// The outcome, or `nil` while pending.
    @inlinable
    final var outcome: Outcome<Value>? {
        withState { $0.result }
    }

    /// The outcome, or `nil` while pending, and whether this is `never` (for a description).
    final var outcomeOrNever: (outcome: Outcome<Value>?, isNever: Bool) {
        withState { ($0.result, $0.phase == .never) }
    }

    /// Whether the future is pending and `origin` may still complete it.
    @usableFromInline
    final func isPendingFor(_ origin: AnyObject) -> Bool {
        withState { $0.phase == .pending && $0.accepts(origin) }
    }
}
