//! Store lifetime: create, destroy, epochs, and joining (method 2).

use std::os::raw::{c_char, c_int};

use super::types::{dds_options, dds_status, dds_store};
use super::{guard, name_arg, opt_string, register_store, store_of, take_store};
use crate::error::{bail, Result};
use crate::store::{Options, Store};

/// Size of the first version of `dds_options` (everything up to `nic_map`).
const OPTIONS_V1: usize = std::mem::size_of::<dds_options>();

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
/// Method 1 (libfabric) chooses the provider from `fabric_provider` /
/// DDSTORE_FABRIC, `fabric_iface` / FABRIC_IFACE and `nic_map` /
/// DDSTORE_NIC_MAP (see docs/fabric.md) and starts a progress thread.
///
/// Errors: DDS_ERR_INVALID_ARGUMENT (NULL `out`, MPI_COMM_NULL, bad option
/// value, option or DDSTORE_ALLTOALL_MAX_BYTES differing across ranks),
/// DDS_ERR_UNSUPPORTED (a method this build cannot serve), DDS_ERR_BAD_STATE
/// (MPI not initialised or already finalised), DDS_ERR_FABRIC (method 1: no
/// usable provider, or the named provider or interface does not exist; on
/// every rank), DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_create(comm_f: c_int, options: *const dds_options, out: *mut *mut dds_store) -> dds_status {
    guard("dds_create", || {
        let opts = decode_options(options).and_then(|o| {
            if out.is_null() {
                bail!(InvalidArgument, "out (where the handle is written) is NULL");
            }
            Ok(o)
        });
        let store = Store::create(comm_f, opts)?;
        *out = register_store(store)?;
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
#[no_mangle]
pub unsafe extern "C" fn dds_destroy(store: *mut dds_store) -> dds_status {
    guard("dds_destroy", || {
        if store.is_null() {
            return Ok(());
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
    guard("dds_epoch_begin", || store_of(store)?.epoch(true))
}

/// Closes the read epoch opened by `dds_epoch_begin`.
///
/// Collective. Errors: DDS_ERR_BAD_STATE (no epoch is open), DDS_ERR_MPI.
#[no_mangle]
pub unsafe extern "C" fn dds_epoch_end(store: *mut dds_store) -> dds_status {
    guard("dds_epoch_end", || store_of(store)?.epoch(false))
}

/// Method 2 extra member: attaches to variable `name` published by the core
/// job, waiting up to DDSTORE_HANDSHAKE_TIMEOUT_S for it to appear.
///
/// Local. Errors: DDS_ERR_BAD_STATE (not a method-2 extra member),
/// DDS_ERR_TIMEOUT, DDS_ERR_IO, DDS_ERR_FABRIC.
#[no_mangle]
pub unsafe extern "C" fn dds_join(store: *mut dds_store, name: *const c_char) -> dds_status {
    guard("dds_join", || {
        let s = store_of(store)?;
        let name = name_arg(name)?;
        bail!(BadState, "cannot join '{name}': dds_join is only valid for method-2 extra members (this store uses method {})", s.method().code())
    })
}
