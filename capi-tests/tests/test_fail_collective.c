/* dds_fail_collective: a binding that finds an error on one rank before a
 * collective call makes that rank take part in the call with its own failure.
 * Every rank must then fail together with that rank's status and message,
 * nothing may hang, and the store must stay usable with its data intact.
 *
 * Rank `bad` (each rank in turn) stands in for every collective call with
 * dds_fail_collective while the others make the real call. */
#include "common.h"

enum { TAG = 7, ROWS = 3, ELEMS = 5 };

static double row_buf[ROWS * ELEMS];

/* Every rank's status and message after one round. */
static void expect_failed(dds_status got, dds_status want, int bad, const char *call, const char *text) {
  char part[256];
  snprintf(part, sizeof part, "%s: rank %d: %s", call, bad, text);
  const char *m = dds_last_error();
  if (got == want && strstr(m, part) != NULL) {
    t_passed++;
  } else {
    t_failed++;
    fprintf(stderr, "rank %d: %s with rank %d failing -> %s \"%s\"; expected %s with \"%s\"\n", t_rank, call, bad,
            dds_status_string(got), got ? m : "", dds_status_string(want), part);
  }
}

/* The whole variable, read back with single gets, equals what was added. */
static int intact(dds_store *s, const char *name) {
  dds_var_info info;
  info.struct_size = sizeof info;
  CHECK(dds_info(s, name, &info));
  double row[ELEMS];
  int ok = info.total_rows == (int64_t)ROWS * t_size;
  for (int64_t g = 0; g < info.total_rows && ok; g++) {
    CHECK(dds_get(s, name, row, sizeof row, g, 1));
    ok = t_rows_ok(row, 1, ELEMS, 8, TAG, NULL, g);
  }
  return ok;
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  dds_store *s = t_store(0, 0);
  t_fill(row_buf, ROWS, ELEMS, 8, TAG, (long long)t_rank * ROWS);
  CHECK(dds_add(s, "data", row_buf, sizeof row_buf, ROWS, ELEMS, 8));

  for (int bad = 0; bad < t_size; bad++) {
    const int me_bad = t_rank == bad;
    char msg[128];
    snprintf(msg, sizeof msg, "unsupported dtype float16 on rank %d", bad);

    /* dds_add / dds_init. */
    dds_status st = me_bad ? dds_fail_collective(s, DDS_CALL_ADD, "v", DDS_ERR_UNSUPPORTED, msg)
                           : dds_add(s, "v", row_buf, sizeof row_buf, ROWS, ELEMS, 8);
    expect_failed(st, DDS_ERR_UNSUPPORTED, bad, "dds_add", msg);
    st = me_bad ? dds_fail_collective(s, DDS_CALL_ADD, NULL, DDS_ERR_MISMATCH, msg) : dds_init(s, "v", ROWS, ELEMS, 8);
    /* The message is named after each rank's own call. */
    expect_failed(st, DDS_ERR_MISMATCH, bad, me_bad ? "dds_add" : "dds_init", msg);
    /* Nothing was registered: the name is still free on every rank. */
    dds_var_info info;
    info.struct_size = sizeof info;
    EXPECT_ERR(dds_info(s, "v", &info), DDS_ERR_UNKNOWN_VARIABLE, "'v'");

    /* dds_get_batch: collective for method 0 in the collective batch mode only. */
    int64_t idx[2] = {0, (int64_t)t_size * ROWS - 1};
    double out[2 * ELEMS];
    st = me_bad ? dds_fail_collective(s, DDS_CALL_GET_BATCH, "data", DDS_ERR_INVALID_ARGUMENT, msg)
                : dds_get_batch(s, "data", out, sizeof out, idx, 2);
    if (t_batch_collective()) {
      expect_failed(st, DDS_ERR_INVALID_ARGUMENT, bad, "dds_get_batch", msg);
    } else if (me_bad) {
      EXPECT_ERR(st, DDS_ERR_INVALID_ARGUMENT, msg);
    } else {
      EXPECT(st == DDS_OK && t_rows_ok(out, 2, ELEMS, 8, TAG, idx, 0));
    }

    /* dds_get_batch_start: the start is collective where get_batch is, and
     * a failed start returns no request. */
    dds_request *rq = NULL;
    memset(out, 0, sizeof out);
    st = me_bad ? dds_fail_collective(s, DDS_CALL_GET_BATCH_START, "data", DDS_ERR_MISMATCH, msg)
                : dds_get_batch_start(s, "data", out, sizeof out, idx, 2, &rq);
    if (t_batch_collective()) {
      expect_failed(st, DDS_ERR_MISMATCH, bad, "dds_get_batch_start", msg);
      EXPECT(rq == NULL);
    } else if (me_bad) {
      EXPECT_ERR(st, DDS_ERR_MISMATCH, msg);
    } else {
      EXPECT(st == DDS_OK && rq != NULL);
      if (rq) CHECK(dds_request_wait(rq));
      EXPECT(t_rows_ok(out, 2, ELEMS, 8, TAG, idx, 0));
    }
    /* The same read started on every rank then works. */
    rq = NULL;
    memset(out, 0, sizeof out);
    CHECK(dds_get_batch_start(s, "data", out, sizeof out, idx, 2, &rq));
    CHECK(dds_request_wait(rq));
    EXPECT(t_rows_ok(out, 2, ELEMS, 8, TAG, idx, 0));

    /* Epochs: a failed begin leaves no epoch open anywhere. */
    st = me_bad ? dds_fail_collective(s, DDS_CALL_EPOCH_BEGIN, NULL, DDS_ERR_BAD_STATE, msg) : dds_epoch_begin(s);
    expect_failed(st, DDS_ERR_BAD_STATE, bad, "dds_epoch_begin", msg);
    CHECK(dds_epoch_begin(s));
    st = me_bad ? dds_fail_collective(s, DDS_CALL_EPOCH_END, NULL, DDS_ERR_GPU, msg) : dds_epoch_end(s);
    expect_failed(st, DDS_ERR_GPU, bad, "dds_epoch_end", msg);
    CHECK(dds_epoch_end(s));

    /* dds_remove: the variable survives. */
    st = me_bad ? dds_fail_collective(s, DDS_CALL_REMOVE, "data", DDS_ERR_IO, msg) : dds_remove(s, "data");
    expect_failed(st, DDS_ERR_IO, bad, "dds_remove", msg);

    /* A status that is not an error still fails the call, as an invalid argument. */
    st = me_bad ? dds_fail_collective(s, DDS_CALL_ADD, "v", DDS_OK, msg)
                : dds_add(s, "v", row_buf, sizeof row_buf, ROWS, ELEMS, 8);
    expect_failed(st, DDS_ERR_INVALID_ARGUMENT, bad, "dds_add", msg);
    if (me_bad) EXPECT(strstr(dds_last_error(), "status 0 is not an error") != NULL);
    st = me_bad ? dds_fail_collective(s, DDS_CALL_ADD, "v", 99, NULL)
                : dds_add(s, "v", row_buf, sizeof row_buf, ROWS, ELEMS, 8);
    expect_failed(st, DDS_ERR_INVALID_ARGUMENT, bad, "dds_add", "(no message)");

    EXPECT(intact(s, "data"));
  }

  /* Two failing ranks: the lowest one's status and message win everywhere. */
  if (t_size > 1) {
    dds_status st = t_rank < 2 ? dds_fail_collective(s, DDS_CALL_ADD, "w", t_rank ? DDS_ERR_IO : DDS_ERR_GPU,
                                                     t_rank ? "second" : "first")
                               : dds_add(s, "w", row_buf, sizeof row_buf, ROWS, ELEMS, 8);
    expect_failed(st, DDS_ERR_GPU, 0, "dds_add", "first");
  }

  /* An unknown call is refused locally and does not take part in anything. */
  EXPECT_ERR(dds_fail_collective(s, 42, "data", DDS_ERR_INVALID_ARGUMENT, "x"), DDS_ERR_INVALID_ARGUMENT,
             "call 42 is not one of the DDS_CALL_* constants");
  EXPECT_ERR(dds_fail_collective(NULL, DDS_CALL_ADD, "data", DDS_ERR_IO, "x"), DDS_ERR_INVALID_ARGUMENT,
             "store handle is NULL");

  /* The store is still fully usable: a new variable, a batch, a removal. */
  CHECK(dds_add(s, "after", row_buf, sizeof row_buf, ROWS, ELEMS, 8));
  int64_t all[ROWS];
  double got[ROWS * ELEMS];
  for (int i = 0; i < ROWS; i++) all[i] = ((int64_t)(t_rank + 1) % t_size) * ROWS + i;
  CHECK(dds_get_batch(s, "after", got, sizeof got, all, ROWS));
  EXPECT(t_rows_ok(got, ROWS, ELEMS, 8, TAG, all, 0));
  CHECK(dds_remove(s, "after"));
  EXPECT(intact(s, "data"));

  CHECK(dds_destroy(s));
  return t_finish("test_fail_collective");
}
