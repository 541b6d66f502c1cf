//! libddstore's `MPI_Finalize`: the MPI profiling interface's way for a
//! library to act before MPI shuts down.
//!
//! A program that links libddstore before its MPI library (CMake's
//! `ddstore::ddstore` before `MPI::MPI_C`, `-lddstore -lmpi`) calls this
//! definition: it stops the request threads and frees the stores' MPI
//! objects (the finalize hook), then calls the `MPI_Finalize` it hides (the
//! next in the search order: MPI's, or a tool's), else `PMPI_Finalize`.
//! Elsewhere (MPI linked first, mpi4py) the same hook runs from MPI's own
//! finalisation (`store::before_mpi_finalize`), where MPICH 4.0 no longer
//! serialises threads: see docs/guarantees.md.

use std::os::raw::c_int;

/// Not part of the C API (cbindgen leaves it out of ddstore.h): it is MPI's
/// own `int MPI_Finalize(void)`, intercepted.
#[no_mangle]
pub extern "C" fn MPI_Finalize() -> c_int {
    crate::store::mpi_finalize_intercepted(MPI_Finalize as *const () as usize)
}
