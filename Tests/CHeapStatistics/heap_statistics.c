#include "heap_statistics.h"

// A libc header first: it defines the macros (`__GLIBC__`) that pick the implementation below.
#include <stdlib.h>

#if defined(__APPLE__)
#include <malloc/malloc.h>

size_t heap_statistics_in_use(void) {
    malloc_statistics_t statistics;
    malloc_zone_statistics(NULL, &statistics);
    return statistics.size_in_use;
}
#elif defined(__GLIBC__)
#include <malloc.h>

size_t heap_statistics_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
#else
#error "no heap statistics for this C library"
#endif

// Defined only when the program runs under ThreadSanitizer or AddressSanitizer.
extern void __tsan_init(void) __attribute__((weak));
extern void __asan_init(void) __attribute__((weak));

int heap_statistics_available(void) {
    return __tsan_init == NULL && __asan_init == NULL;
}
