//! Snapshots: `dds_save` and `dds_load` (store/snapshot.rs).

use std::os::raw::c_char;

use super::types::{dds_status, dds_store};
use super::{guard, name_arg, store_of};
use crate::error::{bail, Result};

/// The directory argument: a non-empty UTF-8 path.
unsafe fn dir_arg(dir: *const c_char) -> Result<&'static str> {
    if dir.is_null() {
        bail!(InvalidArgument, "snapshot directory is NULL");
    }
    match std::ffi::CStr::from_ptr(dir).to_str() {
        Ok("") => bail!(InvalidArgument, "snapshot directory is empty"),
        Ok(s) => Ok(s),
        Err(_) => bail!(InvalidArgument, "snapshot directory is not valid UTF-8"),
    }
}

/// The list of variable names (`n_names` == 0: none given, `names` may be NULL).
unsafe fn names_arg(names: *const *const c_char, n_names: i64) -> Result<Vec<String>> {
    if n_names < 0 {
        bail!(InvalidArgument, "n_names {n_names} is negative");
    }
    if n_names > 0 && names.is_null() {
        bail!(InvalidArgument, "names is NULL but n_names is {n_names}");
    }
    (0..n_names as usize).map(|i| name_arg(*names.add(i)).map(str::to_string)).collect()
}

/// Saves variables of the store to snapshot directory `dir`: the
/// `n_names` variables named in `names`, or every variable when `n_names`
/// is 0. Every rank writes its own shards (files 0600, fsynced) into
/// `<dir>.partial-<token>` beside `dir`; rank 0 writes the manifest (shapes,
/// rows per shard, chunk checksums) and renames the directory to `dir`,
/// atomically exchanging it with an older snapshot already there, which is
/// then removed. A job killed during the call leaves the old snapshot (or
/// none) at `dir`. `dir`'s parent must exist on a file system every rank
/// sees, be owned by this user and not writable by others.
///
/// Collective. Not concurrent with other calls on the same store. Errors
/// (on every rank together): DDS_ERR_INVALID_ARGUMENT (NULL or empty `dir`,
/// a bad name, a name given twice, `dir` a `.partial-*` directory or an
/// existing directory that is not a snapshot), DDS_ERR_UNKNOWN_VARIABLE,
/// DDS_ERR_IO (the message names the file and the failure), DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_save(
    store: *mut dds_store,
    dir: *const c_char,
    names: *const *const c_char,
    n_names: i64,
) -> dds_status {
    guard("dds_save", || store_of(store)?.save(dir_arg(dir), names_arg(names, n_names)))
}

/// Loads variables from snapshot directory `dir` (written by `dds_save` on
/// any number of ranks): the `n_names` variables named in `names`, or every
/// variable of the snapshot when `n_names` is 0. Each is re-sharded evenly:
/// of T rows (ragged: samples) over P ranks, rank r holds the contiguous
/// range starting at r*(T/P) + min(r, T%P), the first T%P ranks one more.
/// A rank reads only the checksum chunks of the files holding its rows and
/// verifies them. The variables then behave as if made by `dds_add` /
/// `dds_add_ragged`.
///
/// Collective. Not concurrent with reads of the same store. Errors (on
/// every rank together; on any error no variable of the call is left
/// registered and the store stays usable): DDS_ERR_INVALID_ARGUMENT (NULL
/// or empty `dir`, bad names, a `.partial-*` directory),
/// DDS_ERR_UNKNOWN_VARIABLE (a name not in the snapshot),
/// DDS_ERR_DUPLICATE_VARIABLE (a variable already in the store),
/// DDS_ERR_MISMATCH (the snapshot's format version, or a library version
/// this one cannot read), DDS_ERR_IO (missing directory, manifest or shard
/// file, a truncated file, a file or directory of another user or writable
/// by others, a symbolic link, a checksum mismatch: the message names the
/// file), DDS_ERR_NO_MEMORY, DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_load(
    store: *mut dds_store,
    dir: *const c_char,
    names: *const *const c_char,
    n_names: i64,
) -> dds_status {
    guard("dds_load", || store_of(store)?.load(dir_arg(dir), names_arg(names, n_names)))
}
