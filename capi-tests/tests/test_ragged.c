/* Ragged variables (issue 21): every byte of every sample read back, and
 * every bad input refused with a clear error on the ranks it must fail.
 *
 * Runs for methods 0 (both batch modes: DDSTORE_BATCH_MODE), 1 and 2 (core
 * members; DDS_TEST_METHOD), node-local reads on and off, 1/2/4 ranks.
 *
 * Layouts: (a) every rank holds samples, some of 0 rows, and rank 0 holds
 * one sample with most of the data; (b) odd ranks hold no samples. Batches:
 * every sample in reverse order, random ones with repeats, an empty batch,
 * one sample at a time. Boundary tables, generated from each layout: sample
 * indices at, just past and far past the end and negative; destinations of
 * exactly the bytes needed, one byte less, and more. Bad registrations:
 * lengths not summing to the payload, a negative length, a row shape
 * differing on one rank: every rank fails, the message names the variable
 * and the rank.
 *
 * `test_ragged core N` / `test_ragged extra` (run_split_ragged.sh): a
 * method-2 core job registers layout 0, a separate extra job joins it with
 * dds_join_ragged and reads every sample back. */
#include <stdint.h>

#include "common.h"

enum { ELEMS = 3 };
typedef uint32_t elem;
static const size_t RB = ELEMS * sizeof(elem);
/* Ranks the samples are spread over: this job's, or the core job's for a
 * method-2 extra member. */
static int n_owners;

/* Sample lengths of layout `lay`: rank r holds n_of(lay, r) samples. */
static int64_t n_of(int lay, int r) {
  if (lay == 1 && r % 2 == 1) return 0;
  return 5 + (r * 3) % 4;
}
static int64_t first_of(int lay, int r) {
  int64_t g = 0;
  for (int q = 0; q < r; q++) g += n_of(lay, q);
  return g;
}
static int64_t total_of(int lay) { return first_of(lay, n_owners); }
/* Length of global sample g: 0 every 4th, one big one (sample 1). */
static int64_t len_of(int lay, int64_t g) {
  if (g == 1) return lay == 0 ? 4000 : 777;
  if (g % 4 == 0) return 0;
  return 1 + (g * 5) % 9;
}
static elem value(int64_t g, int64_t row, int e) { return (elem)(g * 1000003 + row * 31 + e * 7 + 1); }

static elem *payload_of(int lay, int r, int64_t *rows_out, int64_t *lens) {
  int64_t f = first_of(lay, r), n = n_of(lay, r), rows = 0;
  for (int64_t i = 0; i < n; i++) rows += len_of(lay, f + i);
  elem *p = malloc((size_t)(rows ? rows : 1) * RB);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    lens[i] = len_of(lay, f + i);
    for (int64_t j = 0; j < lens[i]; j++)
      for (int e = 0; e < ELEMS; e++) p[k++] = value(f + i, j, e);
  }
  *rows_out = rows;
  return p;
}

static unsigned long long mix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/* Checks a packed read of samples idx[0..n) and its lengths. */
static int verify(int lay, const int64_t *idx, int64_t n, const elem *buf, const int64_t *lens) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t g = idx[i];
    if (lens[i] != len_of(lay, g)) return 0;
    for (int64_t j = 0; j < lens[i]; j++)
      for (int e = 0; e < ELEMS; e++)
        if (buf[k++] != value(g, j, e)) return 0;
  }
  return 1;
}

static size_t bytes_of(int lay, const int64_t *idx, int64_t n) {
  size_t b = 0;
  for (int64_t i = 0; i < n; i++) b += (size_t)len_of(lay, idx[i]) * RB;
  return b;
}

/* Reads idx[0..n) and checks every byte, the lengths and bytes_read. */
static void read_and_verify(dds_store *s, const char *name, int lay, const int64_t *idx, int64_t n) {
  size_t need = bytes_of(lay, idx, n);
  elem *buf = malloc(need + 64);
  int64_t *lens = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  size_t got = 12345;
  CHECK(dds_get_ragged_batch(s, name, buf, need + 64, idx, n, lens, &got));
  EXPECT(got == need);
  EXPECT(verify(lay, idx, n, buf, lens));
  /* Lengths alone. */
  for (int64_t i = 0; i < n; i++) lens[i] = -7;
  CHECK(dds_ragged_lengths(s, name, idx, n, lens));
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= lens[i] == len_of(lay, idx[i]);
  EXPECT(ok);
  free(buf);
  free(lens);
}

static void run_layout(dds_store *s, int lay, int collective) {
  char name[32];
  snprintf(name, sizeof name, "graph/x%d", lay);
  int64_t n = n_of(lay, t_rank), rows;
  int64_t *lens = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  elem *p = payload_of(lay, t_rank, &rows, lens);
  CHECK(dds_add_ragged(s, name, p, (size_t)rows * RB, lens, n, ELEMS, sizeof(elem)));
  free(p);
  free(lens);
  CHECK(dds_epoch_begin(s));
  int64_t total = total_of(lay), all_rows = 0;
  for (int64_t g = 0; g < total; g++) all_rows += len_of(lay, g);

  dds_var_info info;
  info.struct_size = sizeof info;
  CHECK(dds_info(s, name, &info));
  EXPECT(info.is_ragged == 1 && info.total_samples == total && info.local_samples == n);
  EXPECT(info.total_items == all_rows && info.total_rows == all_rows && info.row_bytes == (int64_t)RB);

  /* Every sample, in reverse order. */
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(3 * total + 8));
  for (int64_t i = 0; i < total; i++) idx[i] = total - 1 - i;
  read_and_verify(s, name, lay, idx, total);
  /* Random ones with repeats; a different count per rank. */
  unsigned long long st = mix(777 + (unsigned long long)t_rank + 100ULL * (unsigned long long)lay);
  int64_t m = 2 * total + t_rank;
  for (int64_t i = 0; i < m; i++) {
    st = mix(st);
    idx[i] = (i > 0 && i % 5 == 0) ? idx[i - 1] : (int64_t)(st % (unsigned long long)total);
  }
  read_and_verify(s, name, lay, idx, m);
  /* An empty batch, and the big sample alone (a batch of one). */
  read_and_verify(s, name, lay, idx, 0);
  {
    int64_t len = -1;
    size_t need = (size_t)len_of(lay, 1) * RB;
    elem *one = malloc(need);
    CHECK(dds_get_ragged(s, name, one, need, 1, &len));
    int64_t g1 = 1;
    EXPECT(len == len_of(lay, 1) && verify(lay, &g1, 1, one, &len));
    free(one);
  }

  /* Boundary table: each bad index is used by one rank (collective: all
   * fail; one-sided: only that rank calls). */
  int64_t bad[] = {total, total + 1, total + 1000, -1, -total - 1, INT64_MIN, INT64_MAX};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    int who = (int)(k % (size_t)t_size);
    int64_t q[3] = {0, 2, 0};
    q[2] = (t_rank == who) ? bad[k] : total - 1;
    char part[64];
    snprintf(part, sizeof part, "sample %lld", (long long)bad[k]);
    elem big[8192];
    if (t_rank == who) {
      EXPECT_ERR(dds_get_ragged_batch(s, name, big, sizeof big, q, 3, NULL, NULL), DDS_ERR_INDEX_OUT_OF_RANGE, part);
      snprintf(part, sizeof part, "index 2 of the batch, sample %lld", (long long)bad[k]);
      EXPECT_ERR(dds_ragged_lengths(s, name, q, 3, (int64_t *)big), DDS_ERR_INDEX_OUT_OF_RANGE, part);
    } else if (collective) {
      EXPECT_ERR(dds_get_ragged_batch(s, name, big, sizeof big, q, 3, NULL, NULL), DDS_ERR_INDEX_OUT_OF_RANGE, part);
      EXPECT_ERR(dds_ragged_lengths(s, name, q, 3, (int64_t *)big), DDS_ERR_INDEX_OUT_OF_RANGE, part);
    }
  }
  /* Destinations: exactly the bytes needed, one byte less (refused, naming
   * the bytes needed), zero bytes for a batch of empty samples. */
  /* Samples 0 (0 rows), 1 (the big one), 2, 3 and the last. */
  int64_t firsts[] = {0, 1, 2, 3, total - 1};
  for (size_t t = 0; t < sizeof firsts / sizeof firsts[0]; t++) {
    int64_t g = firsts[t];
    int64_t q[2] = {g, (g + 1) % total};
    size_t need = bytes_of(lay, q, 2);
    elem *buf = malloc(need + 1);
    int64_t l2[2];
    CHECK(dds_get_ragged_batch(s, name, buf, need, q, 2, l2, NULL));
    EXPECT(verify(lay, q, 2, buf, l2));
    if (need > 0) {
      char part[64];
      snprintf(part, sizeof part, "%zu bytes are needed", need);
      EXPECT_ERR(dds_get_ragged_batch(s, name, buf, need - 1, q, 2, l2, NULL), DDS_ERR_MISMATCH, part);
      EXPECT_ERR(dds_get_ragged_batch(s, name, NULL, 0, q, 2, l2, NULL), DDS_ERR_MISMATCH, part);
    } else {
      CHECK(dds_get_ragged_batch(s, name, NULL, 0, q, 2, l2, NULL));
      EXPECT(l2[0] == 0 && l2[1] == 0);
    }
    free(buf);
  }
  /* A too-small destination on one rank only fails every rank (collective). */
  if (collective && t_size > 1) {
    int64_t q[1] = {1};
    size_t need = bytes_of(lay, q, 1);
    elem *buf = malloc(need);
    size_t give = t_rank == t_size - 1 ? need - 1 : need;
    EXPECT_ERR(dds_get_ragged_batch(s, name, buf, give, q, 1, NULL, NULL), DDS_ERR_MISMATCH, "bytes are needed");
    /* A binding's failure on rank 0 (dds_fail_collective) fails every rank. */
    if (t_rank == 0)
      EXPECT_ERR(dds_fail_collective(s, DDS_CALL_GET_RAGGED_BATCH, name, DDS_ERR_INVALID_ARGUMENT, "binding said no"),
                 DDS_ERR_INVALID_ARGUMENT, "binding said no");
    else
      EXPECT_ERR(dds_get_ragged_batch(s, name, buf, need, q, 1, NULL, NULL), DDS_ERR_INVALID_ARGUMENT,
                 "binding said no");
    free(buf);
  }
  /* The store is still usable after every error. */
  for (int64_t i = 0; i < total; i++) idx[i] = i;
  read_and_verify(s, name, lay, idx, total);
  free(idx);
  CHECK(dds_epoch_end(s));
}

static void bad_registrations(dds_store *s) {
  int last = t_size - 1;
  elem p[6 * ELEMS] = {0};
  int64_t lens[3] = {1, 2, 3};
  char part[96];
  /* Lengths summing to 6 rows but 5 rows of payload on the last rank. */
  snprintf(part, sizeof part, "rank %d: ragged variable 'bad/sum': rank %d: the lengths", last, last);
  EXPECT_ERR(dds_add_ragged(s, "bad/sum", p, (t_rank == last ? 5 : 6) * RB, lens, 3, ELEMS, sizeof(elem)),
             DDS_ERR_MISMATCH, part);
  /* A negative length on the last rank. */
  int64_t neg[3] = {1, t_rank == last ? -2 : 2, 3};
  snprintf(part, sizeof part, "rank %d, local sample 1: length -2 is negative", last);
  EXPECT_ERR(dds_add_ragged(s, "bad/neg", p, sizeof p, neg, 3, ELEMS, sizeof(elem)), DDS_ERR_INVALID_ARGUMENT, part);
  /* A row shape differing on the last rank (6 rows of 3 x 4 bytes = 9 rows of 2 x 4 bytes). */
  if (t_size > 1) {
    int64_t l9[3] = {2, 3, 4};
    int mine = t_rank == last;
    snprintf(part, sizeof part, "variable 'bad/shape': rank %d has rows of 2 elements", last);
    EXPECT_ERR(dds_add_ragged(s, "bad/shape", p, sizeof p, mine ? l9 : lens, 3, mine ? 2 : ELEMS, sizeof(elem)),
               DDS_ERR_MISMATCH, part);
  }
  /* Bad pointers and shapes. */
  EXPECT_ERR(dds_add_ragged(s, "bad/null", p, sizeof p, NULL, 3, ELEMS, sizeof(elem)), DDS_ERR_INVALID_ARGUMENT,
             "lengths is NULL");
  EXPECT_ERR(dds_add_ragged(s, "bad/item", p, sizeof p, lens, 3, ELEMS, 3), DDS_ERR_INVALID_ARGUMENT, "item size 3");
  /* None of them was registered: the names are free. */
  dds_var_info info;
  info.struct_size = sizeof info;
  EXPECT_ERR(dds_info(s, "bad/sum", &info), DDS_ERR_UNKNOWN_VARIABLE, "bad/sum");
  CHECK(dds_add_ragged(s, "bad/sum", p, sizeof p, lens, 3, ELEMS, sizeof(elem)));
  EXPECT_ERR(dds_add_ragged(s, "bad/sum", p, sizeof p, lens, 3, ELEMS, sizeof(elem)), DDS_ERR_DUPLICATE_VARIABLE,
             "bad/sum");
  /* Ragged calls on a fixed-row variable, and fixed reads of a ragged one's rows. */
  CHECK(dds_add(s, "fixed", p, sizeof p, 6, ELEMS, sizeof(elem)));
  int64_t q[1] = {0};
  EXPECT_ERR(dds_get_ragged_batch(s, "fixed", p, sizeof p, q, 1, NULL, NULL), DDS_ERR_INVALID_ARGUMENT, "not ragged");
  elem row[ELEMS];
  CHECK(dds_get(s, "bad/sum", row, sizeof row, 0, 1));
  CHECK(dds_remove(s, "bad/sum"));
  CHECK(dds_remove(s, "fixed"));
}

/* The example of docs/ragged.md and docs/c-api.md, run and checked. */
static void doc_example(dds_store *s) {
  // [snippet:c-ragged]
  /* This rank's 3 samples: 2 rows, 0 rows and 1 row of 4 floats, back to back. */
  int64_t lengths[3] = {2, 0, 1};
  float x[3 * 4];
  for (int k = 0; k < 12; k++) x[k] = (float)(100 * t_rank + k);
  CHECK(dds_add_ragged(s, "graph/x", x, sizeof x, lengths, 3, 4, sizeof(float)));

  int64_t want[3] = {0, 3 * t_size - 1, 0}, len[3]; /* any samples, any order, repeats */
  float buf[5 * 4];
  size_t got;
  CHECK(dds_get_ragged_batch(s, "graph/x", buf, sizeof buf, want, 3, len, &got));
  /* buf: sample 0 (2 rows), the last sample (1 row), sample 0 again; len = {2, 1, 2} */
  // [end-snippet]
  EXPECT(len[0] == 2 && len[1] == 1 && len[2] == 2 && got == sizeof buf);
  int ok = 1;
  for (int k = 0; k < 8; k++) ok &= buf[k] == (float)k && buf[12 + k] == (float)k;
  for (int k = 0; k < 4; k++) ok &= buf[8 + k] == (float)(100 * (t_size - 1) + 8 + k);
  EXPECT(ok);
  CHECK(dds_remove(s, "graph/x"));
}

/* Method 2 across jobs: the core serves layout 0 until N extras are done. */
static int run_core(int n_extras) {
  dds_options o;
  dds_store *s;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  int64_t n = n_of(0, t_rank), rows;
  int64_t *lens = malloc(sizeof(int64_t) * (size_t)n);
  elem *p = payload_of(0, t_rank, &rows, lens);
  CHECK(dds_add_ragged(s, "graph/x", p, (size_t)rows * RB, lens, n, ELEMS, sizeof(elem)));
  free(p);
  free(lens);
  CHECK(dds_wait_extras(s, n_extras, 120000));
  CHECK(dds_destroy(s));
  return t_finish("test_ragged core");
}

static int run_extra(int n_core) {
  dds_options o;
  dds_store *s;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = n_core;
  CHECK(dds_create(0, &o, &s));
  n_owners = n_core;
  CHECK(dds_join_ragged(s, "graph/x"));
  EXPECT_ERR(dds_join_ragged(s, "graph/x"), DDS_ERR_DUPLICATE_VARIABLE, "already joined");
  dds_var_info info;
  info.struct_size = sizeof info;
  CHECK(dds_info(s, "graph/x", &info));
  int64_t total = total_of(0);
  EXPECT(info.is_ragged == 1 && info.total_samples == total && info.local_samples == 0);
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(2 * total));
  for (int64_t i = 0; i < total; i++) idx[i] = total - 1 - i;
  read_and_verify(s, "graph/x", 0, idx, total);
  for (int64_t i = 0; i < 2 * total; i++) idx[i] = (i * 7) % total;
  read_and_verify(s, "graph/x", 0, idx, 2 * total);
  int64_t q[1] = {total};
  elem buf[4];
  EXPECT_ERR(dds_get_ragged_batch(s, "graph/x", buf, sizeof buf, q, 1, NULL, NULL), DDS_ERR_INDEX_OUT_OF_RANGE,
             "sample");
  free(idx);
  CHECK(dds_extra_done(s));
  CHECK(dds_destroy(s));
  return t_finish("test_ragged extra");
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  n_owners = t_size;
  const char *role = argc > 1 ? argv[1] : "";
  if (!strcmp(role, "core")) return run_core(argc > 2 ? atoi(argv[2]) : 1);
  if (!strcmp(role, "extra")) return run_extra(argc > 2 ? atoi(argv[2]) : 2);
  dds_store *s = t_store(0, 0);
  int collective = t_batch_collective();
  run_layout(s, 0, collective);
  run_layout(s, 1, collective);
  bad_registrations(s);
  doc_example(s);
  CHECK(dds_destroy(s));
  return t_finish("test_ragged");
}
