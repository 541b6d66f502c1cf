/* The figures with their own loop, each run by one command-line mode of
 * bench.c's main (one figure per program invocation). They use the harness
 * only. */
#ifndef DDS_BENCH_DRIVERS_H
#define DDS_BENCH_DRIVERS_H

#include <stdio.h>

/* bench_mem.c: the memory check (one mode per program invocation, because
 * the peak RSS of a process cannot be reset). */
int mem_check(FILE *out);
/* bench_overlap.c: the training-loop figure (--overlap). */
int overlap_check(FILE *out);
/* bench_ragged.c: ragged batches against fixed rows, and metadata per rank (--ragged). */
int ragged_check(FILE *out);


#endif
