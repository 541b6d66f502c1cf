//! The serving side's progress thread.
//!
//! With manual-progress providers (`tcp;ofi_rxm`, `shm` on libfabric 1.x) a
//! remote read of our memory only completes while our serving endpoint's CQ
//! is read. This thread reads it, so a rank that computes or sits in an MPI
//! call still serves its peers. Remote reads produce no completion here; the
//! call only drives the provider.
//!
//! Waiting: where the CQ has a file-descriptor wait object (`tcp;ofi_rxm`),
//! the thread sleeps in `poll(2)` on it (after `fi_trywait` says nothing is
//! pending) and, once woken by a peer's request, keeps driving progress by
//! polling for `HOT_US` before it sleeps again: a reader's next request
//! usually follows within microseconds, and waking a sleeping thread for
//! each one doubled the latency of single reads over tcp (10 -> 21 us at
//! 3 KiB). An idle store still sleeps. Where only `fi_cq_sread` works, the
//! thread blocks in it (at most `BLOCK_MS` between checks of the stop
//! flag). Otherwise (`shm`, whose `fi_cq_sread`
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
use std::time::{Duration, Instant};

use libfabric_sys::*;

/// Longest block in `fi_cq_sread` or `poll` before the stop flag is checked.
const BLOCK_MS: i32 = 20;
/// How long the thread keeps polling after a peer's request woke it.
const HOT_US: u64 = 200;

/// How the thread waits for work.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// `poll(2)` on the CQ's wait fd, guarded by `fi_trywait` on `fabric`.
    Fd { fabric: *mut fid_fabric, fd: i32 },
    /// `fi_cq_sread` (a wait object without an fd).
    Sread,
    /// `fi_cq_read` and a sleep of the given length between polls.
    Poll(Duration),
}

// SAFETY: the fabric outlives the thread (joined before it is closed).
unsafe impl Send for Wait {}

struct CqPtr(*mut fid_cq);
// SAFETY: FI_THREAD_SAFE domain; the CQ outlives the thread (joined first).
unsafe impl Send for CqPtr {}

pub struct Progress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts driving `cq`, waiting for work as `wait` says.
    pub fn start(cq: *mut fid_cq, wait: Wait) -> std::io::Result<Progress> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let cq = CqPtr(cq);
        let handle = std::thread::Builder::new().name("ddstore-progress".into()).spawn(move || {
            let cq = cq;
            let mut entries = [fi_cq_entry::default(); 8];
            let mut hot_until = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                // SAFETY: the CQ stays open until this thread is joined.
                let n = unsafe {
                    match wait {
                        Wait::Sread => {
                            ddsfi_cq_sread(cq.0, entries.as_mut_ptr().cast(), entries.len(), std::ptr::null(), BLOCK_MS)
                        }
                        _ => ddsfi_cq_read(cq.0, entries.as_mut_ptr().cast(), entries.len()),
                    }
                };
                if n == -(FI_EAVAIL as isize) {
                    // Not expected on a serving endpoint; consume it so the CQ moves on.
                    let mut e = fi_cq_err_entry::default();
                    unsafe { ddsfi_cq_readerr(cq.0, &mut e, 0) };
                    continue;
                }
                if n < 0 && n != -(FI_EAGAIN as isize) {
                    // A CQ failure: do not spin on it.
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                match wait {
                    Wait::Sread => {}
                    Wait::Poll(d) => {
                        if n <= 0 {
                            std::thread::sleep(d);
                        }
                    }
                    Wait::Fd { fabric, fd } => {
                        let now = Instant::now();
                        if n > 0 || now < hot_until {
                            std::thread::yield_now();
                            continue;
                        }
                        let mut fids = [cq.0 as *mut fid];
                        // SAFETY: fabric and CQ are open; trywait only checks them.
                        if unsafe { ddsfi_trywait(fabric, fids.as_mut_ptr(), 1) } != 0 {
                            // Work is pending: keep polling.
                            hot_until = now + Duration::from_micros(HOT_US);
                            continue;
                        }
                        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                        // SAFETY: one valid pollfd.
                        if unsafe { libc::poll(&mut p, 1, BLOCK_MS) } > 0 {
                            hot_until = Instant::now() + Duration::from_micros(HOT_US);
                        }
                    }
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
