//! Store lifetime: create, destroy, epochs, and joining (method 2).

use std::os::raw::{c_char, c_int};

use super::types::{
    dds_options, dds_settings, dds_status, dds_store, DDS_BATCH_AUTO, DDS_BATCH_COLLECTIVE, DDS_BATCH_ONESIDED,
    DDS_CALL_ADD, DDS_CALL_ADD_RAGGED, DDS_CALL_EPOCH_BEGIN, DDS_CALL_EPOCH_END, DDS_CALL_GET_BATCH,
    DDS_CALL_GET_BATCH_START, DDS_CALL_GET_RAGGED_BATCH, DDS_CALL_LOAD, DDS_CALL_RAGGED_LENGTHS, DDS_CALL_REMOVE,
    DDS_CALL_SAVE, DDS_CALL_WAIT_EXTRAS, DDS_GPU_AUTO, DDS_GPU_OFF, DDS_GPU_REQUIRE, DDS_ROLE_CORE, DDS_ROLE_EXTRA,
    DDS_SETTINGS_PATH_BYTES,
};
use super::{
    guard, name_arg, opt_string, out_struct_size, peek_store, register_store, store_of, take_store, write_sized,
};
use crate::error::{bail, Error, Kind, Result};
use crate::store::{BatchMode, Collective, GpuMode, Options, Settings, Store};

/// Size of the first version of `dds_options` (everything up to `nic_map`).
const OPTIONS_V1: usize = std::mem::offset_of!(dds_options, gpu);
/// Size with the GPU fields (0.2).
const OPTIONS_V2: usize = std::mem::offset_of!(dds_options, batch_mode);
/// Size with `batch_mode` (0.3).
const OPTIONS_V3: usize = std::mem::size_of::<dds_options>();

unsafe fn decode_options(p: *const dds_options) -> Result<Options> {
    if p.is_null() {
        return Ok(Options::default());
    }
    let o = &*p;
    if (o.struct_size as usize) < OPTIONS_V1 {
        bail!(
            InvalidArgument,
            "options.struct_size is {} (expected {OPTIONS_V1}): initialise options with dds_options_init",
            o.struct_size
        );
    }
    Ok(Options {
        method: o.method,
        role: o.role,
        width: o.width,
        n_core: o.n_core,
        handshake_dir: opt_string("handshake_dir", o.handshake_dir)?,
        fabric_provider: opt_string("fabric_provider", o.fabric_provider)?,
        fabric_iface: opt_string("fabric_iface", o.fabric_iface)?,
        nic_map: opt_string("nic_map", o.nic_map)?,
        // Older callers' structs end before the GPU fields.
        gpu: if o.struct_size as usize >= OPTIONS_V2 { o.gpu } else { -1 },
        gpu_staging: if o.struct_size as usize >= OPTIONS_V2 { o.gpu_staging } else { -1 },
        batch_mode: if o.struct_size as usize >= OPTIONS_V3 { BatchMode::from_code(o.batch_mode)? } else { None },
    })
}

/// Creates a store over a communicator and writes its handle to `*out`.
///
/// `comm_f` is the communicator's Fortran handle (`MPI_Comm_c2f(comm)` in C,
/// `comm.py2f()` in mpi4py, the plain `integer` in Fortran); with <mpi.h>
/// included first, `dds_create_comm` takes an `MPI_Comm`. The store works on
/// a private duplicate, so its traffic never mixes with the caller's.
/// `options` may be NULL for the defaults (method 0 over all ranks); with
/// `width` > 0 the communicator is split into consecutive groups of `width`
/// ranks, each an independent store.
///
/// Collective over the communicator. MPI must be initialised. Not thread-safe
/// with other calls on the same store (there is none yet).
///
/// Method 2 (`DDS_METHOD_SPLIT`, see docs/method2.md): with `role` =
/// `DDS_ROLE_CORE` (default) as method 1 over `comm_f`, plus the hand-shake
/// directory (`handshake_dir`, else DDSTORE_HANDSHAKE_DIR, else
/// ./ddstore_hs; created 0700 if missing). With `role` = `DDS_ROLE_EXTRA`
/// the call is local: `comm_f` is ignored (any value, MPI_COMM_NULL
/// included), `n_core` (> 0) is required, nothing is opened until the first
/// `dds_join`. MPI must still be initialised (the store keeps a duplicate of
/// MPI_COMM_SELF).
///
/// Method 1 (libfabric) chooses the provider from `fabric_provider` /
/// DDSTORE_FABRIC, `fabric_iface` / FABRIC_IFACE and `nic_map` /
/// DDSTORE_NIC_MAP (see docs/fabric.md) and starts a progress thread.
///
/// Device memory (`gpu`, `gpu_staging` / DDSTORE_GPU, DDSTORE_GPU_STAGING):
/// see docs/gpu.md. With `DDS_GPU_REQUIRE` and no usable GPU driver every
/// rank fails with DDS_ERR_GPU.
///
/// Errors: DDS_ERR_INVALID_ARGUMENT (NULL `out`, MPI_COMM_NULL, bad option
/// value, option or DDSTORE_ALLTOALL_MAX_BYTES differing across ranks),
/// DDS_ERR_GPU (GPU support required but no driver is usable),
/// DDS_ERR_UNSUPPORTED (a method this build cannot serve), DDS_ERR_BAD_STATE
/// (MPI not initialised or already finalised), DDS_ERR_FABRIC (method 1: no
/// usable provider, or the named provider or interface does not exist; on
/// every rank), DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_create(
    comm_f: c_int,
    options: *const dds_options,
    out: *mut *mut dds_store,
) -> dds_status {
    guard("dds_create", || {
        let opts = decode_options(options).and_then(|o| {
            if out.is_null() {
                bail!(InvalidArgument, "out (where the handle is written) is NULL");
            }
            Ok(o)
        });
        let store = Store::create(comm_f, opts, super::raw_extra_role(options))?;
        *out = register_store(store)?;
        Ok(())
    })
}

/// Reports the settings `store` runs with, its options and the environment
/// resolved (see `dds_settings`); with `store` NULL, what a store created now
/// with default options would use. Set `out->struct_size =
/// sizeof(dds_settings)` first. Bindings use it rather than parsing the
/// environment themselves. Local and thread-safe; needs no MPI when `store`
/// is NULL.
///
/// Errors: DDS_ERR_INVALID_ARGUMENT (NULL or unsized `out`; with `store`
/// NULL, a malformed environment variable, named as `dds_create` would),
/// DDS_ERR_BAD_STATE (a destroyed handle), DDS_ERR_MISMATCH (a hand-shake
/// directory longer than `DDS_SETTINGS_PATH_BYTES` - 1 bytes).
#[no_mangle]
pub unsafe extern "C" fn dds_store_settings(store: *mut dds_store, out: *mut dds_settings) -> dds_status {
    guard("dds_store_settings", || {
        let size = out_struct_size(out, "dds_settings", std::mem::size_of::<dds_settings>(), |o| o.struct_size)?;
        let s = if store.is_null() { Settings::defaults()? } else { store_of(store)?.settings() };
        let dir = s.handshake_dir.as_os_str().as_encoded_bytes();
        if dir.len() >= DDS_SETTINGS_PATH_BYTES {
            bail!(
                Mismatch,
                "the hand-shake directory is {} bytes; dds_settings holds at most {}",
                dir.len(),
                DDS_SETTINGS_PATH_BYTES - 1
            );
        }
        let mut value = dds_settings {
            struct_size: size,
            method: s.method.code(),
            role: if s.extra { DDS_ROLE_EXTRA } else { DDS_ROLE_CORE },
            batch_mode: match s.batch_mode {
                BatchMode::Collective => DDS_BATCH_COLLECTIVE,
                BatchMode::Onesided => DDS_BATCH_ONESIDED,
                BatchMode::Auto => DDS_BATCH_AUTO,
            },
            gpu: match s.gpu {
                GpuMode::Off => DDS_GPU_OFF,
                GpuMode::Auto => DDS_GPU_AUTO,
                GpuMode::Require => DDS_GPU_REQUIRE,
            },
            gpu_staging: s.gpu_staging as i32,
            profiling: s.profiling as i32,
            node_local: s.node_local as i32,
            mpi_progress: s.mpi_progress as i32,
            handshake_dir: [0; DDS_SETTINGS_PATH_BYTES],
        };
        for (d, &b) in value.handshake_dir.iter_mut().zip(dir) {
            *d = b as c_char;
        }
        write_sized(out, &value, size);
        Ok(())
    })
}

/// Destroys a store: frees every variable, registration and communicator it
/// holds. `dds_destroy(NULL)` does nothing. A handle that was already
/// destroyed (or never created) is refused with DDS_ERR_BAD_STATE.
///
/// Collective while MPI runs: method 0 frees its windows together; method 1
/// waits at a barrier, so no peer is still reading this rank's memory, then
/// closes its registrations and endpoints. Safe after MPI_Finalize: then only
/// local memory is released. Must not run while other threads use the store.
/// Requests in flight (`dds_get_batch_start`) are waited for first; their
/// handles stay valid for `dds_request_wait`, which returns their status.
#[no_mangle]
pub unsafe extern "C" fn dds_destroy(store: *mut dds_store) -> dds_status {
    guard("dds_destroy", || {
        if store.is_null() {
            return Ok(());
        }
        // Agreed first, while the handle is still live: a mismatch leaves
        // the store as it was.
        if let Some(s) = peek_store(store) {
            s.enter_destroy()?;
        }
        take_store(store)?.destroy()
    })
}

/// Opens a read epoch (DDStore compatibility). Makes every rank's updates
/// visible to readers and synchronises the ranks. Epochs must alternate:
/// begin, end, begin...; reads do not require one.
///
/// Collective. Errors: DDS_ERR_BAD_STATE (an epoch is already open on some
/// rank: every rank fails), DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_epoch_begin(store: *mut dds_store) -> dds_status {
    guard("dds_epoch_begin", || store_of(store)?.epoch(true, Ok(())))
}

/// Closes the read epoch opened by `dds_epoch_begin`.
///
/// Collective. Errors: DDS_ERR_BAD_STATE (no epoch is open), DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_epoch_end(store: *mut dds_store) -> dds_status {
    guard("dds_epoch_end", || store_of(store)?.epoch(false, Ok(())))
}

/// Method 2 extra member: attaches to variable `name` published by the core
/// job. Waits for its record in the hand-shake directory, polling with a
/// back-off (10 ms doubling to 500 ms) for up to DDSTORE_HANDSHAKE_TIMEOUT_S
/// (default 300 s), checks it (format version, checksum, n_core, provider,
/// owner and permissions of the file), then reads like method 1: `dds_get`
/// and `dds_get_batch` are one-sided and thread-safe; `dds_info` reports
/// `local_rows` 0.
///
/// Local (no MPI). Not concurrent with reads of the same store. Errors:
/// DDS_ERR_BAD_STATE (not a method-2 extra member; or the core job withdrew
/// the variable: it freed it with dds_remove or dds_destroy),
/// DDS_ERR_TIMEOUT (no record within the time; the message names the
/// directory and the variable), DDS_ERR_DUPLICATE_VARIABLE (already joined),
/// DDS_ERR_IO (record truncated, corrupt, not ours or writable by others),
/// DDS_ERR_UNSUPPORTED (record of another format version), DDS_ERR_MISMATCH
/// (published by a core job of another size than n_core), DDS_ERR_FABRIC
/// (another provider or address format; no usable provider).
#[no_mangle]
pub unsafe extern "C" fn dds_join(store: *mut dds_store, name: *const c_char) -> dds_status {
    guard("dds_join", || store_of(store)?.join(name_arg(name)?, None))
}

/// As `dds_join`, and also checks the row shape: the variable must have rows
/// of `row_elems` elements of `item_size` bytes (DDS_ERR_MISMATCH otherwise).
#[no_mangle]
pub unsafe extern "C" fn dds_join_expect(
    store: *mut dds_store,
    name: *const c_char,
    row_elems: i64,
    item_size: i32,
) -> dds_status {
    guard("dds_join_expect", || store_of(store)?.join(name_arg(name)?, Some((row_elems, item_size))))
}

/// Frees variable `name` so that the name can be registered (or joined)
/// again. Core members of every method: collective (every rank, same name);
/// methods 1 and 2 first wait at a barrier so no peer of the store still
/// reads it; method 2 first replaces its record with a "withdrawn" one, so
/// extra members that join later fail at once (DDS_ERR_BAD_STATE) instead of
/// reading freed memory. Extra members: local, forgets a joined variable.
///
/// Not concurrent with reads of the same store. Errors:
/// DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_INVALID_ARGUMENT (ranks naming different
/// variables), DDS_ERR_IO (record), DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_remove(store: *mut dds_store, name: *const c_char) -> dds_status {
    guard("dds_remove", || {
        // A bad name still takes part in the collective, so no rank waits.
        store_of(store)?.remove(name_arg(name))
    })
}

/// Method 2 extra member: announces that this store has finished reading,
/// to every core store whose variables it joined (one file per extra store
/// in the hand-shake directory). Call it before `dds_destroy`; the core
/// waits for it with `dds_wait_extras`. Calling it again is harmless.
///
/// Local. Errors: DDS_ERR_BAD_STATE (not an extra member, or nothing joined),
/// DDS_ERR_IO.
#[no_mangle]
pub unsafe extern "C" fn dds_extra_done(store: *mut dds_store) -> dds_status {
    guard("dds_extra_done", || store_of(store)?.extra_done())
}

/// Method 2 core members: waits until `n_extras` extra stores have called
/// `dds_extra_done` after joining this store's variables, polling the
/// hand-shake directory for at most `timeout_ms` milliseconds (a negative
/// value means DDSTORE_HANDSHAKE_TIMEOUT_S). Then the core may free its data.
///
/// Collective over the core members (all return the same status). Errors:
/// DDS_ERR_BAD_STATE (not a method-2 core member), DDS_ERR_TIMEOUT (the
/// message says how many were seen), DDS_ERR_INVALID_ARGUMENT (negative
/// `n_extras`), DDS_ERR_IO.
#[no_mangle]
pub unsafe extern "C" fn dds_wait_extras(store: *mut dds_store, n_extras: i64, timeout_ms: i64) -> dds_status {
    guard("dds_wait_extras", || store_of(store)?.wait_extras(n_extras, timeout_ms))
}

/// For bindings (Python, C++, Fortran) that find an error on this rank
/// before entering a collective call: takes part in `call` (`DDS_CALL_*`)
/// exactly as the other ranks' real call does, contributing this rank's
/// failure, so no rank is left waiting. Every rank's call then fails with
/// the status and message of the lowest failing rank: `dds_last_error()`
/// reads "dds_add: rank R: `message`" (named after the call) on every rank.
/// `name` is the variable the call names on this rank (may be NULL).
///
/// `status` should be the binding's `dds_status` for the error; a value
/// that is not an error status still fails the call, as
/// DDS_ERR_INVALID_ARGUMENT. For a call that is not collective on this
/// store (method 1 and 2 `dds_get_batch`), the failure is returned locally.
///
/// Collective exactly when `call` is. Errors: as the call stands in for;
/// DDS_ERR_INVALID_ARGUMENT for an unknown `call` (then nothing collective
/// happens: that is a bug in the binding).
#[no_mangle]
pub unsafe extern "C" fn dds_fail_collective(
    store: *mut dds_store,
    call: i32,
    name: *const c_char,
    status: i32,
    message: *const c_char,
) -> dds_status {
    let what = match call {
        DDS_CALL_ADD => Collective::Add,
        DDS_CALL_GET_BATCH => Collective::GetBatch,
        DDS_CALL_REMOVE => Collective::Remove,
        DDS_CALL_EPOCH_BEGIN => Collective::EpochBegin,
        DDS_CALL_EPOCH_END => Collective::EpochEnd,
        DDS_CALL_WAIT_EXTRAS => Collective::WaitExtras,
        DDS_CALL_ADD_RAGGED => Collective::AddRagged,
        DDS_CALL_GET_RAGGED_BATCH => Collective::GetRaggedBatch,
        DDS_CALL_RAGGED_LENGTHS => Collective::RaggedLengths,
        DDS_CALL_GET_BATCH_START => Collective::GetBatchStart,
        DDS_CALL_SAVE => Collective::Save,
        DDS_CALL_LOAD => Collective::Load,
        _ => {
            return guard("dds_fail_collective", || {
                bail!(InvalidArgument, "call {call} is not one of the DDS_CALL_* constants")
            })
        }
    };
    guard(what.entry(), || {
        let s = store_of(store)?;
        // Lossy on purpose: a binding's message may hold anything.
        let text = if message.is_null() {
            String::from("(no message)")
        } else {
            std::ffi::CStr::from_ptr(message).to_string_lossy().into_owned()
        };
        let kind = Kind::from_status(status);
        let failure = match kind {
            Some(k) => Error::new(k, text),
            None => Error::new(
                Kind::InvalidArgument,
                format!("{text} (dds_fail_collective: status {status} is not an error)"),
            ),
        };
        let name = if name.is_null() { "" } else { name_arg(name).unwrap_or("") };
        s.fail_collective(what, name, failure)
    })
}
