/* Ragged variables (issue 21), its own invocation:
 *
 *   mpiexec -n 2 bench --ragged [--out FILE --append]
 *
 * For each method (method 0 collective, method 0 one-sided, method 1 on shm
 * and on tcp, all with node-local reads off so the bytes travel; and method
 * 0 with them on, "mpi+local") and mean sample size (3 KiB and 200 KiB): a ragged variable
 * whose sample lengths vary 1-10x (uniform in [a, 10a] rows of 64 bytes,
 * a = mean / 5.5), and in the same store a fixed-row variable whose row is
 * the ragged pool's mean sample size. Timed: batches of 128 random samples
 * (dds_get_ragged_batch into a buffer sized for the largest batch) and
 * batches of 128 random fixed rows (dds_get_batch), alternating, medians of
 * repeats, max over ranks; compared per byte moved (ratio = ragged us/byte
 * over fixed us/byte; target <= 1.5). Every batch's bytes are verified
 * after the timing (the last batch of each repeat).
 *
 * Metadata: a ragged variable of 10^6 samples over the ranks (each of 0
 * rows: no payload), registered alone; the growth of this rank's resident
 * memory per local sample, next to the structural figure (16 B per local
 * sample: the index shard) and what HydraGNN's all-gathered record offsets
 * cost per rank (two 8-byte entries per sample of the whole dataset). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { RG_BATCH = 128, RG_BATCHES = 24, RG_REPEATS = 5, RG_ROW = 64 };

typedef struct {
  const char *label;
  int method;
  int batch_mode;
  const char *provider;
  const char *node_local; /* DDSTORE_NODE_LOCAL: "0" makes every peer's bytes travel */
} rg_method;

static const rg_method RG_METHODS[] = {
    {"mpi", DDS_METHOD_MPI, DDS_BATCH_COLLECTIVE, NULL, "0"},
    {"mpi onesided", DDS_METHOD_MPI, DDS_BATCH_ONESIDED, NULL, "0"},
    {"fabric:shm", DDS_METHOD_FABRIC, DDS_BATCH_ENV, "shm", "0"},
    {"fabric:tcp", DDS_METHOD_FABRIC, DDS_BATCH_ENV, "tcp", "0"},
    {"mpi+local", DDS_METHOD_MPI, DDS_BATCH_COLLECTIVE, NULL, "1"},
};

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* Rows of global sample g (every rank computes any sample's length). */
static int64_t rows_of(int64_t g, int64_t a) {
  uint64_t s = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(g * 2654435761LL + 1);
  next(&s), next(&s);
  return a + (int64_t)(next(&s) % (uint64_t)(9 * a + 1));
}

/* Word k of sample g's payload. */
static uint64_t word_of(int64_t g, int64_t k) { return (uint64_t)g * 0x100000001B3ULL + (uint64_t)k; }

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
  if (f) fclose(f);
  return kib;
}

/* Seconds per batch of RG_BATCHES calls of `ragged` (1) or fixed (0) reads, max over ranks. */
static double timed(dds_store *s, int ragged, int64_t **order, char *buf, size_t cap, size_t fixed_rb) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_s();
  for (int k = 0; k < RG_BATCHES; k++) {
    if (ragged)
      TRY(dds_get_ragged_batch(s, "rag", buf, cap, order[k], RG_BATCH, NULL, NULL));
    else
      TRY(dds_get_batch(s, "fix", buf, RG_BATCH * fixed_rb, order[k], RG_BATCH));
  }
  double per = (now_s() - t0) / RG_BATCHES, worst;
  MPI_Allreduce(&per, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

static int metadata(FILE *out, int me, int np) {
  const int64_t total = 1000000;
  int64_t n = total / np + (me < total % np);
  int64_t *lengths = calloc((size_t)n, sizeof *lengths);
  dds_store *s = NULL;
  TRY(dds_create_comm(MPI_COMM_WORLD, NULL, &s));
  MPI_Barrier(MPI_COMM_WORLD);
  long before = rss_kib();
  TRY(dds_add_ragged(s, "meta", NULL, 0, lengths, n, 8, 8));
  long after = rss_kib();
  free(lengths);
  dds_var_info info;
  info.struct_size = sizeof info;
  TRY(dds_info(s, "meta", &info));
  double per = 1024.0 * (double)(after - before) / (double)n;
  double per_max;
  MPI_Allreduce(&per, &per_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (me == 0) {
    printf("ragged metadata: %lld samples on %d ranks: RSS growth %.1f B per local sample (max over ranks); "
           "structure 16 B per local sample + 2 layouts of %d entries; all-gathered offsets would be %lld B per rank\n",
           (long long)info.total_samples, np, per_max, np, (long long)(16 * total));
    if (out)
      fprintf(out,
              "{\"type\": \"ragged_meta\", \"samples\": %lld, \"ranks\": %d, \"local_samples\": %lld, "
              "\"rss_bytes_per_local_sample\": %.2f, \"index_bytes_per_local_sample\": 16, \"layout_bytes\": %d, "
              "\"allgather_bytes_per_rank\": %lld}\n",
              (long long)info.total_samples, np, (long long)n, per_max, 2 * 8 * np, (long long)(16 * total));
  }
  TRY(dds_destroy(s));
  return 0;
}

int ragged_check(FILE *out) {
  int me, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  const int64_t means[] = {3072, 204800};
  int failed = 0;
  if (me == 0) printf("ragged batches (%d ranks, %d samples per batch, lengths 1-10x around the mean):\n", np, RG_BATCH);
  for (size_t mi = 0; mi < sizeof RG_METHODS / sizeof RG_METHODS[0]; mi++) {
    const rg_method *m = &RG_METHODS[mi];
    for (int si = 0; si < 2; si++) {
      int64_t a = (means[si] / RG_ROW * 2 + 5) / 11; /* rows in [a, 10a]: mean 5.5a */
      int64_t per_rank = (32LL << 20) / means[si] / np; /* ~32 MiB of payload over all ranks */
      if (per_rank < 2 * RG_BATCH) per_rank = 2 * RG_BATCH;
      int64_t total = per_rank * np, first = per_rank * me;
      dds_options o;
      TRY(dds_options_init(&o));
      o.method = m->method;
      o.batch_mode = m->batch_mode;
      o.fabric_provider = m->provider;
      setenv("DDSTORE_NODE_LOCAL", m->node_local, 1);
      dds_store *s = NULL;
      if (dds_create_comm(MPI_COMM_WORLD, &o, &s) != DDS_OK) {
        if (me == 0) printf("  %-13s %7lld B: skipped (%s)\n", m->label, (long long)means[si], dds_last_error());
        continue;
      }
      /* The ragged pool, and its mean sample size over the whole variable. */
      int64_t *lengths = xmalloc(sizeof(int64_t) * (size_t)per_rank), rows = 0, all_rows = 0, biggest = 0;
      for (int64_t i = 0; i < per_rank; i++) rows += lengths[i] = rows_of(first + i, a);
      for (int64_t g = 0; g < total; g++) all_rows += rows_of(g, a);
      uint64_t *pay = xmalloc((size_t)(rows * RG_ROW));
      for (int64_t i = 0, w = 0; i < per_rank; i++)
        for (int64_t k = 0; k < lengths[i] * (RG_ROW / 8); k++) pay[w++] = word_of(first + i, k);
      TRY(dds_add_ragged(s, "rag", pay, (size_t)(rows * RG_ROW), lengths, per_rank, RG_ROW / 8, 8));
      free(pay);
      free(lengths);
      size_t fixed_rb = (size_t)((all_rows * RG_ROW / total + 7) / 8 * 8);
      char *fix = xmalloc(fixed_rb * (size_t)per_rank);
      fill_rows(fix, first, per_rank, (int64_t)fixed_rb);
      TRY(dds_add(s, "fix", fix, fixed_rb * (size_t)per_rank, per_rank, (int64_t)fixed_rb / 8, 8));
      free(fix);
      /* The same random samples / rows for both. */
      uint64_t seed = 0x2545F4914F6CDD1DULL * (uint64_t)(me + 1) + (uint64_t)means[si];
      int64_t **order = xmalloc(sizeof(int64_t *) * RG_BATCHES);
      int64_t ragged_bytes = 0;
      for (int k = 0; k < RG_BATCHES; k++) {
        order[k] = xmalloc(sizeof(int64_t) * RG_BATCH);
        int64_t b = 0;
        for (int i = 0; i < RG_BATCH; i++) {
          order[k][i] = (int64_t)(next(&seed) % (uint64_t)total);
          b += rows_of(order[k][i], a) * RG_ROW;
        }
        ragged_bytes += b;
        if (b > biggest) biggest = b;
      }
      size_t cap = (size_t)biggest > RG_BATCH * fixed_rb ? (size_t)biggest : RG_BATCH * fixed_rb;
      char *buf = xmalloc(cap);
      double tr[RG_REPEATS], tf[RG_REPEATS];
      timed(s, 1, order, buf, cap, fixed_rb); /* warm up both */
      timed(s, 0, order, buf, cap, fixed_rb);
      for (int rep = 0; rep < RG_REPEATS; rep++) {
        tr[rep] = timed(s, 1, order, buf, cap, fixed_rb);
        tf[rep] = timed(s, 0, order, buf, cap, fixed_rb);
      }
      /* Verification of one ragged and one fixed batch, outside the timing. */
      int bad = 0;
      int64_t lens[RG_BATCH];
      TRY(dds_get_ragged_batch(s, "rag", buf, cap, order[0], RG_BATCH, lens, NULL));
      const uint64_t *w = (const uint64_t *)buf;
      for (int i = 0; i < RG_BATCH; i++) {
        bad |= lens[i] != rows_of(order[0][i], a);
        for (int64_t k = 0; k < lens[i] * (RG_ROW / 8); k++) bad |= *w++ != word_of(order[0][i], k);
      }
      TRY(dds_get_batch(s, "fix", buf, RG_BATCH * fixed_rb, order[0], RG_BATCH));
      bad |= check_rows(buf, order[0], RG_BATCH, (int64_t)fixed_rb) != 0;
      int allbad = 0;
      MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      failed |= allbad != 0;
      double r = bench_median(tr, RG_REPEATS), f = bench_median(tf, RG_REPEATS);
      double rbytes = (double)ragged_bytes / RG_BATCHES, fbytes = (double)(RG_BATCH * fixed_rb);
      double ratio = (r / rbytes) / (f / fbytes);
      if (me == 0) {
        printf("  %-13s mean %7lld B: ragged %9.3f ms (%8.0f B/batch), fixed %9.3f ms (%8.0f B/batch), "
               "ragged/fixed per byte %.2f (target <= 1.5)%s%s\n",
               m->label, (long long)means[si], 1e3 * r, rbytes, 1e3 * f, fbytes, ratio,
               ratio <= 1.5 ? "" : "  ABOVE TARGET", allbad ? "  WRONG BYTES" : "");
        if (out)
          fprintf(out,
                  "{\"type\": \"ragged\", \"method\": \"%s\", \"mean_bytes\": %lld, \"batch\": %d, \"ranks\": %d, "
                  "\"ragged_ms\": %.6f, \"fixed_ms\": %.6f, \"ragged_batch_bytes\": %.0f, \"fixed_batch_bytes\": %.0f, "
                  "\"ratio_per_byte\": %.4f, \"verified\": %s}\n",
                  m->label, (long long)means[si], RG_BATCH, np, 1e3 * r, 1e3 * f, rbytes, fbytes, ratio,
                  allbad ? "false" : "true");
      }
      free(buf);
      for (int k = 0; k < RG_BATCHES; k++) free(order[k]);
      free(order);
      MPI_Barrier(MPI_COMM_WORLD);
      TRY(dds_destroy(s));
    }
  }
  return failed | metadata(out, me, np);
}
