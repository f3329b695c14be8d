// Counts the Swift runtime's reference-counting calls a program makes, by call site.
//
//     cc -O2 -shared -fPIC -o count-retains.so count-retains.c -ldl
//     LD_PRELOAD=$PWD/count-retains.so RETAINS_OUT=/tmp/sites.txt .build/release/probe map 20
//
// Each line of RETAINS_OUT: kind (0 retain, 1 release, 2 retain_n, 3 release_n), calls on an
// object, calls on nil, the call site's offset in its binary, and the binary. `count-retains.py`
// subtracts a run with zero repetitions and names each site. Works on Linux, where a client's calls
// into libswiftCore go through the PLT and can be interposed.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void *(*real_retain)(void *);
static void (*real_release)(void *);
static void *(*real_retain_n)(void *, uint32_t);
static void (*real_release_n)(void *, uint32_t);

#define SLOTS 65536
static struct { void *site; int kind; long objects, nils; } table[SLOTS];
static int counting = 1;

static void resolve(void) {
    real_retain = dlsym(RTLD_NEXT, "swift_retain");
    real_release = dlsym(RTLD_NEXT, "swift_release");
    real_retain_n = dlsym(RTLD_NEXT, "swift_retain_n");
    real_release_n = dlsym(RTLD_NEXT, "swift_release_n");
}

// Single-threaded programs only: the table is not synchronised.
static void note(void *site, int kind, void *object) {
    if (!counting) return;
    unsigned long slot = (((unsigned long)site >> 2) * 31 + kind) % SLOTS;
    while (table[slot].site && (table[slot].site != site || table[slot].kind != kind)) slot = (slot + 1) % SLOTS;
    table[slot].site = site;
    table[slot].kind = kind;
    if (object) table[slot].objects++; else table[slot].nils++;
}

void *swift_retain(void *o) {
    if (!real_retain) resolve();
    note(__builtin_return_address(0), 0, o);
    return real_retain(o);
}
void swift_release(void *o) {
    if (!real_release) resolve();
    note(__builtin_return_address(0), 1, o);
    real_release(o);
}
void *swift_retain_n(void *o, uint32_t n) {
    if (!real_retain_n) resolve();
    note(__builtin_return_address(0), 2, o);
    return real_retain_n(o, n);
}
void swift_release_n(void *o, uint32_t n) {
    if (!real_release_n) resolve();
    note(__builtin_return_address(0), 3, o);
    real_release_n(o, n);
}

__attribute__((destructor)) static void report(void) {
    counting = 0;
    const char *path = getenv("RETAINS_OUT");
    FILE *out = fopen(path ? path : "/tmp/retains.txt", "w");
    if (!out) return;
    for (int i = 0; i < SLOTS; i++) {
        if (!table[i].site) continue;
        Dl_info info;
        unsigned long offset = 0;
        const char *binary = "?";
        if (dladdr(table[i].site, &info)) {
            offset = (unsigned long)table[i].site - (unsigned long)info.dli_fbase;
            binary = info.dli_fname;
        }
        fprintf(out, "%d %ld %ld 0x%lx %s\n", table[i].kind, table[i].objects, table[i].nils, offset, binary);
    }
    fclose(out);
}
