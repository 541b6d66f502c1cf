/* Method 0's auto batch mode (issue 40 item 3; store/batch_mode.rs).
 *
 * A check is 1 to 4 rounds, each 16 batches in blocks of 4 (C C C C O O O O
 * C C C C O O O O, the first of each block untimed) and one deciding batch,
 * which goes on with another round while the choice could still change
 * within twice the standard error of the means' difference.
 * The testing aid DDSTORE_TEST_BATCH_AUTO_PENALTY_S, set on rank 0 only,
 * adds 1000 s to the measured time of every timed batch of the mode in use
 * there, so each check picks the other mode whatever the machine's load
 * (a collective batch of 4 busy-polling ranks on 2 loaded cores can take
 * longer than any sleep a test could afford), in one round (the means are
 * 1000 s apart, their spread that of the real times), and every rank must
 * adopt rank 0's view. With
 * DDSTORE_BATCH_AUTO_RECHECK=3 a variable's calls are: 16 probes, decide,
 * 3 runs, and again; so the mode flips O, C, O, C at calls 17, 37, 57, 77.
 * The testing aid DDSTORE_TEST_BATCH_AUTO_SPREAD_S (rank 0 only) makes
 * every check run all 4 rounds: 2000 s added to every other timed batch of
 * each mode, 100 s more to each of the mode in use (means 10% apart, a
 * spread far wider); then it leaves the mode in use.
 *
 * - Switching: every row of every batch is verified, every rank reports
 *   the same mode after every batch (dds_counters.batch_mode), the flips
 *   and the counts of checks and one-sided batches are the exact ones.
 * - Errors: a bad index on one rank in a collective batch of a check fails
 *   every rank, in a one-sided one only that rank, and either counts as a
 *   call of the check; in a batch run one-sided only that rank; in a batch
 *   run collectively every rank; in the deciding batch every rank, and the
 *   check is still to be decided; afterwards the rows are right again (a
 *   second variable, whose state is its own).
 * - Rounds: with the spread aid each check is 4 rounds (68 calls), no
 *   check counted and the mode unchanged until its last call; the counts
 *   of checks and one-sided batches (the extending batches run in the mode
 *   in use) are the exact ones.
 * - Real timings (no testing aid): one check (whatever its rounds: the
 *   test runs past the longest), rows right, every rank agrees.
 * - Settings: DDSTORE_BATCH_MODE=auto and DDS_BATCH_AUTO show as
 *   DDS_BATCH_AUTO; a bad DDSTORE_BATCH_AUTO_RECHECK fails dds_create on every
 *   rank naming it; a started batch in the auto mode reads right.
 *
 * Run at 1, 2 and 4 ranks, node-local reads on and off. */
#include <stdint.h>

#include "common.h"

/* A round's calls (16 probes, the decision), its one-sided probes, the
 * first one-sided probe's call, the most rounds of a check. */
enum { ELEMS = 8, B = 64, CHECK_CALLS = 17, ONESIDED_PROBES = 8, FIRST_ONESIDED = 5, RECHECK = 3, MAX_ROUNDS = 4 };
static const size_t RB = ELEMS * sizeof(double);
static const char *PENALTY = "1000";
static const char *SPREAD = "1000";

static int64_t rows_of(int r) { return 30 + (r * 7) % 10; }
static int64_t first_row_of(int r) {
  int64_t g = 0;
  for (int q = 0; q < r; q++) g += rows_of(q);
  return g;
}

static dds_store *make_aided(int mode, const char *recheck, const char *penalty, const char *spread) {
  if (recheck) setenv("DDSTORE_BATCH_AUTO_RECHECK", recheck, 1);
  if (penalty) setenv("DDSTORE_TEST_BATCH_AUTO_PENALTY_S", t_rank == 0 ? penalty : "0", 1);
  if (spread) setenv("DDSTORE_TEST_BATCH_AUTO_SPREAD_S", t_rank == 0 ? spread : "0", 1);
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.batch_mode = mode;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  unsetenv("DDSTORE_BATCH_AUTO_RECHECK");
  unsetenv("DDSTORE_TEST_BATCH_AUTO_PENALTY_S");
  unsetenv("DDSTORE_TEST_BATCH_AUTO_SPREAD_S");
  return s;
}

static dds_store *make(int mode, const char *recheck, const char *penalty) {
  return make_aided(mode, recheck, penalty, NULL);
}

static void add(dds_store *s, const char *name, int tag) {
  int64_t n = rows_of(t_rank);
  double *buf = malloc(RB * (size_t)n);
  t_fill(buf, n, ELEMS, 8, tag, first_row_of(t_rank));
  CHECK(dds_add(s, name, buf, RB * (size_t)n, n, ELEMS, 8));
  free(buf);
}

static dds_counters counters(dds_store *s, const char *name) {
  dds_counters c = {.struct_size = sizeof c};
  CHECK(dds_profile(s, name, &c));
  return c;
}

/* 1 when every rank's `v` equals rank 0's. */
static int same_everywhere(long long v) {
  long long mm[2] = {v, -v};
  MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  return mm[0] == -mm[1];
}

/* A batch of B random rows (every rank's own), read and verified. */
static int read_ok(dds_store *s, const char *name, int tag, double *dst, int64_t *idx) {
  const int64_t total = first_row_of(t_size);
  for (int i = 0; i < B; i++) idx[i] = (int64_t)(t_next() % (unsigned long long)total);
  memset(dst, 0, RB * B);
  dds_status st = dds_get_batch(s, name, dst, RB * B, idx, B);
  if (st != DDS_OK) fprintf(stderr, "rank %d: dds_get_batch(%s): %s\n", t_rank, name, dds_last_error());
  return st == DDS_OK && t_rows_ok(dst, B, ELEMS, 8, tag, idx, 0);
}

/* The mode the variable runs in after call `k` (1-based) of the schedule
 * above: collective before the first choice, then flipping at each
 * deciding call. */
static int mode_after(int k) {
  const int period = CHECK_CALLS + RECHECK;
  int decided = k < CHECK_CALLS ? 0 : (k - CHECK_CALLS) / period + 1;
  return decided % 2 == 1 ? DDS_BATCH_ONESIDED : DDS_BATCH_COLLECTIVE;
}

static void test_switching(void) {
  dds_store *s = make(DDS_BATCH_AUTO, "3", PENALTY);
  add(s, "x", 31);
  double *dst = malloc(RB * B);
  int64_t idx[B];
  const int calls = 4 * (CHECK_CALLS + RECHECK);
  int rows_right = 1, agreed = 1, as_scheduled = 1;
  for (int k = 1; k <= calls; k++) {
    rows_right &= read_ok(s, "x", 31, dst, idx);
    dds_counters c = counters(s, "x");
    agreed &= same_everywhere((long long)c.batch_mode) && same_everywhere((long long)c.batch_checks);
    if ((int)c.batch_mode != mode_after(k)) {
      fprintf(stderr, "rank %d: after call %d the mode is %llu, expected %d\n", t_rank, k,
              (unsigned long long)c.batch_mode, mode_after(k));
      as_scheduled = 0;
    }
  }
  EXPECT(rows_right);
  EXPECT(agreed);
  EXPECT(as_scheduled);
  dds_counters c = counters(s, "x");
  EXPECT(c.batch_checks == 4);
  /* The one-sided probes of each check, and the two one-sided spells: the
   * deciding call and 3 runs each. */
  EXPECT(c.batch_calls_onesided == 4 * ONESIDED_PROBES + 2 * (1 + RECHECK));
  EXPECT(c.calls == (uint64_t)calls);
  free(dst);
  CHECK(dds_destroy(s));
}

/* The spread aid: every check runs MAX_ROUNDS rounds, then flips the mode.
 * With RECHECK=3: the first choice (one-sided) at call 68, 3 runs, the
 * second (collective) at call 139. */
static void test_rounds(void) {
  dds_store *s = make_aided(DDS_BATCH_AUTO, "3", NULL, SPREAD);
  add(s, "x", 31);
  double *dst = malloc(RB * B);
  int64_t idx[B];
  const int check = MAX_ROUNDS * CHECK_CALLS, calls = 2 * check + RECHECK;
  int rows_right = 1, agreed = 1, as_scheduled = 1;
  for (int k = 1; k <= calls; k++) {
    rows_right &= read_ok(s, "x", 31, dst, idx);
    dds_counters c = counters(s, "x");
    agreed &= same_everywhere((long long)c.batch_mode) && same_everywhere((long long)c.batch_checks);
    int checks = k < check ? 0 : k < calls ? 1 : 2;
    int mode = checks == 1 ? DDS_BATCH_ONESIDED : DDS_BATCH_COLLECTIVE;
    if ((int)c.batch_checks != checks || (int)c.batch_mode != mode) {
      fprintf(stderr, "rank %d: after call %d: %llu checks, mode %llu; expected %d, %d\n", t_rank, k,
              (unsigned long long)c.batch_checks, (unsigned long long)c.batch_mode, checks, mode);
      as_scheduled = 0;
    }
  }
  EXPECT(rows_right);
  EXPECT(agreed);
  EXPECT(as_scheduled);
  dds_counters c = counters(s, "x");
  /* One-sided: every round's probes; the first check's deciding batch
   * (its choice) and 3 runs; the second check's 3 extending batches (the
   * mode in use, one-sided). */
  EXPECT(c.batch_calls_onesided == 2 * MAX_ROUNDS * ONESIDED_PROBES + 1 + RECHECK + (MAX_ROUNDS - 1));
  EXPECT(c.calls == (uint64_t)calls);
  free(dst);
  CHECK(dds_destroy(s));
}

/* Calls `k` of variable "e" with a bad index on the last rank: which
 * ranks fail, and that every rank fails alike where it must. */
static void bad_call(dds_store *s, double *dst, int64_t *idx, int everyone_fails) {
  const int64_t total = first_row_of(t_size);
  for (int i = 0; i < B; i++) idx[i] = i % total;
  if (t_rank == t_size - 1) idx[B / 2] = total + 5;
  dds_status st = dds_get_batch(s, "e", dst, RB * B, idx, B);
  if (everyone_fails || t_rank == t_size - 1) {
    char want[64];
    snprintf(want, sizeof want, "global row %lld", (long long)(total + 5));
    EXPECT(st == DDS_ERR_INDEX_OUT_OF_RANGE && strstr(dds_last_error(), want) && strstr(dds_last_error(), "'e'"));
    if (st != DDS_ERR_INDEX_OUT_OF_RANGE) fprintf(stderr, "rank %d: %s\n", t_rank, dds_last_error());
  } else {
    EXPECT(st == DDS_OK && t_rows_ok(dst, B, ELEMS, 8, 32, idx, 0));
  }
}

static void test_errors(void) {
  dds_store *s = make(DDS_BATCH_AUTO, "3", PENALTY);
  add(s, "x", 31);
  add(s, "e", 32);
  double *dst = malloc(RB * B);
  int64_t idx[B];
  /* Call 1 of a check, collective: every rank fails; the call counts. */
  bad_call(s, dst, idx, 1);
  int ok = 1;
  for (int k = 2; k < FIRST_ONESIDED; k++) ok &= read_ok(s, "e", 32, dst, idx);
  /* A one-sided probe: only the last rank fails (on one rank, every rank); it counts. */
  bad_call(s, dst, idx, t_size == 1);
  for (int k = FIRST_ONESIDED + 1; k < CHECK_CALLS; k++) ok &= read_ok(s, "e", 32, dst, idx);
  EXPECT(counters(s, "e").batch_checks == 0);
  /* The deciding call: every rank fails, and the next call decides. */
  bad_call(s, dst, idx, 1);
  EXPECT(counters(s, "e").batch_checks == 0);
  ok &= read_ok(s, "e", 32, dst, idx);
  EXPECT(ok);
  dds_counters c = counters(s, "e");
  EXPECT(c.batch_checks == 1 && c.batch_mode == DDS_BATCH_ONESIDED);
  /* "x" has a state of its own: still before its first check. */
  EXPECT(counters(s, "x").batch_checks == 0 && counters(s, "x").batch_mode == DDS_BATCH_COLLECTIVE);
  /* Run one-sided: only the last rank fails (on one rank, every rank). */
  bad_call(s, dst, idx, t_size == 1);
  ok = read_ok(s, "e", 32, dst, idx) && read_ok(s, "e", 32, dst, idx);
  /* The next check chooses collective. */
  for (int k = 1; k <= CHECK_CALLS; k++) ok &= read_ok(s, "e", 32, dst, idx);
  EXPECT(ok);
  c = counters(s, "e");
  EXPECT(c.batch_checks == 2 && c.batch_mode == DDS_BATCH_COLLECTIVE);
  /* Run collectively: every rank fails; the store stays usable. */
  bad_call(s, dst, idx, 1);
  EXPECT(read_ok(s, "e", 32, dst, idx));
  /* A timed batch of "x" with a bad destination size on rank 0 fails every rank. */
  for (int i = 0; i < B; i++) idx[i] = i % first_row_of(t_size);
  EXPECT_ERR(dds_get_batch(s, "x", dst, t_rank == 0 ? RB * B - 1 : RB * B, idx, B), DDS_ERR_MISMATCH, "destination");
  EXPECT(read_ok(s, "x", 31, dst, idx));
  free(dst);
  CHECK(dds_destroy(s));
}

/* No testing aid: the real timings choose; every rank agrees. A check of
 * real timings may run 1 to MAX_ROUNDS rounds: the calls pass the longest
 * and stay far below the next check (after 256 more). */
static void test_real_timings(void) {
  dds_store *s = make(DDS_BATCH_AUTO, NULL, NULL);
  add(s, "x", 31);
  double *dst = malloc(RB * B);
  int64_t idx[B];
  int ok = 1;
  for (int k = 0; k < MAX_ROUNDS * CHECK_CALLS + 3; k++) ok &= read_ok(s, "x", 31, dst, idx);
  EXPECT(ok);
  dds_counters c = counters(s, "x");
  EXPECT(c.batch_checks == 1);
  EXPECT(c.batch_mode == DDS_BATCH_COLLECTIVE || c.batch_mode == DDS_BATCH_ONESIDED);
  EXPECT(same_everywhere((long long)c.batch_mode));
  if (t_rank == 0) printf("test_batch_auto: %d ranks chose %s\n", t_size, c.batch_mode ? "onesided" : "collective");
  /* A started batch runs collectively and reads right. */
  dds_request *req = NULL;
  for (int i = 0; i < B; i++) idx[i] = (int64_t)(t_next() % (unsigned long long)first_row_of(t_size));
  CHECK(dds_get_batch_start(s, "x", dst, RB * B, idx, B, &req));
  CHECK(dds_request_wait(req));
  EXPECT(t_rows_ok(dst, B, ELEMS, 8, 31, idx, 0));
  free(dst);
  CHECK(dds_destroy(s));
}

static void test_settings(void) {
  dds_settings g = {.struct_size = sizeof g};
  dds_store *s = make(DDS_BATCH_AUTO, NULL, NULL);
  CHECK(dds_store_settings(s, &g));
  EXPECT(g.batch_mode == DDS_BATCH_AUTO);
  CHECK(dds_destroy(s));
  setenv("DDSTORE_BATCH_MODE", "auto", 1);
  s = make(DDS_BATCH_ENV, NULL, NULL);
  CHECK(dds_store_settings(s, &g));
  EXPECT(g.batch_mode == DDS_BATCH_AUTO);
  add(s, "x", 31);
  dds_counters c = counters(s, "x");
  EXPECT(c.batch_mode == DDS_BATCH_COLLECTIVE && c.batch_checks == 0);
  CHECK(dds_destroy(s));
  unsetenv("DDSTORE_BATCH_MODE");
  /* A bad re-check interval on one rank fails every rank, naming it. */
  setenv("DDSTORE_BATCH_AUTO_RECHECK", t_rank == t_size - 1 ? "-3" : "3", 1);
  dds_options o;
  CHECK(dds_options_init(&o));
  o.batch_mode = DDS_BATCH_AUTO;
  s = NULL;
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT, "DDSTORE_BATCH_AUTO_RECHECK");
  EXPECT(s == NULL);
  unsetenv("DDSTORE_BATCH_AUTO_RECHECK");
  /* An unknown mode code names auto among the valid ones. */
  o.batch_mode = 3;
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT, "2 (auto)");
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  t_rng += (unsigned long long)t_rank * 7919ULL;
  test_settings();
  test_switching();
  test_errors();
  test_rounds();
  test_real_timings();
  return t_finish("test_batch_auto");
}
