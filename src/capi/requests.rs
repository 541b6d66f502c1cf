//! Non-blocking batched reads: start, test, wait, free.
//!
//! Request handles are ids in a registry, as store handles are: a request
//! already waited for (or freed) is refused, never dereferenced.

use std::collections::HashMap;
use std::os::raw::{c_char, c_int, c_void};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::reads::BatchArgs;
use super::types::{dds_status, dds_store};
use super::{check_kind, guard, new_handle, store_of, HandleKind};
use crate::error::{bail, Result};
use crate::store::Request;

/// Opaque handle of one batched read in flight, from `dds_get_batch_start`;
/// released by `dds_request_wait` or `dds_request_free`.
pub struct dds_request {
    _private: [u8; 0],
}

static REQUESTS: Lazy<Mutex<HashMap<usize, Request>>> = Lazy::new(Default::default);

/// Removes a request from the registry; the caller waits for it outside
/// the registry's lock (other threads start and test theirs meanwhile).
fn take(req: *mut dds_request) -> Result<Request> {
    if req.is_null() {
        bail!(InvalidArgument, "request handle is NULL");
    }
    check_kind(req as usize, HandleKind::Request)?;
    match REQUESTS.lock().remove(&(req as usize)) {
        Some(r) => Ok(r),
        None => bail!(BadState, "request handle {req:p} is not a live request (already waited for or freed)"),
    }
}

/// Starts reading `n` arbitrary rows into `dst`, as `dds_get_batch` does,
/// and returns at once with a request in `*req`; the read progresses on a
/// library thread while the caller works. `indices` is copied; `dst` must
/// stay valid and untouched until the request completes (`dds_request_test`
/// reports done, or `dds_request_wait` / `dds_request_free` returns).
///
/// Errors found at start are returned here and no request is made:
/// DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_INDEX_OUT_OF_RANGE, DDS_ERR_MISMATCH
/// (`dst_bytes`), DDS_ERR_INVALID_ARGUMENT (NULL pointers, negative `n`),
/// DDS_ERR_GPU (a device `dst` the store cannot stage). Errors of the read
/// itself (transport, timeout) are returned by `dds_request_wait`.
///
/// Methods 1 and 2, and method 0 in the one-sided batch mode: local and
/// thread-safe; any number of requests may be in flight per store and per
/// thread, completing in any order. Method 0 in the collective batch mode:
/// collective, as `dds_get_batch` (every rank starts the same requests, in
/// the same order, from one thread; argument and index errors fail the start
/// on every rank); the rows move in start order on a library thread.
/// Method 0 when MPI is not initialised with MPI_THREAD_MULTIPLE: the read
/// runs inside this call (no overlap; the request is complete on return).
///
/// Device `dst`: the rows arrive in a host buffer the request owns and are
/// copied to the device by `dds_request_wait`, on the waiting thread.
#[no_mangle]
pub unsafe extern "C" fn dds_get_batch_start(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    indices: *const i64,
    n: i64,
    req: *mut *mut dds_request,
) -> dds_status {
    guard("dds_get_batch_start", || {
        let s = store_of(store)?;
        // Argument errors are folded into a collective start's agreement.
        let (name, d, dst_bytes, idx) = BatchArgs { name, dst, dst_bytes, indices, n }.for_store(|| {
            if req.is_null() {
                bail!(InvalidArgument, "req (the output) is NULL");
            }
            Ok(())
        });
        let r = s.get_batch_start(name, d, dst_bytes, idx)?;
        let id = new_handle(HandleKind::Request);
        REQUESTS.lock().insert(id, r);
        *req = id as *mut dds_request;
        Ok(())
    })
}

/// Sets `*done` to 1 when the request's read has completed (successfully or
/// not; `dds_request_wait` then returns at once), else 0. Never blocks; the
/// read progresses whether or not this is called. Thread-safe.
/// Errors: DDS_ERR_INVALID_ARGUMENT (NULL), DDS_ERR_BAD_STATE (not a live request).
#[no_mangle]
pub unsafe extern "C" fn dds_request_test(req: *mut dds_request, done: *mut c_int) -> dds_status {
    guard("dds_request_test", || {
        if req.is_null() || done.is_null() {
            bail!(InvalidArgument, "{} is NULL", if req.is_null() { "request handle" } else { "done" });
        }
        check_kind(req as usize, HandleKind::Request)?;
        let d = match REQUESTS.lock().get(&(req as usize)) {
            Some(r) => r.is_done(),
            None => bail!(BadState, "request handle {req:p} is not a live request (already waited for or freed)"),
        };
        *done = d as c_int;
        Ok(())
    })
}

/// Waits for the request's read, releases the request and returns the
/// read's status (its message through `dds_last_error` on this thread).
/// Any thread may wait for any request, in any order; it blocks without
/// spinning. A request outlives its store: after `dds_destroy` (which waits
/// for every request first) the wait returns the read's status at once.
/// Errors: the read's (DDS_ERR_FABRIC, DDS_ERR_TIMEOUT, DDS_ERR_MPI,
/// DDS_ERR_GPU ...), DDS_ERR_INVALID_ARGUMENT (NULL), DDS_ERR_BAD_STATE
/// (already waited for or freed).
#[no_mangle]
pub unsafe extern "C" fn dds_request_wait(req: *mut dds_request) -> dds_status {
    guard("dds_request_wait", || take(req)?.wait())
}

/// Abandons a request: waits for its read (the destination is written until
/// then), discards its status and releases it. `dds_request_free(NULL)` does
/// nothing. Errors: DDS_ERR_BAD_STATE (already waited for or freed).
#[no_mangle]
pub unsafe extern "C" fn dds_request_free(req: *mut dds_request) -> dds_status {
    guard("dds_request_free", || {
        if req.is_null() {
            return Ok(());
        }
        let _ = take(req)?.wait();
        Ok(())
    })
}
