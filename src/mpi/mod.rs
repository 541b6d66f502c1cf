//! Small wrappers over mpi-sys, one file per concern:
//!
//! - `library`: which MPI is loaded and whether it runs (the ABI check);
//! - `finalize`: the hook that releases our MPI objects as `MPI_Finalize` starts;
//! - `gate`: how the library's own threads call MPI one at a time;
//! - `comm`: communicators, collectives and the failure agreement;
//! - `window`: row datatypes and RMA windows.
//!
//! Every communicator and window we create gets `MPI_ERRORS_RETURN`, so MPI
//! failures come back as `Kind::Mpi` errors instead of aborting the job. Objects
//! are released only while MPI is still running: after `MPI_Finalize` they are
//! leaked, which is what makes `dds_destroy` safe at any time.

use std::os::raw::c_int;

use mpi_sys as ffi;

use crate::error::{err, Result};

mod comm;
mod finalize;
mod gate;
mod library;
mod window;

pub use comm::{agree, exclusive_prefix, share_error, Comm};
pub use finalize::{before_finalize, finalize_began, finalize_intercepted};
pub use gate::mark_library_thread;
pub use library::{check_same_mpi, finalized, initialized, not_initialized_error, running, thread_multiple};
pub use window::{Datatype, Window};

/// Largest byte count passed to one MPI call (counts are C ints).
pub const MAX_CHUNK: usize = 1 << 30;

fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    let mut buf = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING bytes as the standard requires.
    unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr().cast(), &mut len) };
    buf.truncate(len.max(0) as usize);
    Err(err!(Mpi, "{what} failed: {} (MPI error {rc})", String::from_utf8_lossy(&buf)))
}
