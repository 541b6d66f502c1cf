//! Ragged variables: samples of different lengths (see `store::ragged`).
//!
//! A sample is a run of rows of one fixed shape (`row_elems` elements of
//! `item_size` bytes); its length is its row count, 0 allowed.

use std::os::raw::{c_char, c_void};

use super::reads::BatchArgs;
use super::types::{dds_status, dds_store};
use super::{guard, in_bytes, name_arg, store_of};
use crate::error::{bail, Result};
use crate::store::RaggedSpec;

/// Checks an array of `n` i64 (NULL only when `n` is 0).
unsafe fn i64_array<'a>(what: &str, p: *const i64, n: i64) -> Result<&'a [i64]> {
    if n < 0 {
        bail!(InvalidArgument, "{what}: count {n} is negative");
    }
    if n > 0 && p.is_null() {
        bail!(InvalidArgument, "{what} is NULL but its count is {n}");
    }
    Ok(if n == 0 { &[] } else { std::slice::from_raw_parts(p, n as usize) })
}

/// Registers ragged variable `name` from this rank's `n_samples` samples:
/// `data` holds their rows back to back (`data_bytes` bytes), `lengths[i]`
/// is sample i's row count (0 allowed), each row `row_elems` elements of
/// `item_size` bytes (1, 2, 4 or 8). Samples are numbered globally in rank
/// order. A rank may hold no samples. Data is copied. Each rank keeps the
/// offsets of its own samples only (16 bytes per local sample).
///
/// Collective. Not concurrent with reads of the same store. Errors (on every
/// rank together, naming the variable and rank): DDS_ERR_INVALID_ARGUMENT
/// (bad name, negative length, bad row shape, NULL pointers with non-zero
/// sizes), DDS_ERR_MISMATCH (lengths not summing to `data_bytes`, row shape
/// differing across ranks), DDS_ERR_DUPLICATE_VARIABLE, DDS_ERR_NO_MEMORY,
/// DDS_ERR_MPI / DDS_ERR_FABRIC.
#[no_mangle]
pub unsafe extern "C" fn dds_add_ragged(
    store: *mut dds_store,
    name: *const c_char,
    data: *const c_void,
    data_bytes: usize,
    lengths: *const i64,
    n_samples: i64,
    row_elems: i64,
    item_size: i32,
) -> dds_status {
    guard("dds_add_ragged", || {
        let s = store_of(store)?;
        let checked = (|| {
            let n = name_arg(name)?;
            let l = i64_array("lengths", lengths, n_samples)?;
            let bytes = in_bytes("data", data, data_bytes)?;
            let host = s.source_to_host(n, data as *const u8, data_bytes)?;
            Ok((n, l, bytes, host))
        })();
        let spec = RaggedSpec { row_elems, item_size };
        match checked {
            Ok((n, l, _, Some(host))) => s.register_ragged(n, Ok(spec), &host, l),
            Ok((n, l, bytes, None)) => s.register_ragged(n, Ok(spec), bytes, l),
            Err(e) => s.register_ragged("", Err(e), &[], &[]),
        }
    })
}

/// Writes the lengths (row counts) of the `n` samples `indices` of ragged
/// variable `name` into `lengths` (`n` entries), e.g. to size a buffer.
/// Any order, repeats allowed.
///
/// Collective in the method-0 collective batch mode (as `dds_get_batch`),
/// else one-sided and thread-safe. Errors: DDS_ERR_UNKNOWN_VARIABLE,
/// DDS_ERR_INDEX_OUT_OF_RANGE (naming the index and sample),
/// DDS_ERR_INVALID_ARGUMENT (not ragged, NULL pointers, negative `n`),
/// transport errors.
#[no_mangle]
pub unsafe extern "C" fn dds_ragged_lengths(
    store: *mut dds_store,
    name: *const c_char,
    indices: *const i64,
    n: i64,
    lengths: *mut i64,
) -> dds_status {
    guard("dds_ragged_lengths", || {
        let s = store_of(store)?;
        let name_res = name_arg(name);
        let checked = (|| {
            name_res.as_ref().map_err(|e| e.clone())?;
            let idx = i64_array("indices", indices, n)?;
            let out = i64_array("lengths", lengths, n)?;
            Ok((idx, std::slice::from_raw_parts_mut(out.as_ptr() as *mut i64, out.len())))
        })();
        s.ragged_lengths(name_res.unwrap_or(""), checked)
    })
}

/// Reads the `n` samples `indices` of ragged variable `name` (any order, any
/// owners, repeats allowed, `n` may be 0) back to back into `dst`, and
/// their lengths into `lengths` (`n` entries; may be NULL). `dst_bytes` must
/// be at least the samples' bytes; `*bytes_read` (may be NULL) receives
/// what was written. Every index is checked before any byte moves.
///
/// Collective in the method-0 collective batch mode (every rank calls, the
/// same number of times, from one thread; errors on any rank fail every
/// rank), else one-sided and thread-safe. A CUDA `dst` is staged: the
/// samples are read into host memory of `dst_bytes` bytes, then copied to
/// the device through pinned bounce buffers before the call returns.
///
/// Errors: DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_INDEX_OUT_OF_RANGE (naming the
/// index and sample), DDS_ERR_MISMATCH (`dst_bytes` too small; the message
/// names the bytes needed), DDS_ERR_INVALID_ARGUMENT (not ragged, NULL
/// pointers, negative `n`), DDS_ERR_GPU (a device `dst` with staging off,
/// or ROCm memory), DDS_ERR_NO_MEMORY (no host memory to stage), transport
/// errors.
#[no_mangle]
pub unsafe extern "C" fn dds_get_ragged_batch(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    indices: *const i64,
    n: i64,
    lengths: *mut i64,
    bytes_read: *mut usize,
) -> dds_status {
    let args = BatchArgs { name, dst, dst_bytes, indices, n };
    guard("dds_get_ragged_batch", || batch_body(store, args, lengths, bytes_read))
}

unsafe fn batch_body(store: *mut dds_store, args: BatchArgs, lengths: *mut i64, bytes_read: *mut usize) -> Result<()> {
    let s = store_of(store)?;
    // The checks (and messages) of dds_get_batch.
    let (name, d, dst_bytes, idx) = args.for_store(|| Ok(()));
    let lens = match idx {
        Ok(_) if !lengths.is_null() && args.n > 0 => Some(std::slice::from_raw_parts_mut(lengths, args.n as usize)),
        _ => None,
    };
    let read = s.get_ragged_batch(name, d, dst_bytes, idx, lens)?;
    if !bytes_read.is_null() {
        *bytes_read = read.bytes as usize;
    }
    Ok(())
}

/// Reads sample `sample` of ragged variable `name` into `dst` and its length
/// into `*length` (may be NULL): `dds_get_ragged_batch` with one index,
/// collective when that is.
#[no_mangle]
pub unsafe extern "C" fn dds_get_ragged(
    store: *mut dds_store,
    name: *const c_char,
    dst: *mut c_void,
    dst_bytes: usize,
    sample: i64,
    length: *mut i64,
) -> dds_status {
    let idx = [sample];
    let args = BatchArgs { name, dst, dst_bytes, indices: idx.as_ptr(), n: 1 };
    guard("dds_get_ragged", || batch_body(store, args, length, std::ptr::null_mut()))
}

/// Method 2 extra member: `dds_join` for a ragged variable (its rows and
/// its per-sample index, both published by the core job's `dds_add_ragged`).
/// Local. Errors: as `dds_join`.
#[no_mangle]
pub unsafe extern "C" fn dds_join_ragged(store: *mut dds_store, name: *const c_char) -> dds_status {
    guard("dds_join_ragged", || store_of(store)?.join_ragged(name_arg(name)?, None))
}
