#include "CFuturesAtomicGlobals.h"

// Constant initial values: the globals are in the binary's data, ready before any code runs.
_Atomic(uintptr_t) swift_futures_installed_carriers = 0;
_Atomic(uint8_t) swift_futures_tracking_switch = 0;
_Atomic(intptr_t) swift_futures_scope_count = 0;
_Atomic(uint64_t) swift_futures_next_tracking_id = 1;
_Atomic(intptr_t) swift_futures_gate_writer = 0;
_Atomic(intptr_t) swift_futures_gate_next_slot = 0;
