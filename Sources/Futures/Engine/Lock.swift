import CFuturesAtomicGlobals

/// The library's lock: `os_unfair_lock` on Apple platforms, a futex word on Linux, else
/// `pthread_mutex_t` (see the C module for why, and for the operations).
@usableFromInline typealias RawLock = swift_futures_raw_lock

/// Initialises, locks and unlocks a lock at a stable address.
///
/// The lock must never move (a `pthread_mutex_t` or `os_unfair_lock` may not, and a futex word is
/// known to the kernel by its address), so it lives in manually allocated memory or in a C global,
/// never in a Swift stored property. ThreadSanitizer sees each acquisition and release, as it does
/// not see `Synchronization.Mutex`'s on Linux.
@usableFromInline
enum RawLockOps {
    @inlinable
    static func initialize(_ lock: UnsafeMutablePointer<RawLock>) {
        swift_futures_raw_lock_init(lock)
    }

    @inlinable
    static func lock(_ lock: UnsafeMutablePointer<RawLock>) {
        swift_futures_raw_lock_lock(lock)
    }

    @inlinable
    static func unlock(_ lock: UnsafeMutablePointer<RawLock>) {
        swift_futures_raw_lock_unlock(lock)
    }

    @inlinable
    static func destroy(_ lock: UnsafeMutablePointer<RawLock>) {
        swift_futures_raw_lock_destroy(lock)
    }
}

/// A fixed table of locks shared by every future (lock striping).
///
/// A future picks its lock by hashing its address, so a future stores no lock of its own: no extra
/// allocation, and no lock word per future (a `pthread_mutex_t`, where it is the lock, is 40
/// bytes). Two futures that share a stripe only contend with each other; they cannot deadlock,
/// because the library never holds two stripe locks at once except in
/// ``LockTable/withLocks(_:_:_:)``, which takes them in index order.
@usableFromInline
enum LockTable {
    /// Number of stripes; a power of two, the length of the C array of the locks.
    @usableFromInline static let count = 256
    /// Distance between two locks, one cache line, so neighbouring stripes do not false-share.
    @usableFromInline static let stride = 64

    /// The locks: a C global, initialised statically (unlocked), never moved. Not a Swift global,
    /// whose every read would take a lock under ThreadSanitizer (see the C module).
    @inlinable static var base: UnsafeMutableRawPointer { swift_futures_stripes_base() }

    @inlinable
    static func index(of object: AnyObject) -> Int {
        let address = UInt(bitPattern: ObjectIdentifier(object))
        // Heap objects are 16-byte aligned; mix higher bits in so neighbouring allocations spread.
        let mixed = (address >> 4) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> 56) & (count - 1)
    }

    @inlinable
    static func lock(at index: Int) -> UnsafeMutablePointer<RawLock> {
        (base + index * stride).assumingMemoryBound(to: RawLock.self)
    }

    /// Runs `body` holding the stripe lock of `object`. `body` must not call user code, take another
    /// stripe lock, or release the last reference to anything (return it instead). Debug builds
    /// check the second rule here, and the third in the deinits of futures, promises and tokens
    /// (see ``LockChecks``).
    @inlinable
    static func withLock<R>(_ object: AnyObject, _ body: () throws -> R) rethrows -> R {
        let lock = acquire(object)
        defer { release(lock) }
        return try body()
    }

    /// Takes the stripe lock of `object` (the rules of ``withLock(_:_:)`` apply until
    /// ``release(_:)``), for the few callers whose critical region does not fit one closure.
    @inlinable @inline(__always)
    static func acquire(_ object: AnyObject) -> UnsafeMutablePointer<RawLock> {
        let stripe = index(of: object)
        let lock = lock(at: stripe)
        #if DEBUG
        LockChecks.willLockStripes(stripe, stripe)
        #endif
        RawLockOps.lock(lock)
        return lock
    }

    /// Releases a lock taken by ``acquire(_:)``.
    @inlinable @inline(__always)
    static func release(_ lock: UnsafeMutablePointer<RawLock>) {
        #if DEBUG
        // The stripe mutexes do not check their owner: this does.
        LockChecks.willUnlockStripe(base.distance(to: UnsafeMutableRawPointer(lock)) / stride)
        #endif
        RawLockOps.unlock(lock)
        #if DEBUG
        LockChecks.didUnlockStripe()
        #endif
    }

    /// Runs `body` holding the stripe locks of both objects, taken in index order (once if shared).
    @inlinable
    static func withLocks<R>(_ first: AnyObject, _ second: AnyObject, _ body: () throws -> R) rethrows -> R {
        let a = index(of: first)
        let b = index(of: second)
        if a == b { return try withLock(first, body) }
        let low = lock(at: min(a, b))
        let high = lock(at: max(a, b))
        #if DEBUG
        LockChecks.willLockStripes(a, b)
        defer { LockChecks.didUnlockStripe() }
        #endif
        RawLockOps.lock(low)
        RawLockOps.lock(high)
        defer {
            RawLockOps.unlock(high)
            RawLockOps.unlock(low)
        }
        return try body()
    }
}

extension LockTable {
    /// Runs `body` holding the stripe locks of three objects, taken in index order (once each if
    /// shared): for the one decision that reads a future two waits away from the adopter (see
    /// ``FutureStorage/adoptShared(_:from:root:effects:)``).
    static func withLocks<R>(_ first: AnyObject, _ second: AnyObject, _ third: AnyObject, _ body: () -> R) -> R {
        // Sorted by hand, and repeats dropped: no array to allocate.
        var (low, middle, high) = (index(of: first), index(of: second), index(of: third))
        if low > middle { swap(&low, &middle) }
        if middle > high { swap(&middle, &high) }
        if low > middle { swap(&low, &middle) }
        #if DEBUG
        LockChecks.willLockStripes(low, middle, high)
        defer { LockChecks.didUnlockStripe() }
        #endif
        RawLockOps.lock(lock(at: low))
        if middle != low { RawLockOps.lock(lock(at: middle)) }
        if high != middle { RawLockOps.lock(lock(at: high)) }
        defer {
            if high != middle { RawLockOps.unlock(lock(at: high)) }
            if middle != low { RawLockOps.unlock(lock(at: middle)) }
            RawLockOps.unlock(lock(at: low))
        }
        return body()
    }
}

/// A standalone lock for state that is not a future's (the adoption gate's, small helper objects).
///
/// Debug builds record its owner and trap when a thread takes it twice (which would hang).
@usableFromInline
final class Lock: @unchecked Sendable {
    // Safety: the pointers are allocated in init and freed in deinit; the lock they point to is
    // the synchronisation primitive itself, designed to be used from many threads, and the owner
    // word is read and written with relaxed atomics (only the owner's thread finds itself in it).
    @usableFromInline let raw: UnsafeMutablePointer<RawLock>
    #if DEBUG
    @usableFromInline let owner: UnsafeMutablePointer<UInt>
    #endif

    @usableFromInline init() {
        raw = .allocate(capacity: 1)
        RawLockOps.initialize(raw)
        #if DEBUG
        owner = .allocate(capacity: 1)
        owner.initialize(to: 0)
        #endif
    }

    deinit {
        RawLockOps.destroy(raw)
        raw.deallocate()
        #if DEBUG
        owner.deallocate()
        #endif
    }

    @inlinable
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        #if DEBUG
        let me = swift_futures_thread_identity()
        precondition(swift_futures_lock_owner_load_relaxed(owner) != me, "a lock was taken twice on one thread")
        RawLockOps.lock(raw)
        swift_futures_lock_owner_store_relaxed(owner, me)
        defer {
            swift_futures_lock_owner_store_relaxed(owner, 0)
            RawLockOps.unlock(raw)
        }
        #else
        RawLockOps.lock(raw)
        defer { RawLockOps.unlock(raw) }
        #endif
        return try body()
    }
}

/// A value guarded by its own lock, for state whose critical regions take stripe locks (a cache
/// that registers on futures), or that is touched while one is held (a race's winner, set by its
/// join). Its lock never nests in itself.
@usableFromInline
final class Locked<State>: @unchecked Sendable {
    // Safety: `state` is only read or written inside `lock.withLock`.
    @usableFromInline let lock = Lock()
    @usableFromInline var state: State

    @usableFromInline init(_ state: State) { self.state = state }

    @inlinable
    func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        try lock.withLock { try body(&state) }
    }
}

/// A value guarded by its stripe lock (see ``LockTable``): the small shared state of the library's
/// helpers (counters, accumulators, progress meters), with no lock of its own to allocate. Its
/// critical regions follow the stripe rules: no other lock, no user code, nothing released.
@usableFromInline
final class Guarded<State>: @unchecked Sendable {
    // Safety: `state` is only read or written inside `LockTable.withLock(self)`, here.
    @exclusivity(unchecked) @usableFromInline var state: State

    @inlinable init(_ state: State) { self.state = state }

    @inlinable
    func withLock<R>(_ body: (inout State) -> R) -> R {
        LockTable.withLock(self) { body(&state) }
    }
}

/// Ends the lifetime of `garbage` here, and not earlier.
///
/// Code that removes something from locked state (a handler, a closure, a future, a promise)
/// returns it out of the critical region and passes it here, after the unlock, so that whatever
/// its release runs (deinits of user captures, which may take a stripe lock again) runs outside
/// the lock. Writing `_ = garbage` instead is not enough: the optimiser may end a value's lifetime
/// at its last use, which can fold the release back into the critical region (a self-deadlock
/// that only release builds show).
@inlinable @inline(__always)
func releaseOutsideLock<Garbage>(_ garbage: consuming Garbage) {
    withExtendedLifetime(garbage) {}
}

/// Debug-build checks of the stripe-lock rules: a thread never takes a stripe lock while it holds
/// one (two at once only through ``LockTable/withLocks(_:_:_:)``, which counts as one), never frees
/// a future, a promise or a token while it holds one (their deinits may run user code and take
/// stripe locks), and code that says "caller holds the lock" does (``assertHolds(_:)``). Release
/// builds compile none of it.
@usableFromInline
enum LockChecks {
    /// The stripes this thread holds, as `first + 1` in the low 10 bits, `second + 1` in the next
    /// 10 and `third + 1` above them (the second again when it holds two), or 0 when it holds none.
    /// (Ten bits hold any stripe index plus one, and three fields fit 32-bit words.) A C
    /// thread-local, read on every lock operation: see the C module for why not a Swift global.
    private static var held: UInt { swift_futures_held_stripes_get() }

    /// Whether this thread holds a stripe lock.
    @usableFromInline static var holdsStripe: Bool { held != 0 }

    @usableFromInline
    static func willLockStripes(_ first: Int, _ second: Int, _ third: Int? = nil) {
        precondition(!holdsStripe, "a stripe lock was taken while this thread already held one (a nested withLock)")
        let encoded = UInt(first + 1) | UInt(second + 1) << 10 | UInt((third ?? second) + 1) << 20
        swift_futures_held_stripes_set(encoded)
    }

    @usableFromInline
    static func didUnlockStripe() {
        swift_futures_held_stripes_set(0)
    }

    /// Traps unless this thread holds the stripe lock of `object`.
    @usableFromInline
    static func assertHolds(_ object: AnyObject) {
        precondition(holds(stripe: LockTable.index(of: object)), "the caller does not hold this object's stripe lock")
    }

    /// Traps unless this thread holds stripe `index`, which it is about to unlock.
    @usableFromInline
    static func willUnlockStripe(_ index: Int) {
        precondition(holds(stripe: index), "a stripe lock was released by a thread that does not hold it")
    }

    private static func holds(stripe index: Int) -> Bool {
        let stripe = UInt(index + 1)
        let held = held
        return held & 0x3FF == stripe || (held >> 10) & 0x3FF == stripe || held >> 20 == stripe
    }

    /// Traps if this thread holds a stripe lock: `what` is being freed under it.
    @usableFromInline
    static func checkNotFreedUnderStripe(_ what: StaticString) {
        precondition(!holdsStripe, "\(what) was freed under a stripe lock; release it after the unlock")
    }
}
