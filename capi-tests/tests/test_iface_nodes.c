/* Method 1 across simulated nodes (scripts/netns-iface.sh runs it, one rank
 * per node): which network interface dds_create takes when none is named.
 *   test_iface_nodes read IFACE   every row of every rank read and checked,
 *                                 and the store's transport uses IFACE;
 *   test_iface_nodes fail IFACE   dds_create fails on every rank with
 *                                 DDS_ERR_FABRIC naming FABRIC_IFACE and IFACE;
 *   test_iface_nodes timeout IFACE  the store uses IFACE, which reaches no
 *                                 peer: the read times out, naming IFACE and
 *                                 FABRIC_IFACE. */
#include "common.h"

#define ROWS 300
#define ELEMS 64

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  if (argc != 3 || (strcmp(argv[1], "read") && strcmp(argv[1], "fail") && strcmp(argv[1], "timeout"))) {
    if (t_rank == 0) fprintf(stderr, "usage: %s read|fail|timeout IFACE\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *iface = argv[2];
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  dds_options o;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_FABRIC;
  dds_store *s = NULL;
  if (strcmp(argv[1], "fail") == 0) {
    EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_FABRIC, "FABRIC_IFACE");
    EXPECT(strstr(dds_last_error(), iface) != NULL);
    printf("rank %d on %s: %s\n", t_rank, host, dds_last_error());
    return t_finish("test_iface_nodes fail");
  }
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  double *mine = malloc(sizeof(double) * ROWS * ELEMS);
  t_fill(mine, ROWS, ELEMS, 8, 7, (long long)t_rank * ROWS);
  CHECK(dds_add(s, "x", mine, sizeof(double) * ROWS * ELEMS, ROWS, ELEMS, 8));
  dds_var_info info = {.struct_size = sizeof info};
  CHECK(dds_info(s, "x", &info));
  char want[80];
  snprintf(want, sizeof want, "@%s", iface);
  EXPECT(strstr(info.transport, want) != NULL);
  printf("rank %d on %s: transport %s\n", t_rank, host, info.transport);
  CHECK(dds_epoch_begin(s));
  /* Every row of the next rank's shard (on the other node), one read. */
  int peer = (t_rank + 1) % t_size;
  double *got = calloc(ROWS * ELEMS, sizeof(double));
  dds_status st = dds_get(s, "x", got, sizeof(double) * ROWS * ELEMS, (int64_t)peer * ROWS, ROWS);
  if (st != DDS_OK) printf("rank %d on %s: %s: %s\n", t_rank, host, dds_status_string(st), dds_last_error());
  if (strcmp(argv[1], "timeout") == 0) {
    char part[80];
    snprintf(part, sizeof part, "interface %s (", iface);
    EXPECT(st == DDS_ERR_TIMEOUT && strstr(dds_last_error(), part) && strstr(dds_last_error(), "does not reach it") &&
           strstr(dds_last_error(), "FABRIC_IFACE"));
  } else {
    EXPECT(st == DDS_OK && t_rows_ok(got, ROWS, ELEMS, 8, 7, NULL, (long long)peer * ROWS));
  }
  CHECK(dds_epoch_end(s));
  CHECK(dds_destroy(s));
  free(mine);
  free(got);
  return t_finish(strcmp(argv[1], "read") ? "test_iface_nodes timeout" : "test_iface_nodes read");
}
