#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE  // glibc declares `syscall` only with it (or its default features)
#endif
#include "CFuturesAtomicGlobals.h"

#include <stddef.h>
#if defined(__linux__)
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>
#if __has_include(<linux/futex.h>)
#include <linux/futex.h>
#endif
// Some C libraries ship without the kernel's headers (musl without linux-headers): the values
// are the kernel's ABI.
#ifndef FUTEX_WAIT_PRIVATE
#define FUTEX_WAIT_PRIVATE 128
#endif
#ifndef FUTEX_WAKE_PRIVATE
#define FUTEX_WAKE_PRIVATE 129
#endif
#if !defined(SYS_futex) && defined(SYS_futex_time64)
#define SYS_futex SYS_futex_time64  // 32-bit ports with 64-bit time only
#endif
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
// The lock's operations run inside the library's calls, between the caller's own calls: a failed
// or interrupted sleep must not change the caller's `errno`.
void swift_futures_raw_lock_sleep(swift_futures_raw_lock *lock) {
    int saved = errno;
    syscall(SYS_futex, &lock->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    errno = saved;
}

void swift_futures_raw_lock_wake(swift_futures_raw_lock *lock) {
    int saved = errno;
    syscall(SYS_futex, &lock->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}
#endif
