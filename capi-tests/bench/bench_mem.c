/* The memory check: peak resident memory (VmHWM) while a rank adds a shard.
 * The peak of a process cannot be reset, so each mode is its own invocation:
 *
 *   add      dds_add of a `mem_bytes` shard from a buffer of the same size;
 *            reported: peak - baseline - source buffer, against the shard
 *            (target: at most shard + 5%);
 *   chunked  dds_init of the shard, then dds_update in `chunk_bytes` chunks from
 *            one reused chunk buffer; reported: peak - baseline, against shard +
 *            one chunk (target: at most (shard + chunk) + 5%).
 *
 * Baseline = VmRSS after MPI_Init and dds_create, before any buffer exists.
 * --mem-node-local 0|1 sets DDSTORE_NODE_LOCAL (shard on the heap or in a
 * shared-memory segment, whose pages also count in VmRSS/VmHWM).
 * Afterwards rows of every rank are read back and checked, then every row of
 * every rank is read, and the page tables of the process (VmPTE) are
 * reported: with node-local reads on, every same-node peer's segment is
 * mapped and touched by then (4 KiB pages: 2 MiB of page tables per GiB;
 * huge pages where the kernel grants them: docs/node-local.md). Also reported:
 * the segment directory (DDSTORE_SHM_DIR) and, from /proc/self/smaps, how
 * this process maps the node's segments (resident kB, of which mapped with
 * transparent huge pages, and kB of hugetlbfs pages), so the huge-page run of
 * `make bench` (scripts/bench-mem-huge.sh) shows what it measured. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* A field of /proc/self/status in bytes ("VmRSS", "VmHWM", "VmPTE"). */
static int64_t status_bytes(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int64_t kb = -1;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && line[n] == ':') {
      kb = strtoll(line + n + 1, NULL, 10);
      break;
    }
  if (f) fclose(f);
  return kb * 1024;
}

/* kB of the node's segment mappings (paths containing "/ddstore."):
 * seg[0] resident, seg[1] of it PMD-mapped (THP), seg[2] hugetlbfs pages. */
static void segment_pages(int64_t seg[3]) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[4096];
  int in = 0;
  seg[0] = seg[1] = seg[2] = 0;
  while (f && fgets(line, sizeof line, f)) {
    size_t k = strcspn(line, " ");
    if (k == 0 || line[k - 1] != ':') { /* a mapping's header line */
      char *path = strchr(line, '/');
      in = path && strstr(path, "/ddstore.") != NULL;
    } else if (in) {
      if (!strncmp(line, "Rss:", 4)) seg[0] += strtoll(line + 4, NULL, 10);
      if (!strncmp(line, "ShmemPmdMapped:", 15)) seg[1] += strtoll(line + 15, NULL, 10);
      if (!strncmp(line, "Shared_Hugetlb:", 15)) seg[2] += strtoll(line + 15, NULL, 10);
      if (!strncmp(line, "Private_Hugetlb:", 16)) seg[2] += strtoll(line + 16, NULL, 10);
    }
  }
  if (f) fclose(f);
}

int mem_check(FILE *out) {
  int me, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  const int add = strcmp(g_opt.mem_mode, "add") == 0;
  const int64_t rb = 1 << 20; /* 1 MiB rows */
  const int64_t rows = g_opt.mem_bytes / rb, bytes = rows * rb;
  int64_t chunk_rows = g_opt.chunk_bytes / rb;
  if (chunk_rows < 1) chunk_rows = 1;
  const int64_t chunk_bytes = chunk_rows * rb, g0 = rows * me;

  dds_store *s = NULL;
  if (g_opt.mem_node_local >= 0) setenv("DDSTORE_NODE_LOCAL", g_opt.mem_node_local ? "1" : "0", 1);
  TRY(dds_create_comm(MPI_COMM_WORLD, NULL, &s));
  MPI_Barrier(MPI_COMM_WORLD);
  int64_t base = status_bytes("VmRSS"), hwm0 = status_bytes("VmHWM"), pte0 = status_bytes("VmPTE"), source = 0, extra,
          limit;
  double secs = 0, t0;
  if (add) {
    char *src = xmalloc((size_t)bytes);
    fill_rows(src, g0, rows, rb); /* every page of the source is resident */
    source = status_bytes("VmRSS") - base;
    t0 = now_s();
    TRY(dds_add(s, "mem", src, (size_t)bytes, rows, rb / 8, 8));
    secs = now_s() - t0;
    extra = status_bytes("VmHWM") - base - bytes; /* minus the source buffer */
    limit = bytes + bytes / 20;
    free(src);
  } else {
    t0 = now_s();
    TRY(dds_init(s, "mem", rows, rb / 8, 8));
    secs += now_s() - t0;
    char *chunk = xmalloc((size_t)chunk_bytes);
    for (int64_t r = 0; r < rows; r += chunk_rows) {
      int64_t n = rows - r < chunk_rows ? rows - r : chunk_rows;
      fill_rows(chunk, g0 + r, n, rb);
      t0 = now_s();
      TRY(dds_update(s, "mem", chunk, (size_t)(n * rb), r));
      secs += now_s() - t0;
    }
    extra = status_bytes("VmHWM") - base;
    limit = (bytes + chunk_bytes) + (bytes + chunk_bytes) / 20;
    free(chunk);
  }
  int64_t rss_after = status_bytes("VmRSS") - base;

  dds_var_info info = {.struct_size = sizeof info};
  TRY(dds_info(s, "mem", &info));

  /* Read back the first, a middle and the last row of every rank's shard. */
  TRY(dds_epoch_begin(s));
  char *row = xmalloc((size_t)rb);
  int64_t bad = 0;
  for (int q = 0; q < np; q++) {
    int64_t want[3] = {rows * q, rows * q + rows / 2, rows * q + rows - 1};
    for (int i = 0; i < 3; i++) {
      TRY(dds_get(s, "mem", row, (size_t)rb, want[i], 1));
      bad += check_rows(row, &want[i], 1, rb);
    }
  }
  /* Every row of every rank (after the peak was taken): all mappings touched. */
  for (int64_t g = 0; g < rows * np; g++) TRY(dds_get(s, "mem", row, (size_t)rb, g, 1));
  int64_t pte = status_bytes("VmPTE"), seg[3];
  segment_pages(seg);
  free(row);
  TRY(dds_epoch_end(s));
  TRY(dds_destroy(s));

  enum { NV = 13 };
  int64_t mine[NV] = {base, extra, rss_after, source, bad, hwm0, (int64_t)(secs * 1e6), info.node_local, pte0, pte,
                      seg[0], seg[1], seg[2]};
  const char *dir = getenv("DDSTORE_SHM_DIR");
  if (!dir || !*dir) dir = "/dev/shm";
  int64_t *all = me == 0 ? xmalloc(sizeof mine * (size_t)np) : NULL;
  MPI_Gather(mine, NV, MPI_INT64_T, all, NV, MPI_INT64_T, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (me == 0) {
    for (int q = 0; q < np; q++) {
      int64_t *v = all + NV * q;
      int met = v[1] <= limit;
      if (v[4]) rc = 1;
      fprintf(out,
              "{\"type\":\"memory\",\"mode\":\"%s\",\"node_local\":%d,\"rank\":%d,\"ranks\":%d,\"shard_bytes\":%lld,\"chunk_bytes\":%lld,"
              "\"baseline_rss\":%lld,\"hwm_before\":%lld,\"source_bytes\":%lld,\"extra_peak_bytes\":%lld,"
              "\"rss_after_bytes\":%lld,\"limit_bytes\":%lld,\"ratio_to_shard\":%.4f,\"met\":%s,\"seconds\":%.3f,"
              "\"vm_pte_baseline\":%lld,\"vm_pte_bytes\":%lld,\"shm_dir\":\"%s\",\"seg_rss_kb\":%lld,"
              "\"seg_thp_kb\":%lld,\"seg_hugetlb_kb\":%lld,\"verified\":%s}\n",
              g_opt.mem_mode, (int)v[7], q, np, (long long)bytes, add ? 0LL : (long long)chunk_bytes, (long long)v[0],
              (long long)v[5], (long long)v[3], (long long)v[1], (long long)v[2], (long long)limit,
              (double)v[1] / (double)bytes, met ? "true" : "false", (double)v[6] * 1e-6, (long long)v[8],
              (long long)v[9], dir, (long long)v[10], (long long)v[11], (long long)v[12], v[4] ? "false" : "true");
      printf("memory %-7s node_local %d rank %d: shard %.0f MiB%s: peak above baseline%s %.1f MiB (%.3fx shard), limit %.1f MiB: "
             "%s; VmPTE %.0f KiB after reading every row (%.0f KiB before); segments in %s: %.0f MiB resident, "
             "%.0f MiB of it THP, %.0f MiB hugetlbfs%s\n",
             g_opt.mem_mode, (int)v[7], q, bytes / 1048576.0, add ? "" : " + chunk", add ? " minus source" : "",
             v[1] / 1048576.0, (double)v[1] / (double)bytes, limit / 1048576.0, met ? "met" : "MISSED", v[9] / 1024.0,
             v[8] / 1024.0, dir, v[10] / 1024.0, v[11] / 1024.0, v[12] / 1024.0, v[4] ? ", VERIFY FAILED" : "");
    }
    fflush(out);
    free(all);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}
