/* The demo (`make demo`): every rank adds a shard of a table, then reads
 * random rows and batches from all ranks and checks them. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddstore.h"

#define TRY(call)                                                                            \
  do {                                                                                       \
    dds_status st = (call);                                                                  \
    if (st != DDS_OK) {                                                                      \
      fprintf(stderr, "%s failed: %s: %s\n", #call, dds_status_string(st), dds_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
    }                                                                                        \
  } while (0)

enum { ROWS = 1000, COLS = 16 };

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Each rank holds ROWS rows; element c of global row g is g + c / 100. */
  double *shard = malloc(sizeof(double) * ROWS * COLS);
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) shard[r * COLS + c] = (double)(rank * ROWS + r) + c / 100.0;

  dds_store *store;
  TRY(dds_create_comm(MPI_COMM_WORLD, NULL, &store));
  TRY(dds_add(store, "table", shard, sizeof(double) * ROWS * COLS, ROWS, COLS, sizeof(double)));
  free(shard); /* the store holds its own copy */

  dds_var_info info = {.struct_size = sizeof info};
  TRY(dds_info(store, "table", &info));
  if (rank == 0)
    printf("libddstore %s: variable 'table' has %lld rows of %lld doubles over %d ranks (%s)\n", dds_version(),
           (long long)info.total_rows, (long long)info.row_elems, size, info.transport);

  /* Single rows from anywhere. */
  srand(42 + rank);
  double row[COLS];
  int bad = 0;
  for (int i = 0; i < 5; i++) {
    int64_t g = rand() % info.total_rows;
    TRY(dds_get(store, "table", row, sizeof row, g, 1));
    bad += row[0] != (double)g || row[COLS - 1] != (double)g + (COLS - 1) / 100.0;
    printf("rank %d read row %5lld (held by rank %lld): [%.2f ... %.2f]\n", rank, (long long)g,
           (long long)(g / ROWS), row[0], row[COLS - 1]);
  }

  /* A batch of 256 random rows (collective with method 0). */
  int64_t idx[256];
  double *batch = malloc(sizeof(double) * 256 * COLS);
  for (int i = 0; i < 256; i++) idx[i] = rand() % info.total_rows;
  TRY(dds_get_batch(store, "table", batch, sizeof(double) * 256 * COLS, idx, 256));
  for (int i = 0; i < 256; i++) bad += batch[i * COLS] != (double)idx[i];
  printf("rank %d read a batch of 256 random rows: %s\n", rank, bad ? "WRONG DATA" : "all verified");
  free(batch);

  int any_bad;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  TRY(dds_destroy(store));
  if (rank == 0) printf("%s\n", any_bad ? "demo FAILED" : "demo OK: every row read was verified");
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
