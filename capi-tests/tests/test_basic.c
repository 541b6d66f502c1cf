/* Method-0 behaviour (method 1 with DDS_TEST_METHOD=1) on 1, 2 or 4 ranks: the intent of DDStore's test_single,
 * test_multirank and the method-0 cases of test_get_batch, plus zero-row
 * ranks, groups, init+update, many variables and multi-round batches. */
#include "common.h"

/* Shard sizes differ per rank so that boundaries are uneven. */
static int64_t rows_of(int rank) { return 3 + rank; }
static int64_t first_row_of(int rank) {
  int64_t g = 0;
  for (int r = 0; r < rank; r++) g += rows_of(r);
  return g;
}

static void add_var(dds_store *s, const char *name, int item, int64_t elems, int tag) {
  int64_t n = rows_of(t_rank);
  void *buf = malloc((size_t)(n * elems * item));
  t_fill(buf, n, elems, item, tag, first_row_of(t_rank));
  CHECK(dds_add(s, name, buf, (size_t)(n * elems * item), n, elems, item));
  memset(buf, 0xAB, (size_t)(n * elems * item)); /* the store kept its own copy */
  free(buf);
}

/* Every item size: each rank reads every row with dds_get, each whole shard
 * at once, and shuffled batches with repeats across all ranks. */
static void test_dtypes(void) {
  const int items[] = {1, 2, 4, 8};
  const int64_t elems = 5, total = first_row_of(t_size);
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  for (int k = 0; k < 4; k++) {
    char name[32];
    snprintf(name, sizeof name, "dtype%d", items[k]);
    add_var(s, name, items[k], elems, k + 1);
  }
  CHECK(dds_epoch_begin(s));
  for (int k = 0; k < 4; k++) {
    char name[32];
    int item = items[k];
    size_t rb = (size_t)(elems * item);
    snprintf(name, sizeof name, "dtype%d", item);
    dds_var_info info = {.struct_size = sizeof info};
    CHECK(dds_info(s, name, &info));
    EXPECT(info.total_rows == total && info.local_rows == rows_of(t_rank) && info.row_elems == elems &&
           info.item_size == item && info.row_bytes == (int64_t)rb &&
           (t_method() == 0 ? strcmp(info.transport, "mpi-rma") == 0 : strncmp(info.transport, "fabric:", 7) == 0));
    char *row = malloc(rb);
    for (int64_t g = 0; g < total; g++) {
      memset(row, 0, rb);
      CHECK(dds_get(s, name, row, rb, g, 1));
      EXPECT(t_rows_ok(row, 1, elems, item, k + 1, NULL, g));
    }
    free(row);
    for (int r = 0; r < t_size; r++) { /* a whole shard, from its first row */
      char *shard = calloc((size_t)rows_of(r), rb);
      CHECK(dds_get(s, name, shard, rb * rows_of(r), first_row_of(r), rows_of(r)));
      EXPECT(t_rows_ok(shard, rows_of(r), elems, item, k + 1, NULL, first_row_of(r)));
      free(shard);
    }
    /* 200 random rows with repeats; rank r asks for 200 - 7(r mod 25)
     * (batches differ; positive for any number of ranks). */
    int64_t n = 200 - 7 * (t_rank % 25), idx[200];
    t_rng = 1234567ULL + (unsigned long long)t_rank * 7919ULL;
    for (int64_t i = 0; i < n; i++) idx[i] = (int64_t)(t_next() % (unsigned long long)total);
    char *dst = calloc((size_t)n, rb);
    CHECK(dds_get_batch(s, name, dst, rb * (size_t)n, idx, n));
    EXPECT(t_rows_ok(dst, n, elems, item, k + 1, idx, 0));
    /* Every row in reverse order matches per-row reads (already checked above). */
    free(dst);
    /* Sized by the number of rows (a fixed rev[64] overflowed above 9 ranks). */
    int64_t *rev = malloc(sizeof(int64_t) * (size_t)total);
    char *all = calloc((size_t)total, rb);
    for (int64_t i = 0; i < total; i++) rev[i] = total - 1 - i;
    CHECK(dds_get_batch(s, name, all, rb * (size_t)total, rev, total));
    EXPECT(t_rows_ok(all, total, elems, item, k + 1, rev, 0));
    free(all);
    free(rev);
  }
  CHECK(dds_epoch_end(s));
  CHECK(dds_destroy(s));
}

/* Shard boundaries: first and last row of every shard, a range ending
 * exactly at a shard end, a batch of one row from the next rank, and an
 * empty batch on some ranks while others read. */
static void test_boundaries(void) {
  const int64_t elems = 3;
  const size_t rb = (size_t)elems * 8;
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  add_var(s, "b", 8, elems, 9);
  double row[3], two[6];
  for (int r = 0; r < t_size; r++) {
    int64_t lo = first_row_of(r), hi = lo + rows_of(r);
    CHECK(dds_get(s, "b", row, rb, lo, 1));
    EXPECT(t_rows_ok(row, 1, elems, 8, 9, NULL, lo));
    CHECK(dds_get(s, "b", row, rb, hi - 1, 1));
    EXPECT(t_rows_ok(row, 1, elems, 8, 9, NULL, hi - 1));
    CHECK(dds_get(s, "b", two, 2 * rb, hi - 2, 2));
    EXPECT(t_rows_ok(two, 2, elems, 8, 9, NULL, hi - 2));
  }
  int64_t next = first_row_of((t_rank + 1) % t_size);
  CHECK(dds_get_batch(s, "b", row, rb, &next, 1));
  EXPECT(t_rows_ok(row, 1, elems, 8, 9, NULL, next));
  /* Odd ranks ask for nothing. */
  int64_t n = (t_rank % 2) ? 0 : 2, idx[2] = {0, first_row_of(t_size) - 1};
  CHECK(dds_get_batch(s, "b", n ? two : NULL, (size_t)n * rb, n ? idx : NULL, n));
  if (n) EXPECT(t_rows_ok(two, 2, elems, 8, 9, idx, 0));
  CHECK(dds_destroy(s));
}

/* init + update: zero-filled shards, partial updates, a zero-row rank. */
static void test_init_update(void) {
  const int64_t elems = 4;
  const size_t rb = (size_t)elems * 4;
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  /* Rank 1 (when there is one) holds no rows; everyone else 8. */
  int64_t mine = (t_size > 1 && t_rank == 1) ? 0 : 8;
  int64_t start = 0;
  for (int r = 0; r < t_rank; r++) start += (t_size > 1 && r == 1) ? 0 : 8;
  int64_t total = 8 * (t_size > 1 ? t_size - 1 : 1);
  CHECK(dds_init(s, "iu", mine, elems, 4));
  float rows[8 * 4];
  /* Before any update every row reads as zeros. */
  CHECK(dds_get(s, "iu", rows, rb, total - 1, 1));
  EXPECT(rows[0] == 0.0f && rows[3] == 0.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mine) { /* rows 0-3 then 4-7 in two updates */
    t_fill(rows, 8, elems, 4, 5, start);
    CHECK(dds_update(s, "iu", rows, 4 * rb, 0));
    CHECK(dds_update(s, "iu", rows + 4 * elems, 4 * rb, 4));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int64_t g = 0; g < total; g++) {
    CHECK(dds_get(s, "iu", rows, rb, g, 1));
    EXPECT(t_rows_ok(rows, 1, elems, 4, 5, NULL, g));
  }
  int64_t idx[3] = {total - 1, 0, total / 2};
  CHECK(dds_get_batch(s, "iu", rows, 3 * rb, idx, 3));
  EXPECT(t_rows_ok(rows, 3, elems, 4, 5, idx, 0));
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "iu", &info));
  EXPECT(info.total_rows == total && info.local_rows == mine && info.n_ranks == t_size);
  CHECK(dds_destroy(s));
}

/* Twenty variables of different shapes live side by side. */
static void test_many_variables(void) {
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  for (int v = 0; v < 20; v++) {
    char name[32];
    snprintf(name, sizeof name, "field/%02d", v);
    add_var(s, name, 8, 1 + v % 4, 100 + v);
  }
  for (int v = 19; v >= 0; v--) {
    char name[32];
    double row[4];
    int64_t elems = 1 + v % 4, g = first_row_of(t_size) - 1 - v % 3;
    snprintf(name, sizeof name, "field/%02d", v);
    CHECK(dds_get(s, name, row, (size_t)elems * 8, g, 1));
    EXPECT(t_rows_ok(row, 1, elems, 8, 100 + v, NULL, g));
    CHECK(dds_get_batch(s, name, row, (size_t)elems * 8, &g, 1));
    EXPECT(t_rows_ok(row, 1, elems, 8, 100 + v, NULL, g));
  }
  CHECK(dds_destroy(s));
}

/* Groups of 2 (DDStore's ddstore_width): each group is its own store holding
 * its own copy; reads stay inside the group. */
static void test_groups(void) {
  if (t_size < 2) return;
  dds_store *s = t_store(DDS_METHOD_MPI, 2);
  int group = t_rank / 2, grank = t_rank % 2;
  int gsize = (t_size - group * 2) < 2 ? 1 : 2;
  const int64_t elems = 2;
  double buf[4 * 2];
  /* Group member k holds 4 rows with the group as tag: global rows 4k.. */
  t_fill(buf, 4, elems, 8, 50 + group, 4 * grank);
  CHECK(dds_add(s, "g", buf, sizeof buf, 4, elems, 8));
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "g", &info));
  EXPECT(info.total_rows == 4 * gsize && info.n_ranks == gsize);
  int64_t idx[8];
  for (int i = 0; i < 4 * gsize; i++) idx[i] = 4 * gsize - 1 - i;
  double out[8 * 2];
  CHECK(dds_get_batch(s, "g", out, sizeof(double) * 2 * 4 * gsize, idx, 4 * gsize));
  EXPECT(t_rows_ok(out, 4 * gsize, elems, 8, 50 + group, idx, 0));
  CHECK(dds_get(s, "g", out, 16, 4 * gsize - 1, 1));
  EXPECT(t_rows_ok(out, 1, elems, 8, 50 + group, NULL, 4 * gsize - 1));
  EXPECT_ERR(dds_get(s, "g", out, 16, 4 * gsize, 1), DDS_ERR_INDEX_OUT_OF_RANGE, "out of range");
  CHECK(dds_destroy(s));
}

/* A small DDSTORE_ALLTOALL_MAX_BYTES forces many rounds, including rows
 * larger than the cap (one row per round). */
static void test_rounds(void) {
  const char *caps[] = {"100", "40"};
  for (int c = 0; c < 2; c++) {
    setenv("DDSTORE_ALLTOALL_MAX_BYTES", caps[c], 1);
    dds_store *s = t_store(DDS_METHOD_MPI, 0);
    unsetenv("DDSTORE_ALLTOALL_MAX_BYTES");
    add_var(s, "r", 8, 6, 77); /* 48-byte rows: 2 per round, then 1 */
    int64_t total = first_row_of(t_size), n = 37, idx[37];
    t_rng = 99 + (unsigned long long)t_rank;
    for (int64_t i = 0; i < n; i++) idx[i] = (int64_t)(t_next() % (unsigned long long)total);
    double out[37 * 6];
    CHECK(dds_get_batch(s, "r", out, sizeof out, idx, n));
    EXPECT(t_rows_ok(out, n, 6, 8, 77, idx, 0));
    /* Sorted requests land in place without staging: same answer. */
    for (int64_t i = 0; i < n; i++) idx[i] = i * total / n;
    CHECK(dds_get_batch(s, "r", out, sizeof out, idx, n));
    EXPECT(t_rows_ok(out, n, 6, 8, 77, idx, 0));
    CHECK(dds_destroy(s));
  }
}

/* Counters count calls, rows and bytes; profile timing is off by default. */
static void test_counters(void) {
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  add_var(s, "c", 4, 2, 3);
  float row[2 * 3];
  int64_t idx[3] = {0, 1, 2};
  CHECK(dds_get(s, "c", row, 8, first_row_of(t_size) - 1, 1));
  CHECK(dds_get_batch(s, "c", row, 24, idx, 3));
  CHECK(dds_get_batch(s, "c", NULL, 0, NULL, 0)); /* empty: not counted */
  dds_counters c = {.struct_size = sizeof c};
  CHECK(dds_profile(s, "c", &c));
  EXPECT(c.calls == 2 && c.rows == 4 && c.bytes == 32 && c.rows_local + c.rows_remote == 4);
  EXPECT(c.profiling == 0 && c.read_ns == 0);
  CHECK(dds_destroy(s));
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  test_dtypes();
  test_boundaries();
  test_init_update();
  test_many_variables();
  test_groups();
  test_rounds();
  test_counters();
  return t_finish("test_basic");
}
