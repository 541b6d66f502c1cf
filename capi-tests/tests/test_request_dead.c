/* A peer that dies while a request is in flight (method 1): rank 1 exits
 * abruptly after a barrier; rank 0's requests for its rows must complete
 * with DDS_ERR_TIMEOUT (DDSTORE_READ_TIMEOUT_S=3) or DDS_ERR_FABRIC, waited
 * for in the order started and in reverse, never hang; a request for its
 * own rows still succeeds. The verdict is rank 0's PASS/FAIL line (as in
 * test_fabric_dead, whose /dev/shm clean-up this copies in spirit). */
#include <dirent.h>
#include <unistd.h>

#include "common.h"

static void remove_shm_of(long pid) {
  char fab[32], seg[40];
  snprintf(fab, sizeof fab, "%ld:", pid);
  snprintf(seg, sizeof seg, "ddstore.%ld.", pid);
  DIR *d = opendir("/dev/shm");
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, fab, strlen(fab)) != 0 && strncmp(e->d_name, seg, strlen(seg)) != 0) continue;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  if (t_size != 2) {
    if (t_rank == 0) printf("test_request_dead needs 2 ranks: PASS (skipped)\n");
    MPI_Finalize();
    return 0;
  }
  setenv("DDSTORE_READ_TIMEOUT_S", "3", 1);
  setenv("DDSTORE_NODE_LOCAL", "0", 1); /* this test is about the fabric */
  long pids[2], me = (long)getpid();
  MPI_Allgather(&me, 1, MPI_LONG, pids, 1, MPI_LONG, MPI_COMM_WORLD);
  dds_store *s = t_store(DDS_METHOD_FABRIC, 0);
  double rows[4 * 2];
  t_fill(rows, 4, 2, 8, 3, 4 * t_rank);
  CHECK(dds_add(s, "v", rows, sizeof rows, 4, 2, 8));
  double row[2];
  CHECK(dds_get(s, "v", row, sizeof row, 4 * (1 - t_rank), 1)); /* connections are up */
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 1) {
    fflush(stdout);
    _exit(0);
  }
  usleep(500000); /* rank 1 is gone */
  enum { K = 4 };
  int64_t idx[K][3] = {{5, 6, 0}, {4, 7, 7}, {1, 2, 3}, {6, 1, 5}};
  double out[K][3 * 2];
  dds_request *req[K];
  double t = MPI_Wtime();
  int ok = 1;
  for (int k = 0; k < K; k++) {
    dds_status st = dds_get_batch_start(s, "v", out[k], sizeof out[k], idx[k], 3, &req[k]);
    if (st != DDS_OK) {
      printf("rank 0: start %d -> %s: %s\n", k, dds_status_string(st), dds_last_error());
      ok = 0;
      req[k] = NULL;
    }
  }
  int done = 0;
  if (req[0]) dds_request_test(req[0], &done); /* never blocks */
  int order[K] = {3, 0, 2, 1};
  for (int j = 0; j < K; j++) {
    int k = order[j];
    if (!req[k]) continue;
    dds_status st = dds_request_wait(req[k]);
    printf("rank 0: request %d -> %s after %.1f s: %s\n", k, dds_status_string(st), MPI_Wtime() - t,
           st ? dds_last_error() : "");
    if (k == 2) {
      ok = ok && st == DDS_OK && t_rows_ok(out[k], 3, 2, 8, 3, idx[k], 0);
    } else {
      ok = ok && (st == DDS_ERR_TIMEOUT || st == DDS_ERR_FABRIC);
    }
  }
  double took = MPI_Wtime() - t;
  ok = ok && took < 60;
  remove_shm_of(pids[1]);
  remove_shm_of(pids[0]);
  printf("test_request_dead: %s\n", ok ? "PASS" : "FAIL");
  fflush(stdout);
  _exit(ok ? 0 : 1);
}
