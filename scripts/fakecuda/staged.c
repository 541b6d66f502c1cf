/* Staged GPU paths against the stand-in driver (scripts/fake-cuda-check.sh). */
#include <dlfcn.h>
#include "common.h"
void *fake_dev_alloc(size_t n);
void fake_dev_write(void *dst, const void *src, size_t n);
void fake_dev_read(void *dst, const void *src, size_t n);
extern long fake_copies;
enum { E = 3, I = 8, TAG = 5 };

/* Sample k of rank r holds ragged_len(r, k) rows of E doubles; element e of
 * row j of global sample g is 1000 g + 10 j + e. */
static int64_t ragged_len(int r, int k) { return k == 0 ? 0 : k == 1 ? 2 + r : 5; }

/* A ragged batch into device memory (staged through host memory), checked
 * byte by byte; with staging refused, the read fails on every rank. */
static void ragged(dds_store *s, int staging) {
  int64_t lens[3], n_rows = 0;
  for (int k = 0; k < 3; k++) n_rows += lens[k] = ragged_len(t_rank, k);
  double *mine = malloc(sizeof(double) * E * (n_rows + 1));
  for (int k = 0, j0 = 0; k < 3; j0 += lens[k], k++)
    for (int j = 0; j < lens[k]; j++)
      for (int e = 0; e < E; e++) mine[(j0 + j) * E + e] = 1000.0 * (3 * t_rank + k) + 10 * j + e;
  CHECK(dds_add_ragged(s, "rg", mine, sizeof(double) * E * n_rows, lens, 3, E, I));
  int nb = 3 * t_size + 2;
  int64_t *idx = malloc(sizeof(int64_t) * nb), want = 0;
  for (int i = 0; i < nb; i++) {
    idx[i] = (3 * t_size - 1 - i % (3 * t_size) + t_rank) % (3 * t_size);
    want += ragged_len((int)(idx[i] / 3), (int)(idx[i] % 3));
  }
  size_t cap = (size_t)(want + 4) * E * I; /* room to spare: the read fills the start */
  void *d = fake_dev_alloc(cap);
  int64_t *got_len = malloc(sizeof(int64_t) * nb);
  size_t got = 0;
  if (!staging) {
    EXPECT_ERR(dds_get_ragged_batch(s, "rg", d, cap, idx, nb, got_len, &got), DDS_ERR_GPU, "DDSTORE_GPU_STAGING=0");
  } else {
    CHECK(dds_get_ragged_batch(s, "rg", d, cap, idx, nb, got_len, &got));
    EXPECT(got == (size_t)want * E * I);
    double *back = malloc(cap);
    fake_dev_read(back, d, cap);
    int ok = 1;
    for (int i = 0, j0 = 0; i < nb; j0 += got_len[i], i++) {
      ok &= got_len[i] == ragged_len((int)(idx[i] / 3), (int)(idx[i] % 3));
      for (int j = 0; j < got_len[i]; j++)
        for (int e = 0; e < E; e++) ok &= back[(j0 + j) * E + e] == 1000.0 * idx[i] + 10 * j + e;
    }
    EXPECT(ok);
    free(back);
  }
  free(got_len);
  free(idx);
  free(mine);
}
/* Requests into device memory: the rows land in the request's host buffer
 * (a host write to `db` would fault) and reach the device only at the wait. */
static void requests(dds_store *s, void *db, char *bb, const int64_t *idx, long long total) {
  const size_t rb = E * I, n = 2 * total * rb;
  memset(bb, 0, n);
  fake_dev_write(db, bb, n);
  dds_request *rq = NULL;
  CHECK(dds_get_batch_start(s, "v", db, n, idx, 2 * total, &rq));
  EXPECT(t_poll_done(rq) == 1);
  fake_dev_read(bb, db, n);
  int untouched = 1;
  for (size_t i = 0; i < n; i++) untouched &= bb[i] == 0;
  EXPECT(untouched);
  CHECK(dds_request_wait(rq));
  fake_dev_read(bb, db, n);
  EXPECT(t_rows_ok(bb, 2 * total, E, I, TAG, idx, 0));
  /* two in flight, waited for in reverse order; then one abandoned */
  dds_request *r2[2] = {NULL, NULL};
  CHECK(dds_get_batch_start(s, "v", db, n / 2, idx, total, &r2[0]));
  CHECK(dds_get_batch_start(s, "v", (char *)db + n / 2, n / 2, idx + total, total, &r2[1]));
  CHECK(dds_request_wait(r2[1]));
  CHECK(dds_request_wait(r2[0]));
  fake_dev_read(bb, db, n);
  EXPECT(t_rows_ok(bb, 2 * total, E, I, TAG, idx, 0));
  CHECK(dds_get_batch_start(s, "v", db, n, idx, 2 * total, &rq));
  CHECK(dds_request_free(rq));
}
int main(int argc, char **argv) {
  t_init(&argc, &argv);
  int32_t n = 0;
  CHECK(dds_gpu_available(&n));
  dds_store *s = t_store(0, 0);
  long long rows = 10 + t_rank, first = 0;
  for (int r = 0; r < t_rank; r++) first += 10 + r;
  long long total = 0;
  for (int r = 0; r < t_size; r++) total += 10 + r;
  size_t rb = E * I, bytes = rows * rb;
  double *h = malloc(bytes);
  t_fill(h, rows, E, I, TAG, first);
  void *dsrc = fake_dev_alloc(bytes);
  fake_dev_write(dsrc, h, bytes);
  int32_t kind = -1, dev = -2;
  CHECK(dds_pointer_kind(dsrc, &kind, &dev));
  EXPECT(kind == DDS_MEM_CUDA && dev == 0);
  CHECK(dds_add(s, "v", dsrc, bytes, rows, E, I)); /* device source */
  CHECK(dds_update(s, "v", dsrc, rb, 0));
  MPI_Barrier(MPI_COMM_WORLD);
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "v", &info));
  EXPECT(info.device_path == DDS_PATH_STAGED);
  /* single gets into device memory, all rows of every rank */
  void *d = fake_dev_alloc(total * rb);
  char *back = malloc(total * rb);
  long long g0 = 0;
  for (int r = 0; r < t_size; r++) {
    CHECK(dds_get(s, "v", (char *)d + g0 * rb, (10 + r) * rb, g0, 10 + r));
    g0 += 10 + r;
  }
  fake_dev_read(back, d, total * rb);
  EXPECT(t_rows_ok(back, total, E, I, TAG, NULL, 0));
  /* batch, reversed + repeats, with and without a stream */
  int64_t *idx = malloc(sizeof(int64_t) * 2 * total);
  for (long long i = 0; i < 2 * total; i++) idx[i] = (total - 1 - i % total + t_rank) % total;
  void *db = fake_dev_alloc(2 * total * rb);
  char *bb = malloc(2 * total * rb);
  CHECK(dds_get_batch(s, "v", db, 2 * total * rb, idx, 2 * total));
  fake_dev_read(bb, db, 2 * total * rb);
  EXPECT(t_rows_ok(bb, 2 * total, E, I, TAG, idx, 0));
  CHECK(dds_get_batch_stream(s, "v", db, 2 * total * rb, idx, 2 * total, (void *)0x77));
  fake_dev_read(bb, db, 2 * total * rb);
  EXPECT(t_rows_ok(bb, 2 * total, E, I, TAG, idx, 0));
  requests(s, db, bb, idx, total);
  /* empty batch on a device pointer; mixed: rank 0 host, others device */
  CHECK(dds_get_batch(s, "v", db, 0, idx, 0));
  char *hb = malloc(2 * total * rb);
  CHECK(dds_get_batch(s, "v", t_rank ? db : (void *)hb, 2 * total * rb, idx, 2 * total));
  if (t_rank) fake_dev_read(hb, db, 2 * total * rb);
  EXPECT(t_rows_ok(hb, 2 * total, E, I, TAG, idx, 0));
  /* errors: out of range index and bad size, collective for method 0 */
  idx[1] = total;
  EXPECT_ERR(dds_get_batch(s, "v", db, 2 * total * rb, idx, 2 * total), DDS_ERR_INDEX_OUT_OF_RANGE, "global row");
  idx[1] = 0;
  EXPECT_ERR(dds_get_batch(s, "v", db, 7, idx, 2 * total), DDS_ERR_MISMATCH, "destination");
  EXPECT_ERR(dds_get(s, "v", d, 2 * rb, 9, 2), t_rank == 0 && 0 ? DDS_OK : DDS_ERR_INVALID_ARGUMENT, "cross");
  /* registered device destination */
  CHECK(dds_register_recv(s, "v", d, total * rb));
  CHECK(dds_get(s, "v", d, rb, total - 1, 1));
  fake_dev_read(back, d, rb);
  EXPECT(t_rows_ok(back, 1, E, I, TAG, NULL, total - 1));
  CHECK(dds_unregister_recv(s, "v", d));
  CHECK(dds_destroy(s));
  /* tiny chunks */
  setenv("DDSTORE_GPU_STAGING_BYTES", "50", 1);
  s = t_store(0, 0);
  CHECK(dds_add(s, "v", h, bytes, rows, E, I));
  MPI_Barrier(MPI_COMM_WORLD);
  long before = fake_copies;
  dds_counters c0 = {.struct_size = sizeof c0}, c1 = {.struct_size = sizeof c1};
  CHECK(dds_profile(s, "v", &c0));
  CHECK(dds_get_batch(s, "v", db, 2 * total * rb, idx, 2 * total));
  fake_dev_read(bb, db, 2 * total * rb);
  EXPECT(t_rows_ok(bb, 2 * total, E, I, TAG, idx, 0));
  const long copies = fake_copies - before - 1;
  if (t_rank == 0) printf("copies for a %lld-row batch with 50-byte chunks: %ld (method %d)\n", 2 * total, copies, t_method());
  /* Many bounce chunks, one call: the counters count what the user called. */
  CHECK(dds_profile(s, "v", &c1));
  EXPECT(t_method() == 0 || copies > 1);
  EXPECT(c1.calls - c0.calls == 1 && c1.rows - c0.rows == (uint64_t)(2 * total));
  EXPECT(c1.bytes - c0.bytes == (uint64_t)(2 * total) * rb);
  CHECK(dds_get(s, "v", d, 5 * rb, first, 5));
  fake_dev_read(back, d, 5 * rb);
  EXPECT(t_rows_ok(back, 5, E, I, TAG, NULL, first));
  CHECK(dds_profile(s, "v", &c0));
  EXPECT(c0.calls - c1.calls == 1 && c0.rows - c1.rows == 5 && c0.rows_local - c1.rows_local == 5);
  ragged(s, 1);
  CHECK(dds_destroy(s));
  unsetenv("DDSTORE_GPU_STAGING_BYTES");
  /* staging refused */
  setenv("DDSTORE_GPU_STAGING", "0", 1);
  s = t_store(0, 0);
  EXPECT_ERR(dds_add(s, "v", dsrc, bytes, rows, E, I), DDS_ERR_GPU, "DDSTORE_GPU_STAGING=0");
  CHECK(dds_add(s, "v", h, bytes, rows, E, I));
  CHECK(dds_info(s, "v", &info));
  EXPECT(info.device_path == DDS_PATH_REFUSED);
  EXPECT_ERR(dds_get(s, "v", d, rb, 0, 1), DDS_ERR_GPU, t_method() ? "FI_HMEM" : "method=1 or 2");
  EXPECT_ERR(dds_get_batch(s, "v", db, 2 * total * rb, idx, 2 * total), DDS_ERR_GPU, "GPU destination");
  dds_request *rq = NULL;
  EXPECT_ERR(dds_get_batch_start(s, "v", db, 2 * total * rb, idx, 2 * total, &rq), DDS_ERR_GPU, "DDSTORE_GPU_STAGING=0");
  EXPECT(rq == NULL);
  ragged(s, 0);
  CHECK(dds_get(s, "v", h, rb, 0, 1));
  CHECK(dds_destroy(s));
  unsetenv("DDSTORE_GPU_STAGING");
  return t_finish("staged");
}
