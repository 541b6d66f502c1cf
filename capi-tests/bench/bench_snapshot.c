/* Snapshot throughput (issue 38, docs/snapshots.md): dds_save and dds_load
 * of MIB MiB per rank into DIR, against `dd oflag=direct` / `iflag=direct`
 * of the same bytes per rank into the same directory in the same run (the
 * file system's floor). Figures only, no assertion:
 *
 *   mpiexec -n 2 bench_snapshot DIR [MIB]      (default 1024 MiB per rank)
 *
 * Each figure is the slowest rank's time (barriers around every phase),
 * as aggregate GiB/s over all ranks. The page cache is not dropped (that
 * needs root on a quiet node): load figures after a save read cached data
 * unless the snapshot exceeds memory. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddstore.h"

static int rank, size;

static double phase(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  return MPI_Wtime();
}

static void check(dds_status s, const char *what) {
  if (s != DDS_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, dds_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static void report(const char *what, double bytes, double t) {
  if (rank == 0) printf("%-28s %8.3f s  %7.2f GiB/s (%d ranks)\n", what, t, bytes / t / (1 << 30), size);
}

static void dd(const char *dir, long mib, int write) {
  char cmd[4096];
  if (write)
    snprintf(cmd, sizeof cmd, "dd if=/dev/zero of='%s/dd.%d' bs=4M count=%ld oflag=direct status=none", dir, rank,
             mib / 4);
  else
    snprintf(cmd, sizeof cmd, "dd if='%s/dd.%d' of=/dev/null bs=4M iflag=direct status=none", dir, rank);
  if (system(cmd) != 0) fprintf(stderr, "rank %d: '%s' failed\n", rank, cmd);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: bench_snapshot DIR [MIB per rank]\n");
    MPI_Finalize();
    return 2;
  }
  const char *dir = argv[1];
  long mib = argc > 2 ? atol(argv[2]) : 1024;
  mib = mib < 4 ? 4 : mib - mib % 4;
  const int64_t elems = 1024, rows = mib * 128; /* 8 KiB rows */
  const double total = (double)mib * (1 << 20) * size;
  char snap[4096];
  snprintf(snap, sizeof snap, "%s/snap", dir);

  double *data = malloc((size_t)rows * elems * 8);
  for (int64_t i = 0; i < rows * elems; i++) data[i] = (double)(rank * 7 + i);
  dds_options o;
  dds_store *s = NULL, *t = NULL;
  check(dds_options_init(&o), "dds_options_init");
  check(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), "dds_create");
  check(dds_add(s, "x", data, (size_t)rows * elems * 8, rows, elems, 8), "dds_add");
  free(data);

  double t0 = phase();
  dd(dir, mib, 1);
  report("dd oflag=direct", total, phase() - t0);
  t0 = phase();
  check(dds_save(s, snap, NULL, 0), "dds_save");
  report("dds_save", total, phase() - t0);
  check(dds_destroy(s), "dds_destroy");

  t0 = phase();
  dd(dir, mib, 0);
  report("dd iflag=direct", total, phase() - t0);
  check(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &t), "dds_create");
  t0 = phase();
  check(dds_load(t, snap, NULL, 0), "dds_load");
  report("dds_load (page cache warm)", total, phase() - t0);
  check(dds_destroy(t), "dds_destroy");
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -f '%s/dd.%d'", dir, rank);
  if (system(cmd) != 0) fprintf(stderr, "rank %d: cleanup failed\n", rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", snap);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", snap);
  }
  MPI_Finalize();
  return 0;
}
