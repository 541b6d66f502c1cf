//! Raw bindings to libfabric (1.x and 2.x headers).
//!
//! * Types, constants and the exported functions come from bindgen
//!   (`fi_*`, `FI_*`, `fid_*`, `fid`). Enum constants are not prefixed with
//!   their enum name (`FI_EP_RDM`, not `fi_ep_type_FI_EP_RDM`).
//! * Most of the libfabric API is `static inline` in the headers; those calls
//!   are reached through the `ddsfi_*` functions of the C shim
//!   (`shim/fi_shim.c`), declared below.
//! * Every `fid_*` struct starts with `fid: fid`, so `&mut (*ep).fid` is the
//!   `*mut fid` that `ddsfi_close`, `ddsfi_ep_bind`, `ddsfi_getname`, ... take.
//!
//! Return conventions are libfabric's: `0`/count on success, `-FI_E*` on error.

#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

use core::ffi::{c_char, c_int, c_void, CStr};

extern "C" {
    /// Loads libfabric, once per process (the shim opens it with dlopen):
    /// NULL, or a message saying why it could not be loaded. The calls below
    /// load it too, and fail (`-FI_ENOSYS`, NULL, 0) where it cannot be.
    pub fn ddsfi_load() -> *const c_char;

    // Discovery and versions.
    pub fn ddsfi_getinfo(
        version: u32,
        node: *const c_char,
        service: *const c_char,
        flags: u64,
        hints: *const fi_info,
        info: *mut *mut fi_info,
    ) -> c_int;
    pub fn ddsfi_freeinfo(info: *mut fi_info);
    pub fn ddsfi_dupinfo(info: *const fi_info) -> *mut fi_info;
    pub fn ddsfi_allocinfo() -> *mut fi_info;
    /// `strdup` from the C allocator, for strings stored into an `fi_info`
    /// (fi_freeinfo releases them with `free`).
    pub fn ddsfi_strdup(s: *const c_char) -> *mut c_char;
    /// `FI_VERSION(major, minor)`.
    pub fn ddsfi_version(major: u32, minor: u32) -> u32;
    pub fn ddsfi_major(version: u32) -> u32;
    pub fn ddsfi_minor(version: u32) -> u32;
    /// Version of the headers the crate was built against.
    pub fn ddsfi_header_version() -> u32;
    /// Version of the library loaded at run time (`fi_version()`).
    pub fn ddsfi_lib_version() -> u32;
    pub fn ddsfi_strerror(errnum: c_int) -> *const c_char;
    pub fn ddsfi_tostr(data: *const c_void, datatype: fi_type) -> *mut c_char;

    // Constants bindgen cannot see, or that only some versions define.
    pub fn ddsfi_addr_unspec() -> fi_addr_t;
    pub fn ddsfi_addr_notavail() -> fi_addr_t;
    pub fn ddsfi_key_notavail() -> u64;
    /// `FI_MR_BASIC` with 1.x headers; 0 with 2.x headers (deprecated or removed there).
    pub fn ddsfi_mr_basic() -> c_int;
    /// `FI_MR_SCALABLE` with 1.x headers; 0 with 2.x headers.
    pub fn ddsfi_mr_scalable() -> c_int;

    // Struct fields whose Rust path differs between 1.x and 2.x headers.
    /// `attr->data_progress` (an anonymous union member in 2.x); an `fi_progress` value.
    pub fn ddsfi_domain_progress(attr: *const fi_domain_attr) -> c_int;
    pub fn ddsfi_set_domain_progress(attr: *mut fi_domain_attr, progress: c_int);

    // Object lifetime and control.
    pub fn ddsfi_fabric(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int;
    pub fn ddsfi_domain(
        fabric: *mut fid_fabric,
        info: *mut fi_info,
        domain: *mut *mut fid_domain,
        context: *mut c_void,
    ) -> c_int;
    pub fn ddsfi_endpoint(
        domain: *mut fid_domain,
        info: *mut fi_info,
        ep: *mut *mut fid_ep,
        context: *mut c_void,
    ) -> c_int;
    pub fn ddsfi_av_open(
        domain: *mut fid_domain,
        attr: *mut fi_av_attr,
        av: *mut *mut fid_av,
        context: *mut c_void,
    ) -> c_int;
    pub fn ddsfi_cq_open(
        domain: *mut fid_domain,
        attr: *mut fi_cq_attr,
        cq: *mut *mut fid_cq,
        context: *mut c_void,
    ) -> c_int;
    pub fn ddsfi_cntr_open(
        domain: *mut fid_domain,
        attr: *mut fi_cntr_attr,
        cntr: *mut *mut fid_cntr,
        context: *mut c_void,
    ) -> c_int;
    pub fn ddsfi_cntr_read(cntr: *mut fid_cntr) -> u64;
    pub fn ddsfi_ep_bind(ep: *mut fid_ep, bfid: *mut fid, flags: u64) -> c_int;
    pub fn ddsfi_enable(ep: *mut fid_ep) -> c_int;
    pub fn ddsfi_close(fid: *mut fid) -> c_int;
    pub fn ddsfi_control(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int;
    pub fn ddsfi_getopt(fid: *mut fid, level: c_int, optname: c_int, optval: *mut c_void, optlen: *mut usize) -> c_int;
    pub fn ddsfi_setopt(fid: *mut fid, level: c_int, optname: c_int, optval: *const c_void, optlen: usize) -> c_int;

    // Addressing.
    pub fn ddsfi_getname(fid: *mut fid, addr: *mut c_void, addrlen: *mut usize) -> c_int;
    pub fn ddsfi_av_insert(
        av: *mut fid_av,
        addr: *const c_void,
        count: usize,
        fi_addr: *mut fi_addr_t,
        flags: u64,
        context: *mut c_void,
    ) -> c_int;
    pub fn ddsfi_av_remove(av: *mut fid_av, fi_addr: *mut fi_addr_t, count: usize, flags: u64) -> c_int;
    pub fn ddsfi_av_straddr(av: *mut fid_av, addr: *const c_void, buf: *mut c_char, len: *mut usize) -> *const c_char;

    // Memory registration.
    pub fn ddsfi_mr_reg(
        domain: *mut fid_domain,
        buf: *const c_void,
        len: usize,
        access: u64,
        offset: u64,
        requested_key: u64,
        flags: u64,
        mr: *mut *mut fid_mr,
        context: *mut c_void,
    ) -> c_int;
    pub fn ddsfi_mr_regattr(
        domain: *mut fid_domain,
        attr: *const fi_mr_attr,
        flags: u64,
        mr: *mut *mut fid_mr,
    ) -> c_int;
    pub fn ddsfi_mr_bind(mr: *mut fid_mr, bfid: *mut fid, flags: u64) -> c_int;
    pub fn ddsfi_mr_enable(mr: *mut fid_mr) -> c_int;
    pub fn ddsfi_mr_key(mr: *mut fid_mr) -> u64;
    pub fn ddsfi_mr_desc(mr: *mut fid_mr) -> *mut c_void;

    // One-sided RMA.
    pub fn ddsfi_read(
        ep: *mut fid_ep,
        buf: *mut c_void,
        len: usize,
        desc: *mut c_void,
        src_addr: fi_addr_t,
        addr: u64,
        key: u64,
        context: *mut c_void,
    ) -> isize;
    pub fn ddsfi_readmsg(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize;
    pub fn ddsfi_write(
        ep: *mut fid_ep,
        buf: *const c_void,
        len: usize,
        desc: *mut c_void,
        dest_addr: fi_addr_t,
        addr: u64,
        key: u64,
        context: *mut c_void,
    ) -> isize;

    // Completion queues and waiting.
    pub fn ddsfi_cq_read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize;
    pub fn ddsfi_cq_readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, flags: u64) -> isize;
    /// Blocking read; needs a CQ opened with a wait object (not `FI_WAIT_NONE`).
    /// `timeout` in milliseconds, -1 for infinite; `-FI_EAGAIN` on timeout.
    pub fn ddsfi_cq_sread(
        cq: *mut fid_cq,
        buf: *mut c_void,
        count: usize,
        cond: *const c_void,
        timeout: c_int,
    ) -> isize;
    pub fn ddsfi_cq_strerror(
        cq: *mut fid_cq,
        prov_errno: c_int,
        err_data: *const c_void,
        buf: *mut c_char,
        len: usize,
    ) -> *const c_char;
    pub fn ddsfi_trywait(fabric: *mut fid_fabric, fids: *mut *mut fid, count: c_int) -> c_int;
    pub fn ddsfi_wait(waitset: *mut fid_wait, timeout: c_int) -> c_int;
}

/// Text for a libfabric error code; accepts `ret` as returned (`-FI_EAGAIN`)
/// or the positive value.
pub fn errstr(code: i32) -> String {
    // SAFETY: fi_strerror accepts any value and returns a static string.
    let p = unsafe { ddsfi_strerror(code.unsigned_abs() as c_int) };
    if p.is_null() {
        return format!("libfabric error {code}");
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `(major, minor)` of the libfabric library loaded at run time.
pub fn lib_version() -> (u32, u32) {
    // SAFETY: pure functions without arguments that could be invalid.
    unsafe {
        let v = ddsfi_lib_version();
        (ddsfi_major(v), ddsfi_minor(v))
    }
}

/// `(major, minor)` of the headers this crate was compiled against.
pub fn header_version() -> (u32, u32) {
    (FI_MAJOR_VERSION, FI_MINOR_VERSION)
}

/// `FI_ADDR_UNSPEC` (`(uint64_t)-1`).
pub fn addr_unspec() -> fi_addr_t {
    unsafe { ddsfi_addr_unspec() }
}

/// `FI_KEY_NOTAVAIL` (`(uint64_t)-1`).
pub fn key_notavail() -> u64 {
    unsafe { ddsfi_key_notavail() }
}
