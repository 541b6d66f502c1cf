/* A peer that dies mid-run: rank 1 exits abruptly (no MPI_Finalize, no
 * dds_destroy) after a barrier; rank 0 then reads its rows and must get
 * DDS_ERR_TIMEOUT (DDSTORE_READ_TIMEOUT_S=3) or DDS_ERR_FABRIC, not hang.
 * mpiexec reports the dead rank, so the test passes on rank 0's "PASS" line.
 * Rank 0 also leaves with _exit: MPI cannot finalise with a dead peer. */
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include "common.h"

/* Removes what a process that cannot clean up after itself (killed, or
 * leaving with _exit) left in `dir`: libfabric shm regions, named
 * "<pid>:<n>:<n>" (in /dev/shm), and libddstore node-local segments,
 * "ddstore.<pid>.<n>" (in /dev/shm or DDSTORE_SHM_DIR). Returns how many were
 * removed. scripts/check-dev-shm.sh checks at the end of make test that
 * nothing of the suite's is left. */
static int remove_shm_in(const char *dir, long pid) {
  char fab[32], seg[40];
  snprintf(fab, sizeof fab, "%ld:", pid);
  snprintf(seg, sizeof seg, "ddstore.%ld.", pid);
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, fab, strlen(fab)) != 0 && strncmp(e->d_name, seg, strlen(seg)) != 0) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) == 0) n++;
  }
  if (d) closedir(d);
  return n;
}

static int remove_shm_of(long pid) {
  const char *dir = getenv("DDSTORE_SHM_DIR");
  int n = remove_shm_in("/dev/shm", pid);
  if (dir && *dir && strcmp(dir, "/dev/shm") != 0) n += remove_shm_in(dir, pid);
  return n;
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  if (t_size != 2) {
    if (t_rank == 0) printf("test_fabric_dead needs 2 ranks: PASS (skipped)\n");
    MPI_Finalize();
    return 0;
  }
  setenv("DDSTORE_READ_TIMEOUT_S", "3", 1);
  /* The peer is on this node: with node-local reads its rows would still be
   * copied from its (surviving) shared memory. This test is about the fabric. */
  setenv("DDSTORE_NODE_LOCAL", "0", 1);
  long pids[2], me = (long)getpid();
  MPI_Allgather(&me, 1, MPI_LONG, pids, 1, MPI_LONG, MPI_COMM_WORLD);
  dds_store *s = t_store(DDS_METHOD_FABRIC, 0);
  double rows[4 * 2];
  t_fill(rows, 4, 2, 8, 3, 4 * t_rank);
  CHECK(dds_add(s, "v", rows, sizeof rows, 4, 2, 8));
  double row[2];
  CHECK(dds_get(s, "v", row, sizeof row, 4 * (1 - t_rank), 1)); /* connections are up */
  int ok = t_rows_ok(row, 1, 2, 8, 3, NULL, 4 * (1 - t_rank));
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 1) {
    fflush(stdout);
    _exit(0);
  }
  usleep(500000); /* rank 1 is gone */
  double t = MPI_Wtime();
  int64_t idx[3] = {5, 6, 0};
  double out[3 * 2];
  dds_status st = dds_get_batch(s, "v", out, sizeof out, idx, 3);
  double took = MPI_Wtime() - t;
  printf("rank 0: read from a dead peer -> %s after %.1f s: %s\n", dds_status_string(st), took, dds_last_error());
  dds_status st2 = dds_get(s, "v", row, sizeof row, 4, 1);
  printf("rank 0: second read -> %s: %s\n", dds_status_string(st2), dds_last_error());
  /* Local rows still read fine. */
  dds_status st3 = dds_get(s, "v", row, sizeof row, 1, 1);
  ok = ok && (st == DDS_ERR_TIMEOUT || st == DDS_ERR_FABRIC) && (st2 == DDS_ERR_TIMEOUT || st2 == DDS_ERR_FABRIC) &&
       took < 30 && st3 == DDS_OK && t_rows_ok(row, 1, 2, 8, 3, NULL, 1);
  /* Neither rank runs its destructors: rank 0 removes the dead rank's
   * /dev/shm files and its own (unlinking keeps its mappings valid). */
  int removed = remove_shm_of(pids[1]);
  removed += remove_shm_of(pids[0]);
  printf("rank 0: removed %d /dev/shm files of pids %ld and %ld\n", removed, pids[1], pids[0]);
  printf("test_fabric_dead: %s\n", ok ? "PASS" : "FAIL");
  fflush(stdout);
  _exit(ok ? 0 : 1);
}
