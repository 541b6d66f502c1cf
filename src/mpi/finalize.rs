//! Releasing our MPI objects while MPI still works, at the start of `MPI_Finalize`.

use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use mpi_sys as ffi;

use crate::error::Result;

use super::check;

static FINALIZE_BEGAN: AtomicBool = AtomicBool::new(false);

/// True once `MPI_Finalize` has started (and the `before_finalize` hook has
/// run). One atomic load, for read paths: a live store implies MPI was
/// initialised and the hook registered.
#[inline]
pub fn finalize_began() -> bool {
    FINALIZE_BEGAN.load(Ordering::Acquire)
}

static HOOK: once_cell::sync::OnceCell<fn()> = once_cell::sync::OnceCell::new();
static HOOK_RAN: AtomicBool = AtomicBool::new(false);

/// Runs the `before_finalize` hook, once per process however many ways
/// finalisation reaches it, then marks finalisation as begun.
fn run_finalize_hook() {
    if !HOOK_RAN.swap(true, Ordering::AcqRel) {
        if let Some(h) = HOOK.get() {
            // A panic must not unwind into MPI.
            let _ = std::panic::catch_unwind(h);
        }
    }
    FINALIZE_BEGAN.store(true, Ordering::Release);
}

/// `MPI_Finalize` as the caller reaches it through libddstore's own
/// definition (capi::finalize, the profiling interface's interception): runs
/// the hook *before* MPI begins to shut down, then the `MPI_Finalize` that
/// ours hides (the next definition in the search order: MPI's, or another
/// tool's), else `PMPI_Finalize`. Before MPI starts, unlike in the
/// attribute callback (`before_finalize`), MPICH still serialises threads.
/// `ours` is the address of libddstore's `MPI_Finalize`.
pub fn finalize_intercepted(ours: usize) -> c_int {
    run_finalize_hook();
    type Finalize = unsafe extern "C" fn() -> c_int;
    // SAFETY: dlsym only reads the loader's tables; a symbol found under
    // this name has MPI_Finalize's signature.
    unsafe {
        let next = libc::dlsym(libc::RTLD_NEXT, c"MPI_Finalize".as_ptr());
        if !next.is_null() && next as usize != ours {
            return std::mem::transmute::<*mut c_void, Finalize>(next)();
        }
        ffi::PMPI_Finalize()
    }
}

/// Arranges for `hook` to run at the start of `MPI_Finalize`, while MPI still
/// works: MPI deletes the attributes of `MPI_COMM_SELF` first thing during
/// finalisation, so a delete callback on one of them is the standard place
/// for a library to release its MPI objects. Registered once per process.
/// (MPICH 4.0 has by then stopped serialising threads, see `GATE`; where
/// the caller reaches libddstore's `MPI_Finalize`, `finalize_intercepted`
/// runs the hook before that.)
pub fn before_finalize(hook: fn()) -> Result<()> {
    use once_cell::sync::OnceCell;
    static REGISTERED: OnceCell<()> = OnceCell::new();

    unsafe extern "C" fn on_delete(_: ffi::MPI_Comm, _: c_int, _: *mut c_void, _: *mut c_void) -> c_int {
        run_finalize_hook();
        ffi::MPI_SUCCESS as c_int
    }

    // The attribute is never copied (what MPI_COMM_NULL_COPY_FN does). A NULL
    // copy function is that constant in MPICH but an invalid argument in
    // Open MPI, whose constant is a real function: so pass our own.
    unsafe extern "C" fn no_copy(
        _: ffi::MPI_Comm,
        _: c_int,
        _: *mut c_void,
        _: *mut c_void,
        _: *mut c_void,
        flag: *mut c_int,
    ) -> c_int {
        *flag = 0;
        ffi::MPI_SUCCESS as c_int
    }

    let _ = HOOK.set(hook);
    REGISTERED.get_or_try_init(|| {
        let mut key: c_int = 0;
        // SAFETY: standard keyval creation; the attribute value is unused.
        unsafe {
            check(
                ffi::MPI_Comm_create_keyval(Some(no_copy), Some(on_delete), &mut key, ptr::null_mut()),
                "MPI_Comm_create_keyval",
            )?;
            check(ffi::MPI_Comm_set_attr(ffi::RSMPI_COMM_SELF, key, ptr::null_mut()), "MPI_Comm_set_attr")
        }
    })?;
    Ok(())
}
