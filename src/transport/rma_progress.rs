//! Method 0: a thread that turns MPI's progress engine while the caller
//! makes no MPI call.
//!
//! Passive-target reads (`MPI_Get` under `lock_all`) are one-sided in the
//! standard, but an MPI may serve them with messages that only the *target*
//! handles, inside its own MPI calls. MPICH 4.0 over UCX shared memory does
//! (this project's test machine): a one-sided batch from a rank whose owner
//! was computing, with no MPI call, waited 2.1 s for the owner's 2 s sleep to
//! end (/tmp experiment, docs/dev/performance.md "Reads overlapped with
//! compute"). So a one-sided method-0 store keeps a thread that calls
//! `MPI_Iprobe` on a private communicator, then sleeps
//! `DDSTORE_PROGRESS_SLEEP_US` (as the fabric's serving thread does): never a
//! spin that takes a core. It needs MPI_THREAD_MULTIPLE.
//!
//! `DDSTORE_MPI_PROGRESS` (config::MpiProgress) chooses it; by default it
//! runs only for a store that spans nodes (there an owner waiting outside
//! MPI, in DDP's gloo allreduce say, hangs the job), because it costs steps
//! on one node and cannot be made safe for a store still alive when the
//! caller reaches MPI's own `MPI_Finalize`: MPICH turns its locks into no-ops
//! early in `MPI_Finalize`, before the attribute callback that lets the
//! library stop the thread, so a probe in flight at that instant leaves a
//! lock held and finalisation aborts ("pthread_mutex_destroy: Device or
//! resource busy"; 1 exit in 40 here with the default sleep, 1 in 20 at
//! 1 us). libddstore's own `MPI_Finalize` (capi/finalize.rs) stops it first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{err, Result};
use crate::mpi::Comm;

pub struct RmaProgress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    /// The private communicator probed; freed by the thread that stops the
    /// progress thread (the caller's, inside the finalize hook or
    /// `dds_destroy`), never by the progress thread itself.
    probe: Option<Arc<Comm>>,
}

impl RmaProgress {
    /// Collective over `comm` (its private duplicate is made here).
    pub fn start(comm: &Comm, sleep: Duration) -> Result<RmaProgress> {
        let probe = Arc::new(comm.dup()?);
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, mine) = (stop.clone(), probe.clone());
        let handle = std::thread::Builder::new()
            .name("ddstore-mpi-progress".into())
            .spawn(move || {
                crate::mpi::mark_library_thread();
                while !flag.load(Ordering::Acquire) {
                    mine.poke_progress();
                    std::thread::sleep(sleep);
                }
            })
            .map_err(|e| err!(NoMemory, "cannot start the MPI progress thread: {e}"))?;
        Ok(RmaProgress { stop, handle: Some(handle), probe: Some(probe) })
    }

    /// Stops the thread, waits for it, then frees its communicator (before
    /// the store's communicators and windows go, and before MPI_Finalize
    /// goes on: see the finalize hook).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        // The thread's reference went with it: this is the last one.
        self.probe.take();
    }
}

impl Drop for RmaProgress {
    fn drop(&mut self) {
        self.stop();
    }
}
