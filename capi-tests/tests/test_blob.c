/* Blobs in the method-2 hand-shake directory: dds_publish_blob and
 * dds_wait_blob.
 *
 *   test_blob               one job: rank 0 publishes, every rank waits
 *                           (sizes 0, 1, max, max+1), two names published
 *                           by two ranks at once, and every error (name,
 *                           size, buffer, timeout, corrupt, foreign owner,
 *                           permissions, link, not method 2). Each rank
 *                           uses its own extra store on one directory.
 *   test_blob publish N     a core job (DDSTORE_HANDSHAKE_DIR): rank 0
 *                           publishes "job/data" and "job/empty", every
 *                           rank waits for "job/ack" from N readers.
 *   test_blob wait          a separate job of extra members: waits for the
 *                           core job's blobs, checks them, each rank
 *                           publishes "job/ack.<pid>"... (run_blob.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>

#include "common.h"

#define MAX ((size_t)DDS_BLOB_MAX_BYTES)

static unsigned char pattern(size_t i, int tag) { return (unsigned char)(i * 31 + tag * 7 + (i >> 8)); }

static unsigned char *filled(size_t n, int tag) {
  unsigned char *b = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) b[i] = pattern(i, tag);
  return b;
}

static int holds(const unsigned char *b, size_t n, int tag) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != pattern(i, tag)) return 0;
  return 1;
}

static dds_store *extra_in(const char *dir) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = 1;
  o.handshake_dir = dir;
  CHECK(dds_create(0, &o, &s));
  return s;
}

/* The one file of blob files matching <dir>/<stem>.*.ddsblob. */
static void blob_path(const char *dir, const char *stem, char *out, size_t cap) {
  char pat[4200];
  glob_t g;
  snprintf(pat, sizeof pat, "%s/%s.*.ddsblob", dir, stem);
  out[0] = 0;
  if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 1) snprintf(out, cap, "%s", g.gl_pathv[0]);
  globfree(&g);
}

/* Waits for `name` (timeout_ms) into a buffer of `cap` bytes; checks `tag`'s bytes. */
static void expect_blob(dds_store *s, const char *name, size_t want, int tag) {
  unsigned char *buf = malloc(want ? want : 1);
  size_t len = (size_t)-1;
  CHECK(dds_wait_blob(s, name, buf, want, &len, 60000));
  EXPECT(len == want);
  EXPECT(holds(buf, want, tag));
  free(buf);
}

static void damaged(dds_store *s, const char *dir, const char *stem, const char *name) {
  char path[4300];
  unsigned char *b = filled(100, 3);
  CHECK(dds_publish_blob(s, name, b, 100));
  blob_path(dir, stem, path, sizeof path);
  EXPECT(path[0] != 0);
  unsigned char buf[100];
  size_t len = 0;
  /* A flipped data byte: the checksum catches it, at once (not at the time-out). */
  FILE *f = fopen(path, "r+b");
  fseek(f, 60, SEEK_SET);
  fputc('!', f);
  fclose(f);
  double t = MPI_Wtime();
  EXPECT_ERR(dds_wait_blob(s, name, buf, sizeof buf, &len, 20000), DDS_ERR_IO, "checksum mismatch");
  EXPECT(strstr(dds_last_error(), path) != NULL);
  EXPECT(MPI_Wtime() - t < 5);
  /* Truncated. */
  CHECK(dds_publish_blob(s, name, b, 100));
  EXPECT(truncate(path, 50) == 0);
  EXPECT_ERR(dds_wait_blob(s, name, buf, sizeof buf, &len, 20000), DDS_ERR_IO, "truncated");
  /* Writable by others, a link, another user's. */
  CHECK(dds_publish_blob(s, name, b, 100));
  EXPECT(chmod(path, 0622) == 0);
  EXPECT_ERR(dds_wait_blob(s, name, buf, sizeof buf, &len, 20000), DDS_ERR_IO, "group or others");
  CHECK(dds_publish_blob(s, name, b, 100)); /* replaced: 0600 again */
  char moved[4400];
  snprintf(moved, sizeof moved, "%s.moved", path);
  EXPECT(rename(path, moved) == 0 && symlink(moved, path) == 0);
  EXPECT_ERR(dds_wait_blob(s, name, buf, sizeof buf, &len, 20000), DDS_ERR_IO, "symbolic link");
  unlink(path);
  unlink(moved);
  CHECK(dds_publish_blob(s, name, b, 100));
  if (geteuid() == 0) {
    EXPECT(chown(path, 65534, 65534) == 0);
    EXPECT_ERR(dds_wait_blob(s, name, buf, sizeof buf, &len, 20000), DDS_ERR_IO, "owned by uid 65534");
  } else if (t_rank == 0) {
    printf("NOT COVERED blob of another user: not root, cannot chown (rank %d)\n", t_rank);
  }
  free(b);
}

static int run_one_job(void) {
  char dir[4096] = "";
  if (t_rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dds-blob.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
      perror("mkdtemp");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  dds_store *s = extra_in(dir);

  /* Sizes at the bounds: rank 0 publishes, every rank waits. */
  size_t sizes[3] = {0, 1, MAX};
  const char *names[3] = {"size/0", "size/1", "size/max"};
  if (t_rank == 0)
    for (int i = 0; i < 3; i++) {
      unsigned char *b = filled(sizes[i], i);
      CHECK(dds_publish_blob(s, names[i], sizes[i] ? b : NULL, sizes[i]));
      free(b);
    }
  for (int i = 0; i < 3; i++) expect_blob(s, names[i], sizes[i], i);
  unsigned char *big = filled(MAX + 1, 0);
  EXPECT_ERR(dds_publish_blob(s, "size/over", big, MAX + 1), DDS_ERR_INVALID_ARGUMENT, "1048577 bytes");
  EXPECT(strstr(dds_last_error(), "DDS_BLOB_MAX_BYTES (1048576)") != NULL);
  EXPECT(strstr(dds_last_error(), "'size/over'") != NULL);
  free(big);

  /* Buffer too small: *len says what is needed, a second call reads it. */
  size_t len = 0;
  EXPECT_ERR(dds_wait_blob(s, "size/1", NULL, 0, &len, 1000), DDS_ERR_INVALID_ARGUMENT, "too small");
  EXPECT(len == 1);
  unsigned char *buf = malloc(MAX);
  EXPECT_ERR(dds_wait_blob(s, "size/max", buf, MAX - 1, &len, 1000), DDS_ERR_INVALID_ARGUMENT,
             "buffer of 1048575 bytes is too small for blob 'size/max' of 1048576 bytes");
  EXPECT(len == MAX);
  CHECK(dds_wait_blob(s, "size/max", buf, len, &len, 1000));
  EXPECT(len == MAX && holds(buf, MAX, 2));

  /* Two names at once, from two ranks; each waits for the other's. */
  char mine[64], theirs[64];
  int other = (t_rank + 1) % t_size;
  snprintf(mine, sizeof mine, "pair/%d", t_rank);
  snprintf(theirs, sizeof theirs, "pair/%d", other);
  unsigned char *b = filled(5000 + t_rank, 10 + t_rank);
  CHECK(dds_publish_blob(s, mine, b, 5000 + t_rank));
  free(b);
  expect_blob(s, theirs, 5000 + other, 10 + other);
  /* A blob replaced by its publisher: readers get the newer bytes. */
  if (t_rank == 0) {
    CHECK(dds_publish_blob(s, "replaced", "one", 3));
    CHECK(dds_publish_blob(s, "replaced", "two!", 4));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  char four[4];
  CHECK(dds_wait_blob(s, "replaced", four, 4, &len, 1000));
  EXPECT(len == 4 && memcmp(four, "two!", 4) == 0);

  /* Bad arguments. */
  char long_name[300];
  memset(long_name, 'n', 256);
  long_name[256] = 0;
  EXPECT_ERR(dds_publish_blob(s, NULL, "x", 1), DDS_ERR_INVALID_ARGUMENT, "blob name is NULL");
  EXPECT_ERR(dds_publish_blob(s, "", "x", 1), DDS_ERR_INVALID_ARGUMENT, "blob name is empty");
  EXPECT_ERR(dds_publish_blob(s, long_name, "x", 1), DDS_ERR_INVALID_ARGUMENT, "longer than 255");
  EXPECT_ERR(dds_wait_blob(s, "\xff", buf, 1, &len, 10), DDS_ERR_INVALID_ARGUMENT, "blob name is not valid UTF-8");
  EXPECT_ERR(dds_publish_blob(s, "x", NULL, 5), DDS_ERR_INVALID_ARGUMENT, "data is NULL but its size is 5");
  EXPECT_ERR(dds_wait_blob(s, "size/1", NULL, 5, &len, 10), DDS_ERR_INVALID_ARGUMENT, "buf is NULL");
  EXPECT_ERR(dds_wait_blob(s, "size/1", buf, 5, NULL, 10), DDS_ERR_INVALID_ARGUMENT, "len is NULL");

  /* Time-outs: the call's, then DDSTORE_HANDSHAKE_TIMEOUT_S's (read at dds_create). */
  double t = MPI_Wtime();
  EXPECT_ERR(dds_wait_blob(s, "never", buf, MAX, &len, 200), DDS_ERR_TIMEOUT, "no blob 'never' was published");
  EXPECT(strstr(dds_last_error(), dir) != NULL && strstr(dds_last_error(), "within 0.2 s") != NULL);
  EXPECT(MPI_Wtime() - t >= 0.2);
  setenv("DDSTORE_HANDSHAKE_TIMEOUT_S", "0.3", 1);
  dds_store *quick = extra_in(dir);
  unsetenv("DDSTORE_HANDSHAKE_TIMEOUT_S");
  EXPECT_ERR(dds_wait_blob(quick, "never", buf, MAX, &len, -1), DDS_ERR_TIMEOUT, "within 0.3 s");
  EXPECT(strstr(dds_last_error(), "DDSTORE_HANDSHAKE_TIMEOUT_S") != NULL);
  CHECK(dds_destroy(quick));

  /* Damaged files: each rank its own blob name. */
  char stem[64], name[64];
  snprintf(stem, sizeof stem, "bad_%d", t_rank);
  snprintf(name, sizeof name, "bad/%d", t_rank);
  damaged(s, dir, stem, name);
  /* The store is still usable after every error. */
  CHECK(dds_wait_blob(s, "size/1", buf, 1, &len, 1000));
  EXPECT(len == 1 && holds(buf, 1, 1));

  /* A directory others may write is refused, by both calls. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0) chmod(dir, 0777);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_ERR(dds_publish_blob(s, "open", "x", 1), DDS_ERR_IO, "may be written by other users");
  EXPECT_ERR(dds_wait_blob(s, "size/1", buf, 1, &len, 10), DDS_ERR_IO, "may be written by other users");
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0) chmod(dir, 0700);
  CHECK(dds_destroy(s));
  EXPECT_ERR(dds_publish_blob(s, "gone", "x", 1), DDS_ERR_BAD_STATE, "");

  /* Not a method-2 store. */
  dds_store *m0 = t_store(0, 0);
  EXPECT_ERR(dds_publish_blob(m0, "x", "x", 1), DDS_ERR_BAD_STATE, "method-2 store, and this store uses method");
  EXPECT_ERR(dds_wait_blob(m0, "x", buf, 1, &len, 10), DDS_ERR_BAD_STATE, "hand-shake directory");
  CHECK(dds_destroy(m0));
  free(buf);

  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    EXPECT(system(cmd) == 0);
  }
  return t_finish("test_blob");
}

/* The core job: publishes through a method-2 core store, then waits for
 * one acknowledgement per reader (their names listed in "job/ack.*" files). */
static int run_publish(int readers) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_CORE;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  if (t_rank == 0) {
    unsigned char *b = filled(70000, 42);
    CHECK(dds_publish_blob(s, "job/data", b, 70000));
    CHECK(dds_publish_blob(s, "job/empty", NULL, 0));
    free(b);
  }
  char name[64];
  size_t len = 0;
  int r;
  for (r = 0; r < readers; r++) {
    snprintf(name, sizeof name, "job/ack.%d", r);
    unsigned char ack[16];
    CHECK(dds_wait_blob(s, name, ack, sizeof ack, &len, -1));
    EXPECT(len == 3 && memcmp(ack, "ok\n", 3) == 0);
  }
  CHECK(dds_destroy(s));
  return t_finish("test_blob publish");
}

/* The reader job: extra members that wait for the core job's blobs. */
static int run_wait(void) {
  const char *dir = getenv("DDSTORE_HANDSHAKE_DIR");
  dds_store *s = extra_in(dir);
  expect_blob(s, "job/data", 70000, 42);
  size_t len = 99;
  CHECK(dds_wait_blob(s, "job/empty", NULL, 0, &len, -1));
  EXPECT(len == 0);
  char name[64];
  snprintf(name, sizeof name, "job/ack.%d", t_rank);
  CHECK(dds_publish_blob(s, name, "ok\n", 3));
  CHECK(dds_destroy(s));
  return t_finish("test_blob wait");
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  if (argc > 2 && strcmp(argv[1], "publish") == 0) return run_publish(atoi(argv[2]));
  if (argc > 1 && strcmp(argv[1], "wait") == 0) return run_wait();
  return run_one_job();
}
