/* Snapshots (issue 38): dds_save on P ranks, dds_load on any P', every row
 * and sample compared; damaged snapshots refused on every rank with a
 * message naming the file; a save killed mid-write leaves the old snapshot.
 * Driven by tests/run_snapshot.sh:
 *
 *   test_snapshot save DIR TAG     save "fx" (fixed) and "rg" (ragged)
 *   test_snapshot load DIR TAG     load all, check every row and the split
 *   test_snapshot damage DIR       every damage kind refused (any P)
 *   test_snapshot missing DIR      load refused: directory missing
 *   test_snapshot partial DIR      load of a .partial-* directory refused
 *
 * Values are a function of (TAG, global row), so the checker does not
 * depend on the number of saving ranks; each saving rank holds a different
 * number of rows (some none). The kill test prints "pid RANK PID". */
#include <stdint.h>

#include "common.h"

/* Paths here are short temporary directories; buffers are far larger. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

enum { ELEMS = 5, ITEM = 8, RELEMS = 3 };

static int64_t fx_rows(int r) { return ((r * 5 + 2) % 7) * 3; }
static int64_t rg_samples(int r) { return (r * 3 + 4) % 5; }
static int64_t rg_len(int64_t g) { return (g * 7) % 5; }
static uint32_t rg_value(int tag, int64_t g, int64_t row, int e) {
  return (uint32_t)(tag * 7777 + g * 1000003 + row * 31 + e * 7 + 1);
}
static int64_t first_of(int64_t (*count)(int), int r) {
  int64_t g = 0;
  for (int q = 0; q < r; q++) g += count(q);
  return g;
}

static void save(dds_store *s, const char *dir, int tag) {
  int64_t n = fx_rows(t_rank), g0 = first_of(fx_rows, t_rank);
  double *fx = malloc((size_t)(n ? n : 1) * ELEMS * ITEM);
  t_fill(fx, n, ELEMS, ITEM, tag, g0);
  CHECK(dds_add(s, "fx", fx, (size_t)n * ELEMS * ITEM, n, ELEMS, ITEM));
  int64_t ns = rg_samples(t_rank), s0 = first_of(rg_samples, t_rank), rows = 0;
  int64_t lens[8];
  for (int64_t i = 0; i < ns; i++) rows += (lens[i] = rg_len(s0 + i));
  uint32_t *p = malloc((size_t)(rows ? rows : 1) * RELEMS * 4), *q = p;
  for (int64_t i = 0; i < ns; i++)
    for (int64_t j = 0; j < lens[i]; j++)
      for (int e = 0; e < RELEMS; e++) *q++ = rg_value(tag, s0 + i, j, e);
  CHECK(dds_add_ragged(s, "rg", p, (size_t)rows * RELEMS * 4, lens, ns, RELEMS, 4));
  printf("pid %d %d\n", t_rank, (int)getpid());
  fflush(stdout);
  CHECK(dds_save(s, dir, NULL, 0));
  free(fx);
  free(p);
}

/* Checks both variables of a store loaded from a snapshot of TAG saved on
 * `saved` ranks: totals, this rank's even share, every row and sample. */
static void check_loaded(dds_store *s, int tag, int saved) {
  dds_var_info info = {.struct_size = sizeof(dds_var_info)};
  int64_t total = first_of(fx_rows, saved);
  CHECK(dds_info(s, "fx", &info));
  EXPECT(info.total_rows == total);
  EXPECT(info.local_rows == total / t_size + (t_rank < total % t_size));
  double row[ELEMS];
  for (int64_t g = 0; g < total; g++) {
    CHECK(dds_get(s, "fx", row, sizeof row, g, 1));
    EXPECT(t_rows_ok(row, 1, ELEMS, ITEM, tag, NULL, g));
  }
  int64_t samples = first_of(rg_samples, saved);
  uint32_t buf[8 * RELEMS];
  for (int64_t g = 0; g < samples; g++) {
    int64_t len = -1;
    CHECK(dds_get_ragged(s, "rg", buf, sizeof buf, g, &len));
    EXPECT(len == rg_len(g));
    int ok = 1;
    for (int64_t j = 0; j < len; j++)
      for (int e = 0; e < RELEMS; e++) ok &= buf[j * RELEMS + e] == rg_value(tag, g, j, e);
    EXPECT(ok);
  }
}

static void sh(const char *cmd) {
  if (system(cmd) != 0) {
    fprintf(stderr, "rank %d: '%s' failed\n", t_rank, cmd);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* Rank 0 makes DIR/case a fresh copy of DIR/good and runs `damage` in it. */
static void prepare(const char *dir, const char *damage) {
  char cmd[4096];
  if (t_rank == 0) {
    snprintf(cmd, sizeof cmd, "rm -rf '%s/case' && cp -rp '%s/good' '%s/case' && cd '%s/case' && %s", dir, dir, dir,
             dir, damage);
    sh(cmd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Rewrites a manifest line with sed and reseals it (FNV-1a-64 of the body). */
static void reseal(const char *path) {
  if (t_rank != 0) return;
  FILE *f = fopen(path, "rb");
  char body[1 << 16];
  size_t n = fread(body, 1, sizeof body, f);
  fclose(f);
  size_t end = n - 1;
  while (end > 0 && body[end - 1] != '\n') end--;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < end; i++) h = (h ^ (unsigned char)body[i]) * 0x100000001b3ULL;
  f = fopen(path, "wb");
  fwrite(body, 1, end, f);
  fprintf(f, "seal %016llx\n", (unsigned long long)h);
  fclose(f);
}

static void damage(dds_store *s, const char *dir) {
  char good[4096], cas[4096], path[4096];
  snprintf(good, sizeof good, "%s/good", dir);
  snprintf(cas, sizeof cas, "%s/case", dir);
  save(s, good, 3);
  CHECK(dds_remove(s, "fx"));
  CHECK(dds_remove(s, "rg"));
  /* Damage to every rank's files of a variable, so whatever rank reads them
   * fails; every rank must return the same error. */
  struct {
    const char *cmd, *part;
    dds_status want;
  } cases[] = {
      {"rm MANIFEST", "missing manifest", DDS_ERR_IO},
      {"rm v0.r0.data", "v0.r0.data: shard file missing", DDS_ERR_IO},
      {"truncate -s -1 v0.r0.data", "v0.r0.data: truncated", DDS_ERR_IO},
      {"truncate -s -8 v1.r0.index", "v1.r0.index: truncated", DDS_ERR_IO},
      {"chmod 0620 v0.r0.data", "v0.r0.data may be written by group or others", DDS_ERR_IO},
      {"chmod 0606 v1.r0.data", "v1.r0.data may be written by group or others", DDS_ERR_IO},
      {"chown 65534 v0.r0.data", "v0.r0.data is owned by uid 65534", DDS_ERR_IO},
      {"chown 65534 MANIFEST", "MANIFEST is owned by uid 65534", DDS_ERR_IO},
      {"mv v0.r0.data x && ln -s x v0.r0.data", "v0.r0.data is a symbolic link", DDS_ERR_IO},
      {"printf '\\377' | dd of=v0.r0.data bs=1 seek=5 conv=notrunc status=none", "v0.r0.data: checksum mismatch",
       DDS_ERR_IO},
      {"printf 'Z' | dd of=v1.r0.data bs=1 seek=0 conv=notrunc status=none", "v1.r0.data: checksum mismatch",
       DDS_ERR_IO},
      {"sed -i 's/^chunk /chunk 1/' MANIFEST", "MANIFEST: checksum mismatch", DDS_ERR_IO},
      {"sed -i 's/^ddstore-snapshot 1$/ddstore-snapshot 99/' MANIFEST", "format version mismatch", DDS_ERR_MISMATCH},
      {"sed -i 's/^library .*/library 999.0.0/' MANIFEST", "library version mismatch", DDS_ERR_MISMATCH},
  };
  int n_cases = (int)(sizeof cases / sizeof cases[0]);
  snprintf(path, sizeof path, "%s/MANIFEST", cas);
  for (int i = 0; i < n_cases; i++) {
    prepare(dir, cases[i].cmd);
    if (strncmp(cases[i].cmd, "sed", 3) == 0 && strstr(cases[i].part, "MANIFEST:") == NULL) reseal(path);
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_ERR(dds_load(s, cas, NULL, 0), cases[i].want, cases[i].part);
    /* Nothing of the failed call stays registered: the store is usable. */
    dds_var_info info = {.struct_size = sizeof(dds_var_info)};
    EXPECT_ERR(dds_info(s, "fx", &info), DDS_ERR_UNKNOWN_VARIABLE, "fx");
  }
  /* Missing directory; a directory writable by others; unknown and
   * repeated names; a variable already in the store; a .partial-* dir. */
  snprintf(path, sizeof path, "%s/nothing", dir);
  EXPECT_ERR(dds_load(s, path, NULL, 0), DDS_ERR_IO, "/nothing is missing");
  prepare(dir, "chmod 0777 .");
  EXPECT_ERR(dds_load(s, cas, NULL, 0), DDS_ERR_IO, "may be written by other users");
  const char *unknown[] = {"fx", "nope"}, *twice[] = {"rg", "rg"}, *fx[] = {"fx"}, *rg[] = {"rg"};
  EXPECT_ERR(dds_load(s, good, unknown, 2), DDS_ERR_UNKNOWN_VARIABLE, "no variable named 'nope' in snapshot");
  EXPECT_ERR(dds_load(s, good, twice, 2), DDS_ERR_INVALID_ARGUMENT, "'rg' is named twice");
  EXPECT_ERR(dds_load(s, good, NULL, -1), DDS_ERR_INVALID_ARGUMENT, "negative");
  EXPECT_ERR(dds_load(s, NULL, NULL, 0), DDS_ERR_INVALID_ARGUMENT, "snapshot directory is NULL");
  /* A damaged second variable: the first, loaded, is removed again. */
  prepare(dir, "printf 'Z' | dd of=v1.r0.data bs=1 seek=0 conv=notrunc status=none");
  const char *both[] = {"fx", "rg"};
  EXPECT_ERR(dds_load(s, cas, both, 2), DDS_ERR_IO, "v1.r0.data: checksum mismatch");
  dds_var_info info = {.struct_size = sizeof(dds_var_info)};
  EXPECT_ERR(dds_info(s, "fx", &info), DDS_ERR_UNKNOWN_VARIABLE, "fx");
  CHECK(dds_load(s, good, fx, 1));
  EXPECT_ERR(dds_load(s, good, NULL, 0), DDS_ERR_DUPLICATE_VARIABLE, "'fx' already exists");
  CHECK(dds_load(s, good, rg, 1));
  check_loaded(s, 3, t_size);
  /* Saving: unknown names, a target that is not a snapshot, a .partial-*. */
  EXPECT_ERR(dds_save(s, cas, unknown, 2), DDS_ERR_UNKNOWN_VARIABLE, "no variable named 'nope' in this store");
  snprintf(path, sizeof path, "%s/plain", dir);
  snprintf(cas, sizeof cas, "mkdir -p '%s' && touch '%s/keep'", path, path);
  if (t_rank == 0) sh(cas);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_ERR(dds_save(s, path, NULL, 0), DDS_ERR_INVALID_ARGUMENT, "exists and is not a snapshot");
  snprintf(path, sizeof path, "%s/x.partial-1", dir);
  EXPECT_ERR(dds_save(s, path, NULL, 0), DDS_ERR_INVALID_ARGUMENT, "unfinished snapshot");
  EXPECT_ERR(dds_load(s, path, NULL, 0), DDS_ERR_INVALID_ARGUMENT, "unfinished snapshot");
  /* Replacing a snapshot: the new one is there, the old one gone. */
  CHECK(dds_save(s, good, NULL, 0));
  snprintf(cas, sizeof cas, "! ls -d '%s'.partial-* 2>/dev/null", good);
  if (t_rank == 0) sh(cas);
  dds_store *t = t_store(0, 0);
  CHECK(dds_load(t, good, NULL, 0));
  check_loaded(t, 3, t_size);
  CHECK(dds_destroy(t));
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  if (argc < 3) {
    if (t_rank == 0) fprintf(stderr, "usage: test_snapshot save|load|damage|missing|partial DIR [TAG SAVED]\n");
    MPI_Finalize();
    return 2;
  }
  const char *mode = argv[1], *dir = argv[2];
  int tag = argc > 3 ? atoi(argv[3]) : 1, saved = argc > 4 ? atoi(argv[4]) : 0;
  dds_store *s = t_store(0, 0);
  if (strcmp(mode, "save") == 0) {
    save(s, dir, tag);
  } else if (strcmp(mode, "load") == 0) {
    CHECK(dds_load(s, dir, NULL, 0));
    check_loaded(s, tag, saved);
  } else if (strcmp(mode, "damage") == 0) {
    damage(s, dir);
  } else if (strcmp(mode, "missing") == 0) {
    EXPECT_ERR(dds_load(s, dir, NULL, 0), DDS_ERR_IO, "is missing");
  } else if (strcmp(mode, "partial") == 0) {
    EXPECT_ERR(dds_load(s, dir, NULL, 0), DDS_ERR_INVALID_ARGUMENT, "unfinished snapshot");
  }
  CHECK(dds_destroy(s));
  return t_finish("test_snapshot");
}
