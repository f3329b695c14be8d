#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif
import CFuturesAtomicGlobals

/// Who may change merge links and waits between futures, and when: a reader-writer gate in which
/// the readers do not share a lock.
///
/// - **Shared** (many threads at once): an adoption that needs no walk. It follows its adopter's
///   links to the root, then, under the futures' stripe locks, checks that the adopter's root and
///   the target still hold their own states and that adopting cannot close a cycle: nothing waits
///   on the adopter's root, or the target waits on nothing, or it waits only on a future that holds
///   its own state, is not the adopter's root and waits on nothing (checked under that future's lock
///   too). Then it merges or waits. Such an adoption only makes a root a link (a merge) or adds a
///   wait, under the locks of the futures it names.
/// - **Exclusive** (one thread, no shared holder): everything that reads more of the graph than the
///   futures it has locked and relies on it not changing meanwhile: an adoption that walks the waits
///   for a cycle, or splits the set its target was merged into, and every split.
///
/// Why a cycle is still always found: a wait into a future is recorded in that future's callbacks,
/// under its lock (a merge set's wait on its source is the one its merged member recorded there), so
/// two waits that meet at a future are ordered by its lock. Of the waits that form a cycle, the one
/// made last saw, under its locks, the wait into its adopter and the waits out of its target, so it
/// was not a shared adoption: it held the gate exclusively, after every shared adoption that made
/// another wait of the cycle had left the gate, and its walk saw the whole cycle. (A registration's
/// wait starts at a new future, which nothing waits on yet: it never closes a cycle.)
///
/// A shared holder counts itself in its thread's slot (threads take one of a few slots in turn,
/// each on cache lines of its own), so two threads adopting at once write no common memory but
/// their futures'. An exclusive holder takes the lock (exclusive holders queue there), raises
/// `writer`, and waits for the slots to empty; a thread that finds `writer` raised leaves its slot
/// at once and adopts exclusively instead, so it never waits while counted. No user code runs in
/// either mode, and the gate is taken before any stripe lock, never while one is held.
@usableFromInline
enum AdoptionGate {
    /// The lock that serialises exclusive holders, then the slots, each on cache lines of its own:
    /// a C global, initialised statically, never moved (a Swift global would take a lock on every
    /// read under ThreadSanitizer; see the C module).
    static var memory: UnsafeMutableRawPointer { swift_futures_adoption_gate_base() }

    /// Bytes between the lock and each slot: two cache lines, so that neither a line nor the
    /// neighbouring line that the processor may fetch with it is shared.
    static let spacing = 128

    /// How many slots the shared holders count themselves in.
    static let slotCount = 16

    /// The lock of the exclusive holders, in `memory`.
    @inline(__always)
    static func lock(_ memory: UnsafeMutableRawPointer) -> UnsafeMutablePointer<RawLock> {
        memory.assumingMemoryBound(to: RawLock.self)
    }

    /// Runs `body` holding the gate exclusively.
    @inline(__always)
    static func exclusively<Result>(_ body: () -> Result) -> Result {
        enterExclusive()
        defer { leaveExclusive() }
        return body()
    }

    /// The slot of a thread whose context is being made (threads take the slots in turn, so the
    /// first `slotCount` threads share none).
    static func assignSlot() -> UnsafeMutableRawPointer {
        memory + spacing * (1 + swift_futures_gate_next_slot_draw_relaxed() % slotCount)
    }

    /// Enters the gate shared, unless an exclusive holder holds it or waits for it: then returns
    /// `nil`, and the caller holds nothing. Otherwise returns this thread's slot, to pass to
    /// ``leaveShared(_:)``.
    @inline(__always)
    static func enterShared() -> UnsafeMutableRawPointer? {
        let slot = ThreadContext.current.takeUnretainedValue().gateSlot
        // Sequentially consistent on both sides: either this thread sees `writer` raised, or the
        // exclusive holder, which raised it before reading the slots, sees this count.
        swift_futures_gate_slot_add_seq_cst(slot, 1)
        if swift_futures_gate_writer_load_seq_cst() == 0 { return slot }
        swift_futures_gate_slot_subtract_release(slot, 1)
        return nil
    }

    /// Leaves the gate entered shared in `slot`.
    @inline(__always)
    static func leaveShared(_ slot: UnsafeMutableRawPointer) {
        // Releasing: what this adoption changed happens before an exclusive holder's walk.
        swift_futures_gate_slot_subtract_release(slot, 1)
    }

    /// Enters the gate exclusively: waits for the exclusive holders before, then for every shared
    /// holder to leave (no new one enters meanwhile).
    static func enterExclusive() {
        let memory = memory
        RawLockOps.lock(lock(memory))
        swift_futures_gate_writer_store_seq_cst(1)
        for index in 0..<slotCount {
            // A shared holder holds no other gate and takes only stripe locks, which this thread
            // does not hold: it leaves in a bounded time.
            while swift_futures_gate_slot_load_seq_cst(memory + spacing * (1 + index)) != 0 { sched_yield() }
        }
    }

    /// Leaves the gate entered exclusively.
    static func leaveExclusive() {
        // Before the gate opens: a consumer's walk that read the count before this holder changed
        // a table of forwards finds it changed (see ``FutureStorage/lockedOwnRoot()``).
        swift_futures_forward_generation_raise_release()
        swift_futures_gate_writer_store_release(0)
        RawLockOps.unlock(lock(memory))
    }
}
