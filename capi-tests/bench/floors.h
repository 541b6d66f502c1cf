/* The floors of the benchmark: the same rows moved by the same transports
 * with no store logic (bench_floors.c: memcpy, MPI; bench_fabric.c: raw
 * fi_read). They use the harness only; bench.c times them beside the store. */
#ifndef DDS_BENCH_FLOORS_H
#define DDS_BENCH_FLOORS_H

#include "harness.h"

/* bench_fabric.c: barrier of every rank that keeps driving the fi-read
 * floors' progress while it waits (peers may still be reading from this rank). */
void bench_sync(bench_ctx *c);

/* bench_floors.c: the floors of the same transports, with no store logic. */
void floor_memcpy(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);
void floor_memcpy_shm(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);
int floors_shm_setup(bench_ctx *c);
void floors_shm_teardown(bench_ctx *c);
void floor_mpi_get_lock(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);
void floor_mpi_get_flush(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);
void floor_mpi_get_pipelined(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);
void floor_mpi_alltoallv(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);
void floors_mpi_setup(bench_ctx *c);
void floors_mpi_teardown(bench_ctx *c);
void floors_mpi_lock_all(bench_ctx *c, int on);

/* bench_fabric.c: the raw fi_read floors of method 1. Setup and teardown are
 * collective; setup returns 0 on every rank when the provider is missing. */
int floors_fi_setup(bench_ctx *c, const char *prov, const char *domain);
void floors_fi_teardown(bench_ctx *c);
void floors_fi_progress(bench_ctx *c);
void floors_fi_pin(bench_ctx *c, int tid, char *buf, size_t len);
int floors_fi_is(read_fn fn);
const char *floors_fi_name(const bench_ctx *c);
void floor_fi_read(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);
void floor_fi_read_pipelined(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst);


#endif
