#ifndef HEAP_STATISTICS_H
#define HEAP_STATISTICS_H

#include <stddef.h>

/// Bytes of heap the process has in use: allocated through malloc and not yet freed.
size_t heap_statistics_in_use(void);

/// Whether malloc's own counters see the program's allocations: not when a sanitizer replaced
/// malloc with its own allocator.
int heap_statistics_available(void);

/// Whether the program counts its allocations (glibc, no sanitizer): malloc and its siblings are
/// replaced by counting wrappers that forward to the C library.
int allocation_counting_available(void);

/// Starts (non-zero) or stops (zero) counting allocations, on every thread.
void allocation_counting_set(int on);

/// Allocations (malloc, calloc, realloc, aligned) counted so far, and the bytes they asked for.
size_t allocation_count(void);
size_t allocation_bytes(void);

#endif
