/* The benchmark's harness (harness.c): the types every part shares, the
 * options, and the helpers (errors, allocation, clocks, the fill pattern and
 * its check). It is the bottom layer: the floors (floors.h) and the other
 * figures' drivers (drivers.h) use it, bench.c (main and the timing run) uses
 * all three, and nothing here calls back up. See docs/dev/performance.md for what is
 * measured and why. */
#ifndef DDS_BENCH_HARNESS_H
#define DDS_BENCH_HARNESS_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ddstore.h"

/* Most reader threads of one measurement (store paths of method 1 and their
 * fi-read floors run with 1, 2 and 4). */
enum { BENCH_MAX_THREADS = 4 };
/* Index of the calling reader thread (0 on the main thread). */
extern _Thread_local int bench_tid;

typedef struct bench_fi bench_fi; /* bench_fabric.c */

/* Destinations of a read: reused (one malloc'd buffer), fresh (malloc per
 * call), registered (dds_register_recv), and reused buffers that start 0, 16
 * or 64 bytes past a page boundary (numpy's large arrays start at +16; the
 * library's copy must not depend on it; docs/dev/performance.md "Row copies"). */
enum { DEST_REUSED, DEST_FRESH, DEST_REGISTERED, DEST_PAGE0, DEST_PAGE16, DEST_PAGE64, N_DEST };
extern const char *const DEST_NAME[N_DEST];

/* Which rows a path leaves in its destination, for the verification: the
 * requested rows in request order; the same grouped by owner rank (request
 * order inside each owner), as a raw MPI_Alltoallv delivers them; or, for the
 * memcpy floor, the rows at the same offsets of this rank's own shard. */
enum { ORDER_REQUEST, ORDER_BY_OWNER, ORDER_LOCAL };

/* Settings of one run (command line). */
typedef struct {
  int quick;
  int repeats;             /* timed repeats per measurement */
  double min_repeat_s;     /* each repeat times calls for at least this long */
  int64_t shard_bytes;     /* per rank, for the timed part */
  int64_t max_batch_bytes; /* the batch sweep stops where batch x row > this */
  int n_sizes;
  int64_t sizes[8];
  const char *out_path;
  int append;
  const char *mem_mode; /* NULL (timing run), "add" or "chunked" */
  int overlap;          /* 1: the training-loop figure instead (bench_overlap.c) */
  int ragged;           /* 1: the ragged-variable figures instead (bench_ragged.c) */
  int64_t mem_bytes;    /* shard of the memory check */
  int64_t chunk_bytes;  /* chunk of the chunked memory check */
  double max_noise;      /* retry a group when other processes took more of the CPUs */
  int retries;
  int mem_node_local;   /* DDSTORE_NODE_LOCAL for the memory check; -1: as set */
  int thread_level;
  const char *only_paths;   /* comma-separated path names to run (NULL: all) */
  const char *only_methods; /* comma-separated method labels to run (NULL: all) */
  const char *only_priorities; /* --overlap: comma-separated request-thread policies (NULL: all) */
  const char *only_dests;   /* comma-separated destination kinds to run (NULL: all) */
} bench_opts;

/* Everything one row size needs: the data, the random rows, the floor window. */
typedef struct {
  int me, np;
  int64_t rb;          /* bytes per row (a multiple of 8) */
  int64_t rows;        /* rows per rank (equal shards) */
  int64_t total;       /* rows of the whole table */
  char *mine;          /* this rank's shard, filled with the pattern (floors read it) */
  int64_t pool_len;    /* random rows per rank in the pool */
  int64_t **idx;       /* idx[q][i]: i-th random global row of rank q */
  int32_t **own;       /* its owner */
  int64_t **off;       /* its byte offset inside the owner's shard */
  MPI_Win win;         /* floor window over `mine` */
  int win_locked_all;  /* 1 while the floor window is in a lock_all epoch */
  MPI_Datatype row_t;  /* one row, for the floor MPI_Alltoallv */
  /* Scratch of the MPI_Alltoallv floor. */
  char *a2a_send;
  int64_t a2a_send_cap;
  int *a2a_counts; /* 4 x np: scounts, sdispls, rcounts, rdispls */
  /* The shared-memory floor: every rank's shard in a segment, mapped by all. */
  char **shm;
  size_t shm_len;
  /* The fi-read floors' endpoint (NULL outside the fabric groups). */
  bench_fi *fi;
} bench_ctx;

/* One read call: `batch` rows, the pool rows [cursor, cursor + batch) of this
 * rank, into `dst`. `state` is the path's own data. */
typedef void (*read_fn)(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);

/* A measured path. */
typedef struct {
  const char *method; /* transport family: "mpi", "host", "fabric:..." */
  const char *path;   /* "store" or a floor name, e.g. "mpi-get-pipelined" */
  const char *op;     /* "get" (batch 1) or "get_batch" */
  int batch;
  int dest;
  int order;
  read_fn fn;
  void *state;
  dds_store *store; /* store paths: for dds_register_recv and dds_profile */
  const char *var;
  int threads; /* reader threads, each with its own destination and rows (0 means 1) */
} bench_path;

/* Statistics of one measurement (microseconds per row). */
typedef struct {
  double med, min, max;  /* this rank, over repeats */
  double max_rank_med;   /* max over ranks of each rank's median */
  int64_t calls;         /* calls per repeat */
  int repeats;
  int verified;          /* 1: every rank's verification read was correct */
} bench_stats;

/* harness.c. g_opt is parsed and g_me set by bench.c's main. */
extern bench_opts g_opt;
extern int g_me; /* this rank in MPI_COMM_WORLD, for messages */
/* True when `name` is one of the comma-separated `list` (NULL: every name). */
int bench_selected(const char *list, const char *name);
void die(const char *what, dds_status s);
#define TRY(call)                                 \
  do {                                            \
    dds_status st_ = (call);                      \
    if (st_ != DDS_OK) die(#call, st_);           \
  } while (0)
uint64_t pattern_word(int64_t g, int64_t k);
void fill_rows(char *buf, int64_t g0, int64_t rows, int64_t rb);
int64_t check_rows(const char *buf, const int64_t *gs, int64_t rows, int64_t rb);
double now_s(void);
/* The machine's CPU time so far from /proc/stat's "cpu" line, in clock
 * ticks: user nice system idle iowait irq softirq steal. 0 if unreadable. */
int machine_ticks(unsigned long long v[8]);
void *xmalloc(size_t n);

/* qsort order of doubles, and the median of v[0..n) (sorts v). */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
