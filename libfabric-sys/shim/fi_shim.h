/*
 * ddsfi_*: real, linkable functions for the libfabric calls that the headers
 * only provide as `static inline` wrappers around provider ops tables (and for
 * the few macros/constants that bindgen cannot evaluate). Rust cannot call a
 * static inline C function, so each one gets a one-line C body here.
 *
 * The signatures are ours and identical for libfabric 1.x and 2.x headers; the
 * matching Rust declarations live in src/lib.rs.
 */
#ifndef DDSFI_SHIM_H
#define DDSFI_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wrapper.h"

/* Loads libfabric (once): NULL, or why it could not be loaded. */
const char *ddsfi_load(void);

/* Discovery and versions. */
int ddsfi_getinfo(uint32_t version, const char *node, const char *service,
		  uint64_t flags, const struct fi_info *hints,
		  struct fi_info **info);
void ddsfi_freeinfo(struct fi_info *info);
struct fi_info *ddsfi_dupinfo(const struct fi_info *info);
struct fi_info *ddsfi_allocinfo(void);
char *ddsfi_strdup(const char *s);
uint32_t ddsfi_version(uint32_t major, uint32_t minor);
uint32_t ddsfi_major(uint32_t version);
uint32_t ddsfi_minor(uint32_t version);
uint32_t ddsfi_header_version(void);
uint32_t ddsfi_lib_version(void);
const char *ddsfi_strerror(int errnum);
char *ddsfi_tostr(const void *data, enum fi_type datatype);

/* Constants that are macros with casts, or that exist only in some versions. */
uint64_t ddsfi_addr_unspec(void);
uint64_t ddsfi_addr_notavail(void);
uint64_t ddsfi_key_notavail(void);
int ddsfi_mr_basic(void);
int ddsfi_mr_scalable(void);

/* Struct fields whose C path differs between 1.x and 2.x. */
int ddsfi_domain_progress(const struct fi_domain_attr *attr);
void ddsfi_set_domain_progress(struct fi_domain_attr *attr, int progress);

/* Object lifetime and generic control. */
int ddsfi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		 void *context);
int ddsfi_domain(struct fid_fabric *fabric, struct fi_info *info,
		 struct fid_domain **domain, void *context);
int ddsfi_endpoint(struct fid_domain *domain, struct fi_info *info,
		   struct fid_ep **ep, void *context);
int ddsfi_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		  struct fid_av **av, void *context);
int ddsfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		  struct fid_cq **cq, void *context);
int ddsfi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		    struct fid_cntr **cntr, void *context);
uint64_t ddsfi_cntr_read(struct fid_cntr *cntr);
int ddsfi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags);
int ddsfi_enable(struct fid_ep *ep);
int ddsfi_close(struct fid *fid);
int ddsfi_control(struct fid *fid, int command, void *arg);
int ddsfi_getopt(struct fid *fid, int level, int optname, void *optval,
		 size_t *optlen);
int ddsfi_setopt(struct fid *fid, int level, int optname, const void *optval,
		 size_t optlen);

/* Addressing. */
int ddsfi_getname(struct fid *fid, void *addr, size_t *addrlen);
int ddsfi_av_insert(struct fid_av *av, const void *addr, size_t count,
		    fi_addr_t *fi_addr, uint64_t flags, void *context);
int ddsfi_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count,
		    uint64_t flags);
const char *ddsfi_av_straddr(struct fid_av *av, const void *addr, char *buf,
			     size_t *len);

/* Memory registration. */
int ddsfi_mr_reg(struct fid_domain *domain, const void *buf, size_t len,
		 uint64_t access, uint64_t offset, uint64_t requested_key,
		 uint64_t flags, struct fid_mr **mr, void *context);
int ddsfi_mr_regattr(struct fid_domain *domain, const struct fi_mr_attr *attr,
		     uint64_t flags, struct fid_mr **mr);
int ddsfi_mr_bind(struct fid_mr *mr, struct fid *bfid, uint64_t flags);
int ddsfi_mr_enable(struct fid_mr *mr);
uint64_t ddsfi_mr_key(struct fid_mr *mr);
void *ddsfi_mr_desc(struct fid_mr *mr);

/* One-sided data transfer. */
ssize_t ddsfi_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
		   fi_addr_t src_addr, uint64_t addr, uint64_t key,
		   void *context);
ssize_t ddsfi_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
		      uint64_t flags);
ssize_t ddsfi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		    fi_addr_t dest_addr, uint64_t addr, uint64_t key,
		    void *context);

/* Completion queues and waiting. */
ssize_t ddsfi_cq_read(struct fid_cq *cq, void *buf, size_t count);
ssize_t ddsfi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			 uint64_t flags);
ssize_t ddsfi_cq_sread(struct fid_cq *cq, void *buf, size_t count,
		       const void *cond, int timeout);
const char *ddsfi_cq_strerror(struct fid_cq *cq, int prov_errno,
			      const void *err_data, char *buf, size_t len);
int ddsfi_trywait(struct fid_fabric *fabric, struct fid **fids, int count);
int ddsfi_wait(struct fid_wait *waitset, int timeout);

#endif
