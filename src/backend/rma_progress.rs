//! Method 0: a thread that turns MPI's progress engine while the caller
//! makes no MPI call.
//!
//! Passive-target reads (`MPI_Get` under `lock_all`) are one-sided in the
//! standard, but an MPI may serve them with messages that only the *target*
//! handles, inside its own MPI calls. MPICH 4.0 over UCX shared memory does
//! (this project's test machine): a one-sided batch from a rank whose owner
//! was computing, with no MPI call, waited 2.1 s for the owner's 2 s sleep to
//! end (/tmp experiment, docs/performance.md "Reads overlapped with
//! compute"). So a one-sided method-0 store keeps a thread that calls
//! `MPI_Iprobe` on a private communicator, then sleeps
//! `DDSTORE_PROGRESS_SLEEP_US` (as the fabric's serving thread does): never a
//! spin that takes a core. It needs MPI_THREAD_MULTIPLE; `DDSTORE_MPI_PROGRESS`
//! turns it on or off (see config.rs for the default).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{err, Result};
use crate::mpi::Comm;

pub struct RmaProgress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl RmaProgress {
    /// Collective over `comm` (its private duplicate is made here).
    pub fn start(comm: &Comm, sleep: Duration) -> Result<RmaProgress> {
        let probe = comm.dup()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ddstore-mpi-progress".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    probe.poke_progress();
                    std::thread::sleep(sleep);
                }
                // The duplicate is freed by the thread that used it, while
                // MPI runs (stop() is called before MPI_Finalize).
                drop(probe);
            })
            .map_err(|e| err!(NoMemory, "cannot start the MPI progress thread: {e}"))?;
        Ok(RmaProgress { stop, handle: Some(handle) })
    }

    /// Stops the thread and waits for it (before the store's communicators
    /// and windows go, and before MPI_Finalize).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for RmaProgress {
    fn drop(&mut self) {
        self.stop();
    }
}
