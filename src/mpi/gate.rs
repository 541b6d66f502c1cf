//! The gate through which the library's own threads call MPI.

use std::os::raw::c_int;

use mpi_sys as ffi;

/// The library's own threads (request threads, the method-0 progress
/// thread) call MPI one at a time, through this gate, and only in calls that
/// return at once (their blocking operations become tests in a loop, see
/// `complete_all`). Why: MPICH 4.0 stops taking its own locks early in
/// `MPI_Finalize` ("isThreaded = 0"), *before* it deletes `MPI_COMM_SELF`'s
/// attributes, i.e. before `before_finalize`'s hook can stop these threads.
/// From then until the hook has drained them, MPI no longer serialises two
/// library threads: two request threads in `MPI_Rget`/`MPI_Testsome` at once
/// aborted in UCX (`worker->inprogress++ == 0`, issue 35). Under the gate at
/// most one library thread is ever inside MPI; the caller's thread (inside
/// `MPI_Finalize`, and only calling MPI after the hook has stopped them) is
/// the other. Blocking inside the gate would let two stores' collective
/// threads deadlock across ranks (each holding its rank's gate in a
/// collective the other rank's thread cannot reach), hence only calls that
/// return at once.
static GATE: parking_lot::Mutex<()> = parking_lot::const_mutex(());

thread_local! {
    static LIBRARY_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as one of the library's own (see `GATE`).
pub fn mark_library_thread() {
    LIBRARY_THREAD.with(|t| t.set(true));
}

pub(super) fn on_library_thread() -> bool {
    LIBRARY_THREAD.with(|t| t.get())
}

/// Held around each MPI call that returns at once: the gate on a library
/// thread, nothing elsewhere.
#[inline]
pub(super) fn gate() -> Option<parking_lot::MutexGuard<'static, ()>> {
    on_library_thread().then(|| GATE.lock())
}

/// Runs one MPI call that returns at once; on a library thread, under the gate.
#[inline]
pub(super) fn gated(call: impl FnOnce() -> c_int) -> c_int {
    let _g = gate();
    call()
}

/// A library thread waiting for MPI requests yields the core between tests
/// while requests keep completing, then sleeps `PATIENT_POLL` between them
/// once none has for `YIELD_FOR` (as one-sided request batches do).
const YIELD_FOR: std::time::Duration = std::time::Duration::from_millis(1);
const PATIENT_POLL: std::time::Duration = std::time::Duration::from_micros(100);

/// Completes every request of `reqs`: `MPI_Waitall` on the caller's
/// threads; on a library thread, `MPI_Testall` under the gate until all
/// are done (the gate is never held while waiting).
pub(super) fn complete_all(reqs: &mut [ffi::MPI_Request]) -> c_int {
    if reqs.is_empty() {
        return ffi::MPI_SUCCESS as c_int;
    }
    if !on_library_thread() {
        // SAFETY: every element is a request started by this module (or null).
        return unsafe { ffi::MPI_Waitall(reqs.len() as c_int, reqs.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE) };
    }
    let started = std::time::Instant::now();
    loop {
        let mut flag: c_int = 0;
        // SAFETY: as above; MPI_Testall returns at once.
        let rc = gated(|| unsafe {
            ffi::MPI_Testall(reqs.len() as c_int, reqs.as_mut_ptr(), &mut flag, ffi::RSMPI_STATUSES_IGNORE)
        });
        if rc != ffi::MPI_SUCCESS as c_int || flag != 0 {
            return rc;
        }
        if started.elapsed() < YIELD_FOR {
            std::thread::yield_now();
        } else {
            std::thread::sleep(PATIENT_POLL);
        }
    }
}
