#ifndef C_FUTURES_ATOMIC_GLOBALS_H
#define C_FUTURES_ATOMIC_GLOBALS_H

// The globals of the Futures module that must need no lazy initialisation, and the operations it
// performs on them:
// - its few word-sized atomic globals, in C11 atomics: `Synchronization.Atomic` needs macOS 15 and
//   iOS 18, newer than the package's deployment targets, so the Swift module cannot declare them
//   itself on every platform;
// - the globals it reads on every lock operation or callback (the stripe locks, the adoption gate,
//   the per-thread state). A Swift global with an initialiser is initialised lazily, and every read
//   of one checks that it was: one atomic load, except under ThreadSanitizer, where the Swift
//   runtime takes a lock on each read (so that the sanitizer sees the initialisation happen before
//   it). Every thread of a process that uses futures would then take that one lock all the time.
//
// The globals are defined in atomic_globals.c with constant initial values. The operations are
// `static inline`: Swift inlines them, including into the `@inlinable` code of Futures that its
// clients compile, where each atomic one is one instruction (a thread-local's address may take a
// call). Every atomic operation names its memory ordering, and the Swift code that calls it says
// why that ordering is enough. Nothing here is for use outside Futures.
//
// One function is not about globals: the main-queue check, which calls libdispatch directly (the
// Swift overlay's generic `DispatchQueue.getSpecific(key:)` costs more than the call it wraps, and
// the check runs for every registration with the default executor).

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#if defined(__APPLE__)
#include <os/lock.h>
#else
#include <pthread.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

// MARK: - The installed context carriers

/// The address of the `CarrierSet` that `FutureContext.bootstrap` installed (allocated once, never
/// freed), or 0.
extern _Atomic(uintptr_t) swift_futures_installed_carriers;

static inline uintptr_t swift_futures_installed_carriers_load_relaxed(void) {
    return atomic_load_explicit(&swift_futures_installed_carriers, memory_order_relaxed);
}

static inline uintptr_t swift_futures_installed_carriers_load_acquire(void) {
    return atomic_load_explicit(&swift_futures_installed_carriers, memory_order_acquire);
}

/// Stores `desired` if no set is installed yet (release on success): whether it did.
static inline bool swift_futures_installed_carriers_install_release(uintptr_t desired) {
    uintptr_t expected = 0;
    return atomic_compare_exchange_strong_explicit(
        &swift_futures_installed_carriers, &expected, desired, memory_order_release, memory_order_relaxed);
}

// MARK: - Diagnostics' tracking

/// Whether futures made now are tracked: 0 until the first future made reads the environment (or
/// tracking is switched), then 1 (off) or 2 (on).
extern _Atomic(uint8_t) swift_futures_tracking_switch;

static inline uint8_t swift_futures_tracking_switch_load_relaxed(void) {
    return atomic_load_explicit(&swift_futures_tracking_switch, memory_order_relaxed);
}

static inline void swift_futures_tracking_switch_store_relaxed(uint8_t value) {
    atomic_store_explicit(&swift_futures_tracking_switch, value, memory_order_relaxed);
}

/// Stores `desired` if the switch is still `expected` (relaxed): whether it did.
static inline bool swift_futures_tracking_switch_compare_exchange_relaxed(uint8_t expected, uint8_t desired) {
    return atomic_compare_exchange_strong_explicit(
        &swift_futures_tracking_switch, &expected, desired, memory_order_relaxed, memory_order_relaxed);
}

/// How many diagnostics scopes exist.
extern _Atomic(intptr_t) swift_futures_scope_count;

static inline intptr_t swift_futures_scope_count_load_relaxed(void) {
    return atomic_load_explicit(&swift_futures_scope_count, memory_order_relaxed);
}

static inline void swift_futures_scope_count_add_relaxed(intptr_t delta) {
    atomic_fetch_add_explicit(&swift_futures_scope_count, delta, memory_order_relaxed);
}

/// The id of the next future tracked (starts at 1).
extern _Atomic(uint64_t) swift_futures_next_tracking_id;

/// The next id, counting it as drawn (relaxed): the value before the increment.
static inline uint64_t swift_futures_next_tracking_id_draw_relaxed(void) {
    return atomic_fetch_add_explicit(&swift_futures_next_tracking_id, 1, memory_order_relaxed);
}

// MARK: - The adoption gate

/// Raised while an exclusive holder of the adoption gate holds it or waits for the slots to empty.
extern _Atomic(intptr_t) swift_futures_gate_writer;

static inline intptr_t swift_futures_gate_writer_load_seq_cst(void) {
    return atomic_load_explicit(&swift_futures_gate_writer, memory_order_seq_cst);
}

static inline void swift_futures_gate_writer_store_seq_cst(intptr_t value) {
    atomic_store_explicit(&swift_futures_gate_writer, value, memory_order_seq_cst);
}

static inline void swift_futures_gate_writer_store_release(intptr_t value) {
    atomic_store_explicit(&swift_futures_gate_writer, value, memory_order_release);
}

/// Hands threads their slots of the gate in turn.
extern _Atomic(intptr_t) swift_futures_gate_next_slot;

/// The next slot number, counting it as drawn (relaxed): the value before the increment.
static inline intptr_t swift_futures_gate_next_slot_draw_relaxed(void) {
    return atomic_fetch_add_explicit(&swift_futures_gate_next_slot, 1, memory_order_relaxed);
}

/// Counts the changes to merge sets' tables of forwards: raised as every exclusive holder of the
/// gate leaves it (every split is made inside one) and by a merge that takes a target's table over.
/// A walk that reads the same count before it starts and again inside the gate held exclusively
/// saw every table as it is now. 64 bits everywhere: a walker that slept through a wrap-around of
/// the count would reuse a walk that no longer holds.
extern _Atomic(uint64_t) swift_futures_forward_generation;

static inline uint64_t swift_futures_forward_generation_load_acquire(void) {
    return atomic_load_explicit(&swift_futures_forward_generation, memory_order_acquire);
}

static inline void swift_futures_forward_generation_raise_release(void) {
    atomic_fetch_add_explicit(&swift_futures_forward_generation, 1, memory_order_release);
}

// A slot of the gate: a counter of shared holders, in `swift_futures_adoption_gate` (below).

static inline void swift_futures_gate_slot_add_seq_cst(void *slot, intptr_t delta) {
    atomic_fetch_add_explicit((_Atomic(intptr_t) *)slot, delta, memory_order_seq_cst);
}

static inline void swift_futures_gate_slot_subtract_release(void *slot, intptr_t delta) {
    atomic_fetch_sub_explicit((_Atomic(intptr_t) *)slot, delta, memory_order_release);
}

static inline intptr_t swift_futures_gate_slot_load_seq_cst(void *slot) {
    return atomic_load_explicit((_Atomic(intptr_t) *)slot, memory_order_seq_cst);
}

// MARK: - The stripe locks

// The lock the library uses (`RawLock` on the Swift side), its unlocked value, and its operations:
// - on Apple platforms, `os_unfair_lock`;
// - on Linux (Android included), a futex word: 0 unlocked, 1 locked, 2 locked with a thread that
//   may be asleep on it. In optimised builds, taking and releasing it uncontended is one atomic
//   instruction each, inlined where the lock is used; a contended lock spins a little (below),
//   and only a thread that must sleep, or wake a sleeper, calls into atomic_globals.c for the
//   `futex` system call. A `pthread_mutex_t` costs a call and its type and owner checks on every
//   operation. The word is a plain `uint32_t` (Swift never reads it), operated on with the
//   compiler's `__atomic` builtins;
// - elsewhere, `pthread_mutex_t`.
// Every way of acquiring is an acquire operation on the word and releasing a release operation,
// so what one holder wrote happens before what the next holder reads. ThreadSanitizer sees those
// atomics (all of them are here, in the header, compiled with the code that uses them); it no
// longer sees a mutex, so it reports no lock-order inversions: the library's own rule against
// nesting stripe locks is checked by `LockChecks` in debug builds, and a standalone `Lock` checks
// its owner in debug builds.
#if defined(__APPLE__)
typedef os_unfair_lock swift_futures_raw_lock;
#define SWIFT_FUTURES_RAW_LOCK_INIT OS_UNFAIR_LOCK_INIT
#elif defined(__linux__)
typedef struct {
    uint32_t word;
} swift_futures_raw_lock;
#define SWIFT_FUTURES_RAW_LOCK_INIT {0}
/// Sleeps while `lock`'s word is 2 (or until a spurious wake-up); keeps `errno`.
void swift_futures_raw_lock_sleep(swift_futures_raw_lock *lock);
/// Wakes one thread asleep on `lock`, which was just released; keeps `errno`.
void swift_futures_raw_lock_wake(swift_futures_raw_lock *lock);

/// Takes `lock`, which another thread held a moment ago: spins a little, then sleeps until a
/// release wakes it. Out of line, so that the inlined fast path stays one instruction.
static inline __attribute__((noinline, cold)) void swift_futures_raw_lock_lock_contended(swift_futures_raw_lock *lock) {
    // Critical regions are a few hundred instructions: a holder running on another core is likely
    // to release the lock within a short spin, which costs less than a sleep and a wake-up.
    for (int spin = 0; spin < 64; spin++) {
        uint32_t state = __atomic_load_n(&lock->word, __ATOMIC_RELAXED);
        if (state == 0) {
            uint32_t expected = 0;
            if (__atomic_compare_exchange_n(&lock->word, &expected, 1, true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                return;
            }
        } else if (state == 2) {
            break;  // others already sleep on it: join them rather than compete
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__ARM_ARCH) && __ARM_ARCH >= 7)
        __asm__ __volatile__("yield");
#endif
    }
    // Mark the lock contended (2) whenever taking it from here, so that its release wakes a
    // sleeper: a thread that takes it here cannot know whether others still sleep. A spurious or
    // interrupted wake-up, or a word that changed before the sleep began, just tries again.
    while (__atomic_exchange_n(&lock->word, 2, __ATOMIC_ACQUIRE) != 0) {
        swift_futures_raw_lock_sleep(lock);
    }
}
#else
typedef pthread_mutex_t swift_futures_raw_lock;
#define SWIFT_FUTURES_RAW_LOCK_INIT PTHREAD_MUTEX_INITIALIZER
#endif

/// Makes `lock`, in memory that will not move until ``swift_futures_raw_lock_destroy``, unlocked.
static inline void swift_futures_raw_lock_init(swift_futures_raw_lock *lock) {
#if defined(__APPLE__)
    *lock = OS_UNFAIR_LOCK_INIT;
#elif defined(__linux__)
    __atomic_store_n(&lock->word, 0, __ATOMIC_RELAXED);
#else
    pthread_mutex_init(lock, NULL);
#endif
}

/// Ends `lock`, which nobody holds.
static inline void swift_futures_raw_lock_destroy(swift_futures_raw_lock *lock) {
#if !defined(__APPLE__) && !defined(__linux__)
    pthread_mutex_destroy(lock);
#else
    (void)lock;
#endif
}

/// Takes `lock` if nobody holds it: whether it did.
static inline bool swift_futures_raw_lock_trylock(swift_futures_raw_lock *lock) {
#if defined(__APPLE__)
    return os_unfair_lock_trylock(lock);
#elif defined(__linux__)
    uint32_t expected = 0;
    return __atomic_compare_exchange_n(&lock->word, &expected, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
#else
    return pthread_mutex_trylock(lock) == 0;
#endif
}

static inline void swift_futures_raw_lock_lock(swift_futures_raw_lock *lock) {
#if defined(__APPLE__)
    os_unfair_lock_lock(lock);
#elif defined(__linux__)
    if (__builtin_expect(swift_futures_raw_lock_trylock(lock), 1)) {
        return;
    }
    swift_futures_raw_lock_lock_contended(lock);
#else
    pthread_mutex_lock(lock);
#endif
}

static inline void swift_futures_raw_lock_unlock(swift_futures_raw_lock *lock) {
#if defined(__APPLE__)
    os_unfair_lock_unlock(lock);
#elif defined(__linux__)
    if (__builtin_expect(__atomic_exchange_n(&lock->word, 0, __ATOMIC_RELEASE) == 2, 0)) {
        swift_futures_raw_lock_wake(lock);
    }
#else
    pthread_mutex_unlock(lock);
#endif
}

#if defined(__linux__)
/// The futex word's state (0 unlocked, 1 locked, 2 locked and contended), for tests.
static inline uint32_t swift_futures_raw_lock_state(swift_futures_raw_lock *lock) {
    return __atomic_load_n(&lock->word, __ATOMIC_RELAXED);
}
#endif

/// The owner of a standalone lock, recorded by debug builds (0: none): loaded and stored relaxed,
/// since only the owner's own thread compares it with itself.
static inline uintptr_t swift_futures_lock_owner_load_relaxed(uintptr_t *owner) {
    return __atomic_load_n(owner, __ATOMIC_RELAXED);
}

static inline void swift_futures_lock_owner_store_relaxed(uintptr_t *owner, uintptr_t value) {
    __atomic_store_n(owner, value, __ATOMIC_RELAXED);
}

/// One stripe lock, alone on its cache line (`LockTable.stride` bytes).
typedef struct {
    _Alignas(64) swift_futures_raw_lock lock;
} swift_futures_stripe;

/// How many stripe locks there are (`LockTable.count`).
#define SWIFT_FUTURES_STRIPE_COUNT 256

/// The stripe locks, initialised statically, never moved.
extern swift_futures_stripe swift_futures_stripes[SWIFT_FUTURES_STRIPE_COUNT];

static inline void *swift_futures_stripes_base(void) {
    return (void *)swift_futures_stripes;
}

static inline intptr_t swift_futures_stripe_count(void) {
    return (intptr_t)(sizeof(swift_futures_stripes) / sizeof(swift_futures_stripes[0]));
}

static inline intptr_t swift_futures_stripe_stride(void) {
    return (intptr_t)sizeof(swift_futures_stripes[0]);
}

/// The stripes this thread holds, encoded as `LockChecks` says (debug builds only).
extern _Thread_local uintptr_t swift_futures_held_stripes;

static inline uintptr_t swift_futures_held_stripes_get(void) {
    return swift_futures_held_stripes;
}

static inline void swift_futures_held_stripes_set(uintptr_t value) {
    swift_futures_held_stripes = value;
}

/// A number that identifies the calling thread while it runs (the address of one of its
/// thread-locals), never 0.
static inline uintptr_t swift_futures_thread_identity(void) {
    return (uintptr_t)&swift_futures_held_stripes;
}

// MARK: - The adoption gate's storage

/// The lock of the gate's exclusive holders, then its slots (`AdoptionGate.spacing` bytes apart):
/// initialised statically, never moved.
typedef struct {
    _Alignas(128) swift_futures_raw_lock lock;
    struct {
        _Alignas(128) _Atomic(intptr_t) count;
    } slots[16];
} swift_futures_gate;

/// The distance between the gate's lock and its first slot, and between slots
/// (`AdoptionGate.spacing`), and how many slots there are (`AdoptionGate.slotCount`).
static inline intptr_t swift_futures_gate_spacing(void) {
    return (intptr_t)sizeof(((swift_futures_gate *)0)->slots[0]);
}

static inline intptr_t swift_futures_gate_slot_count(void) {
    return (intptr_t)(sizeof(((swift_futures_gate *)0)->slots) / sizeof(((swift_futures_gate *)0)->slots[0]));
}

extern swift_futures_gate swift_futures_adoption_gate;

static inline void *swift_futures_adoption_gate_base(void) {
    return (void *)&swift_futures_adoption_gate;
}

// MARK: - The thread's context

/// This thread's `ThreadContext` (retained), or null until it first needs one.
extern _Thread_local void *swift_futures_thread_context;

static inline void *swift_futures_thread_context_get(void) {
    return swift_futures_thread_context;
}

static inline void swift_futures_thread_context_set(void *context) {
    swift_futures_thread_context = context;
}

// MARK: - The main queue's mark

#if defined(__APPLE__)
#include <dispatch/dispatch.h>
#else
/// libdispatch's own function (declared here: its header is not on a C target's include path
/// outside Apple platforms; the library is linked into every process that imports Dispatch).
extern void *dispatch_get_specific(const void *key);
#endif

/// Whether the queue running the calling code, or a queue it targets, has a value for `key`: the
/// key of a `DispatchSpecificKey`, which is the key object's address.
static inline bool swift_futures_dispatch_specific_is_set(const void *key) {
    return dispatch_get_specific(key) != 0;
}

#ifdef __cplusplus
}
#endif

#endif
