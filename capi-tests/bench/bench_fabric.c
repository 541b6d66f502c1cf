/* The raw fi_read floors of method 1: the same rows read with fi_read on the
 * same libfabric provider and domain as the store, with none of the store's
 * logic (owners, offsets, keys and addresses precomputed, buffers registered
 * before timing). One RDM endpoint per rank serves this rank's shard and
 * issues this rank's reads; reader threads share it (FI_THREAD_SAFE domain)
 * and each completion is credited to the thread that posted the read.
 *
 * Progress: shm and tcp;ofi_rxm only move the target side of a read when the
 * target reads its CQ, so a rank must keep polling while any peer may still
 * read from it: the benchmark's barriers (bench_sync, below) call
 * floors_fi_progress() until every rank has finished its reads. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "floors.h"

enum { EP_NAME_MAX = 256, FI_CQ_BATCH = 32 };
/* A read that has not completed after this long will not: fail, do not hang. */
static const double STALL_S = 60;

typedef struct fi_thr fi_thr;

/* One read in flight: the provider's scratch (FI_CONTEXT2 mode) first, so the
 * completion's op_context is the op itself. */
typedef struct {
  struct fi_context2 fc;
  fi_thr *owner;
} fi_op;

struct fi_thr {
  fi_op *ops; /* one per read of a call (a call never has more in flight) */
  int cap;
  int64_t posted;             /* reads this thread has posted, ever */
  _Atomic int64_t done;       /* of which completed (credited by any poller) */
  struct fid_mr *pin_mr;      /* the thread's pre-registered destination */
  char *pin;
  size_t pin_len;
};

struct bench_fi {
  char prov[64], dom[64];
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  struct fid_mr *mine_mr;
  uint64_t mr_mode;
  int need_local;    /* destinations need a registration and its descriptor */
  uint64_t next_key; /* requested keys when the provider does not choose them */
  fi_addr_t *addr;   /* each rank's endpoint */
  uint64_t *key;     /* each rank's shard key */
  uint64_t *base;    /* each rank's remote address of its shard's byte 0 */
  fi_thr thr[BENCH_MAX_THREADS];
};

static void fab_fail(const bench_ctx *c, const char *what, long rc) {
  const bench_fi *f = c->fi;
  fprintf(stderr, "bench rank %d: %s failed on %s@%s: %s (%ld)\n", c->me, what, f ? f->prov : "?",
          f ? f->dom : "?", fi_strerror((int)-rc), rc);
  MPI_Abort(MPI_COMM_WORLD, 3);
}
#define FI_TRY(c, call)                           \
  do {                                            \
    long rc_ = (long)(call);                      \
    if (rc_ != 0) fab_fail((c), #call, rc_);       \
  } while (0)

/* Registers [buf, buf+len) with `access`, honouring the domain's MR mode. */
static struct fid_mr *reg_mr(bench_ctx *c, const void *buf, size_t len, uint64_t access) {
  bench_fi *f = c->fi;
  struct fid_mr *mr = NULL;
  uint64_t key = (f->mr_mode & FI_MR_PROV_KEY) ? 0 : f->next_key++;
  FI_TRY(c, fi_mr_reg(f->domain, buf, len, access, 0, key, 0, &mr, NULL));
  if (f->mr_mode & FI_MR_ENDPOINT) {
    FI_TRY(c, fi_mr_bind(mr, &f->ep->fid, 0));
    FI_TRY(c, fi_mr_enable(mr));
  }
  return mr;
}

/* Reads completions of the shared CQ and credits them; returns how many. */
static int cq_poll(bench_ctx *c) {
  bench_fi *f = c->fi;
  struct fi_cq_entry e[FI_CQ_BATCH];
  ssize_t n = fi_cq_read(f->cq, e, FI_CQ_BATCH);
  if (n > 0) {
    for (ssize_t i = 0; i < n; i++) atomic_fetch_add(&((fi_op *)e[i].op_context)->owner->done, 1);
    return (int)n;
  }
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    struct fi_cq_err_entry err;
    memset(&err, 0, sizeof err);
    if (fi_cq_readerr(f->cq, &err, 0) == 1) {
      fprintf(stderr, "bench rank %d: fi_read of %zu bytes failed on %s@%s: %s (%s)\n", c->me, err.len, f->prov,
              f->dom, fi_strerror(err.err), fi_cq_strerror(f->cq, err.prov_errno, err.err_data, NULL, 0));
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return 0; /* another thread took the error entry and reports it */
  }
  fab_fail(c, "fi_cq_read", (long)n);
  return 0;
}

void floors_fi_progress(bench_ctx *c) {
  if (c->fi) cq_poll(c);
}

void bench_sync(bench_ctx *c) {
  if (!c || !c->fi) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  MPI_Request rq;
  int done = 0;
  MPI_Ibarrier(MPI_COMM_WORLD, &rq);
  for (;;) {
    floors_fi_progress(c);
    MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
    if (done) break;
    sched_yield();
  }
}

/* Aborts when a wait that began at *since (0: not yet) has lasted too long. */
static void check_stall(bench_ctx *c, double *since, const char *what, int64_t pending) {
  double now = now_s();
  if (*since == 0) *since = now;
  if (now - *since < STALL_S) return;
  fprintf(stderr, "bench rank %d: %s on %s@%s: %lld reads of %lld bytes still pending after %.0f s (thread %d)\n",
          c->me, what, c->fi->prov, c->fi->dom, (long long)pending, (long long)c->rb, STALL_S, bench_tid);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

/* Waits (polling, yielding between empty polls) until every read this
 * thread posted has completed. */
static void wait_mine(bench_ctx *c, fi_thr *t) {
  double since = 0;
  unsigned idle = 0;
  while (atomic_load(&t->done) < t->posted) {
    if (cq_poll(c) > 0) continue;
    sched_yield();
    if (++idle % 4096 == 0) check_stall(c, &since, "waiting for fi_read completions", t->posted - t->done);
  }
}

/* The calling thread's state, with room for `batch` reads. */
static fi_thr *thread_state(bench_ctx *c, int batch) {
  fi_thr *t = &c->fi->thr[bench_tid];
  if (t->cap < batch) { /* grows in the warm-up call, never while timed */
    free(t->ops);
    t->ops = xmalloc(sizeof(fi_op) * (size_t)batch);
    t->cap = batch;
  }
  return t;
}

/* Posts the read of row i of the call into d; on a full queue, reads
 * completions (this or any thread's) and retries. */
static void post_read(bench_ctx *c, fi_thr *t, int i, char *d, void *desc, int32_t owner, int64_t off) {
  bench_fi *f = c->fi;
  fi_op *op = &t->ops[i];
  op->owner = t;
  double since = 0;
  for (unsigned idle = 1;; idle++) {
    ssize_t rc = fi_read(f->ep, d, (size_t)c->rb, desc, f->addr[owner], f->base[owner] + (uint64_t)off,
                         f->key[owner], op);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN) fab_fail(c, "fi_read", (long)rc);
    if (cq_poll(c) == 0) sched_yield();
    if (idle % 4096 == 0) check_stall(c, &since, "fi_read kept returning -FI_EAGAIN", t->posted - t->done);
  }
  t->posted++;
}

/* The descriptor for a destination: the thread's pinned registration when it
 * covers it, else a registration for this call only (*tmp, closed by the
 * caller). NULL when the provider needs no local registration. */
static void *dst_desc(bench_ctx *c, fi_thr *t, char *dst, size_t len, struct fid_mr **tmp) {
  *tmp = NULL;
  if (!c->fi->need_local) return NULL;
  if (t->pin_mr && dst >= t->pin && dst + len <= t->pin + t->pin_len) return fi_mr_desc(t->pin_mr);
  *tmp = reg_mr(c, dst, len, FI_READ);
  return fi_mr_desc(*tmp);
}

/* Single-op floor: per remote row one fi_read, then wait for its completion. */
void floor_fi_read(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int32_t *own = c->own[c->me] + cursor;
  const int64_t *off = c->off[c->me] + cursor;
  fi_thr *t = thread_state(c, 1);
  struct fid_mr *tmp;
  void *desc = dst_desc(c, t, dst, (size_t)batch * (size_t)c->rb, &tmp);
  for (int i = 0; i < batch; i++) {
    char *d = dst + (int64_t)i * c->rb;
    if (own[i] == c->me) {
      memcpy(d, c->mine + off[i], (size_t)c->rb);
      continue;
    }
    post_read(c, t, 0, d, desc, own[i], off[i]);
    wait_mine(c, t);
  }
  if (tmp) fi_close(&tmp->fid);
}

/* Batch floor: every remote read of the batch posted, then wait for all. */
void floor_fi_read_pipelined(bench_ctx *c, void *state, int64_t cursor, int batch, char *dst) {
  (void)state;
  const int32_t *own = c->own[c->me] + cursor;
  const int64_t *off = c->off[c->me] + cursor;
  fi_thr *t = thread_state(c, batch);
  struct fid_mr *tmp;
  void *desc = dst_desc(c, t, dst, (size_t)batch * (size_t)c->rb, &tmp);
  int n = 0;
  for (int i = 0; i < batch; i++) {
    char *d = dst + (int64_t)i * c->rb;
    if (own[i] == c->me) continue;
    post_read(c, t, n++, d, desc, own[i], off[i]);
  }
  /* Own rows copied while the reads travel, as the store does. */
  for (int i = 0; i < batch; i++)
    if (own[i] == c->me) memcpy(dst + (int64_t)i * c->rb, c->mine + off[i], (size_t)c->rb);
  wait_mine(c, t);
  if (tmp) fi_close(&tmp->fid);
}

int floors_fi_is(read_fn fn) { return fn == floor_fi_read || fn == floor_fi_read_pipelined; }

void floors_fi_pin(bench_ctx *c, int tid, char *buf, size_t len) {
  fi_thr *t = &c->fi->thr[tid];
  if (t->pin_mr) fi_close(&t->pin_mr->fid);
  t->pin_mr = NULL;
  t->pin = buf;
  t->pin_len = len;
  if (buf && c->fi->need_local) t->pin_mr = reg_mr(c, buf, len, FI_READ);
}

/* The first fi_getinfo entry of `prov` whose domain is `dom` (any domain when
 * dom is empty), with the capabilities and modes the store asks for. */
static struct fi_info *pick_info(const char *prov, const char *dom) {
  struct fi_info *hints = fi_allocinfo(), *list = NULL, *got = NULL;
  if (!hints) return NULL;
  hints->caps = FI_RMA | FI_READ | FI_REMOTE_READ;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_LOCAL_MR;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  hints->fabric_attr->prov_name = strdup(prov); /* freed by fi_freeinfo */
  if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list) == 0)
    for (struct fi_info *p = list; p && !got; p = p->next)
      if (!strcasecmp(p->fabric_attr->prov_name, prov) && (!*dom || !strcmp(p->domain_attr->name, dom)))
        got = fi_dupinfo(p);
  fi_freeinfo(list);
  fi_freeinfo(hints);
  return got;
}

int floors_fi_setup(bench_ctx *c, const char *prov, const char *dom) {
  bench_fi *f = calloc(1, sizeof *f);
  snprintf(f->prov, sizeof f->prov, "%s", prov);
  snprintf(f->dom, sizeof f->dom, "%s", dom);
  f->info = pick_info(prov, dom);
  int ok = f->info != NULL, all_ok;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (c->me == 0)
      printf("# floors fi-read skipped: provider %s%s%s is not available for RDM endpoints with RMA read\n", prov,
             *dom ? " with domain " : "", dom);
    fi_freeinfo(f->info);
    free(f);
    return 0;
  }
  c->fi = f;
  struct fi_info *info = f->info;
  snprintf(f->dom, sizeof f->dom, "%s", info->domain_attr->name);
  info->tx_attr->op_flags = 0; /* no default FI_INJECT, as in the store */
  f->mr_mode = (uint64_t)info->domain_attr->mr_mode;
  const char *force = getenv("DDSTORE_TEST_FABRIC_LOCAL_MR"); /* the store's testing aid, followed here too */
  f->need_local = (f->mr_mode & FI_MR_LOCAL) || (info->mode & FI_LOCAL_MR) || (force && strcmp(force, "0"));
  if (f->mr_mode & FI_MR_RAW) {
    fprintf(stderr, "bench: provider %s@%s uses raw MR keys (FI_MR_RAW), which the fi-read floors do not handle\n",
            f->prov, f->dom);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  f->next_key = 1;
  FI_TRY(c, fi_fabric(info->fabric_attr, &f->fabric, NULL));
  FI_TRY(c, fi_domain(f->fabric, info, &f->domain, NULL));
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = (size_t)c->np};
  FI_TRY(c, fi_av_open(f->domain, &av_attr, &f->av, NULL));
  struct fi_cq_attr cq_attr = {.size = 4096, .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
  FI_TRY(c, fi_cq_open(f->domain, &cq_attr, &f->cq, NULL));
  FI_TRY(c, fi_endpoint(f->domain, info, &f->ep, NULL));
  FI_TRY(c, fi_ep_bind(f->ep, &f->av->fid, 0));
  FI_TRY(c, fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV));
  FI_TRY(c, fi_enable(f->ep));
  f->mine_mr = reg_mr(c, c->mine, (size_t)(c->rows * c->rb), FI_REMOTE_READ);

  /* Exchange endpoint names, keys and shard addresses. */
  struct {
    uint64_t len, key, base;
    char name[EP_NAME_MAX];
  } rec, *all = xmalloc(sizeof rec * (size_t)c->np);
  memset(&rec, 0, sizeof rec);
  size_t len = EP_NAME_MAX;
  FI_TRY(c, fi_getname(&f->ep->fid, rec.name, &len));
  rec.len = len;
  rec.key = fi_mr_key(f->mine_mr);
  rec.base = (f->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)c->mine : 0;
  MPI_Allgather(&rec, (int)sizeof rec, MPI_BYTE, all, (int)sizeof rec, MPI_BYTE, MPI_COMM_WORLD);
  f->addr = xmalloc(sizeof(fi_addr_t) * (size_t)c->np);
  f->key = xmalloc(sizeof(uint64_t) * (size_t)c->np);
  f->base = xmalloc(sizeof(uint64_t) * (size_t)c->np);
  for (int q = 0; q < c->np; q++) {
    /* One insert per rank: name lengths differ between ranks (shm). */
    if (fi_av_insert(f->av, all[q].name, 1, &f->addr[q], 0, NULL) != 1)
      fab_fail(c, "fi_av_insert", -FI_EINVAL);
    f->key[q] = all[q].key;
    f->base[q] = all[q].base;
  }
  free(all);
  MPI_Barrier(MPI_COMM_WORLD); /* every rank's endpoint and shard are ready */
  return 1;
}

/* Collective: no rank closes its endpoint while a peer may still read. */
void floors_fi_teardown(bench_ctx *c) {
  bench_fi *f = c->fi;
  if (!f) return;
  bench_sync(c);
  for (int t = 0; t < BENCH_MAX_THREADS; t++) {
    if (f->thr[t].pin_mr) fi_close(&f->thr[t].pin_mr->fid);
    free(f->thr[t].ops);
  }
  fi_close(&f->mine_mr->fid);
  fi_close(&f->ep->fid);
  fi_close(&f->cq->fid);
  fi_close(&f->av->fid);
  fi_close(&f->domain->fid);
  fi_close(&f->fabric->fid);
  fi_freeinfo(f->info);
  free(f->addr);
  free(f->key);
  free(f->base);
  free(f);
  c->fi = NULL;
}

const char *floors_fi_name(const bench_ctx *c) {
  static char buf[140];
  snprintf(buf, sizeof buf, "%s@%s", c->fi->prov, c->fi->dom);
  return buf;
}
