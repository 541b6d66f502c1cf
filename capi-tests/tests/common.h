/* Helpers shared by the C test programs: checks that report the rank, the
 * call and the library's message, and a pass/fail tally agreed by all ranks. */
#ifndef DDS_TEST_COMMON_H
#define DDS_TEST_COMMON_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddstore.h"

static int t_rank, t_size, t_failed, t_passed;

/* A call that must succeed: on failure, report and abort the job. */
#define CHECK(call)                                                                           \
  do {                                                                                        \
    dds_status s_ = (call);                                                                   \
    if (s_ != DDS_OK) {                                                                       \
      fprintf(stderr, "rank %d %s:%d: %s -> %s: %s\n", t_rank, __FILE__, __LINE__, #call,     \
              dds_status_string(s_), dds_last_error());                                       \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                           \
    }                                                                                         \
  } while (0)

/* A condition that must hold; counted, and reported with its location. */
#define EXPECT(cond)                                                                          \
  do {                                                                                        \
    if (cond) {                                                                               \
      t_passed++;                                                                             \
    } else {                                                                                  \
      t_failed++;                                                                             \
      fprintf(stderr, "rank %d %s:%d: expected %s\n", t_rank, __FILE__, __LINE__, #cond);     \
    }                                                                                         \
  } while (0)

/* A call that must fail with `want` and a message containing `part`. */
#define EXPECT_ERR(call, want, part)                                                          \
  do {                                                                                        \
    dds_status s_ = (call);                                                                   \
    const char *m_ = dds_last_error();                                                        \
    if (s_ == (want) && strstr(m_, (part)) != NULL) {                                         \
      t_passed++;                                                                             \
    } else {                                                                                  \
      t_failed++;                                                                             \
      fprintf(stderr, "rank %d %s:%d: %s -> %s \"%s\"; expected %s with \"%s\"\n", t_rank,    \
              __FILE__, __LINE__, #call, dds_status_string(s_), s_ ? m_ : "", #want, (part)); \
    }                                                                                         \
  } while (0)

static inline void t_init(int *argc, char ***argv) {
  int provided;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &t_size);
}

/* Agrees on the outcome, prints one closing line on rank 0, finalises. */
static inline int t_finish(const char *name) {
  int sums[2] = {t_passed, t_failed}, tot[2];
  MPI_Allreduce(sums, tot, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (t_rank == 0) printf("%s on %d ranks: %d passed, %d failed\n", name, t_size, tot[0], tot[1]);
  MPI_Finalize();
  return tot[1] ? 1 : 0;
}

/* The memory or time instrumentation this process runs under, or NULL:
 * AddressSanitizer (compiled in), valgrind (its client request), or the
 * tool scripts/sanitize.sh names in DDS_TEST_SANITIZER. Under these, freed
 * blocks wait in a quarantine before reuse and every instruction is slower,
 * so a bound on resident memory or on time measures the tool: tests skip
 * exactly those bounds there (the tool's own leak check covers leaks) and
 * keep every other check. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define T_HAVE_VALGRIND_H 1
#endif
#endif
static inline const char *t_instrumented(void) {
#if defined(__SANITIZE_ADDRESS__)
  return "AddressSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return "AddressSanitizer";
#endif
#endif
#ifdef T_HAVE_VALGRIND_H
  if (RUNNING_ON_VALGRIND) return "valgrind";
#endif
  const char *e = getenv("DDS_TEST_SANITIZER");
  return (e && *e) ? e : NULL;
}

/* Method the tests run with: DDS_TEST_METHOD (default 0) replaces method 0
 * in t_store, so one program covers method 0 and method 1 (libfabric; the
 * provider comes from DDSTORE_FABRIC). */
static inline int t_method(void) {
  const char *m = getenv("DDS_TEST_METHOD");
  return (m && *m) ? atoi(m) : 0;
}

/* True when dds_get_batch is collective in the stores t_store makes:
 * method 0 unless DDSTORE_BATCH_MODE=onesided (then, as methods 1 and 2,
 * each rank's batch is its own and errors stay on the rank that made them). */
static inline int t_batch_collective(void) {
  const char *m = getenv("DDSTORE_BATCH_MODE");
  return t_method() == 0 && !(m && (strcmp(m, "onesided") == 0 || strcmp(m, "one-sided") == 0));
}

static inline dds_store *t_store(int method, int width) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  if (method == 0) method = t_method();
  o.method = method;
  o.width = width;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  return s;
}

/* Value stored at element `col` of global row `g` of a variable tagged `tag`:
 * distinct for every (tag, row, column), so a misplaced row is detected. */
static inline double t_value(int tag, long long g, long long col) {
  return (double)tag * 1e6 + (double)g * 100.0 + (double)col;
}

/* Writes element (g, col) as an item of `item` bytes. Small ints wrap; the
 * same function is used to write and to check, so the comparison is exact. */
static inline void t_put(void *row, long long col, int item, int tag, long long g) {
  long long v = (long long)t_value(tag, g, col);
  switch (item) {
    case 1: ((unsigned char *)row)[col] = (unsigned char)(v * 7 + g); break;
    case 2: ((short *)row)[col] = (short)v; break;
    case 4: ((float *)row)[col] = (float)t_value(tag, g, col); break;
    default: ((double *)row)[col] = t_value(tag, g, col); break;
  }
}

/* Fills `rows` rows starting at global row `g0`. */
static inline void t_fill(void *buf, long long rows, long long elems, int item, int tag, long long g0) {
  for (long long r = 0; r < rows; r++)
    for (long long c = 0; c < elems; c++) t_put((char *)buf + (r * elems) * item, c, item, tag, g0 + r);
}

/* 1 when `rows` rows of `buf` hold global rows `idx` (or g0.. when idx is NULL). */
static inline int t_rows_ok(const void *buf, long long rows, long long elems, int item, int tag, const int64_t *idx,
                     long long g0) {
  char *want = malloc((size_t)(elems * item));
  int ok = 1;
  for (long long r = 0; r < rows && ok; r++) {
    long long g = idx ? idx[r] : g0 + r;
    t_fill(want, 1, elems, item, tag, g);
    if (memcmp(want, (const char *)buf + r * elems * item, (size_t)(elems * item)) != 0) {
      fprintf(stderr, "rank %d: row %lld (global %lld) of tag %d differs\n", t_rank, r, g, tag);
      ok = 0;
    }
  }
  free(want);
  return ok;
}

/* Simple deterministic generator (xorshift), seeded per rank. */
/* Tests `req` every 10 ms, never blocking in the library, until its read
 * completes or 30 s pass (a request that never completes fails, not hangs):
 * 1 when done. */
static inline int t_poll_done(dds_request *req) {
  int done = 0;
  for (int i = 0; i < 3000 && !done; i++) {
    if (dds_request_test(req, &done) != DDS_OK) return 0;
    if (!done) usleep(10000);
  }
  return done;
}

static unsigned long long t_rng = 88172645463325252ULL;
static inline unsigned long long t_next(void) {
  t_rng ^= t_rng << 13;
  t_rng ^= t_rng >> 7;
  t_rng ^= t_rng << 17;
  return t_rng;
}

#endif
