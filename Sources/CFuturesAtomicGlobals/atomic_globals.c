#include "CFuturesAtomicGlobals.h"

#include <stddef.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// Constant initial values: the globals are in the binary's data, ready before any code runs.
_Atomic(uintptr_t) swift_futures_installed_carriers = 0;
_Atomic(uint8_t) swift_futures_tracking_switch = 0;
_Atomic(intptr_t) swift_futures_scope_count = 0;
_Atomic(uint64_t) swift_futures_next_tracking_id = 1;
_Atomic(intptr_t) swift_futures_gate_writer = 0;
_Atomic(intptr_t) swift_futures_gate_next_slot = 0;
_Atomic(uint64_t) swift_futures_forward_generation = 0;

swift_futures_stripe swift_futures_stripes[SWIFT_FUTURES_STRIPE_COUNT] = {
    [0 ... SWIFT_FUTURES_STRIPE_COUNT - 1] = {SWIFT_FUTURES_RAW_LOCK_INIT}};
_Static_assert(sizeof(swift_futures_stripe) == 64, "a stripe lock is one cache line (LockTable.stride)");

_Thread_local uintptr_t swift_futures_held_stripes = 0;

swift_futures_gate swift_futures_adoption_gate = {.lock = SWIFT_FUTURES_RAW_LOCK_INIT};
_Static_assert(sizeof(((swift_futures_gate *)0)->slots[0]) == 128, "a slot of the gate is two cache lines");
_Static_assert(offsetof(swift_futures_gate, slots) == 128, "the gate's lock fits before its first slot");
_Static_assert(sizeof(swift_futures_gate) == 128 * 17, "the gate is its lock and 16 slots");

_Thread_local void *swift_futures_thread_context = 0;

#if defined(__linux__)
void swift_futures_raw_lock_lock_contended(swift_futures_raw_lock *lock) {
    _Atomic(uint32_t) *word = (_Atomic(uint32_t) *)&lock->word;
    // Critical regions are a few hundred instructions: a holder running on another core is likely
    // to release the lock within a short spin, which costs less than a sleep and a wake-up.
    for (int spin = 0; spin < 64; spin++) {
        uint32_t state = atomic_load_explicit(word, memory_order_relaxed);
        if (state == 0) {
            uint32_t expected = 0;
            if (atomic_compare_exchange_weak_explicit(word, &expected, 1, memory_order_acquire, memory_order_relaxed)) {
                return;
            }
        } else if (state == 2) {
            break;  // others already sleep on it: join them rather than compete
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
        __asm__ __volatile__("yield");
#endif
    }
    // Mark the lock contended (2) whenever taking it, so that its release wakes a sleeper: a thread
    // that takes it here cannot know whether others still sleep. A spurious or interrupted wake-up,
    // or a word changed before the sleep began, just tries again.
    while (atomic_exchange_explicit(word, 2, memory_order_acquire) != 0) {
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    }
}

void swift_futures_raw_lock_wake(swift_futures_raw_lock *lock) {
    syscall(SYS_futex, (_Atomic(uint32_t) *)&lock->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#endif
