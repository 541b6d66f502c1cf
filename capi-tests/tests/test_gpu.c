/* Device-memory support as seen without a GPU (and, where a driver exists,
 * the parts that need no device buffer): pointer classification, the
 * DDSTORE_GPU=require failure, the stream-ordered read variants with NULL
 * and non-NULL streams, and dds_info's device_path. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

static int have_driver;

static void expect_host(const void *p, const char *what) {
  int32_t kind = 77, dev = 77;
  dds_status s = dds_pointer_kind(p, &kind, &dev);
  if (s == DDS_OK && kind == DDS_MEM_HOST && dev == -1) {
    t_passed++;
  } else {
    t_failed++;
    fprintf(stderr, "rank %d: %s %p: status %s kind %d device %d (%s)\n", t_rank, what, p, dds_status_string(s),
            kind, dev, dds_last_error());
  }
}

static void classification(dds_store *s) {
  char on_stack[256];
  char *heap = malloc(1 << 20);
  void *anon = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char shm_name[64];
  snprintf(shm_name, sizeof shm_name, "/dds_test_gpu_%d_%d", (int)getpid(), t_rank);
  int fd = shm_open(shm_name, O_CREAT | O_RDWR, 0600);
  EXPECT(fd >= 0 && ftruncate(fd, 1 << 16) == 0);
  void *shm = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  void *mpi_mem = NULL;
  MPI_Alloc_mem(1 << 16, MPI_INFO_NULL, &mpi_mem);
  EXPECT(anon != MAP_FAILED && shm != MAP_FAILED && mpi_mem != NULL);

  expect_host(on_stack, "stack");
  expect_host(heap, "heap");
  expect_host(heap + 12345, "heap interior");
  expect_host(anon, "mmap");
  expect_host(shm, "shm");
  expect_host(mpi_mem, "MPI_Alloc_mem");
  expect_host(NULL, "NULL");
  expect_host((void *)&classification, "code");
  /* A registered destination is still host memory. */
  CHECK(dds_register_recv(s, "v", heap, 1 << 20));
  expect_host(heap, "registered");
  CHECK(dds_unregister_recv(s, "v", heap));
  EXPECT_ERR(dds_pointer_kind(heap, NULL, NULL), DDS_ERR_INVALID_ARGUMENT, "kind is NULL");
  int32_t kind = -5;
  CHECK(dds_pointer_kind(heap, &kind, NULL)); /* device may be NULL */
  EXPECT(kind == DDS_MEM_HOST);

  MPI_Free_mem(mpi_mem);
  munmap(shm, 1 << 16);
  close(fd);
  shm_unlink(shm_name);
  munmap(anon, 1 << 16);
  free(heap);
}

/* DDSTORE_GPU=require (option and environment) fails on every rank without a driver. */
static void require(void) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  EXPECT(o.gpu == DDS_GPU_ENV && o.gpu_staging == -1);
  o.method = t_method();
  o.gpu = DDS_GPU_REQUIRE;
  dds_status st = dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s);
  if (have_driver) {
    EXPECT(st == DDS_OK);
    if (st == DDS_OK) CHECK(dds_destroy(s));
  } else {
    EXPECT(st == DDS_ERR_GPU && s == NULL);
    EXPECT(strstr(dds_last_error(), "GPU support was required") && strstr(dds_last_error(), "no GPU driver"));
  }
  /* The same through the environment. */
  setenv("DDSTORE_GPU", "require", 1);
  CHECK(dds_options_init(&o));
  o.method = t_method();
  s = NULL;
  st = dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s);
  EXPECT(have_driver ? st == DDS_OK : st == DDS_ERR_GPU);
  if (st == DDS_OK) CHECK(dds_destroy(s));
  /* The option overrides the environment. */
  o.gpu = DDS_GPU_OFF;
  s = NULL;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  CHECK(dds_destroy(s));
  unsetenv("DDSTORE_GPU");
  setenv("DDSTORE_GPU", "sometimes", 1);
  CHECK(dds_options_init(&o));
  o.method = t_method();
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT, "DDSTORE_GPU");
  unsetenv("DDSTORE_GPU");
  CHECK(dds_options_init(&o));
  o.gpu = 9;
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT, "options.gpu 9");
  /* A caller built before the GPU fields existed gets the defaults. */
  CHECK(dds_options_init(&o));
  o.method = t_method();
  o.struct_size = (uint32_t)offsetof(dds_options, gpu);
  o.gpu = 12345; /* beyond the old struct: must be ignored */
  s = NULL;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  CHECK(dds_destroy(s));
}

enum { ELEMS = 5, ITEM = 8, TAG = 3 };

static void streams(dds_store *s, int gpu_off) {
  long long total = 0;
  dds_var_info info = {.struct_size = sizeof(dds_var_info)};
  CHECK(dds_info(s, "v", &info));
  total = info.total_rows;
  if (gpu_off || !have_driver)
    EXPECT(info.device_path == DDS_PATH_HOST_ONLY);
  else if (strstr(info.transport, "+hmem")) /* a provider serving FI_HMEM (GPUDirect) */
    EXPECT(info.device_path == DDS_PATH_GPUDIRECT);
  else
    EXPECT(info.device_path == DDS_PATH_STAGED);

  /* NULL stream: byte for byte what dds_get / dds_get_batch give. */
  size_t rb = ELEMS * ITEM;
  double a[ELEMS * 3], b[ELEMS * 3];
  for (long long g = 0; g < total; g++) {
    memset(a, 0x5a, sizeof a);
    memset(b, 0xa5, sizeof b);
    CHECK(dds_get(s, "v", a, rb, g, 1));
    CHECK(dds_get_stream(s, "v", b, rb, g, 1, NULL));
    EXPECT(memcmp(a, b, rb) == 0 && t_rows_ok(b, 1, ELEMS, ITEM, TAG, NULL, g));
  }
  int64_t idx[3] = {total - 1, 0, (t_rank * 7) % total};
  memset(a, 0x5a, sizeof a);
  memset(b, 0xa5, sizeof b);
  CHECK(dds_get_batch(s, "v", a, 3 * rb, idx, 3));
  CHECK(dds_get_batch_stream(s, "v", b, 3 * rb, idx, 3, NULL));
  EXPECT(memcmp(a, b, 3 * rb) == 0 && t_rows_ok(b, 3, ELEMS, ITEM, TAG, idx, 0));
  /* Errors are the same as without a stream. */
  EXPECT_ERR(dds_get_stream(s, "v", b, rb, total, 1, NULL), DDS_ERR_INDEX_OUT_OF_RANGE, "out of range");
  EXPECT_ERR(dds_get_stream(s, "nope", b, rb, 0, 1, NULL), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  EXPECT_ERR(dds_get_stream(s, "v", b, rb + 1, 0, 1, NULL), DDS_ERR_MISMATCH, "destination");

  /* A non-NULL stream (CU_STREAM_LEGACY's value) needs a usable driver and
   * GPU support on; the batch form fails on every rank together. */
  void *legacy = (void *)0x1;
  dds_status st1 = dds_get_stream(s, "v", b, rb, 0, 1, legacy);
  const char *m1 = dds_last_error();
  if (gpu_off) {
    EXPECT(st1 == DDS_ERR_GPU && strstr(m1, "GPU support is off"));
  } else if (!have_driver) {
    EXPECT(st1 == DDS_ERR_GPU && strstr(m1, "no GPU driver") && strstr(m1, "dds_get_stream"));
  } else {
    if (st1 != DDS_OK) printf("rank %d: dds_get_stream(CU_STREAM_LEGACY): %s\n", t_rank, m1);
    EXPECT(st1 == DDS_OK && t_rows_ok(b, 1, ELEMS, ITEM, TAG, NULL, 0));
  }
  dds_status st2 = dds_get_batch_stream(s, "v", b, 3 * rb, idx, 3, legacy);
  if ((have_driver && !gpu_off) && st2 != DDS_OK)
    printf("rank %d: dds_get_batch_stream(CU_STREAM_LEGACY): %s\n", t_rank, dds_last_error());
  EXPECT((have_driver && !gpu_off) ? st2 == DDS_OK : st2 == DDS_ERR_GPU);
  /* The store is still usable. */
  memset(b, 0, sizeof b);
  CHECK(dds_get_batch_stream(s, "v", b, 3 * rb, idx, 3, NULL));
  EXPECT(t_rows_ok(b, 3, ELEMS, ITEM, TAG, idx, 0));
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  int32_t n = -1;
  dds_status st = dds_gpu_available(&n);
  have_driver = st == DDS_OK;
  if (have_driver) {
    EXPECT(n > 0);
  } else {
    EXPECT(st == DDS_ERR_GPU && n == 0 && strstr(dds_last_error(), "dds_gpu_available: "));
  }
  if (t_rank == 0) printf("GPU driver: %s\n", have_driver ? "present" : dds_last_error());
  /* Every rank must see the same; a mixed job would deadlock the require test. */
  int mine = have_driver, lo, hi;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT(lo == hi);

  long long rows = 2 + t_rank;
  for (int off = 0; off <= 1; off++) {
    dds_options o;
    dds_store *s = NULL;
    CHECK(dds_options_init(&o));
    o.method = t_method();
    if (off) o.gpu = DDS_GPU_OFF;
    CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
    long long first = 0;
    for (int r = 0; r < t_rank; r++) first += 2 + r;
    double *data = malloc((size_t)rows * ELEMS * ITEM);
    t_fill(data, rows, ELEMS, ITEM, TAG, first);
    CHECK(dds_add(s, "v", data, (size_t)rows * ELEMS * ITEM, rows, ELEMS, ITEM));
    CHECK(dds_update(s, "v", data, ELEMS * ITEM, 0));
    free(data);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!off) classification(s);
    streams(s, off);
    CHECK(dds_destroy(s));
  }
  require();
  return t_finish("test_gpu");
}
