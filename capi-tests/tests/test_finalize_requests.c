/* MPI_Finalize with batched reads in flight (issue 35, item 2): every rank
 * starts 8 requests, reading rows of the next rank, waits for none, and
 * calls MPI_Finalize; afterwards it tests, waits for and frees them and
 * destroys the store. Before the fix, the one-sided method-0 mode aborted
 * inside MPI_Finalize (UCX: `worker->inprogress++ == 0`, from MPI_Rget on a
 * request thread), because MPICH stops locking before the library's
 * finalize hook runs and two request threads then called MPI at once.
 *
 * What must hold, in every mode (method 0 collective and one-sided, method
 * 1; set by the environment, node-local reads off so the rows travel): the
 * process never aborts; after MPI_Finalize each request is complete
 * (dds_request_test says done); its wait returns DDS_OK with the right rows
 * (it ran) or DDS_ERR_BAD_STATE "MPI was finalized with this request in
 * flight" (it had not started); a second wait is refused; dds_destroy works.
 *
 * DDS_TEST_EXPECT=cancelled (with the testing aid
 * DDSTORE_TEST_REQUEST_DELAY_S, which keeps every request queued well past
 * MPI_Finalize): every one-sided request (method 1, method-0 one-sided) must
 * be refused that way, while the collective mode's run to the end (every
 * rank started them; see docs/guarantees.md) and return DDS_OK. */
#include "common.h"

enum { ROWS = 4096, ELEMS = 256, NREQ = 8, PER = 1024 };

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  const char *expect = getenv("DDS_TEST_EXPECT");
  const int want_cancel = expect && strcmp(expect, "cancelled") == 0;
  const int collective = t_batch_collective();

  float *data = malloc(sizeof(float) * ROWS * ELEMS);
  t_fill(data, ROWS, ELEMS, 4, 7, (long long)t_rank * ROWS);
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  CHECK(dds_add(s, "x", data, sizeof(float) * ROWS * ELEMS, ROWS, ELEMS, 4));
  free(data);

  /* Request k reads rows k*PER/2 .. of the next rank's shard, reversed (no
   * run merges into one transfer). */
  const int peer = (t_rank + 1) % t_size;
  int64_t *idx[NREQ];
  float *dst[NREQ];
  dds_request *req[NREQ];
  for (int k = 0; k < NREQ; k++) {
    idx[k] = malloc(sizeof(int64_t) * PER);
    dst[k] = malloc(sizeof(float) * PER * ELEMS);
    for (int i = 0; i < PER; i++) idx[k][i] = (int64_t)peer * ROWS + (k * PER / 2 + PER - 1 - i) % ROWS;
    CHECK(dds_get_batch_start(s, "x", dst[k], sizeof(float) * PER * ELEMS, idx[k], PER, &req[k]));
  }

  int sums[2] = {t_passed, t_failed}, tot[2];
  MPI_Allreduce(sums, tot, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();

  /* No MPI any more. */
  int done = 0;
  EXPECT(dds_request_test(req[0], &done) == DDS_OK && done == 1);
  int ran = 0, refused = 0;
  for (int k = 0; k < NREQ; k++) {
    dds_status st = k == NREQ - 1 ? dds_request_free(req[k]) : dds_request_wait(req[k]);
    const char *msg = dds_last_error();
    if (k == NREQ - 1) {
      EXPECT(st == DDS_OK); /* free discards the status */
    } else if (st == DDS_OK) {
      ran++;
      EXPECT(t_rows_ok(dst[k], PER, ELEMS, 4, 7, idx[k], 0));
    } else {
      refused++;
      EXPECT(st == DDS_ERR_BAD_STATE);
      EXPECT(strstr(msg, "dds_request_wait: MPI was finalized with this request in flight") != NULL);
      if (st != DDS_ERR_BAD_STATE) fprintf(stderr, "rank %d request %d: %s: %s\n", t_rank, k, dds_status_string(st), msg);
    }
  }
  EXPECT_ERR(dds_request_wait(req[0]), DDS_ERR_BAD_STATE, "not a live request");
  if (collective) {
    EXPECT(ran == NREQ - 1 && refused == 0);
  } else if (want_cancel) {
    EXPECT(ran == 0 && refused == NREQ - 1);
  }
  EXPECT(dds_destroy(s) == DDS_OK);
  for (int k = 0; k < NREQ; k++) {
    free(idx[k]);
    free(dst[k]);
  }
  printf("test_finalize_requests rank %d after MPI_Finalize: %d ran, %d refused; %d passed, %d failed\n", t_rank,
         ran, refused, t_passed - sums[0], t_failed - sums[1]);
  if (t_rank == 0)
    printf("test_finalize_requests on %d ranks before finalize: %d passed, %d failed\n", t_size, tot[0], tot[1]);
  return (tot[1] || t_failed != sums[1]) ? 1 : 0;
}
