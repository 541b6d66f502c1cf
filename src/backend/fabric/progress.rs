//! The serving side's progress thread.
//!
//! With manual-progress providers (`tcp;ofi_rxm`, `shm` on libfabric 1.x) a
//! remote read of our memory only completes while our serving endpoint's CQ
//! is read. This thread reads it, so a rank that computes or sits in an MPI
//! call still serves its peers. Remote reads produce no completion here; the
//! call only drives the provider.
//!
//! Waiting: where the CQ has a wait object (`tcp;ofi_rxm`), the thread blocks
//! in `fi_cq_sread` (woken by the provider's sockets, at most `BLOCK_MS`
//! between checks of the stop flag). Otherwise (`shm`, whose `fi_cq_sread`
//! ignores its timeout in 1.17) it polls with `fi_cq_read` and sleeps
//! `DDSTORE_PROGRESS_SLEEP_US` (default 1000) between polls: never a spin
//! that takes a core. (Measured here: an idle store costs 2% of a core at
//! 1000 us, 8% at 200 us, 15% at 50 us. With cross-memory attach, which shm
//! uses when the kernel allows it, readers copy by themselves and do not
//! wait for this thread; without it each round of requests waits for the
//! next poll.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use libfabric_sys::*;

/// Longest block in `fi_cq_sread` before the stop flag is checked.
const BLOCK_MS: i32 = 20;

struct CqPtr(*mut fid_cq);
// SAFETY: FI_THREAD_SAFE domain; the CQ outlives the thread (joined first).
unsafe impl Send for CqPtr {}

pub struct Progress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts driving `cq`; `blocking` when it has a wait object.
    pub fn start(cq: *mut fid_cq, blocking: bool, poll_sleep: Duration) -> std::io::Result<Progress> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let cq = CqPtr(cq);
        let handle = std::thread::Builder::new().name("ddstore-progress".into()).spawn(move || {
            let cq = cq;
            let mut entries = [fi_cq_entry::default(); 8];
            while !flag.load(Ordering::Relaxed) {
                // SAFETY: the CQ stays open until this thread is joined.
                let n = unsafe {
                    if blocking {
                        ddsfi_cq_sread(cq.0, entries.as_mut_ptr().cast(), entries.len(), std::ptr::null(), BLOCK_MS)
                    } else {
                        ddsfi_cq_read(cq.0, entries.as_mut_ptr().cast(), entries.len())
                    }
                };
                if n == -(FI_EAVAIL as isize) {
                    // Not expected on a serving endpoint; consume it so the CQ moves on.
                    let mut e = fi_cq_err_entry::default();
                    unsafe { ddsfi_cq_readerr(cq.0, &mut e, 0) };
                } else if n <= 0 && !blocking {
                    std::thread::sleep(poll_sleep);
                } else if n < 0 && n != -(FI_EAGAIN as isize) {
                    // A CQ failure: do not spin on it.
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })?;
        Ok(Progress { stop, handle: Some(handle) })
    }

    /// Stops the thread and waits for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}
