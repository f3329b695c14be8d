/// What cycle detection needs of a future, whatever its value type: a cycle can pass through
/// transforms that change it (`p.complete(with: p.future.map { String($0) }.map { Int($0)! })`).
@usableFromInline
protocol CycleNode: AnyObject {
    /// The representative of this future's merge set. Called inside the exclusive adoption gate:
    /// the references the walk drops go into `garbage`, released after it.
    func cycleRoot(collecting garbage: inout [AnyObject]) -> any CycleNode
    /// `nil` unless this future is pending; else what it waits for: `upstream`, its source (a
    /// derived future) or the future it adopted; `jump`, a compressed pointer further along the
    /// same path; and whether a path through it may be compressed (`stable`): its wait changes only
    /// in a split, to the new future that took over what it waited on, so that the old pointer
    /// still lies on the path, and it can never adopt (so no later cycle check starts from it).
    func cycleEdges() -> (jump: (any CycleNode)?, upstream: (any CycleNode)?, stable: Bool)?
    /// Points this pending future's compressed pointer at `ancestor`, if it is stable and has room
    /// for one (an adopter, or the root of a merge set); does nothing to others.
    func compressWait(to ancestor: any CycleNode)
    /// Fails this future with ``FutureError/cycle`` if it is still pending, whoever may complete it.
    func failAsCycle()
}

/// Finds the cycle an adoption would close.
///
/// A future waits on exactly one other: a derived future on its source, an adopter on the future it
/// adopted. Adopting `target` closes a cycle when following those waits from `target` reaches the
/// adopter. The walk jumps along compressed pointers kept by adopters and merge-set roots (union-find
/// with path compression), so long chains stay cheap. A run of stable futures (whose waits change
/// only by ending, or in a split that keeps the old pointer on the path, and which can never adopt)
/// is compressed: each of them with room for a pointer points at where the run ended, skipping plain
/// derived futures too. A future whose wait may still change (a `flatMap` that has not yet adopted,
/// or a set root that took over such a future's source) ends a run and is never jumped over, because
/// a pointer past it could miss the cycle its adoption closes later; nor is a future that may still
/// adopt, since a later check starts from it. A hit is confirmed along the real waits, since a jump
/// can skip a future that completed meanwhile (the path is then broken, and there is no cycle).
///
/// Joins wait on several futures and record none of them: a cycle through a join is not found.
@usableFromInline
enum CycleDetection {

    /// The futures of the cycle that `adopter` adopting `target` would close, from `target` to the
    /// one the adopter waits for, or `nil` if it closes none. Called inside the exclusive adoption
    /// gate with both futures being roots; every strong reference taken goes into `keepAlive`.
    static func cycle(
        adopting target: any CycleNode,
        into adopter: AnyObject,
        keepAlive: inout [AnyObject]
    ) -> [any CycleNode]? {
        var node = target
        var adopters: [any CycleNode] = []  // consecutive stable futures just walked: compressed together
        var hit = false
        var steps = 0
        var seen: Set<ObjectIdentifier> = []  // past a few steps: a stale jump could loop
        while let edges = node.cycleEdges(), let parent = edges.jump ?? edges.upstream {
            if let jump = edges.jump { keepAlive.append(jump) }
            if let upstream = edges.upstream { keepAlive.append(upstream) }
            steps += 1
            if steps > 16, !seen.insert(ObjectIdentifier(node)).inserted {
                hit = true  // let the walk along real waits decide
                break
            }
            let next = parent.cycleRoot(collecting: &keepAlive)
            keepAlive.append(next)
            if next === adopter {
                hit = true
                break
            }
            if edges.stable {
                adopters.append(node)
            } else {
                compress(adopters, to: node, keepAlive: &keepAlive)
                adopters.removeAll()
            }
            node = next
        }
        ThreadContext.current.takeUnretainedValue().cycleStepsWalked &+= steps
        if !hit { compress(adopters, to: node, keepAlive: &keepAlive) }
        guard hit else { return nil }
        return confirm(adopting: target, into: adopter, keepAlive: &keepAlive)
    }

    /// Points each of a run of stable futures that has room for a pointer at the future the run
    /// leads to.
    private static func compress(_ adopters: [any CycleNode], to end: any CycleNode, keepAlive: inout [AnyObject]) {
        guard adopters.count > 1 else { return }
        for adopter in adopters { adopter.compressWait(to: end) }
        keepAlive.append(contentsOf: adopters as [AnyObject])
    }

    /// Walks the real waits from `target`: the futures passed on the way to `adopter`, or `nil` if
    /// the path breaks (a future that is no longer pending) or runs around another cycle.
    private static func confirm(
        adopting target: any CycleNode,
        into adopter: AnyObject,
        keepAlive: inout [AnyObject]
    ) -> [any CycleNode]? {
        var members: [any CycleNode] = [target]
        var seen: Set<ObjectIdentifier> = [ObjectIdentifier(target)]
        var current = target
        while let edges = current.cycleEdges(), let upstream = edges.upstream {
            if let jump = edges.jump { keepAlive.append(jump) }
            keepAlive.append(upstream)
            let next = upstream.cycleRoot(collecting: &keepAlive)
            keepAlive.append(next)
            if next === adopter { return members }
            guard seen.insert(ObjectIdentifier(next)).inserted else { return nil }
            members.append(next)
            current = next
        }
        return nil
    }
}

extension FutureStorage: CycleNode {
    @usableFromInline
    func cycleRoot(collecting garbage: inout [AnyObject]) -> any CycleNode {
        root(collecting: &garbage)
    }

    @usableFromInline
    func cycleEdges() -> (jump: (any CycleNode)?, upstream: (any CycleNode)?, stable: Bool)? {
        LockTable.withLock(self) {
            guard phase == .pending else { return nil }
            // A cast, not a protocol refinement: a `ConsumerSource` that also had to be a
            // `CycleNode` would cost every derived future a witness-table lookup.
            return (extras?.waitingOn, upstream?.resolved as? any CycleNode, !flag(StorageFlags.waitMayChange))
        }
    }

    @usableFromInline
    func compressWait(to ancestor: any CycleNode) {
        // Held weakly: the path to the ancestor may pass a future that became immortal after this
        // one waited on it, and holds what it waits on only weakly; a strong pointer past it would
        // keep an immortal future, and what registered on it, alive with this one. The old pointer
        // is released after the lock.
        let old = LockTable.withLock(self) { () -> (any CycleNode)? in
            guard phase == .pending, !flag(StorageFlags.waitMayChange), let extras else { return nil }
            return extras.wait(on: ancestor, weakly: true)
        }
        releaseOutsideLock(old)
    }

    @usableFromInline
    func failAsCycle() {
        _ = finish(.failure(FutureError.cycle), origin: nil)
    }
}
