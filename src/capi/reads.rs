//! Reads: single ranges, batches, and destination registration.

use std::os::raw::{c_char, c_void};

use super::types::{dds_status, dds_store};
use super::{guard, name_arg, out_ptr, store_and_name, store_of};
use crate::error::{bail, Result};
use crate::store::Stream;

/// Reads `count` consecutive rows starting at global row `start` into `dst`
/// (`dst_bytes` must be `count` x row bytes). The rows must lie in one rank's
/// shard; use `dds_get_batch` for rows of several ranks.
///
/// `dst` may be host or device memory (see docs/gpu.md): rows for a device
/// destination are staged through pinned host memory, and the call returns
/// once they are in place (it waits for its own copy, not for the device).
///
/// One-sided (not collective) and thread-safe. Method 0 needs MPI initialised
/// with MPI_THREAD_MULTIPLE for concurrent calls from several threads (the
/// store serialises its MPI calls otherwise); method 1 reads make no MPI
/// calls. Errors: DDS_ERR_UNKNOWN_VARIABLE,
/// DDS_ERR_INDEX_OUT_OF_RANGE (`start` outside [0, total rows)),
/// DDS_ERR_INVALID_ARGUMENT (range crossing a shard end, negative count, NULL
/// dst), DDS_ERR_MISMATCH (`dst_bytes`), DDS_ERR_MPI / DDS_ERR_FABRIC /
/// DDS_ERR_TIMEOUT (transport), DDS_ERR_GPU (device destination refused or
/// a GPU driver call failed).
#[no_mangle]
pub unsafe extern "C" fn dds_get(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    start: i64,
    count: i64,
) -> dds_status {
    guard("dds_get", || get_body(store, name, dst, dst_bytes, start, count, std::ptr::null_mut()))
}

/// As `dds_get`, ordered on the caller's CUDA stream `stream` (a `CUstream`
/// or `cudaStream_t`; NULL makes it exactly `dds_get`).
///
/// Device `dst`: the host-to-device copy is queued on `stream` after the
/// work already queued there, and the call returns without waiting for it:
/// work queued on `stream` afterwards sees the rows; anything else must wait
/// for the stream (or an event recorded on it) first. `dst` must stay
/// allocated until then; the library's bounce buffers are not reused before
/// the copy completes. Host `dst`: the call first waits for the work queued
/// on `stream` (which may still use `dst`), then reads as `dds_get`.
///
/// Errors: as `dds_get`, plus DDS_ERR_GPU for a non-NULL stream when no GPU
/// driver is usable or GPU support is off for the store.
#[no_mangle]
pub unsafe extern "C" fn dds_get_stream(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    start: i64,
    count: i64,
    stream: *mut c_void,
) -> dds_status {
    guard("dds_get_stream", || get_body(store, name, dst, dst_bytes, start, count, stream))
}

unsafe fn get_body(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    start: i64,
    count: i64,
    stream: *mut c_void,
) -> Result<()> {
    let (s, name) = store_and_name(store, name)?;
    s.get_to(name, out_ptr("dst", dst, dst_bytes)?, dst_bytes, start, count, stream_arg(stream))
}

/// Reads `n` arbitrary rows: row i of `dst` receives global row `indices[i]`.
/// Any order, any owners, repeats allowed, `n` may be 0. `dst_bytes` must be
/// `n` x row bytes. Every index is checked before any row moves; after an
/// error the store stays usable.
///
/// Method 0: collective. Every rank of the store calls it for the same
/// variable, the same number of times, from one thread (the number of
/// indices may differ per rank); argument and index errors on any rank fail
/// the call on every rank. Methods 1 and 2: one-sided and thread-safe.
///
/// `dst` may be host or device memory, as for `dds_get`.
///
/// Errors: DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_INDEX_OUT_OF_RANGE,
/// DDS_ERR_MISMATCH (`dst_bytes`), DDS_ERR_INVALID_ARGUMENT (NULL pointers,
/// negative `n`, ranks naming different variables), transport errors,
/// DDS_ERR_GPU.
#[no_mangle]
pub unsafe extern "C" fn dds_get_batch(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    indices: *const i64,
    n: i64,
) -> dds_status {
    let args = BatchArgs { name, dst, dst_bytes, indices, n };
    guard("dds_get_batch", || batch_body(store, args, std::ptr::null_mut()))
}

/// As `dds_get_batch`, ordered on the caller's CUDA stream (NULL makes it
/// exactly `dds_get_batch`); the stream rules are those of `dds_get_stream`.
/// Method 0 stays collective: every rank calls it (or `dds_get_batch`) for
/// the same variable; each rank may pass its own stream, or NULL.
#[no_mangle]
pub unsafe extern "C" fn dds_get_batch_stream(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    indices: *const i64,
    n: i64,
    stream: *mut c_void,
) -> dds_status {
    let args = BatchArgs { name, dst, dst_bytes, indices, n };
    guard("dds_get_batch_stream", || batch_body(store, args, stream))
}

unsafe fn batch_body(store: *mut dds_store, args: BatchArgs, stream: *mut c_void) -> Result<()> {
    let s = store_of(store)?;
    match args.check(|| Ok(())) {
        (name, Ok((idx, d))) => s.get_batch_to(name, d, args.dst_bytes, Ok(idx), stream_arg(stream)),
        (name, Err(e)) => s.get_batch(name, std::ptr::null_mut(), 0, Err(e)),
    }
}

/// A CUDA stream argument: NULL is none.
fn stream_arg(p: *mut c_void) -> Option<Stream> {
    (!p.is_null()).then_some(Stream(p as usize))
}

/// The C arguments every batched read takes (`dds_get_batch*`,
/// `dds_get_ragged*`, `dds_get_batch_start`), as its entry point got them.
#[derive(Clone, Copy)]
pub(super) struct BatchArgs {
    pub name: *const c_char,
    pub dst: *mut c_void,
    pub dst_bytes: usize,
    pub indices: *const i64,
    pub n: i64,
}

impl BatchArgs {
    /// The arguments checked as far as this layer can: the name ("" when
    /// unusable) and either the indices and destination or the first error,
    /// in the order name, `more` (a caller's own output checks), `n`,
    /// `indices`, `dst`. The error is not returned early: a method-0
    /// collective batch folds it into its agreement step, so that every
    /// rank fails together.
    ///
    /// # Safety
    /// As the entry points: `indices` points to `n` values when not NULL.
    pub(super) unsafe fn check<'a>(self, more: impl FnOnce() -> Result<()>) -> (&'a str, Result<(&'a [i64], *mut u8)>) {
        let BatchArgs { name, dst, dst_bytes, indices, n } = self;
        let name_res = name_arg(name);
        let checked = (|| {
            name_res.as_ref().map_err(|e| e.clone())?;
            more()?;
            if n < 0 {
                bail!(InvalidArgument, "n {n} is negative");
            }
            if n > 0 && indices.is_null() {
                bail!(InvalidArgument, "indices is NULL but n is {n}");
            }
            // SAFETY: the caller's contract; n > 0 and indices is not NULL.
            let idx = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(indices, n as usize) } };
            Ok((idx, out_ptr("dst", dst, dst_bytes)?))
        })();
        (name_res.unwrap_or(""), checked)
    }

    /// `check`, in the form the store's batched calls take: the name, the
    /// destination and its size, and the indices; after an error a NULL
    /// destination of 0 bytes and the error in place of the indices.
    ///
    /// # Safety
    /// As `check`.
    pub(super) unsafe fn for_store<'a>(
        self,
        more: impl FnOnce() -> Result<()>,
    ) -> (&'a str, *mut u8, usize, Result<&'a [i64]>) {
        match self.check(more) {
            (name, Ok((idx, d))) => (name, d, self.dst_bytes, Ok(idx)),
            (name, Err(e)) => (name, std::ptr::null_mut(), 0, Err(e)),
        }
    }
}

/// A buffer argument that must not be NULL, as an address.
fn buf_arg(buf: *mut c_void) -> Result<usize> {
    if buf.is_null() {
        bail!(InvalidArgument, "buf is NULL");
    }
    Ok(buf as usize)
}

/// Registers `bytes` bytes at `buf` as a destination for reads of `name`:
/// later reads whose destination lies inside it (the whole buffer or any
/// slice) need no memory registration. Registering the same buffer twice is
/// a no-op; a buffer partly overlapping a registered one is refused. A
/// zero-byte buffer is ignored. For method 0, and for staged device buffers
/// (whose rows arrive through bounce buffers), the registration is recorded
/// and validated but changes nothing; a GPUDirect device buffer is
/// registered with its memory interface (docs/gpu.md).
///
/// Local and thread-safe. Errors: DDS_ERR_UNKNOWN_VARIABLE,
/// DDS_ERR_INVALID_ARGUMENT (NULL `buf`, overlap), DDS_ERR_FABRIC.
#[no_mangle]
pub unsafe extern "C" fn dds_register_recv(
    store: *mut dds_store,
    name: *const c_char,
    buf: *mut c_void,
    bytes: usize,
) -> dds_status {
    guard("dds_register_recv", || {
        let (s, name) = store_and_name(store, name)?;
        s.register_recv(name, buf_arg(buf)?, bytes)
    })
}

/// Removes the registration of `name` that starts at `buf`. The buffer stays
/// usable as an ordinary destination. Local and thread-safe.
/// Errors: DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_INVALID_ARGUMENT (not registered).
#[no_mangle]
pub unsafe extern "C" fn dds_unregister_recv(
    store: *mut dds_store,
    name: *const c_char,
    buf: *mut c_void,
) -> dds_status {
    guard("dds_unregister_recv", || {
        let (s, name) = store_and_name(store, name)?;
        s.unregister_recv(name, buf_arg(buf)?)
    })
}
