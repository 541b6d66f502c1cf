/* A rank killed while its node registers a variable (issue 35, item 3).
 * Run by run_shm_crash.sh:
 *
 *   test_shm_crash crash   every rank prints its pid, then dds_add with
 *                          node-local reads on; the testing aid
 *                          DDSTORE_TEST_SEGMENT_DELAY_S holds each rank in
 *                          the window in which its segment still has a
 *                          name, and the last rank kills itself (SIGKILL)
 *                          in it; the job dies with the segments named.
 *   test_shm_crash create  one dds_create and dds_destroy: removes the
 *                          segments of processes that no longer exist. */
#include "common.h"

#include <pthread.h>
#include <signal.h>

static void *killer(void *arg) {
  (void)arg;
  usleep(700 * 1000); /* well inside the segment delay */
  raise(SIGKILL);
  return NULL;
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  const int crash = argc > 1 && strcmp(argv[1], "crash") == 0;
  if (crash) {
    printf("pid %d %d\n", t_rank, (int)getpid());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t t;
    if (t_rank == t_size - 1) pthread_create(&t, NULL, killer, NULL);
  }
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  if (crash) {
    enum { ROWS = 256, ELEMS = 1024 }; /* 1 MiB per rank */
    float *data = calloc(ROWS * ELEMS, sizeof(float));
    dds_add(s, "x", data, sizeof(float) * ROWS * ELEMS, ROWS, ELEMS, 4);
    fprintf(stderr, "rank %d: dds_add returned: the kill came too late\n", t_rank);
    free(data);
  }
  CHECK(dds_destroy(s));
  return t_finish(crash ? "test_shm_crash crash" : "test_shm_crash create");
}
