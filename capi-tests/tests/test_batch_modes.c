/* Method-0 batches in both modes (issue 17), every row verified.
 *
 * DDSTORE_BATCH_MODE (collective, the default, or onesided) selects the mode
 * of the stores t_store makes; DDSTORE_NODE_LOCAL on or off. Runs at 2, 4, 8
 * and 16 ranks (16: by hand; make test runs 2, 4 and 8).
 *
 * Collective mode: batches of B = 128 random 64-byte rows (fixed seeds), and
 * the request bytes each rank sent and received (dds_counters.req_bytes_*),
 * which are deterministic: every rank regenerates every rank's batches and
 * checks the counters against the exact model of the sparse exchange
 * (per round 4 bytes of count per peer, 8 bytes per index sent to its
 * owner). The bytes received per rank per batch must be at most 2 KiB and
 * within 2.5x of the P = 2 figure (4 + 8 x 64 = 516 bytes): flat in P. The
 * all-gather of DDStore 3.0 (and of libddstore before issue 17) would
 * receive 8 (P - 1) + 8 x (the other ranks' travelling rows), printed next
 * to it for docs/dev/performance.md.
 *
 * One-sided mode: different numbers of calls per rank, calls on one rank
 * only while the others wait in MPI_Barrier, 8 threads per rank reading at
 * once, no request bytes counted. Both: the batch_mode option overrides the
 * environment, an older dds_options (without batch_mode) still works, an
 * unknown mode is refused, and modes differing across ranks fail on every
 * rank. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

enum { ELEMS = 8, B = 128, BATCHES = 10, THREADS = 8 };
static const size_t RB = ELEMS * sizeof(double);

/* Uneven shards (40 to 49 rows), so owner boundaries are not aligned. */
static int64_t rows_of(int r) { return 40 + (r * 7) % 10; }
static int64_t first_row_of(int r) {
  int64_t g = 0;
  for (int q = 0; q < r; q++) g += rows_of(q);
  return g;
}
static int owner_of(int64_t g) {
  int r = 0;
  while (g >= first_row_of(r + 1)) r++;
  return r;
}

/* A private generator per (rank, batch, thread): any rank can regenerate
 * any rank's batch. */
static unsigned long long mix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
static void batch_of(int rank, int b, int thread, int64_t *idx, int64_t n, int64_t total) {
  unsigned long long s = mix(20260417ULL + 1000003ULL * (unsigned long long)rank + 7919ULL * (unsigned long long)b +
                             104729ULL * (unsigned long long)thread);
  for (int64_t i = 0; i < n; i++) {
    s = mix(s);
    /* Every 9th entry repeats an earlier one. */
    idx[i] = (i > 0 && i % 9 == 0) ? idx[(int64_t)(s % (unsigned long long)i)] : (int64_t)(s % (unsigned long long)total);
  }
}

static dds_store *make(int mode) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  EXPECT(o.batch_mode == DDS_BATCH_ENV);
  o.batch_mode = mode;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  int64_t n = rows_of(t_rank);
  double *buf = malloc(RB * (size_t)n);
  t_fill(buf, n, ELEMS, 8, 17, first_row_of(t_rank));
  CHECK(dds_add(s, "x", buf, RB * (size_t)n, n, ELEMS, 8));
  free(buf);
  return s;
}

static void counters(dds_store *s, dds_counters *c) {
  c->struct_size = sizeof *c;
  CHECK(dds_profile(s, "x", c));
}

/* Collective batches of B rows; the request counters match the model. */
static void test_collective_bytes(void) {
  dds_store *s = make(DDS_BATCH_COLLECTIVE);
  const int64_t total = first_row_of(t_size);
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "x", &info));
  /* Which owners this rank copies directly: itself, or (node-local reads on,
   * one node here) every rank. Other layouts (DDSTORE_TEST_NODE_LOCAL_WIDTH) get
   * only the bounds. */
  const int all_direct = info.node_local && info.node_ranks == t_size;
  const int exact = !info.node_local || all_direct;
  int64_t idx[B];
  double *dst = malloc(RB * B);
  dds_counters before, after;
  counters(s, &before);
  unsigned long long want_sent = 0, want_recv = 0, old_recv = 0;
  for (int b = 0; b < BATCHES; b++) {
    batch_of(t_rank, b, 0, idx, B, total);
    memset(dst, 0, RB * B);
    CHECK(dds_get_batch(s, "x", dst, RB * B, idx, B));
    EXPECT(t_rows_ok(dst, B, ELEMS, 8, 17, idx, 0));
    if (all_direct) continue;
    /* The model: every rank's travelling rows (owner != rank). */
    unsigned long long sent = 0, recv = 0, others = 0;
    for (int q = 0; q < t_size; q++) {
      int64_t qi[B];
      batch_of(q, b, 0, qi, B, total);
      for (int i = 0; i < B; i++) {
        int o = owner_of(qi[i]);
        if (o == q) continue;
        if (q == t_rank) sent += 8;
        if (o == t_rank) recv += 8;
        if (q != t_rank) others += 8;
      }
    }
    /* One round (B rows of 64 bytes are far below the cap): counts to and
     * from every peer. */
    want_sent += sent + 4ULL * (unsigned long long)(t_size - 1);
    want_recv += recv + 4ULL * (unsigned long long)(t_size - 1);
    old_recv += others + 8ULL * (unsigned long long)(t_size - 1);
  }
  counters(s, &after);
  unsigned long long got_sent = after.req_bytes_sent - before.req_bytes_sent;
  unsigned long long got_recv = after.req_bytes_recv - before.req_bytes_recv;
  if (exact) {
    EXPECT(got_sent == want_sent);
    EXPECT(got_recv == want_recv);
    if (got_sent != want_sent || got_recv != want_recv)
      fprintf(stderr, "rank %d: request bytes sent %llu (model %llu), received %llu (model %llu)\n", t_rank, got_sent,
              want_sent, got_recv, want_recv);
  }
  /* Flat in P: at most 2 KiB per batch, within 2.5x of P = 2's 516 bytes. */
  double per_batch = (double)got_recv / BATCHES;
  EXPECT(per_batch <= 2048.0);
  EXPECT(per_batch <= 2.5 * 516.0);
  double mine[3] = {per_batch, (double)got_sent / BATCHES, (double)old_recv / BATCHES}, most[3], sum[3];
  MPI_Reduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (t_rank == 0)
    printf("test_batch_modes: P=%d B=%d node_local=%d: request bytes per rank per batch: received mean %.1f max %.1f, "
           "sent mean %.1f; the all-gather would receive mean %.1f\n",
           t_size, B, info.node_local, sum[0] / t_size, most[0], sum[1] / t_size, sum[2] / t_size);
  free(dst);
  CHECK(dds_destroy(s));
}

/* One-sided: rank r makes 1 + 3r calls of its own sizes, then rank 0 alone
 * reads while the others wait in a barrier. */
static void test_onesided_uneven(void) {
  dds_store *s = make(DDS_BATCH_ONESIDED);
  const int64_t total = first_row_of(t_size);
  int64_t idx[2 * B];
  double *dst = malloc(RB * 2 * B);
  dds_counters before, after;
  counters(s, &before);
  int calls = 1 + 3 * t_rank;
  for (int b = 0; b < calls; b++) {
    int64_t n = 1 + (b * 37 + t_rank * 11) % (2 * B);
    batch_of(t_rank, 100 + b, 0, idx, n, total);
    CHECK(dds_get_batch(s, "x", dst, RB * (size_t)n, idx, n));
    EXPECT(t_rows_ok(dst, n, ELEMS, 8, 17, idx, 0));
  }
  /* Sorted runs across shard boundaries merge into few gets: same rows. */
  int64_t n = total < 2 * B ? total : 2 * B;
  for (int64_t i = 0; i < n; i++) idx[i] = i * total / n;
  CHECK(dds_get_batch(s, "x", dst, RB * (size_t)n, idx, n));
  EXPECT(t_rows_ok(dst, n, ELEMS, 8, 17, idx, 0));
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0) {
    for (int b = 0; b < 5; b++) {
      batch_of(0, 200 + b, 0, idx, B, total);
      CHECK(dds_get_batch(s, "x", dst, RB * B, idx, B));
      EXPECT(t_rows_ok(dst, B, ELEMS, 8, 17, idx, 0));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  counters(s, &after);
  EXPECT(after.calls - before.calls == (unsigned long long)(calls + 1 + (t_rank == 0 ? 5 : 0)));
  EXPECT(after.req_bytes_sent == 0 && after.req_bytes_recv == 0);
  /* Errors stay on their rank: only the last rank asks for a bad row. */
  int64_t bad[2] = {0, t_rank == t_size - 1 ? total : 1};
  if (t_rank == t_size - 1)
    EXPECT_ERR(dds_get_batch(s, "x", dst, 2 * RB, bad, 2), DDS_ERR_INDEX_OUT_OF_RANGE, "index 1 of the batch");
  else
    CHECK(dds_get_batch(s, "x", dst, 2 * RB, bad, 2));
  free(dst);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
}

struct reader {
  pthread_t th;
  dds_store *s;
  int id, ok, calls;
};
static void *read_loop(void *arg) {
  struct reader *r = arg;
  const int64_t total = first_row_of(t_size);
  int64_t idx[2 * B];
  double *dst = malloc(RB * 2 * B);
  for (int b = 0; b < 40 && r->ok; b++) {
    int64_t n = 1 + (b * 53 + r->id * 29 + t_rank * 7) % (2 * B);
    batch_of(t_rank, 1000 + b, r->id + 1, idx, n, total);
    if (dds_get_batch(r->s, "x", dst, RB * (size_t)n, idx, n) != DDS_OK) {
      fprintf(stderr, "rank %d thread %d: dds_get_batch: %s\n", t_rank, r->id, dds_last_error());
      r->ok = 0;
    } else if (!t_rows_ok(dst, n, ELEMS, 8, 17, idx, 0)) {
      fprintf(stderr, "rank %d thread %d: wrong rows in batch %d\n", t_rank, r->id, b);
      r->ok = 0;
    }
    r->calls++;
  }
  free(dst);
  return NULL;
}

/* One-sided: THREADS threads per rank read at once. */
static void test_onesided_threads(void) {
  dds_store *s = make(DDS_BATCH_ONESIDED);
  dds_counters before, after;
  counters(s, &before);
  struct reader r[THREADS];
  for (int i = 0; i < THREADS; i++) {
    r[i] = (struct reader){.s = s, .id = i, .ok = 1};
    pthread_create(&r[i].th, NULL, read_loop, &r[i]);
  }
  int calls = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(r[i].th, NULL);
    EXPECT(r[i].ok);
    calls += r[i].calls;
  }
  counters(s, &after);
  EXPECT(after.calls - before.calls == (unsigned long long)calls);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
}

/* The option and its versions. */
static void test_options(void) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.batch_mode = 7;
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT, "batch_mode 7");
  /* Modes differing across ranks: refused on every rank. */
  if (t_size > 1) {
    o.batch_mode = t_rank == 0 ? DDS_BATCH_ONESIDED : DDS_BATCH_COLLECTIVE;
    EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT, "batch mode differs");
    /* The message names where the mode comes from, the ranks and the modes by name. */
    EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT,
               "batch mode differs across ranks (DDSTORE_BATCH_MODE or options.batch_mode): rank 0 has onesided, "
               "rank 1 has collective");
  }
  /* A caller built before batch_mode: its struct ends before the field,
   * whatever lies there is ignored, and the environment decides. */
  CHECK(dds_options_init(&o));
  o.struct_size = (uint32_t)offsetof(dds_options, batch_mode);
  o.batch_mode = 12345;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  int64_t n = rows_of(t_rank);
  CHECK(dds_init(s, "z", n, ELEMS, 8));
  int64_t g = first_row_of(t_size) - 1;
  double row[ELEMS];
  CHECK(dds_get_batch(s, "z", row, RB, &g, 1)); /* every rank calls: right in either mode */
  EXPECT(row[0] == 0.0);
  CHECK(dds_destroy(s));
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  test_options();
  test_collective_bytes();
  test_onesided_uneven();
  test_onesided_threads();
  return t_finish("test_batch_modes");
}
