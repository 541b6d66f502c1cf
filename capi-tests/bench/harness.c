/* The benchmark's harness (harness.h): options, errors, allocation, clocks,
 * and the fill pattern every read is verified against. It calls nothing else
 * of the benchmark. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

const char *const DEST_NAME[N_DEST] = {"reused", "fresh", "registered", "page+0", "page+16", "page+64"};
bench_opts g_opt;
_Thread_local int bench_tid;
int g_me;

void die(const char *what, dds_status s) {
  fprintf(stderr, "bench rank %d: %s -> %s: %s\n", g_me, what, dds_status_string(s), dds_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "bench rank %d: out of memory (%zu bytes)\n", g_me, n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Word k of global row g: unique per (row, word), never zero-like. */
uint64_t pattern_word(int64_t g, int64_t k) {
  return (((uint64_t)g << 32) | (uint64_t)k) ^ 0xA5A5A5A5A5A5A5A5ULL;
}

void fill_rows(char *buf, int64_t g0, int64_t rows, int64_t rb) {
  for (int64_t r = 0; r < rows; r++) {
    uint64_t *w = (uint64_t *)(buf + r * rb);
    for (int64_t k = 0; k < rb / 8; k++) w[k] = pattern_word(g0 + r, k);
  }
}

/* Number of rows of `buf` that are not global rows gs[0..rows). */
int64_t check_rows(const char *buf, const int64_t *gs, int64_t rows, int64_t rb) {
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    const uint64_t *w = (const uint64_t *)(buf + r * rb);
    for (int64_t k = 0; k < rb / 8; k++)
      if (w[k] != pattern_word(gs[r], k)) {
        if (bad < 3)
          fprintf(stderr,
                  "bench rank %d: row %lld of the destination is not global row %lld (word %lld holds %#llx, "
                  "which is word %lld of row %lld)\n",
                  g_me, (long long)r, (long long)gs[r], (long long)k, (unsigned long long)w[k],
                  (long long)((w[k] ^ 0xA5A5A5A5A5A5A5A5ULL) & 0xffffffffULL),
                  (long long)((w[k] ^ 0xA5A5A5A5A5A5A5A5ULL) >> 32));
        bad++;
        break;
      }
  }
  return bad;
}

int machine_ticks(unsigned long long v[8]) {
  int ok = 0;
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return 0;
  ok = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
              &v[7]) == 8;
  fclose(f);
  return ok;
}

/* 1 when `name` is in the comma-separated `list` (a NULL list selects all). */
int bench_selected(const char *list, const char *name) {
  if (!list) return 1;
  size_t n = strlen(name);
  for (const char *s = list; *s;) {
    size_t k = strcspn(s, ",");
    if (k == n && !strncmp(s, name, n)) return 1;
    s += k + (s[k] == ',');
  }
  return 0;
}
