/* Stand-in for libcuda, for scripts/fake-cuda-check.sh only: "device memory"
 * is PROT_NONE host memory, so any host access to it faults. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
typedef int CUresult;
static struct { char *p; size_t n; } devs[256];
static int ndev;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
long fake_copies, fake_bytes;
static int find(uintptr_t p, size_t n) {
  for (int i = 0; i < ndev; i++)
    if (p >= (uintptr_t)devs[i].p && p + n <= (uintptr_t)devs[i].p + devs[i].n) return i;
  return -1;
}
void *fake_dev_alloc(size_t n) {
  size_t pg = (n + 4095) & ~(size_t)4095;
  char *p = mmap(NULL, pg ? pg : 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pthread_mutex_lock(&mu); devs[ndev].p = p; devs[ndev].n = pg ? pg : 4096; ndev++; pthread_mutex_unlock(&mu);
  return p;
}
static void xfer(void *d, const void *s, size_t n, char *dev, size_t dn) {
  pthread_mutex_lock(&mu);
  mprotect(dev, dn, PROT_READ | PROT_WRITE);
  memcpy(d, s, n);
  mprotect(dev, dn, PROT_NONE);
  fake_copies++; fake_bytes += n;
  pthread_mutex_unlock(&mu);
}
void fake_dev_write(void *dst, const void *src, size_t n) { int i = find((uintptr_t)dst, n); xfer(dst, src, n, devs[i].p, devs[i].n); }
void fake_dev_read(void *dst, const void *src, size_t n) { int i = find((uintptr_t)src, n); xfer(dst, src, n, devs[i].p, devs[i].n); }
CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int o) { *d = o; return o == 0 ? 0 : 101; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)0x1234; return 0; }
CUresult cuCtxPushCurrent_v2(void *c) { (void)c; return 0; }
CUresult cuCtxPopCurrent_v2(void **c) { if (c) *c = (void *)0x1234; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuGetErrorName(CUresult e, const char **s) { (void)e; *s = "CUDA_ERROR_FAKE"; return 0; }
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, uintptr_t p) {
  int dev = find(p, 1) >= 0;
  for (unsigned i = 0; i < n; i++) {
    if (attrs[i] == 2) *(unsigned *)data[i] = dev ? 2 : 0;
    else if (attrs[i] == 9) *(int *)data[i] = 0;
    else if (attrs[i] == 8) *(unsigned *)data[i] = 0;
  }
  return 0;
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned f) { (void)f; *p = malloc(n); return *p ? 0 : 2; }
CUresult cuMemFreeHost(void *p) { free(p); return 0; }
CUresult cuMemcpyHtoDAsync_v2(uintptr_t d, const void *s, size_t n, void *st) {
  (void)st; int i = find(d, n); if (i < 0) return 1;
  xfer((void *)d, s, n, devs[i].p, devs[i].n); return 0;
}
CUresult cuMemcpyDtoH_v2(void *d, uintptr_t s, size_t n) {
  int i = find(s, n); if (i < 0) return 1;
  xfer(d, (void *)s, n, devs[i].p, devs[i].n); return 0;
}
CUresult cuEventCreate(void **e, unsigned f) { (void)f; *e = malloc(1); return 0; }
CUresult cuEventRecord(void *e, void *s) { (void)e; (void)s; return 0; }
CUresult cuEventQuery(void *e) { (void)e; return 0; }
CUresult cuEventSynchronize(void *e) { (void)e; return 0; }
CUresult cuEventDestroy_v2(void *e) { free(e); return 0; }
CUresult cuStreamSynchronize(void *s) { (void)s; return 0; }
