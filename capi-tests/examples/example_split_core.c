/* Method 2, core job: each rank holds 1000 rows of 64 floats of variable
 * "train/x" and serves them to separate extra jobs (example_split_extra.c)
 * until one extra process has announced it is done.
 *
 *   DDSTORE_HANDSHAKE_DIR=/shared/scratch/hs mpiexec -n 2 ./example_split_core
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "ddstore.h"

#define OK(call)                                                                \
  do {                                                                          \
    dds_status s_ = (call);                                                     \
    if (s_ != DDS_OK) {                                                         \
      fprintf(stderr, "%s: %s\n", dds_status_string(s_), dds_last_error());     \
      MPI_Abort(MPI_COMM_WORLD, 1);                                             \
    }                                                                           \
  } while (0)

int main(int argc, char **argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  dds_options o;
  dds_store *s;
  OK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT; /* role: DDS_ROLE_CORE, the default */
  o.handshake_dir = NULL;      /* NULL: DDSTORE_HANDSHAKE_DIR, else ./ddstore_hs */
  OK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));

  /* Row g of the whole variable holds g in every element. */
  float *rows = malloc(1000 * 64 * sizeof(float));
  for (int i = 0; i < 1000 * 64; i++) rows[i] = (float)(rank * 1000 + i / 64);
  OK(dds_add(s, "train/x", rows, 1000 * 64 * sizeof(float), 1000, 64, 4)); /* publishes it */
  free(rows); /* the store keeps its own copy */

  /* Serve until one extra process is done (at most an hour), then free. */
  OK(dds_wait_extras(s, 1, 3600 * 1000));
  if (rank == 0) printf("core: the extra job is done\n");
  OK(dds_destroy(s));
  MPI_Finalize();
  return 0;
}
