/*
 * Bodies for the ddsfi_* functions declared in fi_shim.h. Most are one line:
 * the libfabric call they forward to is a static inline in the public headers
 * (a jump through the object's ops table), which has no symbol to link to.
 */
#define _GNU_SOURCE /* dlvsym */
#include <stdlib.h>
#include <string.h>

#include "fi_shim.h"

/*
 * Loading. libfabric is opened with dlopen at the first call that needs it,
 * not linked: a process that never uses a fabric (method 0) does not load it,
 * nor the libraries its providers link (Debian's libpsm and libpsm2 spend
 * ~0.2 s calibrating clocks in their constructors), and runs where libfabric
 * is missing. Its exported functions carry symbol versions, and the layout of
 * struct fi_info follows the version: each is looked up with dlvsym at the
 * version a link against the build's library would have bound
 * (fi_versions.h, from build.rs), never the run-time library's newest. The
 * soname is tried first, so a libfabric already in the process (MPI's) or
 * on LD_LIBRARY_PATH is the one used; then the build's directory.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "fi_versions.h"

/* p_fi_getinfo, p_fi_freeinfo, ...: the functions of DDSFI_LOADED. */
#define DECLARE(name, version) static __typeof__(&name) p_##name;
DDSFI_LOADED(DECLARE)
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void *find(void *lib, const char *name, const char *version)
{
	void *f = *version ? dlvsym(lib, name, version) : dlsym(lib, name);
	if (!f && !load_error[0])
		snprintf(load_error, sizeof load_error,
			 "%s has no %s%s%s (this library was built against libfabric %d.%d)",
			 DDSFI_SONAME, name, *version ? "@" : "", version,
			 FI_MAJOR_VERSION, FI_MINOR_VERSION);
	return f;
}

static void load(void)
{
	void *lib = dlopen(DDSFI_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib && DDSFI_LIBDIR[0]) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", DDSFI_LIBDIR, DDSFI_SONAME);
		lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (!lib) {
		const char *why = dlerror();
		snprintf(load_error, sizeof load_error,
			 "cannot load %s (%s); put the directory of libfabric on LD_LIBRARY_PATH",
			 DDSFI_SONAME, why ? why : "not found");
		return;
	}
#define FIND(name, version) void *f_##name = find(lib, #name, version);
	DDSFI_LOADED(FIND)
	if (load_error[0])
		return;
	/* Set only when every one was found: ddsfi_load is all or nothing. */
#define SET(name, version) p_##name = (__typeof__(p_##name))f_##name;
	DDSFI_LOADED(SET)
}

const char *ddsfi_load(void)
{
	pthread_once(&load_once, load);
	return load_error[0] ? load_error : NULL;
}

/*
 * Discovery and versions, through the loaded functions (-FI_ENOSYS, NULL or
 * 0 when libfabric could not be loaded; ddsfi_load says why). fi_allocinfo
 * is static inline (fi_dupinfo(NULL)); FI_VERSION/FI_MAJOR/FI_MINOR are
 * macros. ddsfi_strdup exists because strings stored in an fi_info (for
 * example hints->fabric_attr->prov_name) are released by fi_freeinfo with
 * free(), so they must come from the C allocator.
 */
int ddsfi_getinfo(uint32_t version, const char *node, const char *service,
		  uint64_t flags, const struct fi_info *hints,
		  struct fi_info **info)
{
	return ddsfi_load() ? -FI_ENOSYS : p_fi_getinfo(version, node, service, flags, hints, info);
}

void ddsfi_freeinfo(struct fi_info *info)
{
	if (!ddsfi_load())
		p_fi_freeinfo(info);
}
struct fi_info *ddsfi_dupinfo(const struct fi_info *info) { return ddsfi_load() ? NULL : p_fi_dupinfo(info); }
struct fi_info *ddsfi_allocinfo(void) { return ddsfi_load() ? NULL : p_fi_dupinfo(NULL); }
char *ddsfi_strdup(const char *s) { return s ? strdup(s) : NULL; }
uint32_t ddsfi_version(uint32_t major, uint32_t minor) { return FI_VERSION(major, minor); }
uint32_t ddsfi_major(uint32_t version) { return FI_MAJOR(version); }
uint32_t ddsfi_minor(uint32_t version) { return FI_MINOR(version); }
uint32_t ddsfi_header_version(void) { return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION); }
uint32_t ddsfi_lib_version(void) { return ddsfi_load() ? 0 : p_fi_version(); }
const char *ddsfi_strerror(int errnum) { return ddsfi_load() ? "libfabric not loaded" : p_fi_strerror(errnum); }
char *ddsfi_tostr(const void *data, enum fi_type datatype) { return ddsfi_load() ? NULL : p_fi_tostr(data, datatype); }

/*
 * Constants. The address/key sentinels are `((uint64_t) -1)` macros, which
 * bindgen skips because of the cast. FI_MR_BASIC/FI_MR_SCALABLE are enum
 * values in 1.x; 2.x headers deprecate them (a macro that warns on use) or
 * drop them, and they have no meaning for API >= 1.5, so they read as 0 there.
 */
uint64_t ddsfi_addr_unspec(void) { return FI_ADDR_UNSPEC; }
uint64_t ddsfi_addr_notavail(void) { return FI_ADDR_NOTAVAIL; }
uint64_t ddsfi_key_notavail(void) { return FI_KEY_NOTAVAIL; }

#if FI_MAJOR_VERSION < 2
int ddsfi_mr_basic(void) { return FI_MR_BASIC; }
int ddsfi_mr_scalable(void) { return FI_MR_SCALABLE; }
#else
int ddsfi_mr_basic(void) { return 0; }
int ddsfi_mr_scalable(void) { return 0; }
#endif

/*
 * fi_domain_attr.data_progress became a member of an anonymous union (with
 * `progress`) in 2.x, so the Rust field path differs between versions; in C
 * the name is the same for both.
 */
int ddsfi_domain_progress(const struct fi_domain_attr *attr) { return attr->data_progress; }
void ddsfi_set_domain_progress(struct fi_domain_attr *attr, int progress) { attr->data_progress = progress; }

/*
 * Object lifetime and control: fi_fabric is exported (loaded above); the rest
 * are static inline jumps through fabric/domain/endpoint/fid ops.
 */
int ddsfi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		 void *context)
{
	return ddsfi_load() ? -FI_ENOSYS : p_fi_fabric(attr, fabric, context);
}

int ddsfi_domain(struct fid_fabric *fabric, struct fi_info *info,
		 struct fid_domain **domain, void *context)
{
	return fi_domain(fabric, info, domain, context);
}

int ddsfi_endpoint(struct fid_domain *domain, struct fi_info *info,
		   struct fid_ep **ep, void *context)
{
	return fi_endpoint(domain, info, ep, context);
}

int ddsfi_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		  struct fid_av **av, void *context)
{
	return fi_av_open(domain, attr, av, context);
}

int ddsfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		  struct fid_cq **cq, void *context)
{
	return fi_cq_open(domain, attr, cq, context);
}

int ddsfi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		    struct fid_cntr **cntr, void *context)
{
	return fi_cntr_open(domain, attr, cntr, context);
}

uint64_t ddsfi_cntr_read(struct fid_cntr *cntr) { return fi_cntr_read(cntr); }
int ddsfi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags) { return fi_ep_bind(ep, bfid, flags); }
int ddsfi_enable(struct fid_ep *ep) { return fi_enable(ep); }
int ddsfi_close(struct fid *fid) { return fi_close(fid); }
int ddsfi_control(struct fid *fid, int command, void *arg) { return fi_control(fid, command, arg); }

int ddsfi_getopt(struct fid *fid, int level, int optname, void *optval,
		 size_t *optlen)
{
	return fi_getopt(fid, level, optname, optval, optlen);
}

int ddsfi_setopt(struct fid *fid, int level, int optname, const void *optval,
		 size_t optlen)
{
	return fi_setopt(fid, level, optname, optval, optlen);
}

/* Addressing: endpoint names and address vectors (static inline). */
int ddsfi_getname(struct fid *fid, void *addr, size_t *addrlen)
{
	return fi_getname(fid, addr, addrlen);
}

int ddsfi_av_insert(struct fid_av *av, const void *addr, size_t count,
		    fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	return fi_av_insert(av, addr, count, fi_addr, flags, context);
}

int ddsfi_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count,
		    uint64_t flags)
{
	return fi_av_remove(av, fi_addr, count, flags);
}

const char *ddsfi_av_straddr(struct fid_av *av, const void *addr, char *buf,
			     size_t *len)
{
	return fi_av_straddr(av, addr, buf, len);
}

/* Memory registration (static inline). */
int ddsfi_mr_reg(struct fid_domain *domain, const void *buf, size_t len,
		 uint64_t access, uint64_t offset, uint64_t requested_key,
		 uint64_t flags, struct fid_mr **mr, void *context)
{
	return fi_mr_reg(domain, buf, len, access, offset, requested_key,
			 flags, mr, context);
}

int ddsfi_mr_regattr(struct fid_domain *domain, const struct fi_mr_attr *attr,
		     uint64_t flags, struct fid_mr **mr)
{
	return fi_mr_regattr(domain, attr, flags, mr);
}

int ddsfi_mr_bind(struct fid_mr *mr, struct fid *bfid, uint64_t flags) { return fi_mr_bind(mr, bfid, flags); }
int ddsfi_mr_enable(struct fid_mr *mr) { return fi_mr_enable(mr); }
uint64_t ddsfi_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }
void *ddsfi_mr_desc(struct fid_mr *mr) { return fi_mr_desc(mr); }

/* One-sided RMA (static inline). */
ssize_t ddsfi_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
		   fi_addr_t src_addr, uint64_t addr, uint64_t key,
		   void *context)
{
	return fi_read(ep, buf, len, desc, src_addr, addr, key, context);
}

ssize_t ddsfi_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
		      uint64_t flags)
{
	return fi_readmsg(ep, msg, flags);
}

ssize_t ddsfi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		    fi_addr_t dest_addr, uint64_t addr, uint64_t key,
		    void *context)
{
	return fi_write(ep, buf, len, desc, dest_addr, addr, key, context);
}

/* Completion queues and wait objects (static inline). */
ssize_t ddsfi_cq_read(struct fid_cq *cq, void *buf, size_t count) { return fi_cq_read(cq, buf, count); }

ssize_t ddsfi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			 uint64_t flags)
{
	return fi_cq_readerr(cq, buf, flags);
}

ssize_t ddsfi_cq_sread(struct fid_cq *cq, void *buf, size_t count,
		       const void *cond, int timeout)
{
	return fi_cq_sread(cq, buf, count, cond, timeout);
}

const char *ddsfi_cq_strerror(struct fid_cq *cq, int prov_errno,
			      const void *err_data, char *buf, size_t len)
{
	return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}

int ddsfi_trywait(struct fid_fabric *fabric, struct fid **fids, int count) { return fi_trywait(fabric, fids, count); }
int ddsfi_wait(struct fid_wait *waitset, int timeout) { return fi_wait(waitset, timeout); }
