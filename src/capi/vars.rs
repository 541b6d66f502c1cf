//! Variables: registration (init, add), local updates, and queries (info, profile).

use std::os::raw::{c_char, c_void};

use super::types::{dds_counters, dds_status, dds_store, dds_var_info};
use super::{guard, in_bytes, name_arg, out_struct_size, store_of, write_sized};
use crate::error::{bail, Result};
use crate::store::{Collective, Shape};

/// Fields of the first versions of the output structs (what an old caller knows).
/// The first `dds_var_info` (up to `transport`); later fields are optional.
const INFO_V1: usize = std::mem::offset_of!(dds_var_info, node_local);
/// Size of the first version of `dds_counters` (up to `cq_ns`); newer
/// fields are written only to callers whose `struct_size` covers them.
const COUNTERS_V1: usize = std::mem::offset_of!(dds_counters, req_bytes_sent);

/// Registers variable `name` with a zero-filled shard of `local_rows` rows of
/// `row_elems` elements of `item_size` bytes (1, 2, 4 or 8) on this rank.
/// Ranks may hold different row counts, zero included; the row shape must be
/// the same on every rank. Fill the shard with `dds_update`.
///
/// Collective. Not concurrent with reads of the same store. Errors (on every
/// rank together): DDS_ERR_INVALID_ARGUMENT (NULL/empty/over-long/non-UTF-8
/// name, negative rows, bad row shape, sizes overflowing), DDS_ERR_DUPLICATE_VARIABLE,
/// DDS_ERR_MISMATCH (row shape differs across ranks), DDS_ERR_NO_MEMORY, DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_init(
    store: *mut dds_store,
    name: *const c_char,
    local_rows: i64,
    row_elems: i64,
    item_size: i32,
) -> dds_status {
    guard("dds_init", || {
        let s = store_of(store)?;
        let (name, shape) = match name_arg(name) {
            Ok(n) => (n, Ok(Shape { local_rows, row_elems, item_size })),
            Err(e) => ("", Err(e)),
        };
        s.register(Collective::Init, name, shape, None)
    })
}

/// Registers variable `name` from `data`: `local_rows` rows of `row_elems`
/// elements of `item_size` bytes, `data_bytes` = their product. Host data is
/// copied, so the caller may reuse or free `data` as soon as the call returns.
/// Device data (CUDA) is copied to the host shard after the device's queued
/// work completes (DDS_ERR_GPU when DDSTORE_GPU_STAGING=0).
/// A rank may contribute zero rows (`data` may then be NULL).
///
/// Collective. Not concurrent with reads of the same store. Errors: as
/// `dds_init`, plus DDS_ERR_MISMATCH when `data_bytes` differs from
/// `local_rows * row_elems * item_size` and DDS_ERR_INVALID_ARGUMENT for a
/// NULL `data` with a non-zero size.
#[no_mangle]
pub unsafe extern "C" fn dds_add(
    store: *mut dds_store,
    name: *const c_char,
    data: *const c_void,
    data_bytes: usize,
    local_rows: i64,
    row_elems: i64,
    item_size: i32,
) -> dds_status {
    guard("dds_add", || {
        let s = store_of(store)?;
        let shape = Shape { local_rows, row_elems, item_size };
        let checked: Result<(&str, &[u8])> = (|| {
            let n = name_arg(name)?;
            let need = (local_rows.max(0) as u128) * (row_elems.max(0) as u128) * (item_size.max(0) as u128);
            if local_rows >= 0 && row_elems > 0 && item_size > 0 && need != data_bytes as u128 {
                bail!(
                    Mismatch,
                    "variable '{n}': data_bytes is {data_bytes} but {local_rows} rows x {row_elems} elements x {item_size} bytes is {need}"
                );
            }
            Ok((n, in_bytes("data", data, data_bytes)?))
        })();
        // Device data is copied to the host first; errors join the collective.
        let staged = checked.and_then(|(n, bytes)| Ok((n, bytes, s.source_to_host(n, data as *const u8, data_bytes)?)));
        match staged {
            Ok((n, _, Some(host))) => s.register(Collective::Add, n, Ok(shape), Some(&host)),
            Ok((n, bytes, None)) => s.register(Collective::Add, n, Ok(shape), Some(bytes)),
            Err(e) => s.register(Collective::Add, "", Err(e), None),
        }
    })
}

/// Copies `data_bytes` bytes (a whole number of rows) into this rank's shard
/// of `name`, starting at local row `local_row` (0-based within this rank's
/// shard). Readers see the rows once the ranks synchronise (a barrier or
/// `dds_epoch_begin`).
///
/// `data` may be device memory, copied as for `dds_add`.
///
/// Local. Thread-safe with reads (writing rows that are being read gives
/// either version of each byte). Errors: DDS_ERR_UNKNOWN_VARIABLE,
/// DDS_ERR_MISMATCH (not whole rows), DDS_ERR_INDEX_OUT_OF_RANGE (outside the
/// shard), DDS_ERR_INVALID_ARGUMENT (NULL data).
#[no_mangle]
pub unsafe extern "C" fn dds_update(
    store: *mut dds_store,
    name: *const c_char,
    data: *const c_void,
    data_bytes: usize,
    local_row: i64,
) -> dds_status {
    guard("dds_update", || {
        let s = store_of(store)?;
        let name = name_arg(name)?;
        let bytes = in_bytes("data", data, data_bytes)?;
        match s.source_to_host(name, data as *const u8, data_bytes)? {
            Some(host) => s.update(name, &host, local_row),
            None => s.update(name, bytes, local_row),
        }
    })
}

/// Describes variable `name`. Set `out->struct_size = sizeof(dds_var_info)`
/// first. Local and thread-safe. Errors: DDS_ERR_UNKNOWN_VARIABLE,
/// DDS_ERR_INVALID_ARGUMENT (NULL or unsized `out`).
#[no_mangle]
pub unsafe extern "C" fn dds_info(store: *mut dds_store, name: *const c_char, out: *mut dds_var_info) -> dds_status {
    guard("dds_info", || {
        let s = store_of(store)?;
        let name = name_arg(name)?;
        let size = out_struct_size(out, "dds_var_info", INFO_V1, |o| o.struct_size)?;
        let i = s.info(name)?;
        let mut value = dds_var_info {
            struct_size: size,
            item_size: i.item_size,
            total_rows: i.total_rows,
            local_rows: i.local_rows,
            row_elems: i.row_elems,
            row_bytes: i.row_bytes as i64,
            method: i.method.code(),
            n_ranks: i.n_ranks as i32,
            transport: [0; 64],
            node_local: i.node_local as i32,
            node_ranks: i.node_ranks as i32,
            device_path: i.device_path as i32,
            is_ragged: i.samples.is_some() as i32,
            total_samples: i.samples.map_or(i.total_rows, |s| s.0),
            local_samples: i.samples.map_or(i.local_rows, |s| s.1),
            total_items: i.total_rows,
        };
        for (d, b) in value.transport.iter_mut().zip(i.transport.bytes().take(63)) {
            *d = b as c_char;
        }
        write_sized(out, &value, size);
        Ok(())
    })
}

/// Reads the counters of variable `name` (see `dds_counters`). Set
/// `out->struct_size = sizeof(dds_counters)` first. Local and thread-safe.
/// Errors: DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_INVALID_ARGUMENT.
#[no_mangle]
pub unsafe extern "C" fn dds_profile(store: *mut dds_store, name: *const c_char, out: *mut dds_counters) -> dds_status {
    guard("dds_profile", || {
        let s = store_of(store)?;
        let name = name_arg(name)?;
        let size = out_struct_size(out, "dds_counters", COUNTERS_V1, |o| o.struct_size)?;
        let (c, on) = s.profile(name)?;
        let value = dds_counters { struct_size: size, profiling: on as u32, ..dds_counters::from(c) };
        write_sized(out, &value, size);
        Ok(())
    })
}
