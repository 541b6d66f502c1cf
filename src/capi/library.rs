//! Library-wide entry points: version, status names, last error, option defaults.

use std::os::raw::c_char;

use std::os::raw::c_void;

use super::types::{dds_options, dds_status, DDS_BATCH_ENV, DDS_GPU_ENV, DDS_METHOD_MPI, DDS_ROLE_CORE};
use super::{guard, last_error_ptr};
use crate::error::{bail, Kind};

/// Version of the library as a NUL-terminated string, e.g. "0.1.0".
/// Thread-safe; needs no MPI.
#[no_mangle]
pub extern "C" fn dds_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// Name of a status code, e.g. "DDS_ERR_MISMATCH"; "DDS_ERR_UNKNOWN_STATUS"
/// for a value that is not a status. Thread-safe; the string is static.
#[no_mangle]
pub extern "C" fn dds_status_string(status: i32) -> *const c_char {
    let s = match Kind::from_status(status) {
        Some(kind) => kind.c_name(),
        None if status == dds_status::DDS_OK as i32 => "DDS_OK\0",
        None => "DDS_ERR_UNKNOWN_STATUS\0",
    };
    s.as_ptr() as *const c_char
}

/// Message of the last failed call on the calling thread ("" if none failed).
/// It names the function and what was wrong (variable, index, size or rank).
/// The string stays valid until the next failing call on the same thread.
#[no_mangle]
pub extern "C" fn dds_last_error() -> *const c_char {
    last_error_ptr()
}

/// Fills `options` with the defaults: method 0, role core, width 0 (all
/// ranks), n_core 0, every string NULL (read from the environment), gpu and
/// gpu_staging -1 (from the environment), batch_mode `DDS_BATCH_ENV`, and sets `struct_size`. Local; needs no MPI.
///
/// Errors: DDS_ERR_INVALID_ARGUMENT if `options` is NULL.
#[no_mangle]
pub unsafe extern "C" fn dds_options_init(options: *mut dds_options) -> dds_status {
    guard("dds_options_init", || {
        if options.is_null() {
            bail!(InvalidArgument, "options is NULL");
        }
        options.write(dds_options {
            struct_size: std::mem::size_of::<dds_options>() as u32,
            method: DDS_METHOD_MPI,
            role: DDS_ROLE_CORE,
            width: 0,
            n_core: 0,
            handshake_dir: std::ptr::null(),
            fabric_provider: std::ptr::null(),
            fabric_iface: std::ptr::null(),
            nic_map: std::ptr::null(),
            gpu: DDS_GPU_ENV,
            gpu_staging: -1,
            batch_mode: DDS_BATCH_ENV,
        });
        Ok(())
    })
}

/// Classifies `ptr` the way the store classifies buffers: writes
/// `DDS_MEM_HOST`, `DDS_MEM_CUDA` or `DDS_MEM_ROCM` to `*kind` and the device
/// ordinal (-1 for host memory) to `*device` (may be NULL). Without a GPU
/// driver every pointer, NULL included, is host memory. Only the address is
/// looked at, never the memory. Thread-safe; needs no MPI and no store.
///
/// Errors: DDS_ERR_INVALID_ARGUMENT (NULL `kind`), DDS_ERR_GPU (the driver
/// failed to answer).
#[no_mangle]
pub unsafe extern "C" fn dds_pointer_kind(ptr: *const c_void, kind: *mut i32, device: *mut i32) -> dds_status {
    guard("dds_pointer_kind", || {
        if kind.is_null() {
            bail!(InvalidArgument, "kind is NULL");
        }
        let k = crate::store::pointer_kind(ptr as *const u8)?;
        *kind = k.code();
        if !device.is_null() {
            *device = k.device();
        }
        Ok(())
    })
}

/// Whether a GPU driver is usable by this process: DDS_OK with the number of
/// devices in `*n_devices` (may be NULL), else DDS_ERR_GPU with
/// `dds_last_error()` saying why (no libcuda.so, no device, built without
/// CUDA...). The driver is probed once per process. Thread-safe; needs no MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_gpu_available(n_devices: *mut i32) -> dds_status {
    guard("dds_gpu_available", || {
        let r = crate::store::gpu_devices();
        if !n_devices.is_null() {
            *n_devices = *r.as_ref().unwrap_or(&0);
        }
        r.map(|_| ())
    })
}
