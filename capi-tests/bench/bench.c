/* The libddstore benchmark (`make bench`): the store's reads through the C API
 * next to the floors of the same transports, in one run.
 *
 *   mpiexec -n 2 bench [--quick] [--out FILE] [--append] [--repeats N]
 *                      [--min-repeat-ms MS] [--shard-mib MIB] [--sizes B,B,...]
 *                      [--max-batch-mib MIB] [--thread single|multiple]
 *                      [--paths store,memcpy,...] [--methods mpi,fabric:shm,...] [--dests reused,...]
 *                      [--max-noise PCT] [--retries N]
 *   mpiexec -n 2 bench --mem add|chunked [--mem-mib MIB] [--chunk-mib MIB] [--mem-node-local 0|1]
 *                      [--out FILE --append]
 *   mpiexec -n 2 bench --overlap [--sizes B,B,...] [--methods L,L] [--priorities P,P]
 *                      [--out FILE --append]                                (bench_overlap.c)
 *   mpiexec -n 2 bench --ragged [--out FILE --append]                      (bench_ragged.c)
 *
 * Every rank runs the same configuration at the same time (symmetric load, as
 * in a data-parallel training step) and reads uniformly random global rows of
 * the whole table. For each measurement: `repeats` timed repeats, each of
 * enough calls to last at least `min_repeat_ms`; the figure is microseconds
 * per row per rank: rank 0's median (min and max over its repeats) and the
 * largest median over ranks. After timing, one more call of the same path is
 * verified row by row against the fill pattern. Method-1 store paths and
 * their floors also run with 2 and 4 reader threads per rank (figure: wall
 * time / rows of all threads); the floors of method 1 are raw fi_read on the
 * store's provider (bench_fabric.c).
 *
 * One JSON object per line goes to --out (default build/bench/results.jsonl);
 * a table goes to stdout. scripts/bench-report.py turns the file into
 * docs/dev/results.md and docs/dev/results.png. See docs/dev/performance.md.
 *
 * The files depend one way, bottom up: harness.c (options, errors, clocks,
 * the fill pattern); the floors (bench_floors.c, bench_fabric.c; floors.h)
 * and the other figures (bench_mem.c, bench_overlap.c, bench_ragged.c;
 * drivers.h), which use the harness only; and this file on top (main, the
 * methods, the timing run's groups), which uses them all. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "drivers.h"
#include "floors.h"
#include "harness.h"

static int g_np;
static int g_provided; /* MPI thread level; reader threads need MPI_THREAD_MULTIPLE */
static FILE *g_out;
static char g_hs_dir[1024];
static int g_failed;
static double g_noise; /* other processes' CPU share while the current group ran */
static int g_group_batch; /* batch of the current group; 0 for the single-row group */
static int g_ctx_shm;     /* the shared-memory floor is set up for this row size */
static int g_attempts, g_noisy;

/* ------------------------------------------------------------------ helpers */

/* Bytes past a page boundary where a page+N destination starts; -1 for the
 * others (malloc's own alignment). */
static int dest_page_offset(int dest) {
  return dest == DEST_PAGE0 ? 0 : dest == DEST_PAGE16 ? 16 : dest == DEST_PAGE64 ? 64 : -1;
}

static char *dest_alloc(int dest, size_t bytes) {
  int off = dest_page_offset(dest);
  if (off < 0) return xmalloc(bytes);
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytes + 4096) != 0) {
    fprintf(stderr, "bench rank %d: out of memory (%zu bytes, page-aligned)\n", g_me, bytes + 4096);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return (char *)p + off;
}

static void dest_free(int dest, char *p) {
  int off = dest_page_offset(dest);
  free(p && off > 0 ? p - off : p);
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static void loadavg(double la[3]) {
  la[0] = la[1] = la[2] = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = -1;
    fclose(f);
  }
}

/* Busy and total CPU time of the whole machine so far, in seconds (/proc/stat). */
static void machine_cpu(double *busy, double *total) {
  unsigned long long v[8] = {0};
  *busy = *total = 0;
  if (machine_ticks(v)) {
    double hz = (double)sysconf(_SC_CLK_TCK);
    unsigned long long idle = v[3] + v[4], all = 0;
    for (int i = 0; i < 8; i++) all += v[i];
    *busy = (double)(all - idle) / hz;
    *total = (double)all / hz;
  }
}

/* CPU time of this process so far, in seconds. */
static double own_cpu(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
         1e-6 * (double)u.ru_stime.tv_usec;
}

/* ------------------------------------------------------------------ methods */

/* Backends to benchmark. Each is probed with dds_create: DDS_ERR_UNSUPPORTED
 * (or any failure) means "not available here" and the run says why. To add a
 * method, provider or node-local path, add a row: `floors` are the floor
 * transports timed in the same group (interleaved with the store paths),
 * `single_floor` / `batch_floor` the floors its dds_get / dds_get_batch are
 * compared to (the primary one: the fastest of `single_floor`, the first of
 * `batch_floor`), `node_local` the DDSTORE_NODE_LOCAL setting of its stores
 * (node-local reads copy rows of same-node ranks from shared memory, so with
 * every rank on one node the transport is only used with it off). */
typedef struct {
  const char *label;
  int method;
  const char *provider; /* dds_options.fabric_provider (methods 1, 2) */
  int node_local;       /* DDSTORE_NODE_LOCAL for this store: 0 or 1 */
  const char *floors[3];
  const char *single_floor[3];
  const char *batch_floor[3];
  int needs_extra_job; /* method 2: readers are a separate job, not driven here yet */
  int batch_mode;      /* method 0: dds_options.batch_mode (DDS_BATCH_*) */
} bench_method;

static const bench_method METHODS[] = {
    /* Method 0 through MPI: node-local reads off, so remote rows use MPI RMA
     * (dds_get) and MPI_Alltoallv (dds_get_batch). */
    {"mpi", DDS_METHOD_MPI, NULL, 0, {"host", "mpi", NULL}, {"mpi-get-flush", "mpi-get-lock", NULL},
     {"mpi-get-pipelined", "mpi-alltoallv", NULL}, 0, DDS_BATCH_COLLECTIVE},
    /* Method 0 in the one-sided batch mode (issue 17), node-local reads off:
     * batches are pipelined MPI_Gets, so their floor is the pipelined get. */
    {"mpi onesided", DDS_METHOD_MPI, NULL, 0, {"host", "mpi", NULL}, {"mpi-get-flush", "mpi-get-lock", NULL},
     {"mpi-get-pipelined", NULL, NULL}, 0, DDS_BATCH_ONESIDED},
    /* Method 0 in the auto batch mode (issue 40): called as the collective
     * mode, each variable runs in the mode its checks found faster. Its
     * batches are compared with the same store in each fixed mode, timed in
     * the same groups (fixed-collective, fixed-onesided; see run_method). */
    {"mpi auto", DDS_METHOD_MPI, NULL, 0, {"host", "mpi", NULL}, {"mpi-get-flush", "mpi-get-lock", NULL},
     {"fixed-collective", "fixed-onesided", "mpi-get-pipelined"}, 0, DDS_BATCH_AUTO},
    /* Method 0 with node-local reads (the default): every row is copied from
     * shared memory, so the floor is memcpy from shared-memory segments
     * (memcpy-shm); memcpy from private memory is shown next to it. */
    {"mpi+local", DDS_METHOD_MPI, NULL, 1, {"host-shm", "host", NULL}, {"memcpy-shm", NULL, NULL},
     {"memcpy-shm", NULL, NULL}, 0, DDS_BATCH_COLLECTIVE},
    /* Method 1 (libfabric RDMA), node-local reads off: its floors are raw
     * fi_read on the store's own provider and domain (bench_fabric.c). */
    {"fabric:shm", DDS_METHOD_FABRIC, "shm", 0, {"fabric:shm", NULL, NULL}, {"fi-read-shm", NULL, NULL},
     {"fi-read-pipelined-shm", NULL, NULL}, 0, 0},
    {"fabric:tcp", DDS_METHOD_FABRIC, "tcp;ofi_rxm", 0, {"fabric:tcp", NULL, NULL}, {"fi-read-tcp", NULL, NULL},
     {"fi-read-pipelined-tcp", NULL, NULL}, 0, 0},
    /* Method 1 with node-local reads: one-sided batches copied from shared memory. */
    {"fabric+local", DDS_METHOD_FABRIC, "shm", 1, {"host-shm", "host", NULL}, {"memcpy-shm", NULL, NULL},
     {"memcpy-shm", NULL, NULL}, 0, DDS_BATCH_COLLECTIVE},
    /* Method 2 (split jobs): probed; timing it needs a second (extra) job. */
    {"split:shm", DDS_METHOD_SPLIT, "shm", 0, {NULL, NULL, NULL}, {"fi-read-shm", NULL, NULL},
     {"fi-read-pipelined-shm", NULL, NULL}, 1, 0},
};
enum { N_METHODS = sizeof METHODS / sizeof METHODS[0] };

static void request_bytes(bench_ctx *c, const bench_method *m, dds_store *s, const char *var);

/* Creates a store of method `m` over all ranks (collective). */
static dds_status create_store(const bench_method *m, dds_store **out) {
  dds_options o;
  TRY(dds_options_init(&o));
  o.method = m->method;
  o.fabric_provider = m->provider;
  o.handshake_dir = g_hs_dir; /* method 2: not the current directory */
  o.batch_mode = m->batch_mode;
  const char *old = getenv("DDSTORE_NODE_LOCAL");
  char *saved = old ? strdup(old) : NULL;
  setenv("DDSTORE_NODE_LOCAL", m->node_local ? "1" : "0", 1); /* read by dds_create */
  dds_status st = dds_create_comm(MPI_COMM_WORLD, &o, out);
  if (saved) setenv("DDSTORE_NODE_LOCAL", saved, 1);
  else unsetenv("DDSTORE_NODE_LOCAL");
  free(saved);
  return st;
}

/* ------------------------------------------------------------------- floors */

typedef struct {
  const char *transport; /* "host", "host-shm", "mpi" or "fabric:<provider>" */
  const char *name;
  read_fn fn;
  int single;   /* measured as a single-row op (batch 1) */
  int batch;    /* measured over the batch sweep */
  int lock_all; /* 1: needs the floor window in lock_all, 0: must not be, -1: either */
  int order;
  int fresh; /* also measured with fresh destinations (batch 1 and 128) */
  int threaded; /* safe to call from several reader threads at once */
} floor_def;

static const floor_def FLOORS[] = {
    {"host", "memcpy", floor_memcpy, 1, 1, -1, ORDER_LOCAL, 1, 1},
    {"host-shm", "memcpy-shm", floor_memcpy_shm, 1, 1, -1, ORDER_REQUEST, 1, 1},
    {"mpi", "mpi-get-lock", floor_mpi_get_lock, 1, 0, 0, ORDER_REQUEST, 0, 0},
    {"mpi", "mpi-get-flush", floor_mpi_get_flush, 1, 0, 1, ORDER_REQUEST, 1, 0},
    {"mpi", "mpi-get-pipelined", floor_mpi_get_pipelined, 0, 1, 1, ORDER_REQUEST, 1, 0},
    {"mpi", "mpi-alltoallv", floor_mpi_alltoallv, 0, 1, -1, ORDER_BY_OWNER, 0, 0},
    {"fabric:shm", "fi-read-shm", floor_fi_read, 1, 0, -1, ORDER_REQUEST, 1, 1},
    {"fabric:shm", "fi-read-pipelined-shm", floor_fi_read_pipelined, 0, 1, -1, ORDER_REQUEST, 1, 1},
    {"fabric:tcp", "fi-read-tcp", floor_fi_read, 1, 0, -1, ORDER_REQUEST, 1, 1},
    {"fabric:tcp", "fi-read-pipelined-tcp", floor_fi_read_pipelined, 0, 1, -1, ORDER_REQUEST, 1, 1},
};
enum { N_FLOORS = sizeof FLOORS / sizeof FLOORS[0] };

/* ------------------------------------------------------------------ results */

typedef struct {
  char group[32], method[32], path[40], op[16];
  int64_t rb;
  int batch, dest, threads;
  double med;
} result_row;

static const char *g_group = ""; /* label of the method whose group is running */

static int nthreads(const bench_path *p) { return p->threads > 1 ? p->threads : 1; }
static result_row *g_res;
static int g_nres, g_capres;

static void remember(const bench_path *p, int64_t rb, double med) {
  if (g_nres == g_capres) {
    g_capres = g_capres ? 2 * g_capres : 256;
    g_res = realloc(g_res, sizeof *g_res * (size_t)g_capres);
  }
  result_row *r = &g_res[g_nres++];
  snprintf(r->group, sizeof r->group, "%s", g_group);
  snprintf(r->method, sizeof r->method, "%s", p->method);
  snprintf(r->path, sizeof r->path, "%s", p->path);
  snprintf(r->op, sizeof r->op, "%s", p->op);
  r->rb = rb;
  r->batch = p->batch;
  r->dest = p->dest;
  r->threads = nthreads(p);
  r->med = med;
}

/* Median of a path at (rb, batch, threads): measured in the current group if
 * it was (same destination kind first, else reused), else in any group; -1
 * when it was not measured. */
static double lookup(const char *method, const char *path, const char *op, int64_t rb, int batch, int dest,
                     int threads) {
  double best[2][2] = {{-1, -1}, {-1, -1}}; /* [other group, this group][reused, same dest] */
  for (int i = 0; i < g_nres; i++) {
    result_row *r = &g_res[i];
    if (r->rb != rb || r->batch != batch || r->threads != threads || strcmp(r->path, path) != 0) continue;
    if (method && strcmp(r->method, method) != 0) continue;
    if (op && strcmp(r->op, op) != 0) continue;
    int here = strcmp(r->group, g_group) == 0;
    if (r->dest == dest) best[here][1] = r->med;
    if (r->dest == DEST_REUSED) best[here][0] = r->med;
  }
  for (int here = 1; here >= 0; here--)
    for (int same = 1; same >= 0; same--)
      if (best[here][same] > 0) return best[here][same];
  return -1;
}

/* -------------------------------------------------------------- measurement */

/* The paths compared with each other (a store path and its floors at one row
 * size and batch) are timed in one group, their repeats interleaved (ABCABC...),
 * so that a change of load during the run moves them all alike. */
typedef struct {
  bench_path p;
  int lock_all;  /* the floor window's state this path needs (-1: either) */
  /* Per reader thread: destination of reused/registered paths, next pool row. */
  char *reused[BENCH_MAX_THREADS];
  int64_t cursor[BENCH_MAX_THREADS];
  int64_t calls; /* per repeat and thread, the same on every rank */
  double *per;   /* us per row of each repeat */
  int prof;
  dds_counters before, after;
  const char *const *floors; /* what a store path is compared to (see finish) */
  int nfloors, nprimary;
} group_item;

enum { MAX_GROUP = 24 }; /* the batch-128 group: floors, dds_get, six destinations */

static int64_t advance(const bench_ctx *c, int64_t cursor, int batch) {
  cursor += batch;
  return cursor + batch > c->pool_len ? 0 : cursor;
}

static void call_once(bench_ctx *c, const bench_path *p, int64_t cursor, char *reused) {
  size_t bytes = (size_t)p->batch * (size_t)c->rb;
  char *dst = p->dest == DEST_FRESH ? xmalloc(bytes) : reused;
  p->fn(c, p->state, cursor, p->batch, dst);
  if (p->dest == DEST_FRESH) free(dst);
}

/* One call of the path at `cursor`, checked row by row; the number of wrong
 * rows. Local: the caller combines the ranks' verdicts. */
static int64_t check_call(bench_ctx *c, const bench_path *p, int64_t cursor, char *reused) {
  size_t bytes = (size_t)p->batch * (size_t)c->rb;
  char *dst = p->dest == DEST_FRESH ? xmalloc(bytes) : reused;
  memset(dst, 0, bytes);
  p->fn(c, p->state, cursor, p->batch, dst);
  const int64_t *idx = c->idx[c->me] + cursor;
  int64_t *want = xmalloc(sizeof(int64_t) * (size_t)p->batch);
  if (p->order == ORDER_REQUEST) {
    memcpy(want, idx, sizeof(int64_t) * (size_t)p->batch);
  } else if (p->order == ORDER_LOCAL) {
    for (int i = 0; i < p->batch; i++) want[i] = c->rows * c->me + c->off[c->me][cursor + i] / c->rb;
  } else {
    const int32_t *own = c->own[c->me] + cursor;
    int n = 0;
    for (int q = 0; q < c->np; q++)
      for (int i = 0; i < p->batch; i++)
        if (own[i] == q) want[n++] = idx[i];
  }
  int64_t bad = check_rows(dst, want, p->batch, c->rb);
  free(want);
  if (p->dest == DEST_FRESH) free(dst);
  return bad;
}

/* Reader threads: thread t makes `calls` calls of the item from its own
 * cursor into its own destination (t = 0 is the calling thread); with
 * `check`, one checked call each. The threads start and end together, so
 * the caller's wall time covers every thread's rows. */
typedef struct {
  bench_ctx *c;
  group_item *it;
  int tid, check;
  int64_t calls, bad;
} worker;

static void *worker_run(void *arg) {
  worker *w = arg;
  group_item *it = w->it;
  int t = w->tid;
  bench_tid = t;
  if (w->check) {
    w->bad = check_call(w->c, &it->p, it->cursor[t], it->reused[t]);
    return NULL;
  }
  for (int64_t k = 0; k < w->calls; k++) {
    call_once(w->c, &it->p, it->cursor[t], it->reused[t]);
    it->cursor[t] = advance(w->c, it->cursor[t], it->p.batch);
  }
  return NULL;
}

/* Runs the item on its threads; returns the wrong rows of a check. */
static int64_t run_threads(bench_ctx *c, group_item *it, int64_t calls, int check) {
  int n = nthreads(&it->p);
  worker w[BENCH_MAX_THREADS];
  pthread_t th[BENCH_MAX_THREADS];
  for (int t = 0; t < n; t++) w[t] = (worker){c, it, t, check, calls, 0};
  for (int t = 1; t < n; t++)
    if (pthread_create(&th[t], NULL, worker_run, &w[t]) != 0) {
      fprintf(stderr, "bench rank %d: cannot start reader thread %d: %s\n", g_me, t, strerror(errno));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  worker_run(&w[0]);
  int64_t bad = w[0].bad;
  for (int t = 1; t < n; t++) {
    pthread_join(th[t], NULL);
    bad += w[t].bad;
  }
  return bad;
}

static int verify(bench_ctx *c, group_item *it) {
  int ok = run_threads(c, it, 1, 1) == 0, all_ok;
  bench_sync(c); /* peers may still be reading from this rank */
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all_ok;
}

static int read_profile(const bench_path *p, dds_counters *out) {
  if (!p->store) return 0;
  out->struct_size = sizeof *out;
  TRY(dds_profile(p->store, p->var, out));
  return 1;
}

static void json_profile(FILE *f, const dds_counters *a, const dds_counters *b) {
  uint64_t rows = b->rows - a->rows;
  double per = rows ? 1.0 / (double)rows : 0;
  fprintf(f,
          ",\"profile\":{\"profiling\":%u,\"calls\":%llu,\"rows\":%llu,\"rows_local\":%llu,\"rows_remote\":%llu,"
          "\"read_ns_per_row\":%.1f,\"lock_wait_ns_per_row\":%.1f,\"mr_ns_per_row\":%.1f,\"cq_ns_per_row\":%.1f,"
          "\"mr_miss\":%llu,\"req_bytes_sent\":%llu,\"req_bytes_recv\":%llu,"
          "\"batch_checks\":%llu,\"batch_calls_onesided\":%llu,\"batch_mode\":%llu}",
          b->profiling, (unsigned long long)(b->calls - a->calls), (unsigned long long)rows,
          (unsigned long long)(b->rows_local - a->rows_local), (unsigned long long)(b->rows_remote - a->rows_remote),
          (double)(b->read_ns - a->read_ns) * per, (double)(b->lock_wait_ns - a->lock_wait_ns) * per,
          (double)(b->mr_ns - a->mr_ns) * per, (double)(b->cq_ns - a->cq_ns) * per,
          (unsigned long long)(b->mr_miss - a->mr_miss), (unsigned long long)(b->req_bytes_sent - a->req_bytes_sent),
          (unsigned long long)(b->req_bytes_recv - a->req_bytes_recv),
          (unsigned long long)(b->batch_checks - a->batch_checks),
          (unsigned long long)(b->batch_calls_onesided - a->batch_calls_onesided), (unsigned long long)b->batch_mode);
}

static void set_lock(bench_ctx *c, int lock_all) {
  if (lock_all >= 0) floors_mpi_lock_all(c, lock_all);
}

/* Warm-up call, then one timed call to size the repeats (the same number of
 * calls on every rank, so collective paths call together). */
static void prepare(bench_ctx *c, group_item *it) {
  bench_path *p = &it->p;
  size_t bytes = (size_t)p->batch * (size_t)c->rb;
  int n = nthreads(p);
  for (int t = 0; t < n; t++) {
    it->reused[t] = NULL;
    /* Threads start far apart in the pool: different random rows. */
    it->cursor[t] = t * (c->pool_len / n);
    if (p->dest == DEST_FRESH) continue;
    it->reused[t] = dest_alloc(p->dest, bytes);
    memset(it->reused[t], 0, bytes); /* fault the pages in before timing */
    if (p->dest == DEST_REGISTERED) TRY(dds_register_recv(p->store, p->var, it->reused[t], bytes));
    if (floors_fi_is(p->fn)) floors_fi_pin(c, t, it->reused[t], bytes); /* pre-registered, as a floor should be */
  }
  set_lock(c, it->lock_all);
  run_threads(c, it, 1, 0);
  bench_sync(c);
  double t0 = now_s();
  run_threads(c, it, 1, 0);
  double t1 = now_s() - t0, tmax;
  bench_sync(c);
  MPI_Allreduce(&t1, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  it->calls = (int64_t)ceil(g_opt.min_repeat_s / (tmax > 1e-7 ? tmax : 1e-7));
  if (it->calls < 1) it->calls = 1;
  if (it->calls > 2000000) it->calls = 2000000;
  it->per = xmalloc(sizeof(double) * (size_t)g_opt.repeats);
  it->prof = read_profile(p, &it->before);
}

static void repeat_once(bench_ctx *c, group_item *it, int r) {
  set_lock(c, it->lock_all);
  bench_sync(c);
  double t0 = now_s();
  run_threads(c, it, it->calls, 0);
  it->per[r] = (now_s() - t0) * 1e6 / (double)(it->calls * it->p.batch * nthreads(&it->p));
  if (c->fi) bench_sync(c); /* keep serving the peers' fi_reads until they are done */
}

/* Verifies, computes the statistics, remembers and writes the record.
 * `floors` are the paths it is compared to; the primary floor is the fastest
 * of the first `nprimary`. */
static void finish(bench_ctx *c, group_item *it, const char *const *floors, int nfloors, int nprimary) {
  bench_path *p = &it->p;
  if (it->prof) read_profile(p, &it->after);
  set_lock(c, it->lock_all);
  int ok = verify(c, it);
  for (int t = 0; t < nthreads(p); t++) {
    if (p->dest == DEST_REGISTERED) TRY(dds_unregister_recv(p->store, p->var, it->reused[t]));
    if (floors_fi_is(p->fn) && it->reused[t]) floors_fi_pin(c, t, NULL, 0);
    dest_free(p->dest, it->reused[t]);
  }

  int n = g_opt.repeats;
  qsort(it->per, (size_t)n, sizeof(double), bench_cmp_double);
  bench_stats s = {.med = n % 2 ? it->per[n / 2] : 0.5 * (it->per[n / 2 - 1] + it->per[n / 2]),
                   .min = it->per[0], .max = it->per[n - 1], .calls = it->calls, .repeats = n, .verified = ok};
  free(it->per);
  MPI_Allreduce(&s.med, &s.max_rank_med, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (!ok) g_failed = 1;
  remember(p, c->rb, s.med);
  if (g_me != 0) return;

  const char *fname = NULL;
  double fmed = -1;
  char ratios[512];
  int at = snprintf(ratios, sizeof ratios, "{");
  for (int i = 0; i < nfloors; i++) {
    double m;
    if (strcmp(floors[i], "store-get") == 0) { /* the same rows read one by one, into the same destination if measured */
      m = lookup(p->method, "store", "get", c->rb, p->batch, p->dest, nthreads(p));
      if (m <= 0) m = lookup(p->method, "store", "get", c->rb, 1, p->dest, nthreads(p));
    } else {
      m = lookup(NULL, floors[i], NULL, c->rb, p->batch, p->dest, nthreads(p));
    }
    if (m <= 0) continue;
    at += snprintf(ratios + at, sizeof ratios - (size_t)at, "%s\"%s\":%.4f", at > 1 ? "," : "", floors[i], s.med / m);
    if (i < nprimary && (!fname || m < fmed)) {
      fname = floors[i];
      fmed = m;
    }
  }
  snprintf(ratios + at, sizeof ratios - (size_t)at, "}");
  char gkind[32] = "single";
  if (g_group_batch) snprintf(gkind, sizeof gkind, "batch%d", g_group_batch);

  fprintf(g_out,
          "{\"type\":\"measure\",\"group\":\"%s\",\"group_key\":\"%s/%lld/%s\",\"kind\":\"%s\",\"method\":\"%s\",\"path\":\"%s\",\"op\":\"%s\",\"row_bytes\":%lld,"
          "\"batch\":%d,\"dest\":\"%s\",\"threads\":%d,\"ranks\":%d,\"repeats\":%d,\"calls_per_repeat\":%lld,"
          "\"us_per_row\":{\"median\":%.4f,\"min\":%.4f,\"max\":%.4f,\"max_rank_median\":%.4f},"
          "\"floor\":%s%s%s,\"ratio_to_floor\":",
          g_group, g_group, (long long)c->rb, gkind, p->store ? "store" : "floor", p->method, p->path, p->op, (long long)c->rb, p->batch, DEST_NAME[p->dest],
          nthreads(p), c->np, s.repeats, (long long)s.calls, s.med, s.min, s.max, s.max_rank_med, fname ? "\"" : "",
          fname ? fname : "null", fname ? "\"" : "");
  if (fname)
    fprintf(g_out, "%.4f", s.med / fmed);
  else
    fprintf(g_out, "null");
  fprintf(g_out, ",\"ratios\":%s,\"verified\":%s,\"other_cpu\":%.4f,\"attempts\":%d", ratios,
          ok ? "true" : "false", g_noise, g_attempts);
  if (it->prof) json_profile(g_out, &it->before, &it->after);
  fprintf(g_out, "}\n");
  fflush(g_out);

  char ratio_txt[64] = "";
  if (fname) snprintf(ratio_txt, sizeof ratio_txt, "%7.2fx %s", s.med / fmed, fname);
  printf("%-12s %-21s %-9s %7lld %4d %-10s %3d %9.3f %9.3f %9.3f %9.3f %4.0f%%  %s%s\n", p->method, p->path, p->op,
         (long long)c->rb, p->batch, DEST_NAME[p->dest], nthreads(p), s.med, s.min, s.max, s.max_rank_med, 100 * g_noise,
         ratio_txt, ok ? "" : "  VERIFY FAILED");
  fflush(stdout);
}

/* A group under construction: floors first (their records must exist before
 * the store's ratios are computed), then store paths. */
typedef struct {
  group_item items[MAX_GROUP];
  int n;
  const char *const *floors; /* for the store paths */
  int nfloors, nprimary;
} group;

static void add_item(group *g, bench_path p, int lock_all) {
  if (!bench_selected(g_opt.only_dests, DEST_NAME[p.dest])) return;
  if (g->n == MAX_GROUP) {
    fprintf(stderr, "bench: too many paths in one group\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  g->items[g->n].p = p;
  g->items[g->n].lock_all = lock_all;
  g->items[g->n].floors = g->floors;
  g->items[g->n].nfloors = g->nfloors;
  g->items[g->n].nprimary = g->nprimary;
  g->n++;
}

/* Share of the machine's CPU time that processes other than our ranks took
 * since `mark` (rank 0's view, broadcast); `mark` is then reset. */
typedef struct {
  double busy, total, own;
} cpu_mark;

static void cpu_mark_now(cpu_mark *m) {
  machine_cpu(&m->busy, &m->total);
  m->own = own_cpu();
}

static double other_share_since(const cpu_mark *m) {
  cpu_mark now;
  cpu_mark_now(&now);
  double own = now.own - m->own, own_all, share = 0;
  MPI_Allreduce(&own, &own_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (now.total > m->total) share = (now.busy - m->busy - own_all) / (now.total - m->total);
  if (share < 0) share = 0;
  MPI_Bcast(&share, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return share;
}

static void run_group(bench_ctx *c, group *g) {
  for (int i = 0; i < g->n; i++) prepare(c, &g->items[i]);
  /* Repeats, again (up to --retries times) when other processes took more
   * than --max-noise of the CPUs meanwhile (with one core per rank, any other
   * busy process turns figures into noise); the quietest attempt is kept. */
  double best = 2;
  double *keep = xmalloc(sizeof(double) * (size_t)(g->n * g_opt.repeats));
  for (int attempt = 0;; attempt++) {
    cpu_mark mark;
    cpu_mark_now(&mark);
    for (int r = 0; r < g_opt.repeats; r++)
      for (int i = 0; i < g->n; i++) repeat_once(c, &g->items[i], r);
    double noise = other_share_since(&mark);
    if (noise < best) { /* keep the quietest attempt */
      best = noise;
      for (int i = 0; i < g->n; i++)
        memcpy(keep + i * g_opt.repeats, g->items[i].per, sizeof(double) * (size_t)g_opt.repeats);
    }
    g_attempts = attempt + 1;
    if (noise <= g_opt.max_noise || attempt >= g_opt.retries) break;
    if (g_me == 0) {
      printf("# other processes took %.0f%% of the CPUs: timing this group again\n", 100 * noise);
      fflush(stdout);
    }
    sleep(3);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  g_noise = best;
  for (int i = 0; i < g->n; i++) memcpy(g->items[i].per, keep + i * g_opt.repeats, sizeof(double) * (size_t)g_opt.repeats);
  free(keep);
  if (g_noise > g_opt.max_noise) g_noisy++;
  for (int i = 0; i < g->n; i++)
    if (g->items[i].p.store)
      finish(c, &g->items[i], g->items[i].floors, g->items[i].nfloors, g->items[i].nprimary);
    else
      finish(c, &g->items[i], NULL, 0, 0);
  floors_mpi_lock_all(c, 0);
}

/* ------------------------------------------------------------- store paths */

typedef struct {
  dds_store *s;
  const char *var;
} store_state;

static void store_get(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  store_state *st = state;
  const int64_t *idx = c->idx[c->me] + cursor;
  for (int i = 0; i < batch; i++) TRY(dds_get(st->s, st->var, dst + (int64_t)i * c->rb, (size_t)c->rb, idx[i], 1));
}

static void store_get_batch(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  store_state *st = state;
  TRY(dds_get_batch(st->s, st->var, dst, (size_t)batch * (size_t)c->rb, c->idx[c->me] + cursor, batch));
}

/* ------------------------------------------------------------ one row size */

static void ctx_setup(bench_ctx *c, int64_t rb) {
  memset(c, 0, sizeof *c);
  c->me = g_me;
  c->np = g_np;
  c->rb = rb;
  c->rows = g_opt.shard_bytes / rb;
  if (c->rows < 1) c->rows = 1;
  c->total = c->rows * g_np;
  c->mine = xmalloc((size_t)(c->rows * rb));
  fill_rows(c->mine, c->rows * g_me, c->rows, rb);
  c->pool_len = g_opt.quick ? (1 << 14) : (1 << 18);
  /* Every rank draws every rank's rows from the same seeds, so the
   * MPI_Alltoallv floor knows its peers' requests without exchanging them. */
  c->idx = xmalloc(sizeof(int64_t *) * (size_t)g_np);
  c->own = xmalloc(sizeof(int32_t *) * (size_t)g_np);
  c->off = xmalloc(sizeof(int64_t *) * (size_t)g_np);
  for (int q = 0; q < g_np; q++) {
    uint64_t seed = 0x5EEDULL * (uint64_t)(q + 1) + (uint64_t)rb;
    c->idx[q] = xmalloc(sizeof(int64_t) * (size_t)c->pool_len);
    c->own[q] = xmalloc(sizeof(int32_t) * (size_t)c->pool_len);
    c->off[q] = xmalloc(sizeof(int64_t) * (size_t)c->pool_len);
    for (int64_t i = 0; i < c->pool_len; i++) {
      int64_t g = (int64_t)(splitmix(&seed) % (uint64_t)c->total);
      c->idx[q][i] = g;
      c->own[q][i] = (int32_t)(g / c->rows);
      c->off[q][i] = (g % c->rows) * rb;
    }
  }
  floors_mpi_setup(c);
  c->shm = NULL;
  g_ctx_shm = bench_selected(g_opt.only_paths, "memcpy-shm") && floors_shm_setup(c);
  if (!g_ctx_shm && g_me == 0 && bench_selected(g_opt.only_paths, "memcpy-shm"))
    printf("# floor memcpy-shm skipped: the ranks are not all on this node, or POSIX shared memory failed\n");
}

static void ctx_teardown(bench_ctx *c) {
  floors_mpi_teardown(c);
  floors_shm_teardown(c);
  for (int q = 0; q < c->np; q++) {
    free(c->idx[q]);
    free(c->own[q]);
    free(c->off[q]);
  }
  free(c->idx);
  free(c->own);
  free(c->off);
  free(c->mine);
}

/* Batch sizes of the sweep: powers of two up to 1024 and max_batch_bytes. */
static int sweep(int64_t rb, int *out) {
  int n = 0;
  for (int b = 1; b <= 1024; b *= 2) {
    if (g_opt.quick && b != 1 && b != 128) continue;
    if (b > 1 && (int64_t)b * rb > g_opt.max_batch_bytes && b != 128) continue;
    out[n++] = b;
  }
  return n;
}

/* Adds the floors of `transport` for batch `batch` (0: the single-op floors)
 * with destination `dest`, read by `threads` threads; batch < 0: the
 * single-op floors that have no batch form, -batch rows into one destination
 * of -batch rows. */
static void add_floors(bench_ctx *c, group *g, const char *transport, int batch, int dest, int threads) {
  for (int f = 0; f < N_FLOORS; f++) {
    const floor_def *fd = &FLOORS[f];
    if (strcmp(fd->transport, transport) != 0 || !bench_selected(g_opt.only_paths, fd->name)) continue;
    if (fd->fn == floor_memcpy_shm && !g_ctx_shm) continue;
    if (floors_fi_is(fd->fn) && !c->fi) continue;
    if (dest == DEST_FRESH && !fd->fresh) continue;
    if (threads > 1 && (!fd->threaded || batch < 0)) continue;
    if (batch == 0 && fd->single)
      add_item(g, (bench_path){fd->transport, fd->name, "get", 1, dest, fd->order, fd->fn, NULL, NULL, NULL, threads},
               fd->lock_all);
    if (batch > 0 && fd->batch)
      add_item(g, (bench_path){fd->transport, fd->name, "get_batch", batch, dest, fd->order, fd->fn, NULL, NULL, NULL,
                               threads},
               fd->lock_all);
    if (batch < 0 && fd->single && !fd->batch)
      add_item(g, (bench_path){fd->transport, fd->name, "get", -batch, dest, fd->order, fd->fn, NULL, NULL, NULL, 1},
               fd->lock_all);
  }
}

/* The fi-read floors of a fabric method, on the provider and domain its
 * store chose (from dds_info's transport, "fabric:<provider>@<domain>");
 * without a store, on the method's provider and FABRIC_IFACE. Collective. */
static void fi_floors_setup(bench_ctx *c, const bench_method *m, const dds_var_info *info) {
  int want = 0;
  for (int t = 0; t < 3 && m->floors[t]; t++)
    for (int f = 0; f < N_FLOORS; f++)
      want |= floors_fi_is(FLOORS[f].fn) && !strcmp(FLOORS[f].transport, m->floors[t]) &&
              bench_selected(g_opt.only_paths, FLOORS[f].name);
  if (!want) return;
  char prov[64], dom[64] = "";
  snprintf(prov, sizeof prov, "%s", m->provider);
  const char *iface = getenv("FABRIC_IFACE");
  if (info && !strncmp(info->transport, "fabric:", 7) && strchr(info->transport, '@')) {
    const char *at = strrchr(info->transport, '@');
    snprintf(prov, sizeof prov, "%.*s", (int)(at - info->transport - 7), info->transport + 7);
    snprintf(dom, sizeof dom, "%s", at + 1);
  } else if (strcmp(prov, "shm") != 0 && iface && *iface) {
    snprintf(dom, sizeof dom, "%s", iface);
  }
  if (floors_fi_setup(c, prov, dom) && g_me == 0 && c->rb == g_opt.sizes[0])
    printf("# %s: store on %s, fi-read floors on fabric:%s\n", m->label, info ? info->transport : "(not run)",
           floors_fi_name(c));
}

/* Batches of `b` rows of st->var until its first auto-mode check is done
 * (dds_counters.batch_checks is the same on every rank, so every rank makes
 * the same calls). */
static void auto_first_check(bench_ctx *c, store_state *st, int b) {
  char *dst = xmalloc((size_t)b * (size_t)c->rb);
  dds_counters k = {.struct_size = sizeof k};
  for (int64_t cursor = 0; k.batch_checks == 0; cursor = advance(c, cursor, b)) {
    store_get_batch(c, st, cursor, b, dst);
    TRY(dds_profile(st->s, st->var, &k));
  }
  free(dst);
}

/* After a cell of the auto mode: the mode its variable ended in, the
 * checks made and the share of its batches that ran one-sided (a check's
 * batches in the mode not chosen are the auto mode's price; printed so a
 * cell off its better fixed mode shows whether it chose wrong or paid for
 * checks). */
static void auto_summary(bench_ctx *c, store_state *st, int b) {
  dds_counters k = {.struct_size = sizeof k};
  TRY(dds_profile(st->s, st->var, &k));
  if (g_me == 0)
    printf("# auto %lld B batch %d: %s, %llu checks, %llu of %llu batches one-sided\n", (long long)c->rb, b,
           k.batch_mode == DDS_BATCH_ONESIDED ? "one-sided" : "collective", (unsigned long long)k.batch_checks,
           (unsigned long long)k.batch_calls_onesided, (unsigned long long)k.calls);
}

/* The auto method's fixed-mode twins, as paths of its batch groups. */
static const char *const TWIN_PATH[2] = {"fixed-collective", "fixed-onesided"};

/* Reader threads of method-1 store paths and their floors (besides 1). */
static const int THREADS[] = {2, 4};

/* One method at one row size: its store next to the floors of its transports. */
static void run_method(bench_ctx *c, const bench_method *m) {
  int do_store = bench_selected(g_opt.only_paths, "store");
  dds_store *s = NULL;
  char var[32];
  snprintf(var, sizeof var, "rows%lld", (long long)c->rb);
  g_group = m->label;
  dds_var_info info = {.struct_size = sizeof info};
  if (do_store) {
    TRY(create_store(m, &s));
    TRY(dds_add(s, var, c->mine, (size_t)(c->rows * c->rb), c->rows, c->rb / 8, 8));
    TRY(dds_info(s, var, &info));
    if (info.total_rows != c->total || info.node_local != m->node_local) {
      fprintf(stderr, "bench: %s of %s has %lld rows (expected %lld), node_local %d (expected %d)\n", var, m->label,
              (long long)info.total_rows, (long long)c->total, info.node_local, m->node_local);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  /* The auto method's fixed-mode twins: the same store in each fixed mode. */
  store_state twin[2] = {{NULL, NULL}, {NULL, NULL}};
  for (int k = 0; do_store && m->batch_mode == DDS_BATCH_AUTO && k < 2; k++) {
    bench_method fixed = *m;
    fixed.batch_mode = k == 0 ? DDS_BATCH_COLLECTIVE : DDS_BATCH_ONESIDED;
    TRY(create_store(&fixed, &twin[k].s));
  }
  fi_floors_setup(c, m, do_store ? &info : NULL);
  /* Method 1 reads and method-0 one-sided batches are thread-safe: also with 2 and 4 threads. */
  int n_thr = (m->method == DDS_METHOD_FABRIC || m->batch_mode == DDS_BATCH_ONESIDED) && g_provided >= MPI_THREAD_MULTIPLE ? 2 : 0;
  store_state st = {s, var};
  const char *single_f[5], *batch_f[6];
  int ns = 0, nbf = 0;
  int has_memcpy_s = 0, has_memcpy_b = 0;
  for (int i = 0; i < 3 && m->single_floor[i]; i++) {
    single_f[ns++] = m->single_floor[i];
    has_memcpy_s |= !strcmp(m->single_floor[i], "memcpy");
  }
  int nsp = ns;
  if (!has_memcpy_s) single_f[ns++] = "memcpy";
  for (int i = 0; i < 3 && m->batch_floor[i]; i++) {
    batch_f[nbf++] = m->batch_floor[i];
    has_memcpy_b |= !strcmp(m->batch_floor[i], "memcpy");
  }
  if (!has_memcpy_b) batch_f[nbf++] = "memcpy";
  batch_f[nbf++] = "store-get";

  /* Single rows. */
  group g = {.n = 0, .floors = single_f, .nfloors = ns, .nprimary = nsp};
  g_group_batch = 0;
  for (int dest = DEST_REUSED; dest <= DEST_FRESH; dest++) {
    for (int t = 0; t < 3 && m->floors[t]; t++) add_floors(c, &g, m->floors[t], 0, dest, 1);
  }
  if (do_store)
    for (int dest = 0; dest <= DEST_REGISTERED; dest++)
      add_item(&g, (bench_path){m->label, "store", "get", 1, dest, ORDER_REQUEST, store_get, &st, s, var, 1}, -1);
  for (int k = 0; k < n_thr; k++) { /* reused destinations, one per thread */
    for (int t = 0; t < 3 && m->floors[t]; t++) add_floors(c, &g, m->floors[t], 0, DEST_REUSED, THREADS[k]);
    if (do_store)
      add_item(&g, (bench_path){m->label, "store", "get", 1, DEST_REUSED, ORDER_REQUEST, store_get, &st, s, var,
                                THREADS[k]},
               -1);
  }
  run_group(c, &g);

  /* Batches. */
  int batches[16], nb = sweep(c->rb, batches);
  for (int i = 0; i < nb; i++) {
    int b = batches[i];
    /* The auto mode decides per variable (a training loop reads one
     * variable at one batch size): each batch size reads a variable of its
     * own, from after its first check, as fixed modes' cells start warm. */
    store_state sb = st;
    char var_b[48];
    if (do_store && m->batch_mode == DDS_BATCH_AUTO) {
      snprintf(var_b, sizeof var_b, "%s_batch%d", var, b);
      for (int k = 0; k < 3; k++)
        TRY(dds_add(k < 2 ? twin[k].s : s, var_b, c->mine, (size_t)(c->rows * c->rb), c->rows, c->rb / 8, 8));
      sb.var = twin[0].var = twin[1].var = var_b;
      auto_first_check(c, &sb, b);
    }
    group gb = {.n = 0, .floors = batch_f, .nfloors = nbf, .nprimary = m->batch_mode == DDS_BATCH_AUTO ? 2 : 1};
    /* Auto against both fixed modes in the same group (their repeats
     * interleaved, so a change of the machine's state meanwhile touches all
     * three): its ratio_to_floor is auto / the better fixed mode. */
    for (int k = 0; do_store && m->batch_mode == DDS_BATCH_AUTO && k < 2; k++)
      add_item(&gb, (bench_path){m->label, TWIN_PATH[k], "get_batch", b, DEST_REUSED, ORDER_REQUEST, store_get_batch,
                                 &twin[k], NULL, NULL, 1},
               -1);
    g_group_batch = b;
    for (int dest = DEST_REUSED; dest <= (b == 128 ? DEST_FRESH : DEST_REUSED); dest++) {
      for (int t = 0; t < 3 && m->floors[t]; t++) add_floors(c, &gb, m->floors[t], b, dest, 1);
    }
    if (b == 128) {
      /* The same 128 rows read one by one into the same 128-row destination:
       * what "a batch is never slower than single reads" compares with (a
       * 1-row destination stays in cache, a 128-row one need not). */
      for (int t = 0; t < 3 && m->floors[t]; t++) add_floors(c, &gb, m->floors[t], -b, DEST_REUSED, 1);
      if (do_store) {
        gb.floors = single_f, gb.nfloors = ns, gb.nprimary = nsp;
        add_item(&gb, (bench_path){m->label, "store", "get", b, DEST_REUSED, ORDER_REQUEST, store_get, &st, s, var, 1},
                 -1);
        gb.floors = batch_f, gb.nfloors = nbf, gb.nprimary = 1;
      }
    }
    if (do_store)
      for (int dest = 0; dest < (b == 128 ? N_DEST : 1); dest++)
        add_item(&gb,
                 (bench_path){m->label, "store", "get_batch", b, dest, ORDER_REQUEST, store_get_batch, &sb, s, sb.var,
                              1},
                 -1);
    for (int k = 0; b == 128 && k < n_thr; k++) {
      for (int t = 0; t < 3 && m->floors[t]; t++) add_floors(c, &gb, m->floors[t], b, DEST_REUSED, THREADS[k]);
      if (do_store)
        add_item(&gb, (bench_path){m->label, "store", "get_batch", b, DEST_REUSED, ORDER_REQUEST, store_get_batch, &st,
                                   s, var, THREADS[k]},
                 -1);
    }
    run_group(c, &gb);
    if (sb.var != var) {
      auto_summary(c, &sb, b);
      for (int k = 0; k < 3; k++) TRY(dds_remove(k < 2 ? twin[k].s : s, sb.var));
    }
  }
  for (int k = 0; k < 2; k++)
    if (twin[k].s) TRY(dds_destroy(twin[k].s));
  if (s && m->method == DDS_METHOD_MPI) request_bytes(c, m, s, var);
  floors_fi_teardown(c);
  if (s) TRY(dds_destroy(s));
}

/* Method 0: request bytes (dds_counters.req_bytes_*) per batch of 128
 * random rows, measured on their own (the timed groups interleave paths, so
 * their counters mix calls): printed and written as a "reqbytes" record. */
static void request_bytes(bench_ctx *c, const bench_method *m, dds_store *s, const char *var) {
  enum { NB = 20, B = 128 };
  int64_t idx[B];
  char *dst = malloc((size_t)B * (size_t)c->rb);
  unsigned long long x = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)(c->me + 1) * 1000003ULL;
  dds_counters a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
  TRY(dds_profile(s, var, &a));
  for (int k = 0; k < NB; k++) {
    for (int i = 0; i < B; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      idx[i] = (int64_t)(x % (unsigned long long)c->total);
    }
    TRY(dds_get_batch(s, var, dst, (size_t)B * (size_t)c->rb, idx, B));
  }
  TRY(dds_profile(s, var, &b));
  free(dst);
  double sent = (double)(b.req_bytes_sent - a.req_bytes_sent) / NB, recv = (double)(b.req_bytes_recv - a.req_bytes_recv) / NB;
  if (c->me == 0) {
    printf("%-12s request bytes per batch of %d random rows (%lld-byte rows): sent %.0f, received %.0f\n", m->label, B,
           (long long)c->rb, sent, recv);
    fprintf(g_out, "{\"type\":\"reqbytes\",\"group\":\"%s\",\"row_bytes\":%lld,\"batch\":%d,\"batches\":%d,"
                   "\"sent_per_batch\":%.1f,\"recv_per_batch\":%.1f,\"ranks\":%d}\n",
            m->label, (long long)c->rb, B, NB, sent, recv, c->np);
  }
}

/* ------------------------------------------------------------------- driver */

static void usage(void) {
  fprintf(stderr,
          "usage: bench [--quick] [--out FILE] [--append] [--repeats N] [--min-repeat-ms MS]\n"
          "             [--shard-mib MIB] [--sizes B,B,...] [--max-batch-mib MIB] [--thread single|multiple]\n"
          "             [--paths store,memcpy,mpi-get-lock,...] [--methods mpi,fabric:shm,...] [--dests reused,...]\n"
          "             [--max-noise PCT] [--retries N]\n"
          "       bench --mem add|chunked [--mem-mib MIB] [--chunk-mib MIB] [--mem-node-local 0|1] [--out FILE] [--append]\n"
          "       bench --overlap [--sizes B,B,...] [--methods L,L] [--priorities P,P] [--out FILE] [--append]\n"
          "       bench --ragged [--out FILE] [--append]\n");
}

static int parse(int argc, char **argv) {
  bench_opts *o = &g_opt;
  o->repeats = 9;
  o->min_repeat_s = 0.020;
  o->shard_bytes = 256LL << 20;
  o->max_batch_bytes = 64LL << 20;
  o->n_sizes = 4;
  o->sizes[0] = 3072, o->sizes[1] = 12800, o->sizes[2] = 204800, o->sizes[3] = 1048576;
  o->out_path = "build/bench/results.jsonl";
  o->mem_bytes = 1LL << 30;
  o->chunk_bytes = 64LL << 20;
  o->thread_level = MPI_THREAD_MULTIPLE;
  o->mem_node_local = -1;
  o->max_noise = 0.10;
  o->retries = 2;
  int sizes_given = 0, repeats_given = 0, ms_given = 0, shard_given = 0, retries_given = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV \
  if (!v) return 0;  \
  i++
    if (!strcmp(a, "--quick")) o->quick = 1;
    else if (!strcmp(a, "--append")) o->append = 1;
    else if (!strcmp(a, "--paths")) { NEEDV; o->only_paths = v; }
    else if (!strcmp(a, "--methods")) { NEEDV; o->only_methods = v; }
    else if (!strcmp(a, "--dests")) { NEEDV; o->only_dests = v; }
    else if (!strcmp(a, "--out")) { NEEDV; o->out_path = v; }
    else if (!strcmp(a, "--repeats")) { NEEDV; o->repeats = atoi(v); repeats_given = 1; }
    else if (!strcmp(a, "--min-repeat-ms")) { NEEDV; o->min_repeat_s = atof(v) / 1000; ms_given = 1; }
    else if (!strcmp(a, "--shard-mib")) { NEEDV; o->shard_bytes = (int64_t)(atof(v) * (1 << 20)); shard_given = 1; }
    else if (!strcmp(a, "--max-batch-mib")) { NEEDV; o->max_batch_bytes = (int64_t)(atof(v) * (1 << 20)); }
    else if (!strcmp(a, "--mem")) { NEEDV; o->mem_mode = v; }
    else if (!strcmp(a, "--overlap")) o->overlap = 1;
    else if (!strcmp(a, "--priorities")) { NEEDV; o->only_priorities = v; }
    else if (!strcmp(a, "--ragged")) o->ragged = 1;
    else if (!strcmp(a, "--mem-mib")) { NEEDV; o->mem_bytes = (int64_t)(atof(v) * (1 << 20)); }
    else if (!strcmp(a, "--chunk-mib")) { NEEDV; o->chunk_bytes = (int64_t)(atof(v) * (1 << 20)); }
    else if (!strcmp(a, "--max-noise")) { NEEDV; o->max_noise = atof(v) / 100; }
    else if (!strcmp(a, "--retries")) { NEEDV; o->retries = atoi(v); retries_given = 1; }
    else if (!strcmp(a, "--mem-node-local")) { NEEDV; o->mem_node_local = atoi(v) != 0; }
    else if (!strcmp(a, "--thread")) {
      NEEDV;
      if (!strcmp(v, "single")) o->thread_level = MPI_THREAD_SINGLE;
      else if (!strcmp(v, "multiple")) o->thread_level = MPI_THREAD_MULTIPLE;
      else return 0;
    } else if (!strcmp(a, "--sizes")) {
      NEEDV;
      o->n_sizes = 0;
      for (char *s = (char *)v; *s && o->n_sizes < 8;) {
        o->sizes[o->n_sizes++] = strtoll(s, &s, 10);
        if (*s == ',') s++;
        else if (*s) return 0;
      }
      sizes_given = 1;
    } else return 0;
#undef NEEDV
  }
  if (o->quick) {
    if (!repeats_given) o->repeats = 3;
    if (!ms_given) o->min_repeat_s = 0.002;
    if (!shard_given) o->shard_bytes = 4LL << 20;
    if (!sizes_given) o->n_sizes = 2, o->sizes[0] = 3072, o->sizes[1] = 204800;
    o->max_batch_bytes = 32LL << 20;
    if (!retries_given) o->retries = 0; /* a smoke test times nothing worth repeating */
  }
  if (o->repeats < 1 || o->min_repeat_s < 0 || o->shard_bytes < 8 || o->n_sizes < 1) return 0;
  for (int i = 0; i < o->n_sizes; i++)
    if (o->sizes[i] < 8 || o->sizes[i] % 8 || o->sizes[i] > (1LL << 30)) {
      fprintf(stderr, "bench: row sizes must be positive multiples of 8 bytes up to 1 GiB\n");
      return 0;
    }
  if (o->mem_mode && strcmp(o->mem_mode, "add") && strcmp(o->mem_mode, "chunked")) return 0;
  return 1;
}

static FILE *open_out(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", g_opt.out_path);
  for (char *s = dir + 1; *s; s++) /* mkdir -p of the parent */
    if (*s == '/') {
      *s = 0;
      if (mkdir(dir, 0777) != 0 && errno != EEXIST) break;
      *s = '/';
    }
  FILE *f = fopen(g_opt.out_path, g_opt.append ? "a" : "w");
  if (!f) {
    fprintf(stderr, "bench: cannot open %s: %s\n", g_opt.out_path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return f;
}

/* Makes a string safe inside JSON quotes (no quotes, backslashes, controls). */
static void json_clean(char *s) {
  for (; *s; s++)
    if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) *s = ' ';
}

static void cpu_model(char *out, size_t n) {
  snprintf(out, n, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10)) {
      char *v = strchr(line, ':');
      if (v) {
        v += 1 + (v[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        json_clean(v);
        snprintf(out, n, "%s", v);
      }
      break;
    }
  fclose(f);
}

static const char *env_or(const char *k, const char *d) {
  const char *v = getenv(k);
  return v ? v : d;
}

int main(int argc, char **argv) {
  int provided;
  int ok_args = parse(argc, argv);
  MPI_Init_thread(&argc, &argv, g_opt.thread_level, &provided);
  g_provided = provided;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_me);
  MPI_Comm_size(MPI_COMM_WORLD, &g_np);
  if (!ok_args) {
    if (g_me == 0) usage();
    MPI_Finalize();
    return 2;
  }
  if (g_me == 0) g_out = open_out();
  snprintf(g_hs_dir, sizeof g_hs_dir, "%s", g_opt.out_path);
  char *slash = strrchr(g_hs_dir, '/');
  snprintf(slash ? slash + 1 : g_hs_dir, sizeof g_hs_dir - (size_t)(slash ? slash + 1 - g_hs_dir : 0), "ddstore_hs");
  if (g_opt.mem_mode || g_opt.overlap || g_opt.ragged) {
    int rc = g_opt.mem_mode ? mem_check(g_out) : g_opt.ragged ? ragged_check(g_out) : overlap_check(g_out);
    if (g_out) fclose(g_out);
    MPI_Finalize();
    return rc;
  }

  double la0[3], la1[3], t_start = now_s(), busy0, total0, own0 = own_cpu();
  loadavg(la0);
  machine_cpu(&busy0, &total0);
  if (g_me == 0) {
    char host[256] = "", cpu[256], date[64];
    gethostname(host, sizeof host - 1);
    cpu_model(cpu, sizeof cpu);
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    char mpiver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpiver, &len);
    mpiver[strcspn(mpiver, "\n")] = 0;
    json_clean(mpiver);
    json_clean(host);
    printf("libddstore %s benchmark: %d ranks, %ld CPUs (%s), load average %.2f %.2f %.2f, %s\n", dds_version(), g_np,
           ncpu, cpu, la0[0], la0[1], la0[2], g_opt.quick ? "quick" : "full");
    if (la0[0] > 0.5 * (double)ncpu)
      printf("WARNING: the machine is busy (load %.2f on %ld CPUs): figures will be noisy\n", la0[0], ncpu);
    fprintf(g_out,
            "{\"type\":\"meta\",\"version\":\"%s\",\"date\":\"%s\",\"host\":\"%s\",\"cpu\":\"%s\",\"cpus\":%ld,"
            "\"ranks\":%d,\"quick\":%s,\"repeats\":%d,\"min_repeat_ms\":%.1f,\"shard_bytes\":%lld,"
            "\"max_batch_bytes\":%lld,\"thread_level\":\"%s\",\"mpi\":\"%s\",\"loadavg_start\":[%.2f,%.2f,%.2f],"
            "\"env\":{\"UCX_TLS\":\"%s\",\"DDSTORE_ALLTOALL_MAX_BYTES\":\"%s\",\"DDSTORE_PROFILE\":\"%s\"}}\n",
            dds_version(), date, host, cpu, ncpu, g_np, g_opt.quick ? "true" : "false", g_opt.repeats,
            g_opt.min_repeat_s * 1e3, (long long)g_opt.shard_bytes, (long long)g_opt.max_batch_bytes,
            provided >= MPI_THREAD_MULTIPLE ? "multiple" : provided == MPI_THREAD_SINGLE ? "single" : "other",
            mpiver, la0[0], la0[1], la0[2], env_or("UCX_TLS", ""), env_or("DDSTORE_ALLTOALL_MAX_BYTES", ""),
            env_or("DDSTORE_PROFILE", ""));
  }

  /* Which methods this build serves: try to create a store with each. */
  int avail[N_METHODS];
  for (int i = 0; i < N_METHODS; i++) {
    dds_store *s = NULL;
    dds_status st = create_store(&METHODS[i], &s);
    avail[i] = st == DDS_OK && !METHODS[i].needs_extra_job;
    const char *why = st == DDS_OK ? "available, but its readers are a separate job that this program does not start yet"
                                   : dds_last_error();
    if (st == DDS_OK) TRY(dds_destroy(s));
    if (g_me == 0 && !avail[i]) {
      printf("skipped method %d (%s): %s: %s\n", METHODS[i].method, METHODS[i].label,
             st == DDS_OK ? "DDS_OK" : dds_status_string(st), why);
      fprintf(g_out, "{\"type\":\"skip\",\"method\":\"%s\",\"method_code\":%d,\"status\":\"%s\",\"reason\":\"",
              METHODS[i].label, METHODS[i].method, st == DDS_OK ? "DDS_OK" : dds_status_string(st));
      for (const char *s2 = why; *s2; s2++) /* JSON-escape the message */
        if (*s2 == '"' || *s2 == '\\') fprintf(g_out, "\\%c", *s2);
        else if ((unsigned char)*s2 >= 0x20) fputc(*s2, g_out);
      fprintf(g_out, "\"}\n");
    }
  }

  if (g_me == 0)
    printf("\n%-12s %-21s %-9s %7s %4s %-10s %3s %9s %9s %9s %9s %5s  %s\n", "method", "path", "op", "row_B", "batch",
           "dest", "thr", "us/row", "min", "max", "max-rank", "other", "ratio to floor");
  for (int k = 0; k < g_opt.n_sizes; k++) {
    bench_ctx c;
    double t0 = now_s();
    ctx_setup(&c, g_opt.sizes[k]);
    for (int i = 0; i < N_METHODS; i++)
      if (avail[i] && bench_selected(g_opt.only_methods, METHODS[i].label)) run_method(&c, &METHODS[i]);
    ctx_teardown(&c);
    if (g_me == 0) printf("# row size %lld done in %.1f s\n", (long long)g_opt.sizes[k], now_s() - t0);
  }

  /* CPU time that other processes took from the machine during the run (our
   * ranks' own CPU time, busy polling included, subtracted): the noise gauge. */
  double own = own_cpu() - own0, own_all, busy1, total1;
  MPI_Allreduce(&own, &own_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  machine_cpu(&busy1, &total1);
  loadavg(la1);
  int failed;
  MPI_Allreduce(&g_failed, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_me == 0) {
    double other = total1 > total0 ? (busy1 - busy0 - own_all) / (total1 - total0) : 0;
    if (other < 0) other = 0;
    fprintf(g_out,
            "{\"type\":\"end\",\"loadavg_end\":[%.2f,%.2f,%.2f],\"seconds\":%.1f,\"other_cpu_share\":%.4f,"
            "\"noisy_groups\":%d,\"max_noise\":%.3f,\"verified\":%s}\n",
            la1[0], la1[1], la1[2], now_s() - t_start, other, g_noisy, g_opt.max_noise, failed ? "false" : "true");
    fclose(g_out);
    printf("load average at the end %.2f %.2f %.2f; %.1f s; other processes used %.1f%% of the CPUs (%d groups "
           "above %.0f%% after retries); every read verified: %s\n",
           la1[0], la1[1], la1[2], now_s() - t_start, 100 * other, g_noisy, 100 * g_opt.max_noise,
           failed ? "NO (see above)" : "yes");
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}
