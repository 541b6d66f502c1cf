/* Store lifetime: 100 stores created and destroyed do not grow the heap
 * store by store (dds_destroy frees everything the store allocated;
 * the bound is not applied under ASan or valgrind, see t_instrumented), and after
 * MPI_Finalize every call but dds_destroy is refused while dds_destroy still
 * releases local memory. */
#include "common.h"

#include <malloc.h>

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib;
}

/* Bytes the C heap has handed out and not had back (Rust's allocator is
 * glibc's malloc here), in KiB. Unlike RSS it does not move when glibc
 * returns freed blocks to the kernel or keeps them. */
static long heap_kib(void) {
  struct mallinfo2 m = mallinfo2();
  return (long)((m.uordblks + m.hblkhd) / 1024);
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  /* Method 1: the RSS check below needs the fabric's one-time allocations
   * (tcp;ofi_rxm pools, ~150 MB) to happen during the 10-store warm-up, which
   * takes fabric traffic; node-local reads (all ranks on this node) would
   * leave the fabric idle and that step would land later. Off unless the
   * environment says otherwise; method 0 runs with them on. */
  if (t_method() == 1) setenv("DDSTORE_NODE_LOCAL", "0", 0);
  enum { ROWS = 1024, ELEMS = 512 }; /* 4 MiB of float per rank and store */
  float *data = malloc(sizeof(float) * ROWS * ELEMS);
  t_fill(data, ROWS, ELEMS, 4, 2, (int64_t)t_rank * ROWS);

  /* Heap in use after each store. A leak repeats with every store, so it
   * shows in the typical (median) growth from one store to the next; the
   * provider's pools (tcp;ofi_rxm grows them by some 25-150 MB, lazily, with
   * the traffic) grow in a few steps whose timing varies from run to run, so
   * a bound on the total would measure when they land, not leaks. RSS is
   * not used for this: between stores it moves up and down by 2-6 MiB at
   * irregular points as glibc hands freed shard blocks back to the kernel or
   * keeps them (under Open MPI it once alternated store by store, which made
   * the median step a whole 4 MiB shard). */
  enum { STORES = 100, WARM = 10 };
  long heap[STORES], rss[STORES];
  for (int i = 0; i < STORES; i++) {
    dds_store *s = t_store(DDS_METHOD_MPI, 0);
    CHECK(dds_add(s, "x", data, sizeof(float) * ROWS * ELEMS, ROWS, ELEMS, 4));
    CHECK(dds_init(s, "y", ROWS, ELEMS, 4));
    float row[ELEMS];
    int64_t g = ((int64_t)t_rank * ROWS + ROWS * t_size - 1) % ((int64_t)ROWS * t_size);
    CHECK(dds_get_batch(s, "x", row, sizeof row, &g, 1));
    EXPECT(t_rows_ok(row, 1, ELEMS, 4, 2, &g, 0));
    CHECK(dds_destroy(s));
    heap[i] = heap_kib();
    rss[i] = rss_kib();
  }
  long steps[STORES - WARM - 1];
  const int n_steps = STORES - WARM - 1;
  for (int i = 0; i < n_steps; i++) steps[i] = heap[WARM + 1 + i] - heap[WARM + i];
  for (int i = 1; i < n_steps; i++) /* insertion sort: 89 values */
    for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) {
      long t = steps[j];
      steps[j] = steps[j - 1];
      steps[j - 1] = t;
    }
  const long median = steps[n_steps / 2], total = rss[STORES - 1] - rss[WARM];
  if (t_rank == 0)
    printf("heap after %d stores: %ld KiB, after %d: %ld KiB; median growth per store %ld KiB; RSS %ld -> %ld KiB\n",
           WARM + 1, heap[WARM], STORES, heap[STORES - 1], median, rss[WARM], rss[STORES - 1]);
  const char *tool = t_instrumented();
  if (tool) {
    /* The tools replace malloc, and a quarantine of freed blocks (valgrind
     * ~20 MB, ASan 256 MB) makes RSS measure the tool; its leak check covers leaks instead. */
    if (t_rank == 0) printf("RSS bound not applied under %s (its leak check covers leaks)\n", tool);
  } else {
    /* Each store holds 8 MiB: leaking even 1/256 of that per store fails. */
    EXPECT(median < 32);
    /* A gross leak outside the heap (a shard's mapping left behind per store
     * is 720 MiB) fails even if irregular. */
    EXPECT(total < 256 * 1024);
  }

  /* A store that outlives MPI. */
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  CHECK(dds_add(s, "x", data, sizeof(float) * ROWS * ELEMS, ROWS, ELEMS, 4));
  free(data);
  int sums[2] = {t_passed, t_failed}, tot[2];
  MPI_Allreduce(sums, tot, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();

  float row[ELEMS];
  int64_t g = 0;
  EXPECT_ERR(dds_get(s, "x", row, sizeof row, 0, 1), DDS_ERR_BAD_STATE, "MPI has been finalized");
  EXPECT_ERR(dds_get_batch(s, "x", row, sizeof row, &g, 1), DDS_ERR_BAD_STATE, "finalized");
  EXPECT_ERR(dds_init(s, "z", 1, 1, 1), DDS_ERR_BAD_STATE, "finalized");
  EXPECT_ERR(dds_epoch_begin(s), DDS_ERR_BAD_STATE, "finalized");
  /* Every other entry point that takes a store, local ones included (dds_info
   * and dds_update used to succeed here). */
  const char *gone = "MPI has been finalized; only dds_destroy is allowed";
  dds_var_info info = {.struct_size = sizeof info};
  dds_counters cnt = {.struct_size = sizeof cnt};
  EXPECT_ERR(dds_info(s, "x", &info), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_update(s, "x", row, sizeof row, 0), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_profile(s, "x", &cnt), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_register_recv(s, "x", row, sizeof row), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_unregister_recv(s, "x", row), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_get_stream(s, "x", row, sizeof row, 0, 1, NULL), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_get_batch_stream(s, "x", row, sizeof row, &g, 1, NULL), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_add(s, "z", row, sizeof row, 1, ELEMS, 4), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_init(s, "z", 1, 1, 1), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_epoch_end(s), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_join(s, "x"), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_join_expect(s, "x", ELEMS, 4), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_remove(s, "x"), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_extra_done(s), DDS_ERR_BAD_STATE, gone);
  EXPECT_ERR(dds_wait_extras(s, 1, 0), DDS_ERR_BAD_STATE, gone);
  dds_store *t = NULL;
  EXPECT_ERR(dds_create(0, NULL, &t), DDS_ERR_BAD_STATE, "MPI has been finalized");
  EXPECT(dds_destroy(s) == DDS_OK);
  EXPECT_ERR(dds_destroy(s), DDS_ERR_BAD_STATE, "destroyed twice");
  /* No MPI any more: each rank reports its own post-finalize checks. */
  printf("test_lifecycle rank %d after MPI_Finalize: %d passed, %d failed\n", t_rank,
         t_passed - sums[0], t_failed - sums[1]);
  if (t_rank == 0) printf("test_lifecycle on %d ranks before finalize: %d passed, %d failed\n", t_size, tot[0], tot[1]);
  return (tot[1] || t_failed != sums[1]) ? 1 : 0;
}
