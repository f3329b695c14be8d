#ifndef HEAP_STATISTICS_H
#define HEAP_STATISTICS_H

#include <stddef.h>

/// Bytes of heap the process has in use: allocated through malloc and not yet freed.
size_t heap_statistics_in_use(void);

/// Whether malloc's own counters see the program's allocations: not when a sanitizer replaced
/// malloc with its own allocator.
int heap_statistics_available(void);

#endif
