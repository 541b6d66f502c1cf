/* Method 2 (split jobs): one program, several roles, driven by run_split.sh,
 * which starts the core and the extra jobs as separate mpiexec launches
 * sharing a hand-shake directory (DDSTORE_HANDSHAKE_DIR).
 *
 *   test_split core N_EXTRAS   core job: publishes x, data/y.z and w, checks
 *                              its own reads and the role rules, waits for
 *                              N_EXTRAS extra stores (dds_wait_extras), frees
 *   test_split serve           core job that publishes x, writes its pids to
 *                              core.pid.<rank> and waits (to be killed)
 *   test_split extra           extra job: joins and verifies every row
 *   test_split rejects         extra, 1 rank, core running: wrong n_core,
 *                              provider, row width; truncated, corrupt,
 *                              other-version and group-writable copies
 *   test_split timeout         extra with no core: DDS_ERR_TIMEOUT
 *   test_split late            extra after the core freed: DDS_ERR_BAD_STATE
 *   test_split read-until-dead extra reading while the core is killed
 *   test_split join-dead       extra joining the record a killed core left:
 *                              the join or the first read fails in time
 *   test_split unwritable      core in a directory it may not write: dds_add
 *                              and dds_init fail on every rank (DDS_ERR_IO
 *                              naming it), destroy is clean
 *   test_split full LIMIT|-    core whose record write fails (rank 0 limited
 *                              to LIMIT bytes per file by RLIMIT_FSIZE, or
 *                              "-": the file system is full until the program
 *                              removes DIR/filler): DDS_ERR_IO on every rank,
 *                              no file left behind; then publishes as `core 1`
 *   test_split baddir          core and extra whose directory cannot be created,
 *                              or that others may write: DDS_ERR_IO naming it
 *   test_split keys            prints the key and base of every rank entry of
 *                              every record in the directory (for the
 *                              no-secret-in-output check)
 *
 * Extras need n_core: SPLIT_N_CORE (default 2). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char *dir(void) {
  const char *d = getenv("DDSTORE_HANDSHAKE_DIR");
  return d && *d ? d : "./ddstore_hs";
}

static int n_core(void) {
  const char *n = getenv("SPLIT_N_CORE");
  return n && *n ? atoi(n) : 2;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The variables: name, tag, elements per row, item size, rows on core rank r. */
typedef struct {
  const char *name;
  int tag;
  long long elems;
  int item;
} var_t;
static const var_t VARS[3] = {{"x", 1, 3, 8}, {"data/y.z", 2, 2, 4}, {"w", 3, 5, 8}};

static long long rows_of(int v, int r) {
  switch (v) {
    case 0: return 5 + 3 * r;
    case 1: return r % 2 == 0 ? 4 : 0; /* odd core ranks hold no rows */
    default: return 3;
  }
}

static long long start_of(int v, int r) {
  long long s = 0;
  for (int q = 0; q < r; q++) s += rows_of(v, q);
  return s;
}

static dds_store *core_store(void) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_CORE;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  return s;
}

static void publish(dds_store *s) {
  for (int v = 0; v < 3; v++) {
    const var_t *V = &VARS[v];
    long long rows = rows_of(v, t_rank), g0 = start_of(v, t_rank);
    size_t bytes = (size_t)(rows * V->elems * V->item);
    void *buf = malloc(bytes ? bytes : 1);
    t_fill(buf, rows, V->elems, V->item, V->tag, g0);
    if (v == 2) { /* init + update */
      CHECK(dds_init(s, V->name, rows, V->elems, V->item));
      CHECK(dds_update(s, V->name, buf, bytes, 0));
    } else {
      CHECK(dds_add(s, V->name, buf, bytes, rows, V->elems, V->item));
    }
    free(buf);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Reads every row of every variable one by one and as a shuffled batch. */
static int verify_all(dds_store *s, int n_ranks) {
  int ok = 1;
  for (int v = 0; v < 3; v++) {
    const var_t *V = &VARS[v];
    long long total = 0;
    for (int r = 0; r < n_ranks; r++) total += rows_of(v, r);
    dds_var_info info;
    info.struct_size = sizeof info;
    CHECK(dds_info(s, V->name, &info));
    EXPECT(info.total_rows == total && info.row_elems == V->elems && info.item_size == V->item &&
           info.method == DDS_METHOD_SPLIT && info.n_ranks == n_ranks);
    size_t rb = (size_t)(V->elems * V->item);
    char *row = malloc(rb);
    for (long long g = 0; g < total; g++) {
      CHECK(dds_get(s, V->name, row, rb, g, 1));
      if (!t_rows_ok(row, 1, V->elems, V->item, V->tag, NULL, g)) ok = 0;
    }
    free(row);
    long long n = total + 3;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    for (long long i = 0; i < total; i++) idx[i] = total - 1 - i;
    for (long long i = total; i < n; i++) idx[i] = (int64_t)(t_next() % (unsigned long long)total);
    char *out = malloc(rb * (size_t)n);
    CHECK(dds_get_batch(s, V->name, out, rb * (size_t)n, idx, n));
    if (!t_rows_ok(out, n, V->elems, V->item, V->tag, idx, 0)) ok = 0;
    free(out);
    free(idx);
  }
  EXPECT(ok);
  return ok;
}

static int run_core(int n_extras) {
  dds_store *s = core_store();
  publish(s);
  verify_all(s, t_size); /* core members read each other as in method 1 */
  double one[3] = {0};
  EXPECT_ERR(dds_add(s, "x", one, sizeof one, 1, 3, 8), DDS_ERR_DUPLICATE_VARIABLE, "already exists");
  EXPECT_ERR(dds_join(s, "x"), DDS_ERR_BAD_STATE, "core member");
  EXPECT_ERR(dds_extra_done(s), DDS_ERR_BAD_STATE, "extra members");
  /* A temporary variable: removed (record withdrawn), then published again. */
  CHECK(dds_init(s, "tmp", 2, 1, 8));
  CHECK(dds_remove(s, "tmp"));
  EXPECT_ERR(dds_remove(s, "tmp"), DDS_ERR_UNKNOWN_VARIABLE, "tmp");
  CHECK(dds_init(s, "tmp", 1, 1, 8));
  double t0 = now();
  CHECK(dds_wait_extras(s, n_extras, 120000));
  if (t_rank == 0) printf("core: %d extra store(s) done after %.1f s\n", n_extras, now() - t0);
  /* Nobody announced a fourth one: a short wait times out on every rank. */
  EXPECT_ERR(dds_wait_extras(s, n_extras + 1, 200), DDS_ERR_TIMEOUT, "extra member");
  CHECK(dds_destroy(s));
  return t_finish("test_split core");
}

static int run_serve(void) {
  dds_store *s = core_store();
  publish(s);
  char path[4096];
  snprintf(path, sizeof path, "%s/core.pid.%d", dir(), t_rank);
  FILE *f = fopen(path, "w");
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  /* Wait to be killed (bounded: never outlive the test). */
  dds_status st = dds_wait_extras(s, 1000, 120000);
  fprintf(stderr, "serve: not killed (%s)\n", dds_status_string(st));
  return 1;
}

static dds_store *extra_store(int n, const char *provider) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = n;
  o.fabric_provider = provider;
  /* No communicator: any value is ignored, MPI_COMM_NULL included. */
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_NULL), &o, &s));
  return s;
}

static int run_extra(void) {
  t_rng ^= (unsigned long long)getpid() * 2654435761ULL;
  dds_store *s = extra_store(n_core(), NULL);
  CHECK(dds_join(s, "x"));
  CHECK(dds_join_expect(s, "data/y.z", 2, 4));
  CHECK(dds_join(s, "w"));
  EXPECT_ERR(dds_join(s, "x"), DDS_ERR_DUPLICATE_VARIABLE, "already joined");
  verify_all(s, n_core());
  dds_var_info info;
  info.struct_size = sizeof info;
  CHECK(dds_info(s, "x", &info));
  EXPECT(info.local_rows == 0 && strncmp(info.transport, "fabric:", 7) == 0);
  double row[3] = {0};
  EXPECT_ERR(dds_add(s, "n", row, sizeof row, 1, 3, 8), DDS_ERR_BAD_STATE, "extra member");
  EXPECT_ERR(dds_init(s, "n", 1, 3, 8), DDS_ERR_BAD_STATE, "extra member");
  EXPECT_ERR(dds_update(s, "x", row, sizeof row, 0), DDS_ERR_BAD_STATE, "extra member");
  EXPECT_ERR(dds_wait_extras(s, 1, 10), DDS_ERR_BAD_STATE, "core members");
  EXPECT_ERR(dds_get(s, "x", row, sizeof row, 1000000, 1), DDS_ERR_INDEX_OUT_OF_RANGE, "x");
  /* An extra may forget a variable and join it again. */
  CHECK(dds_remove(s, "w"));
  CHECK(dds_join(s, "w"));
  CHECK(dds_extra_done(s));
  CHECK(dds_destroy(s));
  return t_finish("test_split extra");
}

/* FNV-1a 64, as the record's checksum. */
static unsigned long long fnv(const unsigned char *p, size_t n) {
  unsigned long long h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

/* Reads the record of "x" (x.<hash>.ddsrec) from the hand-shake directory. */
static unsigned char *read_record(char *fname, size_t fname_len, size_t *len) {
  DIR *d = opendir(dir());
  struct dirent *e;
  unsigned char *buf = NULL;
  while (d && (e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, "x.", 2) == 0 && n > 7 && strcmp(e->d_name + n - 7, ".ddsrec") == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir(), e->d_name);
      snprintf(fname, fname_len, "%s", e->d_name);
      FILE *f = fopen(path, "rb");
      buf = malloc(1 << 16);
      *len = fread(buf, 1, 1 << 16, f);
      fclose(f);
      break;
    }
  }
  if (d) closedir(d);
  return buf;
}

/* Writes `len` bytes as <tmpdir>/<fname> with `mode`. */
static void write_copy(const char *tmpdir, const char *fname, const unsigned char *b, size_t len, mode_t mode) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", tmpdir, fname);
  unlink(path);
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, len, f);
  fclose(f);
  chmod(path, mode);
}

static void join_copy(const char *tmpdir, dds_status want, const char *part) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = n_core();
  o.handshake_dir = tmpdir;
  CHECK(dds_create(0, &o, &s));
  double t = now();
  EXPECT_ERR(dds_join(s, "x"), want, part);
  EXPECT(now() - t < 5); /* rejected at once, not after the time-out */
  CHECK(dds_destroy(s));
}

static int run_rejects(void) {
  /* Wrong n_core: published by n_core() ranks. */
  dds_store *s = extra_store(n_core() + 1, NULL);
  EXPECT_ERR(dds_join(s, "x"), DDS_ERR_MISMATCH, "n_core = ");
  CHECK(dds_destroy(s));
  /* The right one: learn the provider, then check the row width. */
  s = extra_store(n_core(), NULL);
  EXPECT_ERR(dds_join_expect(s, "x", 4, 8), DDS_ERR_MISMATCH, "expected 4 x 8");
  CHECK(dds_join_expect(s, "x", 3, 8));
  dds_var_info info;
  info.struct_size = sizeof info;
  CHECK(dds_info(s, "x", &info));
  int is_shm = strstr(info.transport, "shm") != NULL;
  /* Another provider than the record's. */
  dds_store *o = extra_store(n_core(), is_shm ? "tcp" : "shm");
  EXPECT_ERR(dds_join(o, "x"), DDS_ERR_FABRIC, "provider");
  CHECK(dds_destroy(o));

  /* Damaged copies of the real record in a private directory. */
  char fname[1024], tmpdir[4096];
  size_t len = 0;
  unsigned char *rec = read_record(fname, sizeof fname, &len);
  EXPECT(rec != NULL && len > 64);
  if (rec) {
    snprintf(tmpdir, sizeof tmpdir, "%s/copies", dir());
    mkdir(tmpdir, 0700);
    write_copy(tmpdir, fname, rec, len, 0600);
    join_copy(tmpdir, DDS_OK, ""); /* the intact copy joins (nothing read) */
    write_copy(tmpdir, fname, rec, len - 5, 0600);
    join_copy(tmpdir, DDS_ERR_IO, "truncated");
    unsigned char *bad = malloc(len);
    memcpy(bad, rec, len);
    bad[len / 2] ^= 0x10;
    write_copy(tmpdir, fname, bad, len, 0600);
    join_copy(tmpdir, DDS_ERR_IO, "checksum");
    memcpy(bad, rec, len);
    bad[8] = 99; /* format version 99, checksum recomputed */
    unsigned long long h = fnv(bad, len - 8);
    for (int i = 0; i < 8; i++) bad[len - 8 + i] = (unsigned char)(h >> (8 * i));
    write_copy(tmpdir, fname, bad, len, 0600);
    join_copy(tmpdir, DDS_ERR_UNSUPPORTED, "version 99");
    write_copy(tmpdir, fname, rec, len, 0620);
    join_copy(tmpdir, DDS_ERR_IO, "group or others");
    /* A record of another user (uid 65534, "nobody"): only root can make one. */
    char path[4096 + 1024];
    snprintf(path, sizeof path, "%s/%s", tmpdir, fname);
    write_copy(tmpdir, fname, rec, len, 0600);
    if (chown(path, 65534, 65534) == 0) {
      join_copy(tmpdir, DDS_ERR_IO, "owned by uid 65534, not by this user");
    } else {
      printf("rejects: NOT COVERED here: a record owned by another user (chown: %s)\n", strerror(errno));
    }
    /* A symbolic link to an intact record. */
    char real[4096 + 1100];
    snprintf(real, sizeof real, "%s.real", path);
    write_copy(tmpdir, fname, rec, len, 0600);
    EXPECT(rename(path, real) == 0 && symlink(real, path) == 0);
    join_copy(tmpdir, DDS_ERR_IO, "symbolic link");
    unlink(path);
    free(bad);
    free(rec);
  }
  CHECK(dds_extra_done(s));
  CHECK(dds_destroy(s));
  return t_finish("test_split rejects");
}

static int run_timeout(void) {
  dds_store *s = extra_store(n_core(), NULL);
  double t = now();
  EXPECT_ERR(dds_join(s, "nobody/here"), DDS_ERR_TIMEOUT, dir());
  EXPECT(strstr(dds_last_error(), "'nobody/here'") != NULL);
  double took = now() - t;
  EXPECT(took >= 0.9 && took < 10); /* DDSTORE_HANDSHAKE_TIMEOUT_S=1 */
  EXPECT_ERR(dds_extra_done(s), DDS_ERR_BAD_STATE, "not joined");
  CHECK(dds_destroy(s));
  return t_finish("test_split timeout");
}

static int run_late(void) {
  dds_store *s = extra_store(n_core(), NULL);
  double t = now();
  EXPECT_ERR(dds_join(s, "x"), DDS_ERR_BAD_STATE, "withdrawn");
  EXPECT(now() - t < 5);
  CHECK(dds_destroy(s));
  return t_finish("test_split late");
}

static int run_read_until_dead(void) {
  dds_store *s = extra_store(n_core(), NULL);
  CHECK(dds_join(s, "x"));
  long long total = 0;
  for (int r = 0; r < n_core(); r++) total += rows_of(0, r);
  double row[3];
  CHECK(dds_get(s, "x", row, sizeof row, total - 1, 1));
  EXPECT(t_rows_ok(row, 1, 3, 8, 1, NULL, total - 1));
  char path[4096];
  snprintf(path, sizeof path, "%s/extra.reading", dir());
  fclose(fopen(path, "w"));
  dds_status st = DDS_OK;
  double t = now(), call = 0;
  int64_t idx[4] = {0, total - 1, 1, total - 2};
  double out[4 * 3];
  while (st == DDS_OK && now() - t < 60) {
    double c = now();
    st = dds_get_batch(s, "x", out, sizeof out, idx, 4);
    call = now() - c;
    if (st == DDS_OK) usleep(2000);
  }
  printf("extra: reading from a killed core -> %s after %.1f s in the call: %s\n", dds_status_string(st), call,
         dds_last_error());
  EXPECT(st == DDS_ERR_TIMEOUT || st == DDS_ERR_FABRIC);
  EXPECT(call < 15); /* DDSTORE_READ_TIMEOUT_S=3 */
  CHECK(dds_destroy(s));
  return t_finish("test_split read-until-dead");
}

static int run_join_dead(void) {
  dds_store *s = extra_store(n_core(), NULL);
  double t = now();
  dds_status st = dds_join(s, "x");
  if (st == DDS_OK) {
    double row[3];
    st = dds_get(s, "x", row, sizeof row, 0, 1);
  }
  printf("extra: joining a killed core's record -> %s after %.1f s: %s\n", dds_status_string(st), now() - t,
         st ? dds_last_error() : "");
  EXPECT(st == DDS_ERR_FABRIC || st == DDS_ERR_TIMEOUT);
  EXPECT(now() - t < 15); /* DDSTORE_READ_TIMEOUT_S=3 */
  CHECK(dds_destroy(s));
  return t_finish("test_split join-dead");
}

/* A core store in `d` (NULL: DDSTORE_HANDSHAKE_DIR); returns the status. */
static dds_status try_core(const char *d, dds_store **s) {
  dds_options o;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_CORE;
  o.handshake_dir = d;
  return dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, s);
}

static int run_unwritable(void) {
  dds_store *s = NULL;
  CHECK(try_core(NULL, &s));
  double buf[3 * 3];
  t_fill(buf, 3, 3, 8, 1, 3 * t_rank);
  /* Every rank fails, rank 0's message (the writer) names the directory. */
  EXPECT_ERR(dds_add(s, "x", buf, sizeof buf, 3, 3, 8), DDS_ERR_IO, t_rank == 0 ? dir() : "rank 0");
  if (t_rank == 0) EXPECT(strstr(dds_last_error(), "Permission denied") != NULL);
  EXPECT_ERR(dds_init(s, "x", 3, 3, 8), DDS_ERR_IO, t_rank == 0 ? dir() : "rank 0");
  /* Nothing was registered: the names are still free, the store still answers. */
  dds_var_info info;
  info.struct_size = sizeof info;
  EXPECT_ERR(dds_info(s, "x", &info), DDS_ERR_UNKNOWN_VARIABLE, "'x'");
  CHECK(dds_epoch_begin(s));
  CHECK(dds_epoch_end(s));
  CHECK(dds_destroy(s));
  return t_finish("test_split unwritable");
}

/* Files in the directory whose names contain `part`. */
static int count_files(const char *part) {
  int n = 0;
  DIR *d = opendir(dir());
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strstr(e->d_name, part)) n++;
  if (d) closedir(d);
  return n;
}

static int run_full(const char *limit) {
  dds_store *s = NULL;
  CHECK(try_core(NULL, &s));
  struct rlimit old;
  getrlimit(RLIMIT_FSIZE, &old);
  int use_rlimit = strcmp(limit, "-") != 0;
  if (use_rlimit && t_rank == 0) {
    /* Past the limit a write fails with EFBIG instead of killing us. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = {(rlim_t)atoll(limit), old.rlim_max};
    EXPECT(setrlimit(RLIMIT_FSIZE, &small) == 0);
  }
  const var_t *V = &VARS[0];
  long long rows = rows_of(0, t_rank);
  size_t bytes = (size_t)(rows * V->elems * V->item);
  void *buf = malloc(bytes);
  t_fill(buf, rows, V->elems, V->item, V->tag, start_of(0, t_rank));
  dds_status st = dds_add(s, V->name, buf, bytes, rows, V->elems, V->item);
  const char *m = dds_last_error();
  printf("rank %d: record write on a full/limited file system -> %s: %s\n", t_rank, dds_status_string(st), m);
  EXPECT(st == DDS_ERR_IO);
  EXPECT(strstr(m, t_rank == 0 ? dir() : "rank 0") != NULL);
  if (t_rank == 0) {
    EXPECT(strstr(m, use_rlimit ? "File too large" : "No space left") != NULL);
    /* Neither a record nor a temporary file is left behind. */
    EXPECT(count_files(".ddsrec") == 0);
    EXPECT(count_files(".tmp.") == 0);
    if (use_rlimit) {
      EXPECT(setrlimit(RLIMIT_FSIZE, &old) == 0);
    } else {
      char path[4096];
      snprintf(path, sizeof path, "%s/filler", dir());
      EXPECT(unlink(path) == 0);
    }
  }
  free(buf);
  MPI_Barrier(MPI_COMM_WORLD);
  /* With room again the same store publishes everything and serves an extra. */
  publish(s);
  verify_all(s, t_size);
  CHECK(dds_wait_extras(s, 1, 120000));
  CHECK(dds_destroy(s));
  return t_finish("test_split full");
}

static int run_baddir(void) {
  char file[4096], path[4200];
  dds_store *s = NULL;
  /* A directory that cannot be created: its parent is a regular file. */
  snprintf(file, sizeof file, "%s/a-file", dir());
  if (t_rank == 0) {
    mkdir(dir(), 0700);
    FILE *f = fopen(file, "w");
    EXPECT(f != NULL);
    if (f) fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  snprintf(path, sizeof path, "%s/hs", file);
  EXPECT_ERR(try_core(path, &s), DDS_ERR_IO, t_rank == 0 ? "cannot create the hand-shake directory" : "rank 0");
  EXPECT(s == NULL);
  dds_options o;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = 1;
  o.handshake_dir = path;
  EXPECT_ERR(dds_create(0, &o, &s), DDS_ERR_IO, path);
  /* A directory others may write: refused by both sides. */
  snprintf(path, sizeof path, "%s/open", dir());
  if (t_rank == 0) {
    mkdir(path, 0700);
    chmod(path, 0777);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_ERR(try_core(path, &s), DDS_ERR_IO, t_rank == 0 ? "may be written by other users (mode 777)" : "rank 0");
  o.handshake_dir = path;
  EXPECT_ERR(dds_create(0, &o, &s), DDS_ERR_IO, "may be written by other users");
  EXPECT(strstr(dds_last_error(), path) != NULL);
  /* Once closed (after every rank's check above), the same directory is accepted. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0) chmod(path, 0700);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(try_core(path, &s));
  CHECK(dds_init(s, "ok", 1, 1, 8));
  CHECK(dds_destroy(s));
  return t_finish("test_split baddir");
}

static unsigned long long le64(const unsigned char *p) {
  unsigned long long v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Prints "key K" and "base B" (decimal) for every rank entry of every record. */
static int run_keys(void) {
  DIR *d = opendir(dir());
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 7 || strcmp(e->d_name + len - 7, ".ddsrec") != 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir(), e->d_name);
    FILE *f = fopen(path, "rb");
    unsigned char b[1 << 16];
    size_t sz = fread(b, 1, sizeof b, f);
    fclose(f);
    if (sz < 64) continue;
    unsigned n_core = b[40] | b[41] << 8 | b[42] << 16 | (unsigned)b[43] << 24;
    size_t at = 64;
    for (int str = 0; str < 3; str++) at += 2 + (size_t)(b[at] | b[at + 1] << 8);
    for (unsigned r = 0; r < n_core && at + 26 <= sz; r++) {
      at += 2 + (size_t)(b[at] | b[at + 1] << 8);
      printf("key %llu\nbase %llu\n", le64(b + at), le64(b + at + 8));
      at += 24;
      n++;
    }
  }
  if (d) closedir(d);
  EXPECT(n > 0);
  return t_finish("test_split keys");
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  const char *role = argc > 1 ? argv[1] : "";
  if (!strcmp(role, "core")) return run_core(argc > 2 ? atoi(argv[2]) : 1);
  if (!strcmp(role, "serve")) return run_serve();
  if (!strcmp(role, "extra")) return run_extra();
  if (!strcmp(role, "rejects")) return run_rejects();
  if (!strcmp(role, "timeout")) return run_timeout();
  if (!strcmp(role, "late")) return run_late();
  if (!strcmp(role, "read-until-dead")) return run_read_until_dead();
  if (!strcmp(role, "join-dead")) return run_join_dead();
  if (!strcmp(role, "unwritable")) return run_unwritable();
  if (!strcmp(role, "full")) return run_full(argc > 2 ? argv[2] : "-");
  if (!strcmp(role, "baddir")) return run_baddir();
  if (!strcmp(role, "keys")) return run_keys();
  fprintf(stderr, "usage: test_split core N|serve|extra|rejects|timeout|late|read-until-dead|join-dead|unwritable|full "
                  "LIMIT|baddir|keys\n");
  MPI_Finalize();
  return 2;
}
