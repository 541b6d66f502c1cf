/* Node-local segments in huge pages (run by scripts/check-hugepages.sh, which
 * mounts the file systems and sets DDSTORE_SHM_DIR / DDSTORE_HUGEPAGES).
 *
 *   test_hugepages small|thp|hugetlb   two variables of 8 MiB per rank (one by
 *       dds_add, one by dds_init + dds_update), every row of every rank read
 *       and checked; then this process's mappings of the node's segments, from
 *       /proc/self/smaps, must all live in DDSTORE_SHM_DIR and use 4 KiB pages
 *       (small), be mapped with transparent huge pages (thp: ShmemPmdMapped > 0
 *       in each), or be hugetlbfs pages (hugetlb: KernelPageSize 2048 kB);
 *   test_hugepages mixed N             as above, with a pool that holds only
 *       some segments (DDSTORE_HUGEPAGES=auto): exactly N mappings are huge
 *       pages in DDSTORE_SHM_DIR, the others in /dev/shm (the quiet fallback);
 *   test_hugepages require             DDSTORE_HUGEPAGES=require, the same
 *       pool: the second variable fails on every rank with DDS_ERR_NO_MEMORY
 *       naming the variable and the shortfall; the store keeps working (the
 *       first variable reads back, a small third one fits in the pages the
 *       failed one gave back).
 *
 * Rank 0 prints each rank's figures and "VMPTE_DELTA_KB <max>": the growth of
 * VmPTE (page tables) from before the first variable to after the reads, the
 * script's comparison of 4 KiB against huge pages. */
#include <unistd.h>

#include "common.h"

enum { ROW_ELEMS = 8192, ITEM = 8, ROWS = 128 }; /* 64 KiB rows, 8 MiB per rank and variable */
#define ROW_BYTES ((size_t)ROW_ELEMS * ITEM)

static int64_t vm_pte_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int64_t kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmPTE:", 6)) kb = strtoll(line + 6, NULL, 10);
  if (f) fclose(f);
  return kb;
}

/* This process's mappings of segment files, by where they live. */
typedef struct {
  int in_dir, in_dev_shm, elsewhere;
  int dir_small, dir_pmd, dir_hugetlb; /* in DDSTORE_SHM_DIR: 4 KiB pages only, THP-mapped, 2 MiB hugetlb */
  int64_t pmd_kb, rss_kb;
} seg_maps;

static void count_mapping(seg_maps *m, int where, int64_t kps, int64_t pmd, int64_t rss) {
  if (where == 1) {
    m->in_dir++;
    m->dir_small += kps == 4 && pmd == 0;
    m->dir_pmd += kps == 4 && pmd > 0;
    m->dir_hugetlb += kps == 2048;
    m->pmd_kb += pmd;
    m->rss_kb += rss;
  } else if (where == 2) {
    m->in_dev_shm++;
  } else if (where == 3) {
    m->elsewhere++;
  }
}

static seg_maps scan_smaps(const char *dir) {
  seg_maps m = {0};
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[4096];
  int where = 0; /* of the current mapping: 0 none, 1 dir, 2 /dev/shm, 3 another segment */
  int64_t kps = 0, pmd = 0, rss = 0;
  size_t dl = strlen(dir);
  while (f && fgets(line, sizeof line, f)) {
    size_t k = strcspn(line, " ");
    if (k == 0 || line[k - 1] != ':') { /* a mapping's header line ("lo-hi perms offset dev inode path") */
      count_mapping(&m, where, kps, pmd, rss);
      where = 0, kps = pmd = rss = 0;
      char *path = strchr(line, '/');
      if (path && strstr(path, "/ddstore.")) {
        if (!strncmp(path, dir, dl) && path[dl] == '/' && !strchr(path + dl + 1, '/'))
          where = 1;
        else if (!strncmp(path, "/dev/shm/", 9))
          where = 2;
        else
          where = 3;
      }
      continue;
    }
    if (!strncmp(line, "KernelPageSize:", 15)) kps = strtoll(line + 15, NULL, 10);
    if (!strncmp(line, "ShmemPmdMapped:", 15)) pmd = strtoll(line + 15, NULL, 10);
    if (!strncmp(line, "Rss:", 4)) rss = strtoll(line + 4, NULL, 10);
  }
  count_mapping(&m, where, kps, pmd, rss);
  if (f) fclose(f);
  return m;
}

/* Reads every row of `name` (shuffled, in batches of 64) and checks them. */
static void read_all(dds_store *s, const char *name, int tag, int64_t total) {
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)total);
  for (int64_t i = 0; i < total; i++) idx[i] = i;
  for (int64_t i = total - 1; i > 0; i--) {
    int64_t j = (int64_t)(t_next() % (unsigned long long)(i + 1)), t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
  enum { B = 64 };
  char *dst = malloc(ROW_BYTES * B);
  int ok = 1;
  for (int64_t i = 0; i < total; i += B) {
    int n = (int)(total - i < B ? total - i : B);
    CHECK(dds_get_batch(s, name, dst, ROW_BYTES * (size_t)n, idx + i, n));
    ok &= t_rows_ok(dst, n, ROW_ELEMS, ITEM, tag, idx + i, 0);
  }
  CHECK(dds_get(s, name, dst, ROW_BYTES, total - 1, 1));
  ok &= t_rows_ok(dst, 1, ROW_ELEMS, ITEM, tag, NULL, total - 1);
  EXPECT(ok);
  free(dst);
  free(idx);
}

static void add_var(dds_store *s, const char *name, int tag, int64_t rows) {
  char *src = malloc(ROW_BYTES * (size_t)rows);
  t_fill(src, rows, ROW_ELEMS, ITEM, tag, rows * t_rank);
  CHECK(dds_add(s, name, src, ROW_BYTES * (size_t)rows, rows, ROW_ELEMS, ITEM));
  free(src);
}

/* dds_init, then dds_update in 1 MiB chunks: the zero-filled path. */
static dds_status init_var(dds_store *s, const char *name, int tag, int64_t rows) {
  dds_status st = dds_init(s, name, rows, ROW_ELEMS, ITEM);
  if (st != DDS_OK) return st;
  enum { CHUNK = 16 };
  char *buf = malloc(ROW_BYTES * CHUNK);
  for (int64_t r = 0; r < rows; r += CHUNK) {
    int64_t n = rows - r < CHUNK ? rows - r : CHUNK;
    t_fill(buf, n, ROW_ELEMS, ITEM, tag, rows * t_rank + r);
    CHECK(dds_update(s, name, buf, ROW_BYTES * (size_t)n, r));
  }
  free(buf);
  CHECK(dds_epoch_begin(s));
  CHECK(dds_epoch_end(s));
  return DDS_OK;
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  const char *mode = argc > 1 ? argv[1] : "";
  const int want_huge = argc > 2 ? atoi(argv[2]) : 0;
  const char *dir = getenv("DDSTORE_SHM_DIR");
  if (!dir || !*dir) dir = "/dev/shm";
  t_rng += (unsigned long long)t_rank * 7919;

  dds_store *s = t_store(0, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  int64_t pte0 = vm_pte_kb();
  add_var(s, "a", 1, ROWS);
  int nvars = 2;
  if (!strcmp(mode, "require")) {
    /* Every rank fails together, naming the setting and the shortfall. */
    EXPECT_ERR(init_var(s, "b", 2, ROWS), DDS_ERR_NO_MEMORY, "DDSTORE_HUGEPAGES=require");
    EXPECT(strstr(dds_last_error(), "short by") != NULL);
    if (t_rank == 0) printf("require: %s\n", dds_last_error());
    /* Still usable: a third variable fits in what the failed one gave back. */
    CHECK(init_var(s, "c", 3, ROWS / 4));
    read_all(s, "c", 3, ROWS / 4 * t_size);
  } else {
    CHECK(init_var(s, "b", 2, ROWS));
    read_all(s, "b", 2, (int64_t)ROWS * t_size);
  }
  read_all(s, "a", 1, (int64_t)ROWS * t_size);
  int64_t pte = vm_pte_kb() - pte0;
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "a", &info));
  EXPECT(info.node_local == 1 && info.node_ranks == t_size);

  seg_maps m = scan_smaps(dir);
  const int n = nvars * t_size; /* each rank maps every segment of the node */
  EXPECT(m.elsewhere == 0);
  if (!strcmp(mode, "small")) {
    EXPECT(m.in_dir == n && m.dir_small == n);
  } else if (!strcmp(mode, "thp")) {
    EXPECT(m.in_dir == n && m.dir_pmd == n);
  } else if (!strcmp(mode, "hugetlb")) {
    EXPECT(m.in_dir == n && m.dir_hugetlb == n);
  } else if (!strcmp(mode, "mixed")) {
    EXPECT(want_huge > 0 && want_huge < n);
    EXPECT(m.in_dir == want_huge && m.dir_hugetlb == want_huge);
    EXPECT(m.in_dev_shm == n - want_huge);
  } else if (!strcmp(mode, "require")) {
    EXPECT(m.in_dir == n && m.dir_hugetlb == n && m.in_dev_shm == 0);
  } else {
    if (t_rank == 0) fprintf(stderr, "usage: test_hugepages small|thp|hugetlb|mixed N|require\n");
    EXPECT(0);
  }
  int64_t mine[8] = {m.in_dir, m.dir_small, m.dir_pmd, m.dir_hugetlb, m.in_dev_shm, m.pmd_kb, m.rss_kb, pte};
  int64_t *all = malloc(sizeof mine * (size_t)t_size);
  MPI_Gather(mine, 8, MPI_INT64_T, all, 8, MPI_INT64_T, 0, MPI_COMM_WORLD);
  if (t_rank == 0) {
    int64_t worst = 0;
    for (int r = 0; r < t_size; r++) {
      int64_t *v = all + 8 * r;
      printf("%s rank %d: segment mappings in %s: %lld (4 KiB pages %lld, THP-mapped %lld, hugetlb 2 MiB %lld; "
             "ShmemPmdMapped %lld of %lld kB Rss), in /dev/shm: %lld; VmPTE +%lld kB\n",
             mode, r, dir, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[5],
             (long long)v[6], (long long)v[4], (long long)v[7]);
      if (v[7] > worst) worst = v[7];
    }
    printf("VMPTE_DELTA_KB %lld\n", (long long)worst);
  }
  free(all);
  CHECK(dds_destroy(s));
  return t_finish("test_hugepages");
}
