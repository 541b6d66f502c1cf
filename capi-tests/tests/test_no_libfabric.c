/* Run by scripts/check-no-libfabric.sh where libfabric cannot be loaded (a
 * mount namespace hides it), not by ctest: method 0 works in full, and a
 * method-1 or method-2 store fails on every rank with DDS_ERR_FABRIC naming
 * libfabric, leaving the process able to make more method-0 stores. */
#include "common.h"

#define ELEMS 3

static void method0_store(void) {
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_MPI;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  double buf[8 * ELEMS], row[ELEMS];
  t_fill(buf, 8, ELEMS, 8, 3, 8 * t_rank);
  CHECK(dds_add(s, "v", buf, sizeof buf, 8, ELEMS, 8));
  int ok = 1;
  for (int64_t g = 0; g < 8 * t_size; g++) {
    CHECK(dds_get(s, "v", row, sizeof row, g, 1));
    ok &= t_rows_ok(row, 1, ELEMS, 8, 3, NULL, g);
  }
  EXPECT(ok);
  CHECK(dds_destroy(s));
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  method0_store();
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_FABRIC;
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_FABRIC, "libfabric: cannot load libfabric");
  EXPECT(s == NULL);
  /* Asked again: the same answer (the load is tried once per process). */
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_FABRIC, "LD_LIBRARY_PATH");
  method0_store();
  return t_finish("test_no_libfabric");
}
