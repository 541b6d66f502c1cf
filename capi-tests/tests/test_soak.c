/* Soak test: many threads x many reads of several variables with different
 * row sizes, every byte of every row checked, while some threads keep
 * registering and unregistering destination buffers.
 *
 * Knobs (environment; the arguments --threads N --batches M --seed S
 * --max-batch B override them):
 *   DDS_SOAK_THREADS    reading threads per rank (default 8)
 *   DDS_SOAK_BATCHES    iterations per thread (default 600: about 20-40 s
 *                       for 2 ranks on a 2-core machine; lower it for quick
 *                       runs, raise it for longer soaks)
 *   DDS_SOAK_MAX_BATCH  largest batch, in rows (default 512)
 *   DDS_SOAK_SEED       seed (default 20261129); printed, so a failing run
 *                       can be replayed (the calls each thread makes depend
 *                       only on the seed, rank and thread; the interleaving
 *                       of threads does not)
 *   DDS_SOAK_RACE_ROUNDS  rounds of the same-buffer register/unregister
 *                       race at the end (default 50000)
 *   DDS_TEST_METHOD     0 (threads use dds_get; the main thread runs
 *                       collective batches meanwhile; with
 *                       DDSTORE_BATCH_MODE=onesided threads use batches too
 *                       and the main thread's are one-sided), 1, or 2 (core member)
 *
 * Every iteration of a method-1/2 thread is one dds_get_batch of 1..max
 * rows (random rows, repeats, ascending runs) or a dds_get of a range, into
 * a destination that cycles through a fresh malloc'd buffer, a reused one
 * and a slice of a registered pool. Threads whose id is 3 mod 4 also
 * register a fresh buffer, read into it, check the registration errors and
 * unregister it, every iteration. At the end (methods 1, 2) two threads
 * register and unregister one buffer at once (test_register_race). */
#include <pthread.h>
#include <stdint.h>

#include "common.h"

/* The variables: row sizes from 7 bytes to 12004 bytes, and one with no rows
 * on odd ranks. */
struct var {
  const char *name;
  int item;
  int64_t elems, base_rows;
  int empty_on_odd;
};
static const struct var vars[] = {
    {"b7", 1, 7, 5000, 0},
    {"s10", 2, 5, 777, 1},
    {"d2400", 8, 300, 400, 0},
    {"f12004", 4, 3001, 60, 0},
};
enum { NVARS = sizeof vars / sizeof vars[0] };
static int64_t *first_row[NVARS]; /* first global row of each rank, t_size + 1 entries */

static int n_threads = 8, n_batches = 600, max_batch = 512, race_rounds = 50000;
static unsigned long long seed = 20261129ULL;
static dds_store *store;
static int method;

static int64_t local_rows(int v, int r) {
  if (vars[v].empty_on_odd && r % 2) return 0;
  return vars[v].base_rows + (r * 37 + v * 11) % 13;
}
static int64_t total_rows(int v) { return first_row[v][t_size]; }
static size_t row_bytes(int v) { return (size_t)(vars[v].elems * vars[v].item); }

static uint64_t mix(uint64_t x) { /* splitmix64 finaliser */
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Byte `b` of global row `g` of variable `v`: a per-row hash (so rows
 * differ) plus the position (so bytes within a row differ). */
static inline unsigned char want_byte(uint64_t h, int64_t b) {
  return (unsigned char)((h >> ((b & 7) * 8)) + (uint64_t)b * 131u + ((uint64_t)b >> 8));
}
static uint64_t row_hash(int v, int64_t g) { return mix(((uint64_t)v << 48) ^ (uint64_t)g); }

static void fill_row(unsigned char *row, int v, int64_t g) {
  uint64_t h = row_hash(v, g);
  for (size_t b = 0; b < row_bytes(v); b++) row[b] = want_byte(h, (int64_t)b);
}

/* Checks `n` rows of `v` in `buf` against rows idx[i] (or start + i when idx
 * is NULL); reports the first bad byte with its variable, row and offset. */
static int check_rows(int tid, int v, const unsigned char *buf, const int64_t *idx, int64_t start, int64_t n) {
  size_t rb = row_bytes(v);
  for (int64_t i = 0; i < n; i++) {
    int64_t g = idx ? idx[i] : start + i;
    uint64_t h = row_hash(v, g);
    const unsigned char *row = buf + (size_t)i * rb;
    for (size_t b = 0; b < rb; b++) {
      if (row[b] != want_byte(h, (int64_t)b)) {
        fprintf(stderr,
                "rank %d thread %d: variable '%s' global row %lld (entry %lld of the read), byte %zu: "
                "got 0x%02x, want 0x%02x (seed %llu)\n",
                t_rank, tid, vars[v].name, (long long)g, (long long)i, b, row[b], want_byte(h, (int64_t)b), seed);
        return 0;
      }
    }
  }
  return 1;
}

/* Guard bytes after a destination: a read must not write past its end. */
enum { GUARD = 32 };
static int guard_ok(int tid, const unsigned char *end, const char *what) {
  for (int i = 0; i < GUARD; i++)
    if (end[i] != 0xA5) {
      fprintf(stderr, "rank %d thread %d: byte %d past the end of a %s destination was overwritten\n", t_rank, tid,
              i, what);
      return 0;
    }
  return 1;
}

struct thread {
  int id, ok;
  unsigned long long rng, rows, calls, regs;
  pthread_t th;
};

static uint64_t next(struct thread *t) {
  t->rng = mix(t->rng);
  return t->rng;
}
static int64_t below(struct thread *t, int64_t n) { return (int64_t)(next(t) % (uint64_t)n); }

/* The shard holding global row g of v, and the end of that shard. */
static int64_t shard_end(int v, int64_t g) {
  int r = 0;
  while (first_row[v][r + 1] <= g) r++;
  return first_row[v][r + 1];
}

/* A batch's rows: random, with repeats of earlier entries, and ascending
 * runs (which the library merges into one read per owner). */
static void make_indices(struct thread *t, int v, int64_t *idx, int64_t n) {
  int64_t total = total_rows(v);
  for (int64_t i = 0; i < n; i++) {
    int kind = (int)below(t, 8);
    if (kind == 0 && i > 0)
      idx[i] = idx[below(t, i)];
    else if (kind <= 2 && i > 0)
      idx[i] = (idx[i - 1] + 1) % total;
    else
      idx[i] = below(t, total);
  }
}

#define FAIL_CALL(t, what)                                                                                  \
  do {                                                                                                      \
    fprintf(stderr, "rank %d thread %d: %s failed: %s (seed %llu)\n", t_rank, (t)->id, what, dds_last_error(), \
            seed);                                                                                          \
    (t)->ok = 0;                                                                                            \
  } while (0)

/* A registered buffer: register, read into a slice, check the errors of
 * double/overlapping registration, unregister. */
static void churn(struct thread *t, int64_t *idx) {
  int v = (int)below(t, NVARS);
  if (total_rows(v) == 0) return;
  size_t rb = row_bytes(v);
  int64_t n = 1 + below(t, max_batch < 64 ? max_batch : 64);
  size_t extra = (size_t)below(t, 64), bytes = (size_t)n * rb + extra;
  unsigned char *buf = malloc(bytes);
  if (dds_register_recv(store, vars[v].name, buf, bytes) != DDS_OK) FAIL_CALL(t, "dds_register_recv");
  /* The same buffer again: a no-op. A partly overlapping one: refused. */
  if (t->ok && dds_register_recv(store, vars[v].name, buf, bytes) != DDS_OK) FAIL_CALL(t, "dds_register_recv (again)");
  if (t->ok && dds_register_recv(store, vars[v].name, buf + 1, bytes - 1) != DDS_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "rank %d thread %d: overlapping registration of '%s' was not refused\n", t_rank, t->id,
            vars[v].name);
    t->ok = 0;
  }
  if (t->ok && !strstr(dds_last_error(), vars[v].name)) {
    fprintf(stderr, "rank %d thread %d: overlap message does not name '%s': %s\n", t_rank, t->id, vars[v].name,
            dds_last_error());
    t->ok = 0;
  }
  if (t->ok && method != 0) {
    make_indices(t, v, idx, n);
    size_t off = (size_t)below(t, (int64_t)extra + 1);
    if (dds_get_batch(store, vars[v].name, buf + off, (size_t)n * rb, idx, n) != DDS_OK)
      FAIL_CALL(t, "dds_get_batch into a registered buffer");
    else if (!check_rows(t->id, v, buf + off, idx, 0, n))
      t->ok = 0;
    t->rows += (unsigned long long)n;
    t->calls++;
  }
  if (t->ok && dds_unregister_recv(store, vars[v].name, buf) != DDS_OK) FAIL_CALL(t, "dds_unregister_recv");
  if (t->ok && dds_unregister_recv(store, vars[v].name, buf) != DDS_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "rank %d thread %d: second unregistration of '%s' was not refused\n", t_rank, t->id,
            vars[v].name);
    t->ok = 0;
  }
  t->regs++;
  free(buf);
}

static void *work(void *arg) {
  struct thread *t = arg;
  size_t max_rb = 0;
  for (int v = 0; v < NVARS; v++) max_rb = row_bytes(v) > max_rb ? row_bytes(v) : max_rb;
  size_t cap = (size_t)max_batch * max_rb;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)max_batch);
  unsigned char *reused = malloc(cap + GUARD);
  /* A pool per variable, registered for the whole run; reads go to slices
   * of it at any byte offset. */
  unsigned char *pool[NVARS];
  size_t pool_bytes[NVARS];
  for (int v = 0; v < NVARS; v++) {
    pool_bytes[v] = (size_t)max_batch * row_bytes(v) * 2;
    pool[v] = malloc(pool_bytes[v]);
    if (dds_register_recv(store, vars[v].name, pool[v], pool_bytes[v]) != DDS_OK) FAIL_CALL(t, "dds_register_recv(pool)");
  }
  for (int b = 0; b < n_batches && t->ok; b++) {
    if (t->id % 4 == 3) {
      churn(t, idx);
      if (!t->ok) break;
    }
    int v = (int)below(t, NVARS);
    int64_t total = total_rows(v);
    if (total == 0) continue;
    size_t rb = row_bytes(v);
    if (t->id % 4 == 1 && b % 8 == 0) {
      /* The local calls are thread-safe with reads: rewrite one of this
       * rank's rows with its own bytes (so every reader still checks it)
       * while other threads read it, and ask info and profile meanwhile. */
      int64_t mine = local_rows(v, t_rank);
      if (mine > 0) {
        int64_t l = below(t, mine);
        unsigned char *row = malloc(rb);
        fill_row(row, v, first_row[v][t_rank] + l);
        if (dds_update(store, vars[v].name, row, rb, l) != DDS_OK) FAIL_CALL(t, "dds_update");
        free(row);
      }
      dds_var_info info = {.struct_size = sizeof info};
      dds_counters c = {.struct_size = sizeof c};
      if (dds_info(store, vars[v].name, &info) != DDS_OK) FAIL_CALL(t, "dds_info");
      else if (info.total_rows != total || info.local_rows != mine || info.row_bytes != (int64_t)rb) {
        fprintf(stderr, "rank %d thread %d: dds_info of %s: %lld rows (%lld local) of %lld bytes\n", t_rank, t->id,
                vars[v].name, (long long)info.total_rows, (long long)info.local_rows, (long long)info.row_bytes);
        t->ok = 0;
      }
      if (dds_profile(store, vars[v].name, &c) != DDS_OK) FAIL_CALL(t, "dds_profile");
      else if (c.rows_local > c.rows) {
        fprintf(stderr, "rank %d thread %d: dds_profile of %s: %llu local rows of %llu\n", t_rank, t->id, vars[v].name,
                (unsigned long long)c.rows_local, (unsigned long long)c.rows);
        t->ok = 0;
      }
    }
    /* Collective method 0: a range within one shard (dds_get); one-sided
     * batches (methods 1, 2, method 0 with DDSTORE_BATCH_MODE=onesided):
     * mostly batches. */
    int use_get = t_batch_collective() || below(t, 4) == 0;
    int64_t n, start = 0;
    if (use_get) {
      start = below(t, total);
      int64_t room = shard_end(v, start) - start, lim = max_batch < 64 ? max_batch : 64;
      n = 1 + below(t, room < lim ? room : lim); /* destinations hold max_batch rows */
    } else {
      n = 1 + below(t, max_batch);
      make_indices(t, v, idx, n);
    }
    size_t need = (size_t)n * rb;
    unsigned char *dst, *fresh = NULL;
    const char *kind;
    switch (b % 3) {
      case 0:
        dst = fresh = malloc(need + GUARD);
        kind = "malloc'd";
        break;
      case 1:
        dst = reused;
        kind = "reused";
        break;
      default:
        dst = pool[v] + below(t, (int64_t)(pool_bytes[v] - need) + 1);
        kind = "registered-pool";
        break;
    }
    int guarded = b % 3 != 2; /* the pool's neighbours are its own bytes */
    if (guarded) memset(dst + need, 0xA5, GUARD);
    dds_status s = use_get ? dds_get(store, vars[v].name, dst, need, start, n)
                           : dds_get_batch(store, vars[v].name, dst, need, idx, n);
    if (s != DDS_OK)
      FAIL_CALL(t, use_get ? "dds_get" : "dds_get_batch");
    else if (!check_rows(t->id, v, dst, use_get ? NULL : idx, start, n) || (guarded && !guard_ok(t->id, dst + need, kind)))
      t->ok = 0;
    t->rows += (unsigned long long)n;
    t->calls++;
    free(fresh);
  }
  for (int v = 0; v < NVARS; v++) {
    if (dds_unregister_recv(store, vars[v].name, pool[v]) != DDS_OK && t->ok) FAIL_CALL(t, "dds_unregister_recv(pool)");
    free(pool[v]);
  }
  free(reused);
  free(idx);
  return NULL;
}

/* Method 0: collective (or, DDSTORE_BATCH_MODE=onesided, one-sided)
 * batches from the main thread while the others read. */
static int main_batches(int count) {
  struct thread m = {.id = -1, .ok = 1, .rng = seed ^ mix(0xabcdefULL + (unsigned long long)t_rank)};
  int64_t n_max = max_batch < 128 ? max_batch : 128;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)n_max);
  size_t cap = (size_t)n_max * row_bytes(NVARS - 1);
  unsigned char *dst = malloc(cap);
  for (int i = 0; i < count && m.ok; i++) {
    int v = i % NVARS; /* the same variable on every rank */
    int64_t n = below(&m, n_max + 1); /* may be 0, and differs per rank */
    make_indices(&m, v, idx, n);
    if (dds_get_batch(store, vars[v].name, dst, (size_t)n * row_bytes(v), idx, n) != DDS_OK)
      FAIL_CALL(&m, "collective dds_get_batch");
    else if (!check_rows(-1, v, dst, idx, 0, n))
      m.ok = 0;
  }
  free(idx);
  free(dst);
  return m.ok;
}

/* Two threads register and unregister the same buffer at once. Afterwards
 * the buffer is unregistered, so the transport must not keep a registration
 * of it either: with DDSTORE_TEST_FABRIC_LOCAL_MR=1 (destinations registered as
 * FI_MR_LOCAL providers need) a read into it must register it afresh (one
 * mr_miss). A stale registration would outlive the buffer's memory. */
struct racer {
  unsigned char *buf;
  size_t bytes;
  int unreg, ok, rounds;
};
static void *race(void *arg) {
  struct racer *r = arg;
  for (int i = 0; i < r->rounds && r->ok; i++) {
    dds_status s = r->unreg ? dds_unregister_recv(store, "d2400", r->buf) : dds_register_recv(store, "d2400", r->buf, r->bytes);
    if (s != DDS_OK && !(r->unreg && s == DDS_ERR_INVALID_ARGUMENT)) {
      fprintf(stderr, "rank %d: racing %s: %s\n", t_rank, r->unreg ? "unregister" : "register", dds_last_error());
      r->ok = 0;
    }
  }
  return NULL;
}

static void test_register_race(void) {
  int v = 2; /* d2400 */
  size_t rb = row_bytes(v);
  unsigned char *buf = malloc(rb * 4), *other = malloc(rb * 4);
  struct racer r[2] = {{buf, rb * 4, 0, 1, race_rounds}, {buf, rb * 4, 1, 1, race_rounds}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, race, &r[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  EXPECT(r[0].ok && r[1].ok);
  dds_unregister_recv(store, "d2400", buf); /* registered or not: now it is not */
  EXPECT_ERR(dds_unregister_recv(store, "d2400", buf), DDS_ERR_INVALID_ARGUMENT, "is not registered for 'd2400'");
  /* Rows of the next rank (a transport read, not a node-local copy). */
  int64_t idx[4];
  for (int i = 0; i < 4; i++) idx[i] = first_row[v][(t_rank + 1) % t_size] + i;
  dds_counters c0 = {.struct_size = sizeof c0}, c1 = {.struct_size = sizeof c1};
  CHECK(dds_get_batch(store, "d2400", other, rb * 4, idx, 4)); /* the cache now holds `other` */
  CHECK(dds_profile(store, "d2400", &c0));
  CHECK(dds_get_batch(store, "d2400", buf, rb * 4, idx, 4));
  CHECK(dds_profile(store, "d2400", &c1));
  EXPECT(check_rows(-1, v, buf, idx, 0, 4));
  const char *lm = getenv("DDSTORE_TEST_FABRIC_LOCAL_MR"), *nl = getenv("DDSTORE_NODE_LOCAL");
  if (method != 0 && t_size > 1 && lm && strcmp(lm, "1") == 0 && nl && strcmp(nl, "0") == 0) {
    if (c1.mr_miss != c0.mr_miss + 1)
      fprintf(stderr, "rank %d: a read into an unregistered buffer found a registration (mr_miss %llu -> %llu)\n",
              t_rank, (unsigned long long)c0.mr_miss, (unsigned long long)c1.mr_miss);
    EXPECT(c1.mr_miss == c0.mr_miss + 1);
  }
  free(buf);
  free(other);
}

static int arg_or_env(int argc, char **argv, const char *flag, const char *env, long long dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], flag) == 0) return (int)atoll(argv[i + 1]);
  const char *e = getenv(env);
  return (e && *e) ? (int)atoll(e) : (int)dflt;
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  /* All ranks share this node: without this, every row would be copied
   * from shared memory and the transports would not be soaked. */
  setenv("DDSTORE_NODE_LOCAL", "0", 0);
  n_threads = arg_or_env(argc, argv, "--threads", "DDS_SOAK_THREADS", 8);
  n_batches = arg_or_env(argc, argv, "--batches", "DDS_SOAK_BATCHES", 600);
  max_batch = arg_or_env(argc, argv, "--max-batch", "DDS_SOAK_MAX_BATCH", 512);
  race_rounds = arg_or_env(argc, argv, "--race-rounds", "DDS_SOAK_RACE_ROUNDS", 50000);
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[i + 1], NULL, 10);
  if (getenv("DDS_SOAK_SEED") && *getenv("DDS_SOAK_SEED")) seed = strtoull(getenv("DDS_SOAK_SEED"), NULL, 10);
  if (n_threads < 1 || n_batches < 0 || max_batch < 1) {
    if (t_rank == 0) fprintf(stderr, "test_soak: bad --threads/--batches/--max-batch\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  method = t_method();
  store = t_store(method, 0);

  for (int v = 0; v < NVARS; v++) {
    first_row[v] = malloc(sizeof(int64_t) * (size_t)(t_size + 1));
    first_row[v][0] = 0;
    for (int r = 0; r < t_size; r++) first_row[v][r + 1] = first_row[v][r] + local_rows(v, r);
    int64_t n = local_rows(v, t_rank);
    unsigned char *shard = malloc(row_bytes(v) * (size_t)n + 1);
    for (int64_t i = 0; i < n; i++) fill_row(shard + (size_t)i * row_bytes(v), v, first_row[v][t_rank] + i);
    CHECK(dds_add(store, vars[v].name, n ? shard : NULL, row_bytes(v) * (size_t)n, n, vars[v].elems, vars[v].item));
    free(shard);
  }
  if (t_rank == 0)
    printf("test_soak: method %d, %d ranks x %d threads x %d iterations, batches of 1..%d rows, seed %llu\n", method,
           t_size, n_threads, n_batches, max_batch, seed);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();

  struct thread *th = calloc((size_t)n_threads, sizeof *th);
  for (int i = 0; i < n_threads; i++) {
    th[i].id = i;
    th[i].ok = 1;
    th[i].rng = seed ^ mix(1000003ULL * (unsigned long long)t_rank + 7919ULL * (unsigned long long)i + 1);
    pthread_create(&th[i].th, NULL, work, &th[i]);
  }
  int main_ok = method == 0 ? main_batches(n_batches / 4 + 1) : 1;
  unsigned long long rows = 0, calls = 0, regs = 0;
  for (int i = 0; i < n_threads; i++) {
    pthread_join(th[i].th, NULL);
    EXPECT(th[i].ok);
    rows += th[i].rows;
    calls += th[i].calls;
    regs += th[i].regs;
  }
  EXPECT(main_ok);
  /* Every read was counted once (method 0's collective batches too). */
  if (method != 0) {
    unsigned long long counted = 0;
    for (int v = 0; v < NVARS; v++) {
      dds_counters c = {.struct_size = sizeof c};
      CHECK(dds_profile(store, vars[v].name, &c));
      counted += c.calls;
    }
    EXPECT(counted == calls);
  }
  double dt = MPI_Wtime() - t0;
  if (method != 0) test_register_race();
  unsigned long long mine[3] = {rows, calls, regs}, all[3];
  MPI_Reduce(mine, all, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (t_rank == 0)
    printf("test_soak: %llu rows verified in %llu reads, %llu register/unregister cycles, %.1f s (seed %llu)\n",
           all[0], all[1], all[2], dt, seed);
  CHECK(dds_destroy(store));
  for (int v = 0; v < NVARS; v++) free(first_row[v]);
  free(th);
  return t_finish("test_soak");
}
