/// A future that becomes immortal while others are registered on it.
///
/// An immortal future (one that adopted `never`, or waits on or merged one that did) completes only
/// if it is cancelled. A future derived from it, or waiting on it, is immortal too, and holds it
/// weakly: nothing else would free an unreferenced chain rooted in `never`, since the immortal
/// future's callbacks hold what waits on it and what waits on it holds the immortal future. A
/// registrant that arrives after the future became immortal gets that weak edge when it registers
/// (``FutureStorage/registerLocked(_:derived:)``, ``FutureStorage/waitLocked(on:token:finishing:keepUpstream:registrants:)``).
/// One that registered before gets it here, when the future becomes immortal: the future's own
/// transition (``FutureStorage/becomeImmortalLocked(registrants:)``) weakens the waits registered on
/// it and hands its registrants over; after the locks, ``Immortality/propagate(from:to:)`` makes
/// each one's edge to it weak and goes on with the registrants of those that became immortal in
/// turn, in a loop (a chain of waits can be as long as the program made it).
enum Immortality {
    /// Gives each of `registrants` (futures registered on `source` before it became immortal, or
    /// other objects, which are skipped) a weak edge to `source`, and so on down, in a loop. Runs
    /// under no lock.
    static func propagate(from source: AnyObject, to registrants: [AnyObject]) {
        var work = registrants.map { (source: source, registrant: $0) }
        while let (source, registrant) = work.popLast() {
            guard let node = registrant as? any ImmortalityNode else { continue }
            node.sourceBecameImmortal(source, next: &work)
        }
    }
}

/// A future, as ``Immortality/propagate(from:to:)`` sees it (whatever its value type).
protocol ImmortalityNode: AnyObject {
    /// If the future holding this one's state is pending and holds `source` strongly as its
    /// upstream, makes that edge weak, marks the future immortal and appends its own registrants
    /// (paired with itself) to `next`. Takes this future's stripe lock.
    func sourceBecameImmortal(_ source: AnyObject, next: inout [(source: AnyObject, registrant: AnyObject)])
}

extension FutureStorage: ImmortalityNode {
    func sourceBecameImmortal(_ source: AnyObject, next: inout [(source: AnyObject, registrant: AnyObject)]) {
        var strongEdge: (any ConsumerSource)? = nil  // released after the lock
        var registrants: [AnyObject] = []
        let node = withState { node -> FutureStorage<Value>? in
            guard node.phase == .pending, !node.flag(StorageFlags.completesOtherwise),
                let upstream = node.upstream, upstream === source, let immortalSource = upstream.resolved
            else { return nil }
            strongEdge = node.upstream
            node.upstream = WeakSource(immortalSource)
            node.becomeImmortalLocked(registrants: &registrants)
            return node
        }
        releaseOutsideLock(strongEdge)
        guard let node else { return }
        for registrant in registrants { next.append((source: node, registrant: registrant)) }
    }

    /// This pending future becomes immortal (caller holds the lock): each wait registered on it
    /// holds its waiter weakly from now on, and what registered on it with a key (derived futures,
    /// waiters) goes to `registrants`, for ``Immortality/propagate(from:to:)`` to give a weak edge
    /// after the locks. (A registrant is alive: the entry's callback holds it, or, for a wait, it
    /// moves from the link to `registrants`, which the caller releases after the locks.)
    ///
    /// Not if a producer's cancel handler waits on it: its registrants' strong edges keep it
    /// alive, so that their cancellation still reaches the handler (its producer, which held it,
    /// may be gone). Such a structure is kept while nothing references it, as it was before it
    /// became immortal.
    final func becomeImmortalLocked(registrants: inout [AnyObject]) {
        assertLocked()
        guard !immortal else { return }
        immortal = true
        guard extras?.merge.cancelHandlers.isEmpty ?? true else { return }
        callbacks.forEachEntry { entry in
            switch entry {
            case .wait(let link):
                if let waiter = link.weaken() { registrants.append(waiter) }
            case .outcome(_, owner: let owner?):
                // The callback holds its owner (see ``RegistrationKey``): alive while the entry is.
                let pointer = UnsafeRawPointer(bitPattern: UInt(bitPattern: owner))
                if let pointer { registrants.append(Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue()) }
            case .outcome, .success, .failure, .member, .carried:
                break
            }
        }
    }
}

/// What a future waiting on another (an adopter that did not merge it) registers there: run with
/// the other's outcome, it completes the waiter `depth` below it (see
/// ``FutureStorage/finish(_:origin:below:)``) from `token`, the only completer the waiter accepts.
/// It holds the waiter strongly, or weakly if the future waited on is immortal (it was when the
/// wait began, or became so since, see ``FutureStorage/becomeImmortalLocked(registrants:)``).
///
/// One allocation, as the closure it replaces was; unlike a closure, it can let go of the waiter.
@usableFromInline
final class WaitLink<Value: Sendable>: @unchecked Sendable {
    // Safety: `waiter` and `weakWaiter` change only in `weaken()`, under the lock of the future
    // waited on while it is pending; `run` reads them in that future's drain, after its completion,
    // which took the same lock. The rest is immutable.
    var waiter: FutureStorage<Value>?
    weak var weakWaiter: FutureStorage<Value>?
    let token: CompleterToken
    let depth: Int32
    /// The waiter's identity: its registration's key.
    @usableFromInline let owner: ObjectIdentifier

    init(waiter: FutureStorage<Value>, token: CompleterToken, depth: Int32, weakly: Bool) {
        if weakly { weakWaiter = waiter } else { self.waiter = waiter }
        self.token = token
        self.depth = depth
        owner = ObjectIdentifier(waiter)
    }

    @usableFromInline
    func run(with outcome: Outcome<Value>) {
        _ = (waiter ?? weakWaiter)?.finish(outcome, origin: token, below: depth)
    }

    /// Holds the waiter weakly from now on; returns it, if it held it strongly (for the caller to
    /// release after the lock).
    func weaken() -> FutureStorage<Value>? {
        guard let strong = waiter.take() else { return nil }
        weakWaiter = strong
        return strong
    }
}
