/* The floors: the same rows moved by the same transport with no store logic
 * (no name lookup, no owner search, no argument checks, no index exchange).
 * Every floor reads exactly the rows the store reads (the same pool of random
 * rows) and copies the rows a rank holds itself with memcpy, as the store does;
 * only the remote rows use the transport. Owners and offsets are precomputed
 * outside the timed loop. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "floors.h"

static void mpi_check(int rc, const char *what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "bench: %s failed: %s\n", what, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

/* memcpy of the same rows from a local buffer: the cost of touching the bytes. */
void floor_memcpy(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int64_t *off = c->off[c->me] + cursor;
  for (int i = 0; i < batch; i++) memcpy(dst + (int64_t)i * c->rb, c->mine + off[i], (size_t)c->rb);
}

/* memcpy of the same rows from POSIX shared memory: every rank's shard in a
 * shm segment that the other ranks of the node map read-only, which is how
 * node-local reads reach same-node rows (shared mappings of tmpfs pages, not
 * private heap pages). Only when every rank is on this node. */
void floor_memcpy_shm(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int32_t *own = c->own[c->me] + cursor;
  const int64_t *off = c->off[c->me] + cursor;
  for (int i = 0; i < batch; i++) memcpy(dst + (int64_t)i * c->rb, c->shm[own[i]] + off[i], (size_t)c->rb);
}

/* Collective: creates this rank's segment (a copy of `mine`) and maps every
 * peer's; returns 0 (and maps nothing) unless every rank is on this node. */
int floors_shm_setup(bench_ctx *c) {
  MPI_Comm node;
  int node_size, ok = 1, all_ok;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->me, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  if (node_size != c->np) return 0;
  long job = (long)getpid();
  MPI_Bcast(&job, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  size_t len = (size_t)(c->rows * c->rb);
  char name[64];
  snprintf(name, sizeof name, "/ddsbench.%ld.%d", job, c->me);
  c->shm = calloc((size_t)c->np, sizeof(char *));
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)len) != 0) ok = 0;
  if (ok) {
    c->shm[c->me] = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c->shm[c->me] == MAP_FAILED) ok = 0, c->shm[c->me] = NULL;
    else memcpy(c->shm[c->me], c->mine, len);
  }
  if (fd >= 0) close(fd);
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  for (int q = 0; all_ok && q < c->np; q++) {
    if (q == c->me) continue;
    char peer[64];
    snprintf(peer, sizeof peer, "/ddsbench.%ld.%d", job, q);
    int pfd = shm_open(peer, O_RDONLY, 0);
    void *m = pfd < 0 ? MAP_FAILED : mmap(NULL, len, PROT_READ, MAP_SHARED, pfd, 0);
    if (pfd >= 0) close(pfd);
    if (m == MAP_FAILED) ok = 0;
    else c->shm[q] = m;
  }
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  shm_unlink(name); /* every peer has mapped it (or given up) */
  c->shm_len = len;
  if (!all_ok) floors_shm_teardown(c);
  return all_ok;
}

void floors_shm_teardown(bench_ctx *c) {
  if (!c->shm) return;
  for (int q = 0; q < c->np; q++)
    if (c->shm[q]) munmap(c->shm[q], c->shm_len);
  free(c->shm);
  c->shm = NULL;
}

/* One passive-target epoch per row: MPI_Win_lock(shared) / MPI_Get / MPI_Win_unlock. */
void floor_mpi_get_lock(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int32_t *own = c->own[c->me] + cursor;
  const int64_t *off = c->off[c->me] + cursor;
  for (int i = 0; i < batch; i++) {
    char *d = dst + (int64_t)i * c->rb;
    if (own[i] == c->me) {
      memcpy(d, c->mine + off[i], (size_t)c->rb);
      continue;
    }
    mpi_check(MPI_Win_lock(MPI_LOCK_SHARED, own[i], 0, c->win), "MPI_Win_lock");
    mpi_check(MPI_Get(d, (int)c->rb, MPI_BYTE, own[i], (MPI_Aint)off[i], (int)c->rb, MPI_BYTE, c->win), "MPI_Get");
    mpi_check(MPI_Win_unlock(own[i], c->win), "MPI_Win_unlock");
  }
}

/* Inside one lock_all epoch: MPI_Get then MPI_Win_flush, one row at a time
 * (what method-0 dds_get does). */
void floor_mpi_get_flush(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int32_t *own = c->own[c->me] + cursor;
  const int64_t *off = c->off[c->me] + cursor;
  for (int i = 0; i < batch; i++) {
    char *d = dst + (int64_t)i * c->rb;
    if (own[i] == c->me) {
      memcpy(d, c->mine + off[i], (size_t)c->rb);
      continue;
    }
    mpi_check(MPI_Get(d, (int)c->rb, MPI_BYTE, own[i], (MPI_Aint)off[i], (int)c->rb, MPI_BYTE, c->win), "MPI_Get");
    mpi_check(MPI_Win_flush(own[i], c->win), "MPI_Win_flush");
  }
}

/* Inside one lock_all epoch: every get of the batch, then one MPI_Win_flush
 * per target. (Not MPI_Win_flush_all: in MPICH 4.0.2 ch4:ucx with
 * UCX_TLS=self,sm it returns before the gets have landed when calls follow
 * each other without a barrier; see docs/dev/performance.md.) */
void floor_mpi_get_pipelined(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int32_t *own = c->own[c->me] + cursor;
  const int64_t *off = c->off[c->me] + cursor;
  int *touched = c->a2a_counts; /* np flags; the alltoallv floor is not running */
  for (int q = 0; q < c->np; q++) touched[q] = 0;
  for (int i = 0; i < batch; i++) {
    char *d = dst + (int64_t)i * c->rb;
    if (own[i] == c->me) {
      memcpy(d, c->mine + off[i], (size_t)c->rb);
      continue;
    }
    mpi_check(MPI_Get(d, (int)c->rb, MPI_BYTE, own[i], (MPI_Aint)off[i], (int)c->rb, MPI_BYTE, c->win), "MPI_Get");
    touched[own[i]] = 1;
  }
  for (int q = 0; q < c->np; q++)
    if (touched[q]) mpi_check(MPI_Win_flush(q, c->win), "MPI_Win_flush");
}

/* Raw MPI_Alltoallv of the same bytes: every rank packs the rows its peers
 * asked it for (their lists are known in advance: no index exchange), one
 * MPI_Alltoallv moves them, rows land grouped by owner in `dst` (the rows a
 * rank holds itself are copied into its own slot). Collective. */
void floor_mpi_alltoallv(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int np = c->np, me = c->me;
  int *sc = c->a2a_counts, *sd = sc + np, *rc = sc + 2 * np, *rd = sc + 3 * np;
  int64_t need = (int64_t)(np - 1) * batch * c->rb;
  if (need > c->a2a_send_cap) { /* grows during the warm-up call, never while timed */
    free(c->a2a_send);
    c->a2a_send = xmalloc((size_t)(need ? need : 1));
    c->a2a_send_cap = need;
  }
  int64_t packed = 0;
  for (int q = 0; q < np; q++) {
    sc[q] = 0;
    sd[q] = (int)packed;
    if (q == me) continue;
    const int32_t *own = c->own[q] + cursor;
    const int64_t *off = c->off[q] + cursor;
    for (int i = 0; i < batch; i++)
      if (own[i] == me) {
        memcpy(c->a2a_send + packed * c->rb, c->mine + off[i], (size_t)c->rb);
        packed++;
        sc[q]++;
      }
  }
  const int32_t *own = c->own[me] + cursor;
  const int64_t *off = c->off[me] + cursor;
  for (int q = 0; q < np; q++) rc[q] = 0;
  for (int i = 0; i < batch; i++) rc[own[i]]++;
  int at = 0;
  for (int q = 0; q < np; q++) {
    rd[q] = at;
    at += rc[q];
  }
  int self = rd[me];
  for (int i = 0; i < batch; i++)
    if (own[i] == me) memcpy(dst + (int64_t)(self++) * c->rb, c->mine + off[i], (size_t)c->rb);
  rc[me] = 0;
  mpi_check(MPI_Alltoallv(c->a2a_send, sc, sd, c->row_t, dst, rc, rd, c->row_t, MPI_COMM_WORLD), "MPI_Alltoallv");
}

/* The raw fi_read floors of method 1 are in bench_fabric.c. */

void floors_mpi_setup(bench_ctx *c) {
  mpi_check(MPI_Win_create(c->mine, (MPI_Aint)(c->rows * c->rb), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &c->win),
            "MPI_Win_create");
  c->win_locked_all = 0;
  mpi_check(MPI_Type_contiguous((int)c->rb, MPI_BYTE, &c->row_t), "MPI_Type_contiguous");
  mpi_check(MPI_Type_commit(&c->row_t), "MPI_Type_commit");
  c->a2a_counts = xmalloc(sizeof(int) * 4 * (size_t)c->np);
  c->a2a_send = NULL;
  c->a2a_send_cap = 0;
}

void floors_mpi_lock_all(bench_ctx *c, int on) {
  if (on && !c->win_locked_all) mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, c->win), "MPI_Win_lock_all");
  if (!on && c->win_locked_all) mpi_check(MPI_Win_unlock_all(c->win), "MPI_Win_unlock_all");
  c->win_locked_all = on;
}

void floors_mpi_teardown(bench_ctx *c) {
  floors_mpi_lock_all(c, 0);
  MPI_Win_free(&c->win);
  MPI_Type_free(&c->row_t);
  free(c->a2a_counts);
  free(c->a2a_send);
  c->a2a_send = NULL;
  c->a2a_send_cap = 0;
}
