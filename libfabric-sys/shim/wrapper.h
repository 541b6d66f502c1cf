/* Headers handed to bindgen (and included by the shim). */
#ifndef DDSFI_WRAPPER_H
#define DDSFI_WRAPPER_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>
#if defined(__has_include)
#  if __has_include(<rdma/fi_ext.h>)
#    include <rdma/fi_ext.h>
#  endif
#endif

#endif
