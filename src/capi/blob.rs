//! Blobs: `dds_publish_blob` and `dds_wait_blob` (store/blob.rs).

use std::os::raw::{c_char, c_void};

use super::types::{dds_status, dds_store};
use super::{guard, in_bytes, name_arg, out_ptr, store_of};
use crate::error::{bail, Error, Result};

/// Largest blob `dds_publish_blob` accepts, in bytes (1 MiB).
pub const DDS_BLOB_MAX_BYTES: i32 = 1048576;
const _: () = assert!(DDS_BLOB_MAX_BYTES as usize == crate::store::BLOB_MAX_BYTES);

/// A blob's name: as a variable's (non-empty UTF-8, at most 255 bytes).
unsafe fn blob_name<'a>(name: *const c_char) -> Result<&'a str> {
    name_arg(name).map_err(|e| Error::new(e.kind, e.msg.replacen("variable name", "blob name", 1)))
}

/// Method 2 (core or extra member): publishes `len` bytes at `data` (NULL
/// allowed when `len` is 0; at most `DDS_BLOB_MAX_BYTES`) as blob `name` in
/// the store's hand-shake directory, for `dds_wait_blob` in any job using
/// that directory. Written as the variable records are: a private file
/// (0600) with a checksum, written to a temporary name, fsynced, renamed
/// over an older blob of the same name, and the directory fsynced.
///
/// Local (no MPI). Errors: DDS_ERR_INVALID_ARGUMENT (bad name, `len` over
/// `DDS_BLOB_MAX_BYTES`, `data` NULL with `len` > 0), DDS_ERR_BAD_STATE (not
/// a method-2 store, or destroyed), DDS_ERR_IO (the directory is not ours or
/// is writable by others; a write fails: the message names the file).
#[no_mangle]
pub unsafe extern "C" fn dds_publish_blob(
    store: *mut dds_store,
    name: *const c_char,
    data: *const c_void,
    len: usize,
) -> dds_status {
    guard("dds_publish_blob", || {
        let store = store_of(store)?;
        let name = blob_name(name)?;
        store.publish_blob(name, in_bytes("data", data, len)?)
    })
}

/// Method 2 (core or extra member): waits for blob `name` in the store's
/// hand-shake directory, polling with a back-off (10 ms doubling to 500 ms)
/// for up to `timeout_ms` milliseconds (negative: DDSTORE_HANDSHAKE_TIMEOUT_S,
/// default 300 s), checks it (owner, permissions, checksum, format version,
/// name) and copies its bytes into `buf` (`cap` bytes; NULL allowed when
/// `cap` is 0). `*len` receives the blob's length whenever the blob was
/// found, also when `cap` is too small; the call then fails and a second
/// call with a buffer of `*len` bytes reads it.
///
/// Local (no MPI). Errors: DDS_ERR_INVALID_ARGUMENT (bad name, `len` NULL,
/// `buf` NULL with `cap` > 0, `cap` smaller than the blob: the message
/// names both sizes), DDS_ERR_BAD_STATE (not a method-2 store, or
/// destroyed), DDS_ERR_TIMEOUT (no blob within the time: the message names
/// the blob, the directory and the seconds), DDS_ERR_IO (the file or the
/// directory is not ours or is writable by others, a symbolic link, a
/// corrupt or truncated file: the message names the file),
/// DDS_ERR_UNSUPPORTED (a blob of another format version).
#[no_mangle]
pub unsafe extern "C" fn dds_wait_blob(
    store: *mut dds_store,
    name: *const c_char,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    timeout_ms: i64,
) -> dds_status {
    guard("dds_wait_blob", || {
        let store = store_of(store)?;
        let name = blob_name(name)?;
        let dst = out_ptr("buf", buf, cap)?;
        if len.is_null() {
            bail!(InvalidArgument, "len is NULL (it receives the blob's length)");
        }
        let data = store.wait_blob(name, timeout_ms)?;
        *len = data.len();
        if data.len() > cap {
            bail!(
                InvalidArgument,
                "buffer of {cap} bytes is too small for blob '{name}' of {} bytes (*len holds the length needed)",
                data.len()
            );
        }
        if !data.is_empty() {
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len());
        }
        Ok(())
    })
}
