/* The C side of bench.py's single-get figure: the same dds_get calls the
 * Python loops make, made from a C loop in the same process, on the same
 * store, destination and rows. Built by bench.py with the system compiler;
 * dds_get comes in as a function pointer (pyddstore loads libddstore with
 * RTLD_LOCAL, so this file links nothing). */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int (*dds_get_fn)(void *store, const char *name, void *dst, size_t dst_bytes, int64_t start,
                          int64_t count);

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds taken by `calls` calls of get(store, name, dst, bytes, starts[k % n], 1);
 * *status: the first nonzero status (then the loop stops), else 0. */
double cloop_get(uintptr_t get, uintptr_t store, const char *name, uintptr_t dst, size_t bytes,
                 const int64_t *starts, int64_t n, int64_t calls, int *status) {
    dds_get_fn fn = (dds_get_fn)get;
    int64_t k = 0;
    *status = 0;
    double t0 = now_s();
    for (int64_t c = 0; c < calls; c++) {
        int rc = fn((void *)store, name, (void *)dst, bytes, starts[k], 1);
        if (rc) {
            *status = rc;
            break;
        }
        if (++k == n) k = 0;
    }
    return now_s() - t0;
}
