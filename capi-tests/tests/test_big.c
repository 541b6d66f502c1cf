/* A row larger than 2 GiB (so every MPI transfer of it needs more than a C
 * int of bytes): dds_get and the collective dds_get_batch both move it
 * intact between two ranks. Needs about 13 GB of memory over two ranks;
 * DDSTORE_TEST_BIG=0 turns it off on small machines. */
#include <stdint.h>

#include "common.h"

static unsigned char pattern(int64_t i, int rank) { return (unsigned char)((i * 31 + rank * 7 + (i >> 20)) & 0xff); }

static int64_t first_mismatch(const unsigned char *p, int64_t n, int rank) {
  for (int64_t i = 0; i < n; i++)
    if (p[i] != pattern(i, rank)) return i;
  return -1;
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  const char *on = getenv("DDSTORE_TEST_BIG");
  if (on && strcmp(on, "0") == 0) {
    if (t_rank == 0) printf("test_big: turned off by DDSTORE_TEST_BIG=0 (nothing was tested)\n");
    MPI_Finalize();
    return 0;
  }
  const int64_t row = ((int64_t)1 << 31) + 4099; /* 2 GiB + a remainder */
  unsigned char *buf = malloc((size_t)row);
  if (!buf) {
    fprintf(stderr, "rank %d: cannot allocate %lld bytes\n", t_rank, (long long)row);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int64_t i = 0; i < row; i++) buf[i] = pattern(i, t_rank);
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  CHECK(dds_add(s, "big", buf, (size_t)row, 1, row, 1));

  int other = (t_rank + 1) % t_size;
  memset(buf, 0, (size_t)row);
  CHECK(dds_get(s, "big", buf, (size_t)row, other, 1));
  int64_t bad = first_mismatch(buf, row, other);
  if (bad >= 0) fprintf(stderr, "rank %d: dds_get byte %lld differs\n", t_rank, (long long)bad);
  EXPECT(bad < 0);

  memset(buf, 0, (size_t)row);
  int64_t g = other;
  CHECK(dds_get_batch(s, "big", buf, (size_t)row, &g, 1));
  bad = first_mismatch(buf, row, other);
  if (bad >= 0) fprintf(stderr, "rank %d: dds_get_batch byte %lld differs\n", t_rank, (long long)bad);
  EXPECT(bad < 0);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(dds_destroy(s));
  free(buf);
  return t_finish("test_big");
}
