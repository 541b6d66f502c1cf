//! The C API: the only `extern "C"` items of the library.
//!
//! Handles are opaque numbers, not pointers: `dds_create` hands out a fresh id
//! that is never reused, and every call looks it up in a registry. A destroyed
//! or invented handle is therefore refused, never dereferenced. Each kind of
//! handle (store, request) carries its kind in its top byte and all kinds
//! draw from one sequence, so no two handles are equal and a handle passed
//! where another kind is expected is refused by name (`check_kind`).
//!
//! Every entry point runs its body through [`guard`], which catches panics
//! (a panic must not unwind into C), records the error message for
//! `dds_last_error` and turns the error kind into a `dds_status`.
//!
//! Below capi lies only the store (src/layering.rs): what the C API needs
//! from gpu, mpi, config or profile comes through `store` (store/process.rs).

pub mod blob;
pub mod finalize;
pub mod library;
pub mod ragged;
pub mod reads;
pub mod requests;
pub mod snapshot;
pub mod store;
pub mod types;
pub mod vars;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::RwLock;

use crate::error::{bail, Error, Kind, Result};
use crate::store::{Store, MAX_NAME_BYTES};
use types::{dds_status, dds_store};

static STORES: Lazy<RwLock<HashMap<usize, Arc<Store>, BuildIdHasher>>> = Lazy::new(Default::default);

/// Hashes handle ids (multiples of 16 under a kind tag, in order) by spreading
/// their sequence number: every read looks one up, and SipHash's
/// protection against crafted keys buys nothing for ids we issue.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_usize(&mut self, id: usize) {
        self.0 = ((id as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(32);
    }
}

type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;
/// The sequence every handle's id comes from (ids step by 16 so they align
/// like pointers).
static NEXT_ID: AtomicUsize = AtomicUsize::new(16);

/// The kinds of opaque handle, as tags in a handle's top byte (values no
/// pointer a program could confuse them with has there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandleKind {
    Store = 0x5d,
    Request = 0x5e,
}

const KIND_SHIFT: u32 = usize::BITS - 8;

impl HandleKind {
    /// The C type a handle of this kind has.
    fn c_type(self) -> &'static str {
        match self {
            HandleKind::Store => "store handle (dds_store *)",
            HandleKind::Request => "request handle (dds_request *)",
        }
    }
}

/// A fresh handle id of `kind`, never handed out before (of any kind).
pub(crate) fn new_handle(kind: HandleKind) -> usize {
    NEXT_ID.fetch_add(16, Ordering::Relaxed) | (kind as usize) << KIND_SHIFT
}

/// Refuses a handle of another known kind than `want` (DDS_ERR_INVALID_ARGUMENT,
/// naming both); other values are left to the registry lookup.
pub(crate) fn check_kind(h: usize, want: HandleKind) -> Result<()> {
    let tag = h >> KIND_SHIFT;
    for other in [HandleKind::Store, HandleKind::Request] {
        if other != want && tag == other as usize {
            bail!(InvalidArgument, "handle {h:#x} is a {}, not a {}", other.c_type(), want.c_type());
        }
    }
    Ok(())
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

pub(crate) fn status_of(kind: Kind) -> dds_status {
    macro_rules! map_to_c {
        ($($kind:ident = $code:literal => $cname:ident,)*) => {{
            // The table's codes must be those of the enum in ddstore.h.
            $(const _: () = assert!(dds_status::$cname as i32 == $code);)*
            match kind {
                $(Kind::$kind => dds_status::$cname,)*
            }
        }};
    }
    crate::error::status_table!(map_to_c)
}

/// Runs an entry point's body: catches panics, records the message of any
/// failure (prefixed with the function name) and returns its status.
pub(crate) fn guard(func: &str, body: impl FnOnce() -> Result<()>) -> dds_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => dds_status::DDS_OK,
        Ok(Err(e)) => {
            set_last_error(&format!("{func}: {}", e.msg));
            status_of(e.kind)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("{func}: internal error (please report): {what}"));
            dds_status::DDS_ERR_INTERNAL
        }
    }
}

/// Registers a new store and returns its handle.
pub(crate) fn register_store(store: Store) -> Result<*mut dds_store> {
    crate::store::before_mpi_finalize(release_all_before_finalize)?;
    let id = new_handle(HandleKind::Store);
    STORES.write().insert(id, Arc::new(store));
    Ok(id as *mut dds_store)
}

/// MPI_Finalize is starting: free the MPI objects of stores still alive, in
/// creation order (handle ids grow), so MPI can shut down cleanly and a later
/// `dds_destroy` (for example from a Python `__del__`) only frees memory.
fn release_all_before_finalize() {
    let stores = STORES.read();
    let mut ids: Vec<&usize> = stores.keys().collect();
    ids.sort();
    for id in ids {
        stores[id].release_mpi();
    }
}

/// Looks up a live store for any entry point but `dds_destroy` (which uses
/// `take_store`): once MPI_Finalize has begun every such call is refused here,
/// in one place, so no entry point can forget it (docs/guarantees.md).
pub(crate) fn store_of(h: *const dds_store) -> Result<Arc<Store>> {
    if h.is_null() {
        bail!(InvalidArgument, "store handle is NULL");
    }
    check_kind(h as usize, HandleKind::Store)?;
    let s = match STORES.read().get(&(h as usize)) {
        Some(s) => s.clone(),
        None => bail!(BadState, "store handle {h:p} is not a live store (destroyed or never created)"),
    };
    s.check_running()?;
    Ok(s)
}

/// The store and the variable name a per-variable entry point starts with,
/// checked in that order (a bad handle is reported before a bad name).
///
/// # Safety
/// As `name_arg`.
pub(crate) unsafe fn store_and_name<'a>(h: *const dds_store, name: *const c_char) -> Result<(Arc<Store>, &'a str)> {
    let s = store_of(h)?;
    Ok((s, name_arg(name)?))
}

/// The live store `h` names, if any, even once MPI_Finalize has begun
/// (`dds_destroy`'s agreement: `take_store` then reports what is wrong).
pub(crate) fn peek_store(h: *const dds_store) -> Option<Arc<Store>> {
    STORES.read().get(&(h as usize)).cloned().filter(|_| check_kind(h as usize, HandleKind::Store).is_ok())
}

/// Removes a store from the registry (the first step of `dds_destroy`).
pub(crate) fn take_store(h: *const dds_store) -> Result<Arc<Store>> {
    check_kind(h as usize, HandleKind::Store)?;
    match STORES.write().remove(&(h as usize)) {
        Some(s) => Ok(s),
        None => bail!(BadState, "store handle {h:p} is not a live store (destroyed twice, or never created)"),
    }
}

/// True when `dds_create`'s raw options ask for a method-2 extra member:
/// `struct_size` covers `method` and `role` and they are 2 and 1. Read
/// before (and whatever the outcome of) decoding the rest, so that an extra
/// member's error (NULL `out`, non-UTF-8 string, short struct) stays local
/// instead of falling into the collective path on a communicator extras
/// ignore.
///
/// # Safety
/// `p` is NULL or points to at least `struct_size` readable bytes.
pub(crate) unsafe fn raw_extra_role(p: *const types::dds_options) -> bool {
    if p.is_null() {
        return false;
    }
    let covers = std::mem::offset_of!(types::dds_options, role) + std::mem::size_of::<i32>();
    let size = std::ptr::addr_of!((*p).struct_size).read_unaligned() as usize;
    size >= covers
        && std::ptr::addr_of!((*p).method).read_unaligned() == crate::capi::types::DDS_METHOD_SPLIT
        && std::ptr::addr_of!((*p).role).read_unaligned() == crate::capi::types::DDS_ROLE_EXTRA
}

/// Reads a NUL-terminated name: not NULL, not empty, UTF-8, at most
/// MAX_NAME_BYTES bytes (the scan stops there, so an unterminated buffer is
/// never read past that bound).
///
/// # Safety
/// `p` is NULL or points to readable memory up to its NUL or MAX_NAME_BYTES + 1 bytes.
pub(crate) unsafe fn name_arg<'a>(p: *const c_char) -> Result<&'a str> {
    if p.is_null() {
        bail!(InvalidArgument, "variable name is NULL");
    }
    let bytes = p as *const u8;
    let mut len = 0usize;
    while *bytes.add(len) != 0 {
        len += 1;
        if len > MAX_NAME_BYTES {
            bail!(InvalidArgument, "variable name is longer than {MAX_NAME_BYTES} bytes");
        }
    }
    if len == 0 {
        bail!(InvalidArgument, "variable name is empty");
    }
    match std::str::from_utf8(std::slice::from_raw_parts(bytes, len)) {
        Ok(s) => Ok(s),
        Err(_) => bail!(InvalidArgument, "variable name is not valid UTF-8"),
    }
}

/// An optional C string option: NULL means unset.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn opt_string(what: &str, p: *const c_char) -> Result<Option<String>> {
    if p.is_null() {
        return Ok(None);
    }
    match std::ffi::CStr::from_ptr(p).to_str() {
        Ok("") => Ok(None),
        Ok(s) => Ok(Some(s.to_string())),
        Err(_) => Err(Error::new(Kind::InvalidArgument, format!("option {what} is not valid UTF-8"))),
    }
}

/// A read-only byte buffer: NULL is allowed only for 0 bytes.
///
/// # Safety
/// `p` points to `len` readable bytes.
pub(crate) unsafe fn in_bytes<'a>(what: &str, p: *const std::os::raw::c_void, len: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        bail!(InvalidArgument, "{what} is NULL but its size is {len} bytes");
    }
    if len > isize::MAX as usize {
        bail!(InvalidArgument, "{what} size {len} is too large");
    }
    Ok(std::slice::from_raw_parts(p as *const u8, len))
}

/// A destination pointer: NULL is allowed only for 0 bytes.
pub(crate) fn out_ptr(what: &str, p: *mut std::os::raw::c_void, len: usize) -> Result<*mut u8> {
    if p.is_null() && len > 0 {
        bail!(InvalidArgument, "{what} is NULL but its size is {len} bytes");
    }
    Ok(p as *mut u8)
}

/// The `struct_size` the caller set in its output struct `*out` (read by
/// `size`), checked: `out` is not NULL and the size covers at least the
/// fields of the first version of the struct (`min` bytes).
///
/// # Safety
/// `out` is NULL or points to a readable struct of type `T`.
pub(crate) unsafe fn out_struct_size<T>(out: *mut T, what: &str, min: usize, size: impl Fn(&T) -> u32) -> Result<u32> {
    if out.is_null() {
        bail!(InvalidArgument, "out is NULL");
    }
    let got = size(&*out);
    if (got as usize) < min {
        bail!(InvalidArgument, "{what}.struct_size is {got}; set it to sizeof({what}) before the call");
    }
    Ok(got)
}

/// Copies `value` into the caller's struct, at most `size` bytes of it (so an
/// older caller with a smaller struct gets only the fields it knows).
///
/// # Safety
/// `out` points to a writable struct of at least `size` bytes.
pub(crate) unsafe fn write_sized<T: Copy>(out: *mut T, value: &T, size: u32) {
    let n = (size as usize).min(std::mem::size_of::<T>());
    std::ptr::copy_nonoverlapping(value as *const T as *const u8, out as *mut u8, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside an entry point's body becomes DDS_ERR_INTERNAL with a
    /// message naming the function and the panic, and does not unwind out.
    #[test]
    fn guard_turns_panics_into_internal_errors() {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {})); // keep the test's output clean
        let st = guard("dds_example", || panic!("index {} out of bounds", 7));
        let msg = unsafe { std::ffi::CStr::from_ptr(last_error_ptr()) }.to_str().unwrap().to_string();
        let st2 = guard("dds_other", || -> Result<()> { std::panic::panic_any(42u8) });
        std::panic::set_hook(hook);
        assert_eq!(st, dds_status::DDS_ERR_INTERNAL);
        assert_eq!(st2, dds_status::DDS_ERR_INTERNAL);
        let msg2 = unsafe { std::ffi::CStr::from_ptr(last_error_ptr()) }.to_str().unwrap().to_string();
        assert!(msg.starts_with("dds_example: internal error (please report): index 7 out of bounds"), "{msg}");
        assert!(msg2.starts_with("dds_other: internal error") && msg2.contains("unknown panic"), "{msg2}");
        // An ordinary error keeps its kind and message.
        let st = guard("dds_example", || bail!(Mismatch, "sizes differ"));
        assert_eq!(st, dds_status::DDS_ERR_MISMATCH);
        let msg = unsafe { std::ffi::CStr::from_ptr(last_error_ptr()) }.to_str().unwrap().to_string();
        assert_eq!(msg, "dds_example: sizes differ");
    }

    /// Every status constant of the header is in the status table under the
    /// same name and code, and the other way round (the table's side is also
    /// checked at compile time, in status_of).
    #[test]
    fn header_statuses_are_the_status_table() {
        let header = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/include/ddstore.h"));
        let mut seen = Vec::new();
        for line in header.lines().map(str::trim).filter(|l| l.starts_with("DDS_ERR_") || l.starts_with("DDS_OK")) {
            let Some((name, code)) = line.trim_end_matches(',').split_once(" = ") else { continue };
            let Ok(code) = code.parse::<i32>() else { continue };
            let named = unsafe { std::ffi::CStr::from_ptr(super::library::dds_status_string(code)) };
            assert_eq!(named.to_str().unwrap(), name, "dds_status_string({code})");
            if code != 0 {
                assert_eq!(status_of(Kind::from_code(code)) as i32, code, "{name}");
                seen.push(code);
            }
        }
        let all: Vec<i32> = Kind::ALL.iter().map(|k| *k as i32).collect();
        assert_eq!(seen, all, "the header's error codes and the status table differ");
        let unknown = unsafe { std::ffi::CStr::from_ptr(super::library::dds_status_string(99)) };
        assert_eq!(unknown.to_str().unwrap(), "DDS_ERR_UNKNOWN_STATUS");
    }

    /// The committed header must equal the one cbindgen generates from this source.
    #[test]
    fn header_is_current() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/ddstore.h"));
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/ddstore.h");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "include/ddstore.h is out of date with src/capi: run `make header` and commit the result"
        );
    }

    /// What scripts/gen-bindings.py writes from the header (the Fortran
    /// module, pyddstore/_constants.py) must be committed as it would write
    /// it now, as the header itself must be (see `header_is_current`).
    #[test]
    fn bindings_are_current() {
        let root = env!("CARGO_MANIFEST_DIR");
        let out = std::process::Command::new("python3")
            .arg(format!("{root}/scripts/gen-bindings.py"))
            .arg("--check")
            .output()
            .expect("python3 runs scripts/gen-bindings.py");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}
