//! What the C API needs from below the store that belongs to no store:
//! pointer classification, the GPU driver's state, the MPI finalisation
//! hook, and the types its structs mirror. capi reaches mpi, gpu, config
//! and profile only through here (src/layering.rs), so a change below the
//! store meets one small surface.

use std::os::raw::c_int;

use crate::error::{err, Result};
use crate::{gpu, mpi};

pub use crate::config::BatchMode;
pub use crate::gpu::{MemKind, Mode as GpuMode, Path as DevicePath, Stream};
pub use crate::profile::Snapshot;

/// `dds_pointer_kind`: what memory `p` is (host for NULL or without a driver).
pub fn pointer_kind(p: *const u8) -> Result<MemKind> {
    gpu::classify(p)
}

/// `dds_gpu_available`: the number of devices, or why no GPU driver is
/// usable (DDS_ERR_GPU).
pub fn gpu_devices() -> Result<i32> {
    gpu::driver_status().map_err(|why| err!(Gpu, "{why}"))
}

/// Runs `hook` at the start of MPI's finalisation, while MPI still works
/// (registered once per process; see mpi::before_finalize).
pub fn before_mpi_finalize(hook: fn()) -> Result<()> {
    mpi::before_finalize(hook)
}

/// libddstore's own `MPI_Finalize` (capi/finalize.rs): the hook, then the
/// `MPI_Finalize` it hides. `ours` is its address.
pub fn mpi_finalize_intercepted(ours: usize) -> c_int {
    mpi::finalize_intercepted(ours)
}
