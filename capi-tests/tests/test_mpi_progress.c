/* Method 0: a passive-target read completes while its owner makes no MPI
 * call (transport::rma_progress). Rank 0 reads rank 1's rows with dds_get and
 * a one-sided dds_get_batch, blocking and started (dds_get_batch_start),
 * while rank 1 makes no MPI call at all: it waits
 * for a file that rank 0 creates once its reads are in and verified. Where
 * the MPI serves such reads only inside the owner's MPI calls (MPICH over
 * UCX shared memory, here), the reads complete only thanks to the store's
 * progress thread; without it rank 0 would wait until rank 1's guard gave
 * up (and the test would fail). No time is measured: the guard is a hang
 * bound only.
 *
 *   DDSTORE_MPI_PROGRESS=1 mpiexec -n 2 test_mpi_progress   (one-sided batch mode)
 *   DDSTORE_MPI_PROGRESS=1 ... test_mpi_progress collective
 *   ... test_mpi_progress config              (the setting's errors, on every rank)
 *
 * With DDSTORE_MPI_PROGRESS unset (auto), the thread must run exactly when
 * the ranks span more than one node (checked through dds_store_settings):
 * the multi-node stage runs this program so on 2 nodes, where without the
 * thread rank 0's reads of the other node's rows would wait for the guard.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

enum { ROWS = 64, ELEMS = 512, GUARD_S = 120 };

static dds_store *make(int mode) {
  dds_options o;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_MPI;
  o.batch_mode = mode;
  dds_store *s = NULL;
  CHECK(dds_create_comm(MPI_COMM_WORLD, &o, &s));
  int64_t *mine = malloc(sizeof(int64_t) * ROWS * ELEMS);
  for (int64_t i = 0; i < ROWS * ELEMS; i++) mine[i] = (int64_t)t_rank * ROWS * ELEMS + i;
  CHECK(dds_add(s, "v", mine, sizeof(int64_t) * ROWS * ELEMS, ROWS, ELEMS, 8));
  free(mine);
  return s;
}

static int row_ok(const int64_t *row, int64_t g) {
  for (int64_t j = 0; j < ELEMS; j++)
    if (row[j] != g * ELEMS + j) return 0;
  return 1;
}

/* Rank 0 reads rank 1's rows while rank 1 waits, outside MPI, for `flag`. */
static void quiet_owner(dds_store *s, int onesided_batch) {
  char flag[256];
  if (t_rank == 0) {
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(flag, sizeof flag, "%s/ddstore-progress-%ld-%d", dir, (long)getpid(), onesided_batch);
    unlink(flag);
  }
  MPI_Bcast(flag, sizeof flag, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 1) {
    /* No MPI call until rank 0's reads are in. */
    struct stat st;
    int waited_ms = 0;
    while (stat(flag, &st) != 0 && waited_ms < GUARD_S * 1000) {
      usleep(1000);
      waited_ms++;
    }
    EXPECT(stat(flag, &st) == 0); /* else rank 0's reads never completed while this rank was quiet */
  } else if (t_rank == 0) {
    int64_t *one = malloc(sizeof(int64_t) * ELEMS * 3);
    CHECK(dds_get(s, "v", one, sizeof(int64_t) * ELEMS * 3, ROWS + 5, 3));
    for (int k = 0; k < 3; k++) EXPECT(row_ok(one + k * ELEMS, ROWS + 5 + k));
    if (onesided_batch) {
      int64_t idx[32];
      for (int i = 0; i < 32; i++) idx[i] = ROWS + (i * 7) % ROWS;
      int64_t *b = malloc(sizeof(int64_t) * ELEMS * 32);
      CHECK(dds_get_batch(s, "v", b, sizeof(int64_t) * ELEMS * 32, idx, 32));
      for (int i = 0; i < 32; i++) EXPECT(row_ok(b + i * ELEMS, idx[i]));
      /* The same batch started: a request thread's request-based gets,
       * tested rather than flushed, served by the same progress thread. */
      for (int i = 0; i < 32; i++) idx[i] = ROWS + (i * 5 + 3) % ROWS;
      memset(b, 0, sizeof(int64_t) * ELEMS * 32);
      dds_request *rq = NULL;
      CHECK(dds_get_batch_start(s, "v", b, sizeof(int64_t) * ELEMS * 32, idx, 32, &rq));
      CHECK(dds_request_wait(rq));
      for (int i = 0; i < 32; i++) EXPECT(row_ok(b + i * ELEMS, idx[i]));
      free(b);
    }
    free(one);
    FILE *f = fopen(flag, "w");
    EXPECT(f != NULL);
    if (f) fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0) unlink(flag);
}

/* 1 if the ranks of `comm` span more than one node (MPI's shared split). */
static int spans_nodes(MPI_Comm comm) {
  MPI_Comm node;
  int n, all;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  MPI_Comm_size(comm, &all);
  int spans = n < all, any = 0;
  MPI_Allreduce(&spans, &any, 1, MPI_INT, MPI_MAX, comm);
  return any;
}

/* What `auto` (the default) chose: the thread runs where the store spans
 * nodes and MPI runs with MPI_THREAD_MULTIPLE, and only there. */
static void expect_auto_choice(dds_store *s) {
  int provided;
  MPI_Query_thread(&provided);
  dds_settings st;
  st.struct_size = sizeof st;
  CHECK(dds_store_settings(s, &st));
  int want = spans_nodes(MPI_COMM_WORLD) && provided == MPI_THREAD_MULTIPLE;
  if (st.mpi_progress != want) fprintf(stderr, "rank %d: auto progress thread %d, expected %d\n", t_rank, st.mpi_progress, want);
  EXPECT(st.mpi_progress == want);
}

/* The setting's errors: a bad word, and "on" without MPI_THREAD_MULTIPLE
 * (checked by the library, so this program initialises MPI itself). */
static void config_errors(void) {
  dds_options o;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_MPI;
  dds_store *s = NULL;
  setenv("DDSTORE_MPI_PROGRESS", "sometimes", 1);
  EXPECT_ERR(dds_create_comm(MPI_COMM_WORLD, &o, &s), DDS_ERR_INVALID_ARGUMENT, "DDSTORE_MPI_PROGRESS");
  EXPECT(s == NULL);
  setenv("DDSTORE_MPI_PROGRESS", "off", 1);
  CHECK(dds_create_comm(MPI_COMM_WORLD, &o, &s));
  CHECK(dds_destroy(s));
  s = NULL;
  /* auto never fails create: without MPI_THREAD_MULTIPLE it stays off. */
  setenv("DDSTORE_MPI_PROGRESS", " Auto", 1);
  CHECK(dds_create_comm(MPI_COMM_WORLD, &o, &s));
  expect_auto_choice(s);
  CHECK(dds_destroy(s));
  s = NULL;
  int provided;
  MPI_Query_thread(&provided);
  setenv("DDSTORE_MPI_PROGRESS", "1", 1);
  if (provided < MPI_THREAD_MULTIPLE) {
    EXPECT_ERR(dds_create_comm(MPI_COMM_WORLD, &o, &s), DDS_ERR_INVALID_ARGUMENT, "MPI_THREAD_MULTIPLE");
  } else {
    CHECK(dds_create_comm(MPI_COMM_WORLD, &o, &s));
    CHECK(dds_destroy(s));
  }
  unsetenv("DDSTORE_MPI_PROGRESS");
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "onesided";
  if (!strcmp(what, "config-funneled")) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    config_errors();
    return t_finish("test_mpi_progress config-funneled");
  }
  t_init(&argc, &argv);
  if (!strcmp(what, "config")) {
    config_errors();
  } else if (t_size >= 2) {
    int onesided = strcmp(what, "collective") != 0;
    dds_store *s = make(onesided ? DDS_BATCH_ONESIDED : DDS_BATCH_COLLECTIVE);
    if (!getenv("DDSTORE_MPI_PROGRESS")) expect_auto_choice(s);
    quiet_owner(s, onesided);
    CHECK(dds_destroy(s));
  } else {
    EXPECT(!"test_mpi_progress needs 2 ranks");
  }
  return t_finish("test_mpi_progress");
}
