/* Method 2, extra job: started separately from the core job
 * (example_split_core.c, 2 ranks), before or after it; joins "train/x" and
 * reads rows of both core ranks.
 *
 *   DDSTORE_HANDSHAKE_DIR=/shared/scratch/hs mpiexec -n 1 ./example_split_extra
 */
#include <mpi.h>
#include <stdio.h>

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
  MPI_Init(&argc, &argv); /* MPI must run, but the extra joins no communicator */

  dds_options o;
  dds_store *s;
  OK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = 2; /* ranks of the core job */
  OK(dds_create(0, &o, &s)); /* local; comm_f is ignored for extras */

  /* Waits (up to DDSTORE_HANDSHAKE_TIMEOUT_S) for the core to publish it,
     and checks the row shape: 64 elements of 4 bytes. */
  OK(dds_join_expect(s, "train/x", 64, 4));

  float out[3][64];
  int64_t idx[3] = {1999, 0, 1000}; /* any rows, any owners, any order */
  OK(dds_get_batch(s, "train/x", out, sizeof out, idx, 3));
  int ok = 1;
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 64; c++) ok = ok && out[i][c] == (float)idx[i];
  printf("extra: rows 1999, 0, 1000 start with %g, %g, %g: %s\n", out[0][0], out[1][0], out[2][0],
         ok ? "correct" : "WRONG");

  OK(dds_extra_done(s)); /* the core may free its memory now */
  OK(dds_destroy(s));
  MPI_Finalize();
  return ok ? 0 : 1;
}
