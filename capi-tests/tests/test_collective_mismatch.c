/* Ranks in different collective calls (issue 35, item 1): a generated table
 * of every collective entry point against every other, on the same and on
 * different variables, rank 0 in one and rank 1 in the other. Each pair
 * must fail on both ranks with DDS_ERR_INVALID_ARGUMENT and a message
 * naming both calls (and variables) and the ranks, never hang, and leave
 * the store as it was: a matched call afterwards works and reads the rows
 * that were added.
 *
 * Which calls are collective depends on the store (DDS_TEST_METHOD,
 * DDSTORE_BATCH_MODE): the reads only in the method-0 collective batch
 * mode, dds_wait_extras only for method-2 cores. dds_add and dds_init are one collective call (a rank may pass data
 * or zero-fill), so that pair is not a mismatch and is left out; so are
 * dds_get_batch_stream and dds_get_ragged, which are dds_get_batch and
 * dds_get_ragged_batch. A hang fails the test through an alarm. */
#include <signal.h>

#include "common.h"

enum { ROWS = 4, ELEMS = 2, TAG = 3, SAMPLES = 3 };

enum call {
  C_ADD,
  C_INIT,
  C_ADD_RAGGED,
  C_REMOVE,
  C_EPOCH_BEGIN,
  C_EPOCH_END,
  C_DESTROY,
  C_WAIT_EXTRAS,
  C_GET_BATCH,
  C_GET_BATCH_START,
  C_GET_RAGGED_BATCH,
  C_RAGGED_LENGTHS,
  N_CALLS
};

static const char *entry[N_CALLS] = {
    "dds_add",         "dds_init",      "dds_add_ragged",      "dds_remove",
    "dds_epoch_begin", "dds_epoch_end", "dds_destroy",         "dds_wait_extras", "dds_get_batch",
    "dds_get_batch_start", "dds_get_ragged_batch", "dds_ragged_lengths",
};

/* Calls that name a variable, and of which family (fixed rows, ragged, a new name). */
static int names_var(int c) { return c != C_EPOCH_BEGIN && c != C_EPOCH_END && c != C_DESTROY && c != C_WAIT_EXTRAS; }
static int is_read(int c) { return c >= C_GET_BATCH; }
static int is_ragged(int c) { return c == C_GET_RAGGED_BATCH || c == C_RAGGED_LENGTHS; }
static int registers(int c) { return c == C_ADD || c == C_INIT || c == C_ADD_RAGGED; }

static volatile sig_atomic_t cur_a = -1, cur_b = -1, cur_same = -1;

static void on_alarm(int sig) {
  (void)sig;
  char msg[200];
  int n = snprintf(msg, sizeof msg, "rank %d: HANG in pair %d/%d (same variable %d): a mismatch was not detected\n",
                   t_rank, (int)cur_a, (int)cur_b, (int)cur_same);
  if (write(2, msg, (size_t)n) < 0) _exit(3);
  _exit(2);
}

static double data[ROWS * ELEMS];
static double ragged_rows[(1 + 2 + 3) * ELEMS];
static const int64_t lengths[SAMPLES] = {1, 2, 3};

/* Makes call `c` on variable `name`; returns its status. */
static dds_status make_call(dds_store *s, int c, const char *name) {
  static double out[2 * 6 * ELEMS];
  int64_t idx[2] = {0, (int64_t)ROWS * t_size - 1};
  int64_t sidx[2] = {0, (int64_t)SAMPLES * t_size - 1};
  int64_t lens[2];
  dds_request *req = NULL;
  dds_status st;
  switch (c) {
    case C_ADD: return dds_add(s, name, data, sizeof data, ROWS, ELEMS, 8);
    case C_INIT: return dds_init(s, name, ROWS, ELEMS, 8);
    case C_ADD_RAGGED:
      return dds_add_ragged(s, name, ragged_rows, sizeof ragged_rows, lengths, SAMPLES, ELEMS, 8);
    case C_REMOVE: return dds_remove(s, name);
    case C_EPOCH_BEGIN: return dds_epoch_begin(s);
    case C_EPOCH_END: return dds_epoch_end(s);
    case C_DESTROY: return dds_destroy(s);
    case C_WAIT_EXTRAS: return dds_wait_extras(s, 0, 0);
    case C_GET_BATCH: return dds_get_batch(s, name, out, 2 * ELEMS * 8, idx, 2);
    case C_GET_BATCH_START:
      st = dds_get_batch_start(s, name, out, 2 * ELEMS * 8, idx, 2, &req);
      if (st == DDS_OK) dds_request_wait(req); /* not expected: keep the buffer safe */
      return st;
    case C_GET_RAGGED_BATCH: return dds_get_ragged_batch(s, name, out, sizeof out, sidx, 2, lens, NULL);
    default: return dds_ragged_lengths(s, name, sidx, 2, lens);
  }
}

/* The variable rank `rank` names in pair (a, b): a call of its own family
 * ("x"/"y", "r"/"q", or a name not registered, "n0"/"n1") for a call
 * against itself on different variables; else, on the same variable, one
 * name both use ("r" when a ragged read is involved, else "x"). */
static const char *var_of(int c, int a, int b, int same, int rank) {
  if (!same) {
    if (registers(c)) return rank ? "n1" : "n0";
    if (is_ragged(c)) return rank ? "q" : "r";
    return rank ? "y" : "x";
  }
  (void)c;
  return (is_ragged(a) || is_ragged(b)) ? "r" : "x";
}

/* The matched call after each pair: every rank reads rows of "x" (a batch,
 * collective or not, as the store's) and checks them. */
static void still_usable(dds_store *s) {
  double out[2 * ELEMS];
  int64_t idx[2] = {(int64_t)ROWS * t_size - 1, 1};
  CHECK(dds_get_batch(s, "x", out, sizeof out, idx, 2));
  EXPECT(t_rows_ok(out, 2, ELEMS, 8, TAG, idx, 0));
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  signal(SIGALRM, on_alarm);
  alarm(90);
  dds_store *s = t_store(0, 0);
  int collective_reads = t_batch_collective();
  t_fill(data, ROWS, ELEMS, 8, TAG, (long long)t_rank * ROWS);
  t_fill(ragged_rows, 6, ELEMS, 8, TAG + 1, 0);
  CHECK(dds_add(s, "x", data, sizeof data, ROWS, ELEMS, 8));
  CHECK(dds_add(s, "y", data, sizeof data, ROWS, ELEMS, 8));
  CHECK(dds_add_ragged(s, "r", ragged_rows, sizeof ragged_rows, lengths, SAMPLES, ELEMS, 8));
  CHECK(dds_add_ragged(s, "q", ragged_rows, sizeof ragged_rows, lengths, SAMPLES, ELEMS, 8));
  int pairs = 0;
  for (int a = 0; a < N_CALLS; a++) {
    for (int b = 0; b < N_CALLS; b++) {
      if (!collective_reads && (is_read(a) || is_read(b))) continue; /* local calls: no pair */
      if (t_method() != 2 && (a == C_WAIT_EXTRAS || b == C_WAIT_EXTRAS)) continue; /* method-2 cores only */
      if ((a == C_ADD && b == C_INIT) || (a == C_INIT && b == C_ADD)) continue; /* one call */
      for (int same = 0; same < 2; same++) {
        if (a == b && (same || !names_var(a))) continue; /* the same call on the same variable matches */
        if (a != b && !same && !names_var(a) && !names_var(b)) continue; /* no variable: once */
        cur_a = a, cur_b = b, cur_same = same;
        int mine = t_rank == 0 ? a : b;
        const char *name0 = var_of(a, a, b, same, 0), *name1 = var_of(b, a, b, same, 1);
        dds_status st = make_call(s, mine, t_rank == 0 ? name0 : name1);
        const char *m = dds_last_error();
        char w0[128], w1[128];
        if (names_var(a)) snprintf(w0, sizeof w0, "rank 0 is in %s('%s')", entry[a], name0);
        else snprintf(w0, sizeof w0, "rank 0 is in %s", entry[a]);
        if (names_var(b)) snprintf(w1, sizeof w1, "rank 1 in %s('%s')", entry[b], name1);
        else snprintf(w1, sizeof w1, "rank 1 in %s", entry[b]);
        const char *what = a == b ? "different variables" : "collective call mismatch";
        if (st == DDS_ERR_INVALID_ARGUMENT && strstr(m, what) && strstr(m, w0) && strstr(m, w1)) {
          t_passed++;
        } else {
          t_failed++;
          fprintf(stderr, "rank %d: rank 0 in %s('%s'), rank 1 in %s('%s') -> %s \"%s\"; expected "
                  "DDS_ERR_INVALID_ARGUMENT with \"%s\", \"%s\"\n", t_rank, entry[a], name0, entry[b], name1,
                  dds_status_string(st), st ? m : "", w0, w1);
        }
        still_usable(s);
        pairs++;
      }
    }
  }
  /* Nothing a refused call asked for happened: no new variable, no open
   * epoch (a begin/end pair still works), the variables are all there. */
  dds_var_info info;
  info.struct_size = sizeof info;
  EXPECT_ERR(dds_info(s, "n0", &info), DDS_ERR_UNKNOWN_VARIABLE, "'n0'");
  EXPECT_ERR(dds_info(s, "n1", &info), DDS_ERR_UNKNOWN_VARIABLE, "'n1'");
  CHECK(dds_epoch_begin(s));
  CHECK(dds_epoch_end(s));
  CHECK(dds_info(s, "r", &info));
  CHECK(dds_info(s, "q", &info));
  CHECK(dds_remove(s, "y"));
  still_usable(s);
  CHECK(dds_destroy(s));
  alarm(0);
  if (t_rank == 0) printf("%d mismatched pairs (collective reads: %s)\n", pairs, collective_reads ? "yes" : "no");
  return t_finish("test_collective_mismatch");
}
