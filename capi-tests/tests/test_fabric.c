/* Method 1 (libfabric) specifics, for the provider named by DDSTORE_FABRIC
 * (shm, tcp): the serving side progresses while its rank is in MPI_Barrier
 * or asleep, concurrent reading threads, registered destinations, rows split
 * into pieces, one-sided batches, provider/interface errors, dds_info,
 * libfabric loaded and reader endpoints opened on demand. */
#include <pthread.h>
#include <strings.h>
#include <unistd.h>

#include "common.h"

#define ELEMS 6
static int64_t rows_per_rank = 64;

static dds_store *fabric_store(void) { return t_store(DDS_METHOD_FABRIC, 0); }

/* Adds variable "v" to `s`: rows_per_rank rows of ELEMS doubles on every
 * rank. */
static dds_store *add_v(dds_store *s) {
  double *buf = malloc(sizeof(double) * (size_t)(rows_per_rank * ELEMS));
  t_fill(buf, rows_per_rank, ELEMS, 8, 7, rows_per_rank * t_rank);
  CHECK(dds_add(s, "v", buf, sizeof(double) * (size_t)(rows_per_rank * ELEMS), rows_per_rank, ELEMS, 8));
  free(buf);
  return s;
}

static dds_store *make_store(void) { return add_v(fabric_store()); }

static double now(void) { return MPI_Wtime(); }

/* Whether every rank is on this node (MPI's node layout); collective. */
static int one_node(void) {
  MPI_Comm node;
  int n = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t_rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  int all = n == t_size;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all;
}

/* dds_info names the provider and domain. */
static void test_info(void) {
  dds_store *s = make_store();
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "v", &info));
  const char *want = getenv("DDSTORE_FABRIC");
  char prefix[64];
  if (!want || !*want)
    snprintf(prefix, sizeof prefix, "fabric:");
  else
    snprintf(prefix, sizeof prefix, "fabric:%s@",
             (strcmp(want, "tcp") == 0 || strcmp(want, "hsn") == 0) ? "tcp;ofi_rxm" : want);
  EXPECT(info.method == DDS_METHOD_FABRIC && strncmp(info.transport, prefix, strlen(prefix)) == 0);
  /* The tcp domain is the interface the environment names (lo on one node,
   * the node's own interface across simulated nodes). */
  const char *iface = getenv("FABRIC_IFACE");
  if (want && strcmp(want, "tcp") == 0 && iface && *iface) {
    char expect[96];
    snprintf(expect, sizeof expect, "fabric:tcp;ofi_rxm@%s", iface);
    EXPECT(strcmp(info.transport, expect) == 0);
  }
  /* Automatic choice on one node (no native provider here): shm; across
   * nodes (MPI's node layout) never shm, which cannot reach another node. */
  if (!want || !*want) {
    EXPECT((strcmp(info.transport, "fabric:shm@shm") == 0) == one_node());
  }
  if (t_rank == 0) printf("transport: %s\n", info.transport);
  CHECK(dds_destroy(s));
}

/* Rank 0 reads rank 1's rows while rank 1 sits in MPI_Barrier, then while it
 * sleeps: only its progress thread can serve the reads. */
static void test_passive_target(void) {
  if (t_size < 2) return;
  dds_store *s = make_store();
  double row[ELEMS];
  int64_t g0 = rows_per_rank; /* rank 1's first row */
  /* Under valgrind, which runs one thread at a time, a read served while
   * the owner spins in MPI_Barrier took 0.74 s: 20 reads check the same. */
  const int n_reads = t_instrumented() ? 20 : 200;
  for (int phase = 0; phase < 2; phase++) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
      double t = now();
      int ok = 1;
      for (int i = 0; i < n_reads; i++) {
        int64_t g = g0 + i % rows_per_rank;
        CHECK(dds_get(s, "v", row, sizeof row, g, 1));
        ok &= t_rows_ok(row, 1, ELEMS, 8, 7, NULL, g);
      }
      int64_t idx[32];
      for (int i = 0; i < 32; i++) idx[i] = g0 + (i * 5) % rows_per_rank;
      double rows[32 * ELEMS];
      CHECK(dds_get_batch(s, "v", rows, sizeof rows, idx, 32));
      ok &= t_rows_ok(rows, 32, ELEMS, 8, 7, idx, 0);
      EXPECT(ok);
      const char *prov = getenv("DDSTORE_FABRIC");
      printf("%s: %d reads + a 32-row batch from a rank %s: %.1f us per read\n", prov && *prov ? prov : "auto",
             n_reads, phase ? "asleep" : "in MPI_Barrier", (now() - t) / (n_reads + 1) * 1e6);
      if (phase == 1) {
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
      }
    } else if (t_rank == 1 && phase == 1) {
      /* Asleep until rank 0 is done (checked every 10 ms, no MPI progress). */
      int flag = 0, done;
      MPI_Request req;
      MPI_Irecv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &req);
      while (!flag) {
        usleep(10000);
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  CHECK(dds_destroy(s));
}

/* Batches are one-sided: rank 0 alone reads, the others do nothing. */
static void test_one_sided_batch(void) {
  dds_store *s = make_store();
  int64_t total = rows_per_rank * t_size;
  if (t_rank == 0) {
    int64_t idx[50];
    for (int i = 0; i < 50; i++) idx[i] = total - 1 - (i * 13) % total;
    double *out = malloc(sizeof(double) * 50 * ELEMS);
    CHECK(dds_get_batch(s, "v", out, sizeof(double) * 50 * ELEMS, idx, 50));
    EXPECT(t_rows_ok(out, 50, ELEMS, 8, 7, idx, 0));
    /* A bad index fails this rank only, and the store stays usable. */
    idx[3] = total;
    EXPECT_ERR(dds_get_batch(s, "v", out, sizeof(double) * 50 * ELEMS, idx, 50), DDS_ERR_INDEX_OUT_OF_RANGE,
               "index 3 of the batch");
    idx[3] = 0;
    CHECK(dds_get_batch(s, "v", out, sizeof(double) * 50 * ELEMS, idx, 50));
    EXPECT(t_rows_ok(out, 50, ELEMS, 8, 7, idx, 0));
    free(out);
    /* More reads than a reader endpoint keeps in flight (256): slots are reused. */
    enum { N = 1500 };
    int64_t *many = malloc(sizeof(int64_t) * N);
    double *dst = malloc(sizeof(double) * N * ELEMS);
    for (int i = 0; i < N; i++) many[i] = (int64_t)((i * 7919LL) % total);
    CHECK(dds_get_batch(s, "v", dst, sizeof(double) * N * ELEMS, many, N));
    EXPECT(t_rows_ok(dst, N, ELEMS, 8, 7, many, 0));
    free(many);
    free(dst);
  }
  CHECK(dds_destroy(s)); /* collective: waits for rank 0's reads */
}

/* Four threads read many batches of random rows at once. */
struct worker {
  dds_store *s;
  int id, ok;
};

static void *work(void *arg) {
  struct worker *w = arg;
  int64_t total = rows_per_rank * t_size, idx[40];
  double *out = malloc(sizeof(double) * 40 * ELEMS);
  unsigned long long x = 1000003ULL * (unsigned long long)(w->id + 1) + (unsigned long long)t_rank;
  w->ok = 1;
  for (int b = 0; b < 60 && w->ok; b++) {
    for (int i = 0; i < 40; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      idx[i] = (int64_t)(x % (unsigned long long)total);
    }
    if (dds_get_batch(w->s, "v", out, sizeof(double) * 40 * ELEMS, idx, 40) != DDS_OK) {
      fprintf(stderr, "rank %d thread %d: %s\n", t_rank, w->id, dds_last_error());
      w->ok = 0;
    } else {
      w->ok = t_rows_ok(out, 40, ELEMS, 8, 7, idx, 0);
    }
    double row[ELEMS];
    if (w->ok && dds_get(w->s, "v", row, sizeof row, idx[0], 1) != DDS_OK) w->ok = 0;
    if (w->ok) w->ok = t_rows_ok(row, 1, ELEMS, 8, 7, NULL, idx[0]);
  }
  free(out);
  return NULL;
}

static void test_threads(void) {
  dds_store *s = make_store();
  struct worker w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (struct worker){s, i, 0};
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    EXPECT(w[i].ok);
  }
  dds_counters c = {.struct_size = sizeof c};
  CHECK(dds_profile(s, "v", &c));
  EXPECT(c.calls == 4 * 60 * 2 && c.rows == 4 * 60 * 41);
  CHECK(dds_destroy(s));
}

/* Registered destinations: reads into slices of a registered pool need no
 * registration (mr_miss unchanged). With DDSTORE_TEST_FABRIC_LOCAL_MR=1 the
 * store registers destinations as FI_MR_LOCAL providers require; without it
 * (tcp and shm need no local descriptors) mr_miss stays 0 throughout. */
static void test_registered(int force_local) {
  if (force_local) setenv("DDSTORE_TEST_FABRIC_LOCAL_MR", "1", 1);
  setenv("DDSTORE_PROFILE", "1", 1);
  dds_store *s = make_store();
  unsetenv("DDSTORE_PROFILE");
  unsetenv("DDSTORE_TEST_FABRIC_LOCAL_MR");
  int64_t total = rows_per_rank * t_size, idx[8];
  size_t rb = sizeof(double) * ELEMS;
  double *pool = malloc(rb * 64), *other = malloc(rb * 8);
  dds_counters c0 = {.struct_size = sizeof c0}, c1 = {.struct_size = sizeof c1};
  /* An unregistered destination: a miss (when registration is needed). */
  for (int i = 0; i < 8; i++) idx[i] = (i * rows_per_rank + 5 + i) % total; /* rows of every rank */
  CHECK(dds_get_batch(s, "v", other, rb * 8, idx, 8));
  EXPECT(t_rows_ok(other, 8, ELEMS, 8, 7, idx, 0));
  CHECK(dds_profile(s, "v", &c0));
  /* Node-local reads (all ranks on this node) use no destination registration. */
  /* main() sets DDSTORE_NODE_LOCAL=0 only when unset; any other value of it is
   * read as the library reads it (off: 0, off, false, no). */
  const char *nl = getenv("DDSTORE_NODE_LOCAL");
  int direct = !(nl && (strcmp(nl, "0") == 0 || strcasecmp(nl, "off") == 0 || strcasecmp(nl, "false") == 0 ||
                        strcasecmp(nl, "no") == 0));
  EXPECT(c0.profiling == 1 && c0.mr_miss == (force_local && t_size > 1 && !direct ? 1u : 0u));
  CHECK(dds_register_recv(s, "v", pool, rb * 64));
  for (int k = 0; k < 8; k++) { /* slices of the pool */
    CHECK(dds_get_batch(s, "v", pool + k * 8 * ELEMS, rb * 8, idx, 8));
    EXPECT(t_rows_ok(pool + k * 8 * ELEMS, 8, ELEMS, 8, 7, idx, 0));
    CHECK(dds_get(s, "v", pool + k * ELEMS, rb, idx[k], 1));
    EXPECT(t_rows_ok(pool + k * ELEMS, 1, ELEMS, 8, 7, NULL, idx[k]));
  }
  CHECK(dds_profile(s, "v", &c1));
  EXPECT(c1.mr_miss == c0.mr_miss);
  EXPECT(c1.read_ns > 0 || t_size == 1);
  CHECK(dds_unregister_recv(s, "v", pool));
  CHECK(dds_destroy(s));
  free(pool);
  free(other);
}

/* Rows longer than DDSTORE_MAX_READ_BYTES are read in pieces: 12004-byte
 * rows with 4096-byte pieces (two whole pieces and a remainder). */
static void test_pieces(void) {
  setenv("DDSTORE_MAX_READ_BYTES", "4096", 1);
  dds_store *s = fabric_store();
  unsetenv("DDSTORE_MAX_READ_BYTES");
  const int64_t elems = 3001, n = 3; /* 3001 floats = 12004 bytes */
  size_t rb = (size_t)elems * 4;
  float *buf = malloc(rb * (size_t)n);
  t_fill(buf, n, elems, 4, 11, n * t_rank);
  CHECK(dds_add(s, "big", buf, rb * (size_t)n, n, elems, 4));
  int64_t total = n * t_size, idx[6];
  float *out = malloc(rb * 6);
  for (int64_t g = 0; g < total; g++) {
    CHECK(dds_get(s, "big", out, rb, g, 1));
    EXPECT(t_rows_ok(out, 1, elems, 4, 11, NULL, g));
  }
  int r = (t_rank + 1) % t_size; /* a whole shard of the next rank in one read */
  CHECK(dds_get(s, "big", out, rb * (size_t)n, n * r, n));
  EXPECT(t_rows_ok(out, n, elems, 4, 11, NULL, n * r));
  for (int i = 0; i < 6; i++) idx[i] = (total - 1 - 2 * i + 6 * total) % total;
  CHECK(dds_get_batch(s, "big", out, rb * 6, idx, 6));
  EXPECT(t_rows_ok(out, 6, elems, 4, 11, idx, 0));
  /* Ascending rows: each owner's run becomes one read (then split in pieces). */
  int64_t k = total < 6 ? total : 6;
  for (int i = 0; i < k; i++) idx[i] = total - k + i;
  memset(out, 0, rb * 6);
  CHECK(dds_get_batch(s, "big", out, rb * (size_t)k, idx, k));
  EXPECT(t_rows_ok(out, k, elems, 4, 11, idx, 0));
  CHECK(dds_destroy(s));
  free(buf);
  free(out);
}

/* A provider or interface that does not exist fails dds_create on every
 * rank with a message naming it. */
static void test_bad_provider(void) {
  char *saved = getenv("DDSTORE_FABRIC") ? strdup(getenv("DDSTORE_FABRIC")) : NULL;
  char *saved_iface = getenv("FABRIC_IFACE") ? strdup(getenv("FABRIC_IFACE")) : NULL;
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_FABRIC;
  int comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  setenv("DDSTORE_FABRIC", "nosuchprov", 1);
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_FABRIC, "provider 'nosuchprov' is not available");
  setenv("DDSTORE_FABRIC", "tcp", 1);
  setenv("FABRIC_IFACE", "nosuchif", 1);
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_FABRIC, "has no domain 'nosuchif'");
  if (saved_iface) /* the interface the tests run on (lo, or a node's own) */
    setenv("FABRIC_IFACE", saved_iface, 1);
  else
    unsetenv("FABRIC_IFACE");
  free(saved_iface);
  /* Options override the environment. */
  o.fabric_provider = "nosuchprov2";
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_FABRIC, "'nosuchprov2'");
  EXPECT(s == NULL);
  if (saved) {
    setenv("DDSTORE_FABRIC", saved, 1);
    free(saved);
  } else {
    unsetenv("DDSTORE_FABRIC");
  }
}

/* How many distinct files whose path contains `part` this process has
 * mapped (/proc/self/maps); -1 if that cannot be read. */
static int mapped_paths(const char *part) {
  char line[4096], seen[16][256];
  int n = 0;
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    char *path = strstr(line, part);
    if (!path) continue;
    path[strcspn(path, "\n")] = 0;
    int dup = 0;
    for (int i = 0; i < n; i++) dup |= strcmp(seen[i], path) == 0;
    if (!dup && n < 16) snprintf(seen[n++], sizeof seen[0], "%s", path);
  }
  fclose(f);
  return n;
}

static int libfabric_mapped(void) { return mapped_paths("/libfabric.so") > 0; }

/* libfabric is loaded by the first fabric a process opens, not with the
 * library: a method-0 store, made and read before any other store of this
 * process, leaves it unloaded (unless MPI itself loaded it, as an MPI over
 * libfabric does); the first method-1 store loads it. Runs first in main. */
static void test_libfabric_on_demand(void) {
  int by_mpi = libfabric_mapped();
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_MPI; /* not t_store: its 0 means DDS_TEST_METHOD */
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  add_v(s);
  double row[ELEMS];
  int64_t g = (rows_per_rank * (t_rank + 1)) % (rows_per_rank * t_size);
  CHECK(dds_get(s, "v", row, sizeof row, g, 1));
  EXPECT(t_rows_ok(row, 1, ELEMS, 8, 7, NULL, g));
  int after_m0 = libfabric_mapped();
  CHECK(dds_destroy(s));
  if (!by_mpi) EXPECT(after_m0 == 0);
  s = fabric_store();
  EXPECT(libfabric_mapped() == 1);
  CHECK(dds_destroy(s));
  if (t_rank == 0)
    printf("libfabric on demand: %s; after a method-0 store %s, after a method-1 store loaded\n",
           by_mpi ? "loaded by MPI already (the method-0 check does not apply)" : "not loaded at start",
           after_m0 ? "loaded" : "not loaded");
}

/* Endpoint regions this process has mapped under /dev/shm: the shm
 * provider names each of its endpoints "<pid>:..." (libfabric 1.17-1.20);
 * peers' regions carry their own pid and do not count. */
static int own_shm_regions(void) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "/dev/shm/%d:", (int)getpid());
  return mapped_paths(prefix);
}

/* Reader endpoints open at the first read through the fabric: with every
 * rank on this node and node-local reads on, a store reads every row without
 * one (its serving endpoint is its only region); with node-local reads off,
 * the first remote read opens one, and the next reads reuse it. shm only:
 * its regions are what can be counted from outside the library. */
static void test_reader_on_demand(void) {
  dds_var_info info = {.struct_size = sizeof info};
  int all_here = one_node();
  char *saved = strdup(getenv("DDSTORE_NODE_LOCAL") ? getenv("DDSTORE_NODE_LOCAL") : "0");
  for (int local = 1; local >= 0; local--) {
    setenv("DDSTORE_NODE_LOCAL", local ? "1" : "0", 1);
    dds_store *s = make_store();
    CHECK(dds_info(s, "v", &info));
    if (strncmp(info.transport, "fabric:shm@", 11) != 0 || !all_here || t_size < 2) {
      const char *why = !all_here ? "ranks on several nodes" : t_size < 2 ? "fewer than 2 ranks" : "not shm";
      if (t_rank == 0 && local) printf("reader on demand: not checked (%s, %s)\n", info.transport, why);
      CHECK(dds_destroy(s));
      break;
    }
    int before = own_shm_regions();
    EXPECT(before >= 1);
    double row[ELEMS];
    int ok = 1;
    for (int64_t g = 0; g < rows_per_rank * t_size; g++) {
      CHECK(dds_get(s, "v", row, sizeof row, g, 1));
      ok &= t_rows_ok(row, 1, ELEMS, 8, 7, NULL, g);
    }
    EXPECT(ok);
    int after = own_shm_regions();
    /* Node-local: no reader endpoint; fabric: one, opened by the first read
     * of a peer's row and kept for the others. */
    EXPECT(after == before + (local ? 0 : 1));
    if (t_rank == 0)
      printf("reader on demand, node-local %s: %d shm region(s) before the reads, %d after\n", local ? "on" : "off",
             before, after);
    CHECK(dds_destroy(s));
  }
  setenv("DDSTORE_NODE_LOCAL", saved, 1);
  free(saved);
}

/* ofi_rxm's buffer settings: the library's defaults (docs/fabric.md,
 * "Memory") where the environment had none, the environment's otherwise.
 * `had_*`: the values before the first store of this process. */
static void test_rxm_defaults(const char *had_size, const char *had_rx) {
  const char *size = getenv("FI_OFI_RXM_BUFFER_SIZE"), *rx = getenv("FI_OFI_RXM_MSG_RX_SIZE");
  EXPECT(size && strcmp(size, had_size ? had_size : "1024") == 0);
  EXPECT(rx && strcmp(rx, had_rx ? had_rx : "16") == 0);
  if (t_rank == 0) printf("rxm: FI_OFI_RXM_BUFFER_SIZE=%s FI_OFI_RXM_MSG_RX_SIZE=%s\n", size, rx);
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  char *had_size = getenv("FI_OFI_RXM_BUFFER_SIZE") ? strdup(getenv("FI_OFI_RXM_BUFFER_SIZE")) : NULL;
  char *had_rx = getenv("FI_OFI_RXM_MSG_RX_SIZE") ? strdup(getenv("FI_OFI_RXM_MSG_RX_SIZE")) : NULL;
  /* The ranks share this node: node-local reads would copy every row without
   * the fabric these tests exercise, so they are off unless the environment
   * asks for them (test_node_local covers the direct path). */
  setenv("DDSTORE_NODE_LOCAL", "0", 0);
  test_libfabric_on_demand();
  test_info();
  test_rxm_defaults(had_size, had_rx);
  free(had_size);
  free(had_rx);
  test_passive_target();
  test_one_sided_batch();
  test_threads();
  test_registered(0);
  test_registered(1);
  test_pieces();
  test_reader_on_demand();
  test_bad_provider();
  return t_finish("test_fabric");
}
