#ifndef C_FUTURES_ATOMIC_GLOBALS_H
#define C_FUTURES_ATOMIC_GLOBALS_H

// The few word-sized atomic globals of the Futures module, and the operations it performs on them,
// in C11 atomics: `Synchronization.Atomic` needs macOS 15 and iOS 18, newer than the package's
// deployment targets, so the Swift module cannot declare them itself on every platform.
//
// The globals are defined in atomic_globals.c with constant initial values, so that reading one
// needs no lazy initialisation. The operations are `static inline`: Swift inlines them, including
// into the `@inlinable` code of Futures that its clients compile, where each is one instruction.
// Every operation names its memory ordering, and the Swift code that calls it says why that
// ordering is enough. Nothing here is for use outside Futures.

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

// A slot of the gate: a counter of shared holders, at an address the Swift side allocated (aligned
// for it) and never frees.

static inline void swift_futures_gate_slot_init(void *slot) {
    atomic_init((_Atomic(intptr_t) *)slot, 0);
}

static inline void swift_futures_gate_slot_add_seq_cst(void *slot, intptr_t delta) {
    atomic_fetch_add_explicit((_Atomic(intptr_t) *)slot, delta, memory_order_seq_cst);
}

static inline void swift_futures_gate_slot_subtract_release(void *slot, intptr_t delta) {
    atomic_fetch_sub_explicit((_Atomic(intptr_t) *)slot, delta, memory_order_release);
}

static inline intptr_t swift_futures_gate_slot_load_seq_cst(void *slot) {
    return atomic_load_explicit((_Atomic(intptr_t) *)slot, memory_order_seq_cst);
}

#ifdef __cplusplus
}
#endif

#endif
