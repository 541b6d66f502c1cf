//! `fi_getinfo` queries: the entries libfabric offers for our endpoints,
//! their names, addresses and FI_HMEM variants.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::ptr;

use libfabric_sys::*;

use super::fi_err;
use crate::error::{bail, Result};

pub(super) fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libfabric strings are NUL-terminated.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
/// Mode bits that libfabric 2.x headers may no longer define (values from
/// the 1.x `fabric.h`, unchanged in the ABI).
pub(super) const MODE_CONTEXT: u64 = 1 << 59;
pub(super) const MODE_LOCAL_MR: u64 = 1 << 55;

/// ofi_rxm's settings that this library gives where the environment gives
/// none. rxm preposts message buffers on each endpoint and connection, and a
/// store moves rows by RMA reads alone, which use none of them: with rxm's
/// defaults (16 KiB buffers, 4096 posted with its shared receive context)
/// a tcp;ofi_rxm store held ~140 MiB per rank once created and ~6 MiB more
/// per peer it read from; with these, 7 MiB and under 1 MiB (docs/fabric.md,
/// "Memory").
const RXM_DEFAULTS: [(&str, &str); 2] = [("FI_OFI_RXM_BUFFER_SIZE", "1024"), ("FI_OFI_RXM_MSG_RX_SIZE", "16")];

/// Sets RXM_DEFAULTS, once per process, before its first `fi_getinfo`: rxm
/// reads them when libfabric loads its providers. Where MPI loaded them
/// first (an MPI over libfabric), they are read already and nothing changes,
/// for MPI or for the store.
fn rxm_defaults() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (name, value) in RXM_DEFAULTS {
            if std::env::var_os(name).is_none() {
                // Once, before any libfabric thread exists (setenv is not
                // safe against a getenv running on another thread).
                std::env::set_var(name, value);
            }
        }
    });
}

/// `fi_getinfo` for RDM endpoints with RMA read, thread-safe domains, and
/// with `hmem` FI_HMEM (and FI_MR_HMEM among the mode bits we handle).
/// Returns the list head (caller frees) or the error.
pub(super) unsafe fn query(hmem: bool) -> Result<*mut fi_info> {
    rxm_defaults();
    // libfabric is loaded here, at the first fabric a process opens (the
    // shim's dlopen): method 0 never loads it.
    let why = ddsfi_load();
    if !why.is_null() {
        bail!(Fabric, "libfabric: {}", cstr(why));
    }
    let hints = ddsfi_allocinfo();
    if hints.is_null() {
        bail!(NoMemory, "fi_allocinfo failed");
    }
    (*hints).caps = FI_RMA | FI_READ | FI_REMOTE_READ | if hmem { FI_HMEM } else { 0 };
    (*hints).mode = MODE_CONTEXT | FI_CONTEXT2 | MODE_LOCAL_MR;
    (*(*hints).ep_attr).type_ = FI_EP_RDM;
    (*(*hints).domain_attr).mr_mode = FI_MR_LOCAL
        | FI_MR_VIRT_ADDR
        | FI_MR_ALLOCATED
        | FI_MR_PROV_KEY
        | FI_MR_ENDPOINT
        | if hmem { FI_MR_HMEM } else { 0 };
    (*(*hints).domain_attr).threading = FI_THREAD_SAFE;
    let mut info = ptr::null_mut();
    let ret = ddsfi_getinfo(ddsfi_header_version(), ptr::null(), ptr::null(), 0, hints, &mut info);
    ddsfi_freeinfo(hints);
    if ret == -(FI_ENODATA as i32) {
        return Ok(ptr::null_mut());
    }
    fi_err(ret as isize, "fi_getinfo")?;
    Ok(info)
}
/// The IP address of an `fi_info` entry's source address, if it has one.
pub(super) unsafe fn ip_of(info: *const fi_info) -> Option<std::net::IpAddr> {
    let (a, len) = ((*info).src_addr as *const u8, (*info).src_addrlen);
    if a.is_null() || len < std::mem::size_of::<libc::sockaddr_in>() {
        return None;
    }
    let family = match (*info).addr_format {
        FI_SOCKADDR_IN => libc::AF_INET,
        FI_SOCKADDR_IN6 => libc::AF_INET6,
        FI_SOCKADDR => (*(a as *const libc::sockaddr)).sa_family as i32,
        _ => return None,
    };
    // Unaligned reads: src_addr is only byte-aligned by contract.
    if family == libc::AF_INET {
        let s: libc::sockaddr_in = ptr::read_unaligned(a.cast());
        Some(std::net::Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)).into())
    } else if family == libc::AF_INET6 && len >= std::mem::size_of::<libc::sockaddr_in6>() {
        let s: libc::sockaddr_in6 = ptr::read_unaligned(a.cast());
        Some(std::net::Ipv6Addr::from(s.sin6_addr.s6_addr).into())
    } else {
        None
    }
}
/// The entries of an `fi_getinfo` list (empty for a null list), each with
/// its `(provider, domain)` names, the key a provider is chosen by.
pub(super) unsafe fn list_entries(list: *mut fi_info) -> Vec<(*mut fi_info, (String, String))> {
    let mut out = Vec::new();
    let mut p = list;
    while !p.is_null() {
        out.push((p, (cstr((*(*p).fabric_attr).prov_name), cstr((*(*p).domain_attr).name))));
        p = (*p).next;
    }
    out
}

/// A copy of the FI_HMEM entry of `(provider, domain)`, or null (none, or
/// the query failed: the plain entry is used then).
pub(super) unsafe fn hmem_entry(want: &(String, String)) -> *mut fi_info {
    let Ok(list) = query(true) else { return ptr::null_mut() };
    let out = list_entries(list)
        .into_iter()
        .find(|(p, names)| (**p).caps & FI_HMEM != 0 && names == want)
        .map_or(ptr::null_mut(), |(p, _)| ddsfi_dupinfo(p));
    if !list.is_null() {
        ddsfi_freeinfo(list);
    }
    out
}

pub(super) unsafe fn fab_name(info: *mut fi_info) -> String {
    cstr((*(*info).fabric_attr).prov_name)
}

pub(super) unsafe fn dom_name(info: *mut fi_info) -> String {
    cstr((*(*info).domain_attr).name)
}
