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
        let root = lockedRoot()
        // `root` stays alive past the unlock: its release must not fold into the critical region
        // (it cannot be the last reference while `self` links to it, but nothing needs that).
        return withExtendedLifetime(root) {
            let step = transition(root)
            LockTable.release(LockTable.lock(at: LockTable.index(of: root)))
            return action(root, step)
        }
    }

    /// The future that holds the state of this merged one, returned with its stripe lock held
    /// (see ``withState(_:then:)``).
    @usableFromInline @inline(never)
    final func lockedRoot() -> FutureStorage<Value> {
        var node = root()
        while true {
            let lock = LockTable.acquire(node)
            if node.phase != .linked { return node }
            LockTable.release(lock)
            node = node.root()  // merged again meanwhile
        }
    }

    /// ``withState(_:then:)`` with nothing to do after the lock.
    @inlinable
    final func withState<Step>(_ transition: (FutureStorage<Value>) -> Step) -> Step {
        withState(transition, then: { _, step in step })
    }

    /// Follows links to the future that holds the state, shortening the path it walked.
    @usableFromInline
    final func root() -> FutureStorage<Value> {
        var garbage: [AnyObject] = []
        let root = root(collecting: &garbage)
        releaseOutsideLock(garbage)
        return root
    }

    /// ``root()``, handing the references the walk drops (links it rewrote, the futures it passed)
    /// to the caller in `garbage`: a caller holding the adoption lock releases them after it, since
    /// the last of them may free a future.
    @usableFromInline
    final func root(collecting garbage: inout [AnyObject]) -> FutureStorage<Value> {
        var node = self
        var visited: [FutureStorage<Value>] = []
        while let next = LockTable.withLock(node, { node.phase == .linked ? node.link : nil }) {
            visited.append(node)
            node = next
        }
        if visited.count > 1 {
            let root = node
            for step in visited.dropLast() {
                // Another compressor may have rewritten this link already, so the old target is not
                // necessarily in `visited`: release it after the lock, never under it.
                let old = LockTable.withLock(step) { () -> FutureStorage<Value>? in
                    var taken: FutureStorage<Value>? = root
                    swap(&taken, &step.link)
                    return taken
                }
                if let old { garbage.append(old) }
            }
        }
        // One by one: appending the array as a sequence would look up a witness table on every
        // call, linked or not (the compiler hoists it to the top).
        for passed in visited { garbage.append(passed) }
        return node
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
