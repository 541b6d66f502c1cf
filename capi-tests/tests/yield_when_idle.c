/* A test aid, not part of the library: loaded with LD_PRELOAD into the
 * test jobs of `make test` (libdds_test_yield.so; docs/dev/testing.md).
 *
 * On a machine with fewer cores than a job has ranks, a rank waiting in MPI
 * (MPICH over UCX) spins in ucp_worker_progress while the rank it waits for
 * has no core to run on; every such run then takes many scheduler ticks per
 * message. This wraps ucp_worker_progress and, only when the node is
 * oversubscribed, calls sched_yield() after a call that made no progress,
 * handing the core to a runnable rank. MPI's progress is still called
 * exactly as before: only timing changes, never what a test checks. On a
 * node with a core per rank it only forwards the call.
 *
 * DDS_TEST_YIELD_REPORT set (non-empty): each process prints one line on
 * stderr at exit with what it saw, so a test can check the aid was loaded
 * and really stands between MPI and UCX. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef unsigned (*progress_fn)(void *worker);

static progress_fn real_progress;
static int oversubscribed;
static long local_ranks, cpus;
static atomic_ulong n_calls, n_yields;

/* Ranks of this job on this node, as the launcher says (hydra, Open MPI,
 * Slurm); 0 when none says. */
static long launcher_local_ranks(void) {
  static const char *const vars[] = {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                     "SLURM_STEP_TASKS_PER_NODE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && *v != '\0') {
      char *end;
      long n = strtol(v, &end, 10);
      if (end != v && n > 0)
        return n;
    }
  }
  return 0;
}

/* Cores this process may run on (its affinity mask, which a launcher or a
 * container may narrow), else the online ones. */
static long usable_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return sysconf(_SC_NPROCESSORS_ONLN);
}

/* UCX's ucp_worker_progress: the next definition after this one, or, when
 * MPI came in by dlopen (mpi4py) and so is not in the global scope that
 * RTLD_NEXT searches, the already loaded libucp's own. */
static progress_fn find_progress(void) {
  void *f = dlsym(RTLD_NEXT, "ucp_worker_progress");
  if (f == NULL) {
    void *ucp = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
    if (ucp != NULL)
      f = dlsym(ucp, "ucp_worker_progress");
  }
  return (progress_fn)f;
}

__attribute__((constructor)) static void yield_init(void) {
  __atomic_store_n(&real_progress, find_progress(), __ATOMIC_RELEASE);
  local_ranks = launcher_local_ranks();
  cpus = usable_cpus();
  oversubscribed = cpus > 0 && local_ranks > cpus;
}

__attribute__((destructor)) static void yield_report(void) {
  const char *want = getenv("DDS_TEST_YIELD_REPORT");
  unsigned long calls = atomic_load(&n_calls);
  /* Ranks and users of UCX only, not the launcher or a shell around them. */
  if (want == NULL || *want == '\0' || (local_ranks == 0 && calls == 0))
    return;
  fprintf(stderr,
          "dds_test_yield: pid %ld local_ranks=%ld cpus=%ld oversubscribed=%d progress_calls=%lu "
          "yields=%lu\n",
          (long)getpid(), local_ranks, cpus, oversubscribed, calls, atomic_load(&n_yields));
}

unsigned ucp_worker_progress(void *worker) {
  progress_fn real = __atomic_load_n(&real_progress, __ATOMIC_ACQUIRE);
  if (real == NULL) {
    /* UCX was loaded after this library's constructor ran: look it up now
     * (threads racing here store the same address). */
    real = find_progress();
    if (real == NULL) {
      fprintf(stderr, "dds_test_yield: ucp_worker_progress called but libucp.so.0 is not found\n");
      abort();
    }
    __atomic_store_n(&real_progress, real, __ATOMIC_RELEASE);
  }
  unsigned events = real(worker);
  atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed);
  if (events == 0 && oversubscribed) {
    atomic_fetch_add_explicit(&n_yields, 1, memory_order_relaxed);
    sched_yield();
  }
  return events;
}
