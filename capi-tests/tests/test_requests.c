/* Non-blocking batched reads (issue 20): dds_get_batch_start, dds_request_test,
 * dds_request_wait, dds_request_free, every row verified.
 *
 * Runs for every store kind t_store makes (DDS_TEST_METHOD, DDSTORE_BATCH_MODE,
 * DDSTORE_NODE_LOCAL): many requests in flight on one store, waited for in an
 * order other than their start order; a request that completes while the
 * caller makes no library or MPI call (the library drives it); errors at
 * start (bad index, name, size, NULL) returned by the start, with the store
 * usable after; waits and frees of dead handles refused; requests from 4
 * threads at once (one-sided stores); a store destroyed with requests in
 * flight (the destroy waits for them, their handles still report). Method-0
 * collective stores start the same requests in the same order on every rank
 * (each rank its own indices). */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "common.h"

enum { ELEMS = 8, ITEM = 8, B = 64, INFLIGHT = 24, THREADS = 4, PER_THREAD = 6 };
static const size_t RB = ELEMS * ITEM;

static int64_t rows_of(int r) { return 30 + (r * 7) % 10; }
static int64_t first_row_of(int r) {
  int64_t g = 0;
  for (int q = 0; q < r; q++) g += rows_of(q);
  return g;
}

static unsigned long long mix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
/* Batch `b` of `thread` on this rank: random rows, some repeated. */
static void batch_of(int b, int thread, int64_t *idx, int64_t n, int64_t total) {
  unsigned long long s = mix(20261201ULL + 1000003ULL * (unsigned long long)t_rank + 7919ULL * (unsigned long long)b +
                             104729ULL * (unsigned long long)thread);
  for (int64_t i = 0; i < n; i++) {
    s = mix(s);
    idx[i] = (i > 0 && i % 7 == 0) ? idx[i - 1] : (int64_t)(s % (unsigned long long)total);
  }
}

static dds_store *make_store(int64_t *total) {
  dds_store *s = t_store(0, 0);
  int64_t n = rows_of(t_rank);
  double *mine = malloc((size_t)n * RB);
  t_fill(mine, n, ELEMS, ITEM, 5, first_row_of(t_rank));
  CHECK(dds_add(s, "v", mine, (size_t)n * RB, n, ELEMS, ITEM));
  free(mine);
  *total = first_row_of(t_size);
  return s;
}

/* Starts INFLIGHT requests, then waits for them in a scrambled order. */
static void many_in_flight(dds_store *s, int64_t total) {
  static int64_t idx[INFLIGHT][B];
  static double out[INFLIGHT][B * ELEMS];
  dds_request *req[INFLIGHT];
  for (int k = 0; k < INFLIGHT; k++) {
    batch_of(k, 0, idx[k], B, total);
    memset(out[k], 0, sizeof out[k]);
    CHECK(dds_get_batch_start(s, "v", out[k], sizeof out[k], idx[k], B, &req[k]));
    /* The indices are copied: scribbling over them must not matter. */
    if (k % 2 == 0) memset(idx[k], 0xff, 8);
  }
  int good = 1;
  for (int j = 0; j < INFLIGHT; j++) {
    int k = (j * 7 + 3) % INFLIGHT; /* 7 is prime to 24: a permutation */
    dds_status st = dds_request_wait(req[k]);
    EXPECT(st == DDS_OK);
    if (k % 2 == 0) batch_of(k, 0, idx[k], B, total);
    good = good && t_rows_ok(out[k], B, ELEMS, ITEM, 5, idx[k], 0);
  }
  EXPECT(good);
  /* A waited-for request is gone: waits and frees of it are refused. */
  EXPECT_ERR(dds_request_wait(req[0]), DDS_ERR_BAD_STATE, "not a live request");
  EXPECT_ERR(dds_request_free(req[1]), DDS_ERR_BAD_STATE, "not a live request");
  int done = 0;
  EXPECT_ERR(dds_request_test(req[2], &done), DDS_ERR_BAD_STATE, "not a live request");
  EXPECT(dds_request_free(NULL) == DDS_OK);
  EXPECT_ERR(dds_request_wait(NULL), DDS_ERR_INVALID_ARGUMENT, "NULL");
}

/* A request completes while this rank only sleeps: nothing but the
 * library's own thread can move its rows (or serve the peers'). */
static void completes_without_caller(dds_store *s, int64_t total) {
  int64_t idx[B];
  double out[B * ELEMS];
  batch_of(100, 0, idx, B, total);
  dds_request *r = NULL;
  CHECK(dds_get_batch_start(s, "v", out, sizeof out, idx, B, &r));
  EXPECT(t_poll_done(r) == 1);
  EXPECT(dds_request_wait(r) == DDS_OK);
  EXPECT(t_rows_ok(out, B, ELEMS, ITEM, 5, idx, 0));
}

/* Errors at start are the start's; no request is made; the store still reads. */
static void errors_at_start(dds_store *s, int64_t total) {
  int64_t idx[3] = {0, total - 1, 1};
  double out[3 * ELEMS];
  dds_request *r = NULL;
  int collective = t_batch_collective();
  /* Rank 0's bad index: on a collective store every rank's start fails. */
  if (t_rank == 0) idx[1] = total;
  if (t_rank == 0 || collective) {
    EXPECT_ERR(dds_get_batch_start(s, "v", out, sizeof out, idx, 3, &r), DDS_ERR_INDEX_OUT_OF_RANGE, "out of range");
    EXPECT(r == NULL);
  }
  idx[1] = -1;
  if (t_rank == 0 || collective) {
    EXPECT_ERR(dds_get_batch_start(s, "v", out, sizeof out, idx, 3, &r), DDS_ERR_INDEX_OUT_OF_RANGE, "index 1");
  }
  idx[1] = total - 1;
  EXPECT_ERR(dds_get_batch_start(s, "nope", out, sizeof out, idx, 3, &r), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  EXPECT_ERR(dds_get_batch_start(s, "v", out, sizeof out - 1, idx, 3, &r), DDS_ERR_MISMATCH, "need");
  EXPECT_ERR(dds_get_batch_start(s, "v", out, sizeof out, NULL, 3, &r), DDS_ERR_INVALID_ARGUMENT, "indices is NULL");
  EXPECT_ERR(dds_get_batch_start(s, "v", out, sizeof out, idx, -1, &r), DDS_ERR_INVALID_ARGUMENT, "negative");
  EXPECT_ERR(dds_get_batch_start(s, "v", out, sizeof out, idx, 3, NULL), DDS_ERR_INVALID_ARGUMENT, "req");
  EXPECT(r == NULL);
  /* Still usable; an empty request too. */
  CHECK(dds_get_batch_start(s, "v", out, sizeof out, idx, 3, &r));
  EXPECT(dds_request_wait(r) == DDS_OK);
  EXPECT(t_rows_ok(out, 3, ELEMS, ITEM, 5, idx, 0));
  CHECK(dds_get_batch_start(s, "v", NULL, 0, NULL, 0, &r));
  EXPECT(dds_request_wait(r) == DDS_OK);
  /* Blocking and non-blocking batches mix. */
  dds_request *r2 = NULL;
  double out2[3 * ELEMS];
  CHECK(dds_get_batch_start(s, "v", out2, sizeof out2, idx, 3, &r2));
  CHECK(dds_get_batch(s, "v", out, sizeof out, idx, 3));
  EXPECT(dds_request_wait(r2) == DDS_OK);
  EXPECT(t_rows_ok(out, 3, ELEMS, ITEM, 5, idx, 0) && t_rows_ok(out2, 3, ELEMS, ITEM, 5, idx, 0));
}

struct job {
  dds_store *s;
  int thread;
  int64_t total;
  int ok;
};

/* Each thread keeps PER_THREAD requests in flight and waits in reverse. */
static void *reader(void *arg) {
  struct job *j = arg;
  int64_t idx[PER_THREAD][B];
  double *out = malloc(PER_THREAD * B * RB);
  dds_request *req[PER_THREAD];
  j->ok = 1;
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < PER_THREAD; k++) {
      batch_of(10 * round + k, j->thread + 1, idx[k], B, j->total);
      if (dds_get_batch_start(j->s, "v", out + k * B * ELEMS, B * RB, idx[k], B, &req[k]) != DDS_OK) {
        fprintf(stderr, "rank %d thread %d: start: %s\n", t_rank, j->thread, dds_last_error());
        j->ok = 0;
        req[k] = NULL;
      }
    }
    for (int k = PER_THREAD - 1; k >= 0; k--) {
      if (req[k] == NULL) continue;
      if (dds_request_wait(req[k]) != DDS_OK) {
        fprintf(stderr, "rank %d thread %d: wait: %s\n", t_rank, j->thread, dds_last_error());
        j->ok = 0;
      } else if (!t_rows_ok(out + k * B * ELEMS, B, ELEMS, ITEM, 5, idx[k], 0)) {
        j->ok = 0;
      }
    }
  }
  free(out);
  return NULL;
}

static void from_threads(dds_store *s, int64_t total) {
  pthread_t th[THREADS];
  struct job jobs[THREADS];
  for (int t = 0; t < THREADS; t++) {
    jobs[t] = (struct job){s, t, total, 0};
    pthread_create(&th[t], NULL, reader, &jobs[t]);
  }
  int ok = 1;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    ok = ok && jobs[t].ok;
  }
  EXPECT(ok);
}

static void step(const double *rows) { (void)rows; usleep(2000); } /* the model's work */

/* The documented pattern (docs/c-api.md): read batch s + 1 while batch s is used. */
static void double_buffered(dds_store *s, int64_t total) {
  enum { STEPS = 6 };
  static int64_t order[STEPS][B];
  static double bufs[2][B * ELEMS];
  for (int k = 0; k < STEPS; k++) batch_of(400 + k, 0, order[k], B, total);
  int good = 1;
  // [snippet:c-overlap]
  dds_request *req;
  CHECK(dds_get_batch_start(s, "v", bufs[0], sizeof bufs[0], order[0], B, &req));
  for (int k = 0; k < STEPS; k++) {
    CHECK(dds_request_wait(req)); /* the rows of batch k are in bufs[k % 2] */
    if (k + 1 < STEPS)            /* start batch k + 1 ... */
      CHECK(dds_get_batch_start(s, "v", bufs[(k + 1) % 2], sizeof bufs[0], order[k + 1], B, &req));
    step(bufs[k % 2]); /* ... while batch k is used */
    good = good && t_rows_ok(bufs[k % 2], B, ELEMS, ITEM, 5, order[k], 0);
  }
  // [end-snippet]
  EXPECT(good);
}

/* dds_destroy with requests in flight waits for them; their handles stay
 * valid and report the reads' status; one is abandoned with free. */
static void destroy_in_flight(void) {
  int64_t total;
  dds_store *s = make_store(&total);
  enum { K = 8 };
  static int64_t idx[K][B];
  static double out[K][B * ELEMS];
  dds_request *req[K];
  for (int k = 0; k < K; k++) {
    batch_of(200 + k, 0, idx[k], B, total);
    memset(out[k], 0, sizeof out[k]);
    CHECK(dds_get_batch_start(s, "v", out[k], sizeof out[k], idx[k], B, &req[k]));
  }
  CHECK(dds_request_free(req[K - 1]));
  CHECK(dds_destroy(s));
  int good = 1;
  for (int k = 0; k < K - 1; k++) {
    EXPECT(dds_request_wait(req[k]) == DDS_OK);
    good = good && t_rows_ok(out[k], B, ELEMS, ITEM, 5, idx[k], 0);
  }
  EXPECT(good);
  /* Starting on the destroyed store is refused. */
  dds_request *r = NULL;
  EXPECT_ERR(dds_get_batch_start(s, "v", out[0], B * RB, idx[0], B, &r), DDS_ERR_BAD_STATE, "not a live store");
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  int64_t total;
  dds_store *s = make_store(&total);
  many_in_flight(s, total);
  completes_without_caller(s, total);
  errors_at_start(s, total);
  double_buffered(s, total);
  if (!t_batch_collective()) from_threads(s, total);
  /* A registry change after requests: add drains them first. */
  dds_request *r = NULL;
  int64_t idx[B];
  double out[B * ELEMS];
  batch_of(300, 0, idx, B, total);
  CHECK(dds_get_batch_start(s, "v", out, sizeof out, idx, B, &r));
  CHECK(dds_init(s, "w", 4, 2, 4));
  EXPECT(dds_request_wait(r) == DDS_OK && t_rows_ok(out, B, ELEMS, ITEM, 5, idx, 0));
  CHECK(dds_destroy(s));
  destroy_in_flight();
  return t_finish("test_requests");
}
