/* The GPUDirect path without a GPU (docs/gpu.md): the testing aid
 * DDSTORE_TEST_GPU_DIRECT_HOST_IFACE presents host shards and destinations to the
 * provider as memory of a libfabric interface, so the same calls run as for
 * device memory: FI_HMEM in the hints, fi_mr_regattr with the interface,
 * descriptors as FI_MR_HMEM demands, every row (this rank's own too) read
 * by the fabric. With FI_HMEM_SYSTEM the shm provider takes the
 * registrations; with FI_HMEM_CUDA on a machine without CUDA it refuses
 * them, which exercises the fallback (per shard and per destination).
 * Each case sets the environment before dds_create (settings are read then). */
#include "common.h"

#define ELEMS 5
static const int64_t rows_per_rank = 24;
static const int tag = 31;

static void set_env(const char *fabric, const char *iface, const char *direct) {
  setenv("DDSTORE_FABRIC", fabric, 1);
  if (iface)
    setenv("DDSTORE_TEST_GPU_DIRECT_HOST_IFACE", iface, 1);
  else
    unsetenv("DDSTORE_TEST_GPU_DIRECT_HOST_IFACE");
  if (direct)
    setenv("DDSTORE_GPU_DIRECT", direct, 1);
  else
    unsetenv("DDSTORE_GPU_DIRECT");
}

static dds_store *make(int method) {
  dds_store *s = t_store(method, 0);
  double *buf = malloc(sizeof(double) * (size_t)(rows_per_rank * ELEMS));
  t_fill(buf, rows_per_rank, ELEMS, 8, tag, rows_per_rank * t_rank);
  CHECK(dds_add(s, "v", buf, sizeof(double) * (size_t)(rows_per_rank * ELEMS), rows_per_rank, ELEMS, 8));
  free(buf);
  return s;
}

static uint64_t mr_miss(dds_store *s) {
  dds_counters c = {.struct_size = sizeof c};
  CHECK(dds_profile(s, "v", &c));
  return c.mr_miss;
}

/* Every row of every rank singly, then a reversed batch with repeats; all
 * into fresh heap buffers. Returns 1 when every byte is right. */
static int read_all(dds_store *s) {
  int64_t total = rows_per_rank * t_size;
  int ok = 1;
  double row[ELEMS];
  for (int64_t g = 0; g < total; g++) {
    memset(row, 0xff, sizeof row);
    CHECK(dds_get(s, "v", row, sizeof row, g, 1));
    ok &= t_rows_ok(row, 1, ELEMS, 8, tag, NULL, g);
  }
  int64_t n = total + 7, *idx = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) idx[i] = (total - 1 - i % total + t_rank) % total;
  double *rows = malloc(sizeof(double) * (size_t)(n * ELEMS));
  memset(rows, 0xff, sizeof(double) * (size_t)(n * ELEMS));
  CHECK(dds_get_batch(s, "v", rows, sizeof(double) * (size_t)(n * ELEMS), idx, n));
  ok &= t_rows_ok(rows, n, ELEMS, 8, tag, idx, 0);
  /* A whole shard at once (one read of rows_per_rank rows). */
  double *shard = malloc(sizeof(double) * (size_t)(rows_per_rank * ELEMS));
  int64_t first = rows_per_rank * ((t_rank + 1) % t_size);
  CHECK(dds_get(s, "v", shard, sizeof(double) * (size_t)(rows_per_rank * ELEMS), first, rows_per_rank));
  ok &= t_rows_ok(shard, rows_per_rank, ELEMS, 8, tag, NULL, first);
  free(shard);
  free(rows);
  free(idx);
  return ok;
}

static dds_var_info info_of(dds_store *s) {
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "v", &info));
  return info;
}

/* FI_HMEM_SYSTEM through shm: registered through fi_mr_regattr, descriptors
 * passed (shm reports FI_MR_HMEM), rows right. */
static void test_system_iface(void) {
  set_env("shm", "system", NULL);
  dds_store *s = make(DDS_METHOD_FABRIC);
  dds_var_info info = info_of(s);
  EXPECT(strcmp(info.transport, "fabric:shm@shm+hmem:system") == 0);
  EXPECT(info.device_path == DDS_PATH_GPUDIRECT);
  if (t_rank == 0) printf("system: transport %s, device_path %d\n", info.transport, info.device_path);
  uint64_t before = mr_miss(s);
  EXPECT(read_all(s));
  /* Each fresh destination was registered with its interface (FI_MR_HMEM
   * wants a descriptor even for local buffers; plain shm needs none). */
  EXPECT(mr_miss(s) > before);
  /* A registered buffer is used without registering again. */
  double *buf = malloc(sizeof(double) * (size_t)(rows_per_rank * ELEMS));
  CHECK(dds_register_recv(s, "v", buf, sizeof(double) * (size_t)(rows_per_rank * ELEMS)));
  uint64_t pinned = mr_miss(s);
  int ok = 1;
  for (int r = 0; r < t_size; r++) {
    CHECK(dds_get(s, "v", buf, sizeof(double) * (size_t)ELEMS * 3, (int64_t)r * rows_per_rank + 2, 3));
    ok &= t_rows_ok(buf, 3, ELEMS, 8, tag, NULL, (int64_t)r * rows_per_rank + 2);
  }
  EXPECT(ok);
  EXPECT(mr_miss(s) == pinned);
  CHECK(dds_unregister_recv(s, "v", buf));
  free(buf);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
}

/* FI_HMEM_CUDA without CUDA: shm (a libfabric built without CUDA, as
 * Debian's and on the H200 check) refuses every registration with
 * FI_ENOSYS. The shard falls back to fi_mr_reg (no interface in the
 * transport name), the store remembers the refusal (device_path no longer
 * GPUDirect: these "device" buffers are host memory under the testing aid,
 * so host-only; staged for real device memory) and each destination takes
 * the host path (nothing registered), with the same rows. */
static void test_refused_iface_falls_back(void) {
  set_env("shm", "cuda", NULL);
  dds_store *s = make(DDS_METHOD_FABRIC);
  dds_var_info info = info_of(s);
  EXPECT(strcmp(info.transport, "fabric:shm@shm+hmem") == 0);
  EXPECT(info.device_path == DDS_PATH_HOST_ONLY);
  if (t_rank == 0) printf("cuda (refused): transport %s\n", info.transport);
  EXPECT(read_all(s));
  EXPECT(mr_miss(s) == 0);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
}

/* DDSTORE_GPU_DIRECT=1 never falls back: a refused registration fails the
 * read with the provider's reason, and the store stays usable. */
static void test_forced_refusal_is_an_error(void) {
  set_env("shm", "cuda", "1");
  dds_store *s = make(DDS_METHOD_FABRIC);
  double row[ELEMS];
  EXPECT_ERR(dds_get(s, "v", row, sizeof row, 0, 1), DDS_ERR_GPU, "registration was refused");
  EXPECT(strstr(dds_last_error(), "fi_mr_regattr (iface cuda") != NULL);
  int64_t idx[2] = {1, 0};
  double rows[2 * ELEMS];
  EXPECT_ERR(dds_get_batch(s, "v", rows, sizeof rows, idx, 2), DDS_ERR_GPU, "DDSTORE_GPU_DIRECT=1");
  EXPECT(info_of(s).total_rows == rows_per_rank * t_size);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
}

/* DDSTORE_GPU_DIRECT=0: FI_HMEM is not even asked for. */
static void test_direct_off(void) {
  set_env("shm", "system", "off");
  dds_store *s = make(DDS_METHOD_FABRIC);
  dds_var_info info = info_of(s);
  EXPECT(strcmp(info.transport, "fabric:shm@shm") == 0);
  EXPECT(info.device_path == DDS_PATH_HOST_ONLY);
  EXPECT(read_all(s));
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
}

/* A provider without FI_HMEM (tcp;ofi_rxm in libfabric 1.17) and method 0:
 * auto reads as host memory; DDSTORE_GPU_DIRECT=1 refuses, naming why
 * (method 0's batch fails on every rank together). */
static void test_no_hmem(void) {
  set_env("tcp", "system", NULL);
  dds_store *s = make(DDS_METHOD_FABRIC);
  dds_var_info info = info_of(s);
  int hmem = strstr(info.transport, "+hmem") != NULL;
  if (t_rank == 0) printf("tcp: transport %s\n", info.transport);
  EXPECT(hmem || info.device_path == DDS_PATH_HOST_ONLY);
  EXPECT(read_all(s));
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
  double row[ELEMS];
  if (!hmem) {
    set_env("tcp", "system", "1");
    s = make(DDS_METHOD_FABRIC);
    EXPECT(info_of(s).device_path == DDS_PATH_REFUSED);
    EXPECT_ERR(dds_get(s, "v", row, sizeof row, 0, 1), DDS_ERR_GPU, "reports no FI_HMEM");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(dds_destroy(s));
  }
  set_env("tcp", "system", "1");
  s = make(DDS_METHOD_MPI);
  EXPECT(info_of(s).device_path == DDS_PATH_REFUSED);
  EXPECT_ERR(dds_get(s, "v", row, sizeof row, 0, 1), DDS_ERR_GPU, "method 0 (MPI) has no FI_HMEM");
  int64_t idx[1] = {0};
  EXPECT_ERR(dds_get_batch(s, "v", row, sizeof row, idx, 1), DDS_ERR_GPU, "method 0");
  CHECK(dds_destroy(s));
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  setenv("DDSTORE_NODE_LOCAL", "0", 1);
  test_system_iface();
  test_refused_iface_falls_back();
  test_forced_refusal_is_an_error();
  test_direct_off();
  test_no_hmem();
  set_env("shm", NULL, NULL);
  return t_finish("test_gpudirect");
}
