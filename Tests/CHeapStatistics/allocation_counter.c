#include "heap_statistics.h"

// A libc header first: it defines the macros (`__GLIBC__`) that pick the implementation below.
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#ifndef __has_feature
#define __has_feature(feature) 0
#endif

// Counting replaces malloc and its siblings for the whole program (a definition in the executable
// comes before the C library's), forwarding each call to glibc's own entry points. Not under a
// sanitizer, which brings its own allocator, nor on other C libraries.
#if defined(__GLIBC__) && !__has_feature(thread_sanitizer) && !__has_feature(address_sanitizer)
#define ALLOCATION_COUNTING 1

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic int counting;
static _Atomic size_t counted_allocations;
static _Atomic size_t counted_bytes;

static inline void note_allocation(size_t size) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&counted_allocations, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&counted_bytes, size, memory_order_relaxed);
    }
}

void *malloc(size_t size) {
    note_allocation(size);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    note_allocation(count * size);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    note_allocation(size);
    return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size) {
    note_allocation(size);
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    note_allocation(size);
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    note_allocation(size);
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}
#else
#define ALLOCATION_COUNTING 0
#endif

int allocation_counting_available(void) {
    return ALLOCATION_COUNTING && heap_statistics_available();
}

void allocation_counting_set(int on) {
#if ALLOCATION_COUNTING
    atomic_store(&counting, on);
#else
    (void)on;
#endif
}

size_t allocation_count(void) {
#if ALLOCATION_COUNTING
    return atomic_load(&counted_allocations);
#else
    return 0;
#endif
}

size_t allocation_bytes(void) {
#if ALLOCATION_COUNTING
    return atomic_load(&counted_bytes);
#else
    return 0;
#endif
}
