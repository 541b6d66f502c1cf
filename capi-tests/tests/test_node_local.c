/* Node-local reads: rows owned by a rank of the same node are copied straight
 * from its shared-memory shard. With DDSTORE_NODE_LOCAL on (the default) the
 * rows of ranks on the reader's node count as local (dds_profile rows_local)
 * for method 0 and method 1, and with DDSTORE_NODE_LOCAL=0 only the rank's
 * own rows do. The node of each rank comes from MPI (MPI_Comm_split_type), so
 * the expectations hold on one node (every row local) and across nodes
 * (scripts/cluster/test-cluster.sh). Also: several variables,
 * a zero-row rank, groups of width 2, repeated and shuffled indices, updates
 * visible after an epoch or a barrier, and no segment left in /dev/shm (or
 * DDSTORE_SHM_DIR, where the segments then live).
 * With DDSTORE_TEST_NODE_LOCAL_WIDTH=k (a testing aid) runs of k ranks act as
 * nodes, and the counters show which rows took which path. */
#include <dirent.h>
#include <unistd.h>

#include "common.h"

static int node_local_on(void) {
  const char *v = getenv("DDSTORE_NODE_LOCAL");
  return !(v && strcmp(v, "0") == 0);
}

/* DDSTORE_TEST_NODE_LOCAL_WIDTH=k (a testing aid) makes runs of k ranks act as
 * separate nodes, so rows of other "nodes" go through the transport. */
static int node_width(void) {
  const char *v = getenv("DDSTORE_TEST_NODE_LOCAL_WIDTH");
  return (v && *v) ? atoi(v) : 0;
}

/* The node of every world rank (the world rank of its first rank there),
 * from MPI_Comm_split_type(SHARED), as the library finds it; and the world
 * rank of store rank 0 of the store under test (stores of groups start
 * further on). */
static int *node_of;
static int n_nodes;
static int store_first;

static void find_nodes(void) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t_rank, MPI_INFO_NULL, &node);
  int leader = t_rank;
  MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  node_of = malloc(sizeof(int) * (size_t)t_size);
  MPI_Allgather(&leader, 1, MPI_INT, node_of, 1, MPI_INT, MPI_COMM_WORLD);
  n_nodes = 0;
  for (int r = 0; r < t_size; r++) n_nodes += node_of[r] == r;
}

/* Rank of store rank `r` among the store's ranks on its node. */
static int rank_on_node(int r) {
  int n = 0;
  for (int q = 0; q < r; q++) n += node_of[store_first + q] == node_of[store_first + r];
  return n;
}

/* True when store rank `r` is read directly by store rank `me`: the same
 * node and, with DDSTORE_NODE_LOCAL_WIDTH=k, the same run of k ranks of it. */
static int near(int r, int me) {
  if (r == me) return 1;
  if (!node_local_on()) return 0;
  if (node_of[store_first + r] != node_of[store_first + me]) return 0;
  int k = node_width();
  return k == 0 || rank_on_node(r) / k == rank_on_node(me) / k;
}

/* Ranks of a store of `group` ranks that `me` reads directly. */
static int near_ranks(int me, int group) {
  int n = 0;
  for (int r = 0; r < group; r++) n += near(r, me);
  return n;
}

static dds_counters counters(dds_store *s, const char *var) {
  dds_counters c = {.struct_size = sizeof c};
  CHECK(dds_profile(s, var, &c));
  return c;
}

/* Segments of this process still named in their directory (they must be
 * unlinked as soon as the registration has mapped them). */
static int named_segments(void) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "ddstore.%ld.", (long)getpid());
  const char *dir = getenv("DDSTORE_SHM_DIR");
  DIR *d = opendir(dir && *dir ? dir : "/dev/shm");
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

/* Global rows [lo, hi) held by rank `r` when rank r holds rows_of(r) rows. */
static int64_t first_row(int64_t (*rows_of)(int), int r) {
  int64_t g = 0;
  for (int q = 0; q < r; q++) g += rows_of(q);
  return g;
}

/* Rank 1 holds no rows of "a" (when there are several ranks). */
static int64_t rows_a(int r) { return (r == 1 && t_size > 1) ? 0 : 6 + r; }
static int64_t rows_b(int r) { (void)r; return 3; }

/* Registers `name` with rows_of(rank) rows of `elems` items of `item` bytes. */
static void add_var(dds_store *s, const char *name, int64_t (*rows_of)(int), int elems, int item, int tag,
                    int group_rank, int group_first) {
  int64_t n = rows_of(group_rank);
  size_t bytes = (size_t)(n * elems * item);
  void *buf = malloc(bytes ? bytes : 1);
  int64_t g0 = 0;
  for (int q = group_first; q < group_first + group_rank; q++) g0 += rows_of(q - group_first);
  t_fill(buf, n, elems, item, tag, g0);
  CHECK(dds_add(s, name, buf, bytes, n, elems, item));
  free(buf);
}

/* Reads every row of `name` (shuffled, with repeats) by batch and by single
 * gets; checks the rows and that the counters show the expected path. `mine`
 * is [lo, hi) of this rank's rows; `group` the ranks sharing the variable. */
static void read_all(dds_store *s, const char *name, int64_t total, int elems, int item, int tag, int64_t lo,
                     int64_t hi, int64_t (*rows_of)(int), int me, int group) {
  int on = node_local_on();
  int n = (int)total + 3;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < (int)total; i++) idx[i] = i;
  for (int i = (int)total - 1; i > 0; i--) { /* shuffle */
    int j = (int)(t_next() % (unsigned long long)(i + 1));
    int64_t t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
  for (int i = (int)total; i < n; i++) idx[i] = idx[(i * 7) % total]; /* repeats */
  size_t rb = (size_t)(elems * item);
  char *dst = malloc(rb * (size_t)n);
  int64_t own = 0, direct = 0;
  for (int i = 0; i < n; i++) {
    own += idx[i] >= lo && idx[i] < hi;
    int r = 0;
    for (int64_t end = rows_of(0); idx[i] >= end; end += rows_of(++r)) {}
    direct += near(r, me);
  }

  dds_counters c0 = counters(s, name);
  CHECK(dds_get_batch(s, name, dst, rb * (size_t)n, idx, n));
  EXPECT(t_rows_ok(dst, n, elems, item, tag, idx, 0));
  dds_counters c1 = counters(s, name);
  EXPECT(c1.rows - c0.rows == (uint64_t)n);
  if (on) {
    EXPECT(c1.rows_local - c0.rows_local == (uint64_t)direct);
    EXPECT(c1.rows_remote - c0.rows_remote == (uint64_t)(n - direct));
    if (node_width() == 0 && n_nodes == 1) EXPECT(direct == n); /* one node: every row */
  } else {
    EXPECT(c1.rows_local - c0.rows_local == (uint64_t)own);
    EXPECT(c1.rows_remote - c0.rows_remote == (uint64_t)(n - own));
  }
  /* Single-row gets (one-sided in every method). */
  memset(dst, 0, rb * (size_t)n);
  for (int i = 0; i < n; i++) CHECK(dds_get(s, name, dst + (size_t)i * rb, rb, idx[i], 1));
  EXPECT(t_rows_ok(dst, n, elems, item, tag, idx, 0));
  dds_counters c2 = counters(s, name);
  EXPECT(c2.rows_local - c1.rows_local == (uint64_t)(on ? direct : own));
  /* An empty batch still takes part (method 0 is collective). */
  CHECK(dds_get_batch(s, name, dst, 0, idx, 0));
  (void)group;
  free(dst);
  free(idx);
}

static void check_info(dds_store *s, const char *name, int me, int group) {
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, name, &info));
  int on = node_local_on();
  EXPECT(info.node_local == on);
  EXPECT(info.node_ranks == near_ranks(me, group));
  /* An older caller's struct (without the node-local fields) is still served. */
  dds_var_info old = {.struct_size = (uint32_t)offsetof(dds_var_info, node_local)};
  old.node_local = 77;
  CHECK(dds_info(s, name, &old));
  EXPECT(old.node_local == 77 && old.total_rows == info.total_rows);
}

static void test_store(int method) {
  dds_store *s = t_store(method, 0);
  add_var(s, "a", rows_a, 5, 8, 11, t_rank, 0);
  add_var(s, "b", rows_b, 7, 4, 12, t_rank, 0);
  EXPECT(named_segments() == 0);
  int64_t ta = first_row(rows_a, t_size), tb = first_row(rows_b, t_size);
  check_info(s, "a", t_rank, t_size);
  check_info(s, "b", t_rank, t_size);
  int64_t alo = first_row(rows_a, t_rank), blo = first_row(rows_b, t_rank);
  read_all(s, "a", ta, 5, 8, 11, alo, alo + rows_a(t_rank), rows_a, t_rank, t_size);
  read_all(s, "b", tb, 7, 4, 12, blo, blo + rows_b(t_rank), rows_b, t_rank, t_size);

  /* Updates: each rank rewrites its rows of "b" with tag 13; after the
   * epoch (method 0's rule for remote readers, and a barrier) every reader,
   * same node or not, sees them. */
  {
    size_t rb = 7 * 4;
    char *rows = malloc(rb * 3);
    t_fill(rows, 3, 7, 4, 13, blo);
    CHECK(dds_epoch_begin(s));
    CHECK(dds_update(s, "b", rows, rb * 3, 0));
    CHECK(dds_epoch_end(s));
    CHECK(dds_epoch_begin(s));
    read_all(s, "b", tb, 7, 4, 13, blo, blo + 3, rows_b, t_rank, t_size);
    CHECK(dds_epoch_end(s));
    /* Method 1 reads are one-sided on the memory itself: a barrier suffices. */
    t_fill(rows, 1, 7, 4, 14, blo);
    CHECK(dds_update(s, "b", rows, rb, 0));
    MPI_Barrier(MPI_COMM_WORLD);
    char row[7 * 4];
    int64_t g = first_row(rows_b, (t_rank + 1) % t_size); /* the next rank's first row */
    CHECK(dds_get(s, "b", row, rb, g, 1));
    EXPECT(t_rows_ok(row, 1, 7, 4, 14, NULL, g));
    MPI_Barrier(MPI_COMM_WORLD);
    free(rows);
  }
  CHECK(dds_destroy(s));
}

/* Groups of width 2: each group is its own store; on one node all of a
 * group's rows are local. */
static void test_groups(int method) {
  if (t_size < 2) return;
  dds_store *s = t_store(method, 2);
  int first = t_rank - t_rank % 2, size = (first + 2 <= t_size) ? 2 : t_size - first;
  store_first = first;
  add_var(s, "g", rows_b, 4, 8, 21, t_rank - first, first);
  check_info(s, "g", t_rank - first, size);
  int64_t lo = 3 * (t_rank - first);
  read_all(s, "g", 3 * size, 4, 8, 21, lo, lo + 3, rows_b, t_rank - first, size);
  CHECK(dds_destroy(s));
  store_first = 0;
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  t_rng ^= (unsigned long long)(t_rank + 1) * 0x9E3779B97F4A7C15ULL;
  find_nodes();
  if (t_rank == 0) printf("test_node_local: %d ranks on %d node(s)\n", t_size, n_nodes);
  test_store(DDS_METHOD_MPI);
  test_groups(DDS_METHOD_MPI);
  if (t_method() == 0) { /* DDS_TEST_METHOD=1 already makes the above method 1 */
    test_store(DDS_METHOD_FABRIC);
    test_groups(DDS_METHOD_FABRIC);
  }
  EXPECT(named_segments() == 0);
  free(node_of);
  return t_finish("test_node_local");
}
