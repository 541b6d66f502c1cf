//! Helpers shared by the integration tests (real libfabric, loopback only).
#![allow(dead_code)]

use libfabric_sys::*;
use std::ffi::{CStr, CString};
use std::ptr;
use std::sync::Once;

/// Keep every provider on the loopback interface. Must run before the first
/// libfabric call, which reads the environment once.
pub fn init_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for var in ["FI_TCP_IFACE", "FI_SOCKETS_IFACE", "FABRIC_IFACE"] {
            std::env::set_var(var, "lo");
        }
    });
}

/// Panics with the libfabric error text when `ret` is negative.
#[macro_export]
macro_rules! check {
    ($call:expr, $what:expr) => {{
        let ret = $call;
        if (ret as i64) < 0 {
            panic!("{} failed: {} ({})", $what, ret, libfabric_sys::errstr(ret as i32));
        }
        ret
    }};
}

pub fn cstr_or(p: *const std::os::raw::c_char, empty: &str) -> String {
    if p.is_null() {
        empty.to_string()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// fi_tostr for one value of the given type, trimmed.
pub fn tostr<T>(value: &T, ty: fi_type) -> String {
    let p = unsafe { ddsfi_tostr(value as *const T as *const _, ty) };
    cstr_or(p, "?").trim().to_string()
}

/// mr_mode bits this test code knows how to honour.
pub const SUPPORTED_MR_MODE: i32 = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;

/// fi_getinfo for RDM endpoints with RMA read (initiator and target).
/// `prov` restricts the query to one provider. Returns the list head (free
/// with ddsfi_freeinfo) or the error code.
pub fn getinfo_rma(prov: Option<&str>) -> Result<*mut fi_info, i32> {
    init_env();
    unsafe {
        let hints = ddsfi_allocinfo();
        assert!(!hints.is_null(), "fi_allocinfo returned NULL");
        (*hints).caps = FI_RMA | FI_READ | FI_REMOTE_READ;
        (*hints).mode = FI_CONTEXT | FI_CONTEXT2; // we give every operation an fi_context2
        (*(*hints).ep_attr).type_ = FI_EP_RDM;
        (*(*hints).domain_attr).mr_mode = SUPPORTED_MR_MODE;
        if let Some(name) = prov {
            let c = CString::new(name).unwrap();
            (*(*hints).fabric_attr).prov_name = ddsfi_strdup(c.as_ptr());
        }
        let mut info = ptr::null_mut();
        let ret = ddsfi_getinfo(ddsfi_header_version(), ptr::null(), ptr::null(), 0, hints, &mut info);
        ddsfi_freeinfo(hints);
        if ret != 0 {
            Err(ret)
        } else {
            Ok(info)
        }
    }
}

/// The entries of an fi_info list, in order.
pub fn entries(mut p: *mut fi_info) -> Vec<*mut fi_info> {
    let mut v = Vec::new();
    while !p.is_null() {
        v.push(p);
        p = unsafe { (*p).next };
    }
    v
}

pub fn prov_name(fi: *const fi_info) -> String {
    unsafe { cstr_or((*(*fi).fabric_attr).prov_name, "") }
}

pub fn domain_name(fi: *const fi_info) -> String {
    unsafe { cstr_or((*(*fi).domain_attr).name, "") }
}

pub fn fabric_name(fi: *const fi_info) -> String {
    unsafe { cstr_or((*(*fi).fabric_attr).name, "") }
}

/// One line describing an fi_info entry.
pub fn describe(fi: *const fi_info) -> String {
    unsafe {
        let d = &*(*fi).domain_attr;
        format!(
            "provider {:<14} fabric {:<14} domain {:<6} mr_mode {:#06x} [{}] data_progress {}",
            prov_name(fi),
            fabric_name(fi),
            domain_name(fi),
            d.mr_mode,
            tostr(&d.mr_mode, FI_TYPE_MR_MODE),
            tostr(&ddsfi_domain_progress(d), FI_TYPE_PROGRESS),
        )
    }
}

/// Ends the whole test process if the guard is not dropped within `limit`:
/// a libfabric call that blocks forever must fail the run, not hang it.
pub struct Watchdog(Option<std::sync::mpsc::Sender<()>>);

impl Watchdog {
    pub fn arm(what: &str, limit: std::time::Duration) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let what = what.to_string();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!("watchdog: {what} still running after {limit:?}; aborting the test process");
                std::process::exit(101);
            }
        });
        Watchdog(Some(tx))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}
