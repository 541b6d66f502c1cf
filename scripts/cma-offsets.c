/* The kernel copy behind libfabric's shm provider, alone: process_vm_readv
 * (cross-memory attach, CMA) of 200 KiB rows from page-aligned rows of this
 * process into a destination 0, 16, 48, 64 or 4000 bytes past a page boundary.
 * It shows how much of the spread across destination offsets of the
 * `fabric:shm` group (docs/dev/results.md) belongs to the kernel, which the
 * library cannot change (docs/dev/performance.md, "Row copies").
 *
 *     cc -O2 scripts/cma-offsets.c -o /tmp/cma-offsets && /tmp/cma-offsets
 *
 * Prints, per offset, the best of 20 passes over 128 rows in us per row, for
 * three rounds (so that a figure disturbed by other jobs shows as such). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { ROW = 204800, ROWS = 128, SRC_ROWS = 4 * ROWS, PASSES = 20, ROUNDS = 3 };

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
  static const int offsets[] = {0, 16, 48, 64, 4000};
  const int n_off = (int)(sizeof offsets / sizeof offsets[0]);
  char *src = aligned_alloc(4096, (size_t)SRC_ROWS * ROW);
  char *dst = aligned_alloc(4096, (size_t)ROWS * ROW + 8192);
  if (!src || !dst) return 1;
  memset(src, 1, (size_t)SRC_ROWS * ROW);
  memset(dst, 0, (size_t)ROWS * ROW + 8192);
  pid_t me = getpid();
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < n_off; k++) {
      char *d = dst + offsets[k];
      double best = 1e30;
      for (int pass = 0; pass < PASSES; pass++) {
        double t0 = seconds();
        for (size_t i = 0; i < ROWS; i++) {
          size_t r = (i * 7919) % SRC_ROWS; /* rows spread over 4x the destination: not all in cache */
          struct iovec local = {d + i * ROW, ROW}, remote = {src + r * ROW, ROW};
          if (process_vm_readv(me, &local, 1, &remote, 1, 0) != ROW) {
            perror("process_vm_readv");
            return 1;
          }
        }
        double us = (seconds() - t0) / ROWS * 1e6;
        if (us < best) best = us;
      }
      printf("round %d: destination page+%-4d %6.1f us per row\n", round, offsets[k], best);
    }
  }
  free(src);
  free(dst);
  return 0;
}
