//! The threads that carry non-blocking reads out (store/request.rs has
//! the entry, `dds_get_batch_start`, and the rules they follow): the
//! request a caller holds, the two lanes (collective in start order; a
//! small one-sided pool), draining, closing and finalisation.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::config::RequestPriority;
use crate::error::{bail, err, Error, Result};
use crate::transport::waiting;

/// Threads of the one-sided lane: two keep one read waiting on the network
/// while the next is being posted; more would only contend for the cores
/// the caller computes on.
const ONESIDED_THREADS: usize = 2;

type Job = Box<dyn FnOnce() -> Result<()> + Send>;
pub(super) type Finish = Box<dyn FnOnce() -> Result<()> + Send>;
/// Completion of one request: its result, once known.
#[derive(Default)]
pub(super) struct Done {
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

impl Done {
    fn set(&self, r: Result<()>) {
        *self.result.lock() = Some(r);
        self.cv.notify_all();
    }
}

/// One batched read in flight. Dropping it waits for the read (the
/// destination must not be written after its owner thinks it is free).
pub struct Request {
    done: Arc<Done>,
    /// Runs at a successful wait (device destinations: the copy to the device).
    finish: Option<Finish>,
    waited: bool,
}

impl Request {
    pub(super) fn new(done: Arc<Done>, finish: Option<Finish>) -> Request {
        Request { done, finish, waited: false }
    }

    pub(super) fn completed(r: Result<()>, finish: Option<Finish>) -> Request {
        let done = Arc::new(Done::default());
        done.set(r);
        Request::new(done, finish)
    }

    /// True once the read has completed (successfully or not).
    pub fn is_done(&self) -> bool {
        self.done.result.lock().is_some()
    }

    /// Waits for the read and returns its outcome (once; later calls fail).
    pub fn wait(&mut self) -> Result<()> {
        if self.waited {
            bail!(BadState, "this request was already waited for");
        }
        let r = {
            let mut g = self.done.result.lock();
            while g.is_none() {
                self.done.cv.wait(&mut g);
            }
            g.take().unwrap_or(Ok(()))
        };
        self.waited = true;
        match (r, self.finish.take()) {
            (Ok(()), Some(f)) => f(),
            (r, _) => r,
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.waited {
            let _ = self.wait();
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    Collective = 0,
    Onesided = 1,
}

/// A queued request: its read, its completion, and when it was started.
type Queued = (Job, Arc<Done>, Instant);

#[derive(Default)]
struct Lanes {
    queues: [VecDeque<Queued>; 2],
    threads: [usize; 2],
    /// The threads of both lanes, joined at MPI_Finalize.
    handles: Vec<JoinHandle<()>>,
    /// Submitted and not yet finished.
    in_flight: usize,
    closed: bool,
    /// `DDSTORE_TEST_REQUEST_DELAY_S` (testing aid): a request waits this long
    /// in its queue before a thread takes it.
    delay: Duration,
}

#[derive(Default)]
struct Shared {
    lanes: Mutex<Lanes>,
    /// One per lane: a start wakes one thread of its own lane (a shared
    /// condition would wake every thread of both lanes for each start, or,
    /// woken one at a time, could wake the wrong lane's thread and lose it).
    work: [Condvar; 2],
    idle: Condvar,
}

impl Shared {
    /// Every thread of both lanes (closing).
    fn wake_all(&self) {
        for cv in &self.work {
            cv.notify_all();
        }
    }
}

/// A store's request threads and their queues.
#[derive(Default)]
pub struct Requests {
    shared: Arc<Shared>,
}

impl Requests {
    /// Queues `job`; the lane's threads start on first use, scheduled as
    /// `priority` says.
    pub(super) fn submit(&self, lane: Lane, priority: RequestPriority, job: Job) -> Result<Arc<Done>> {
        let done = Arc::new(Done::default());
        let mut l = self.shared.lanes.lock();
        if l.closed {
            bail!(BadState, "the store is being destroyed (or MPI finalized); no new requests");
        }
        let want = if lane == Lane::Collective { 1 } else { ONESIDED_THREADS };
        while l.threads[lane as usize] < want {
            let sh = self.shared.clone();
            let handle = std::thread::Builder::new()
                .name("ddstore-request".into())
                .spawn(move || {
                    set_policy(priority);
                    waiting::mark_request_thread();
                    crate::mpi::mark_library_thread();
                    worker(sh, lane)
                })
                .map_err(|e| err!(NoMemory, "cannot start a request thread: {e}"))?;
            l.handles.push(handle);
            l.threads[lane as usize] += 1;
        }
        l.queues[lane as usize].push_back((job, done.clone(), Instant::now()));
        l.in_flight += 1;
        self.shared.work[lane as usize].notify_one();
        Ok(done)
    }

    /// Waits until every submitted request has finished.
    pub fn drain(&self) {
        let mut l = self.shared.lanes.lock();
        while l.in_flight > 0 {
            self.shared.idle.wait(&mut l);
        }
    }

    /// Refuses new requests, then drains (`dds_destroy`).
    pub fn close(&self) {
        self.shared.lanes.lock().closed = true;
        // Threads held by the testing aid's delay take their work now.
        self.shared.wake_all();
        self.drain();
        self.shared.wake_all();
    }

    /// MPI_Finalize has begun (the finalize hook): refuses new requests,
    /// completes the one-sided requests not yet started with
    /// DDS_ERR_BAD_STATE, lets the running ones and the collective lane
    /// finish (see the module's notes), then joins every thread, so none
    /// calls MPI once this returns.
    pub fn finalize(&self) {
        let cancelled: Vec<Queued> = {
            let mut l = self.shared.lanes.lock();
            l.closed = true;
            let q: Vec<Queued> = l.queues[Lane::Onesided as usize].drain(..).collect();
            l.in_flight -= q.len();
            if l.in_flight == 0 {
                self.shared.idle.notify_all();
            }
            q
        };
        self.shared.wake_all();
        for (job, done, _) in cancelled {
            // The job (and the store it holds) goes before the request is
            // marked done, as in `worker`.
            drop(job);
            done.set(Err(err!(
                BadState,
                "MPI was finalized with this request in flight (it had not started: no rows were read)"
            )));
        }
        self.drain();
        self.shared.wake_all();
        let handles = std::mem::take(&mut self.shared.lanes.lock().handles);
        for h in handles {
            let _ = h.join();
        }
    }

    /// Sets the testing aid `DDSTORE_TEST_REQUEST_DELAY_S`.
    pub fn set_test_delay(&self, seconds: f64) {
        self.shared.lanes.lock().delay = Duration::from_secs_f64(seconds);
    }
}

impl Drop for Requests {
    fn drop(&mut self) {
        // The threads hold only `Shared`: they see `closed` and exit.
        self.shared.lanes.lock().closed = true;
        self.shared.wake_all();
    }
}

/// The Linux policy `priority` names, for this thread (elsewhere, or if the
/// kernel refuses, the thread keeps the normal policy: only timing differs).
fn set_policy(priority: RequestPriority) {
    let policy = match priority {
        RequestPriority::Normal => return,
        RequestPriority::Batch => libc::SCHED_BATCH,
        RequestPriority::Idle => libc::SCHED_IDLE,
    };
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `p` outlives the call.
    unsafe { libc::sched_setscheduler(0, policy, &p) };
}

fn worker(sh: Arc<Shared>, lane: Lane) {
    let mut l = sh.lanes.lock();
    loop {
        // The testing aid: a request younger than the delay waits (on the
        // condition, so that closing or finalizing wakes this thread).
        let young = l.queues[lane as usize].front().map(|q| q.2.elapsed()).filter(|age| *age < l.delay);
        if let (Some(age), false) = (young, l.closed) {
            let left = l.delay - age;
            sh.work[lane as usize].wait_for(&mut l, left);
            continue;
        }
        if let Some((job, done, _)) = l.queues[lane as usize].pop_front() {
            // The job (and the store it holds) is consumed before the
            // request is marked done, so a drained store has no other owner.
            parking_lot::MutexGuard::unlocked(&mut l, || {
                done.set(catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|p| Err(panicked(&*p))));
            });
            l.in_flight -= 1;
            if l.in_flight == 0 {
                sh.idle.notify_all();
            }
        } else if l.closed {
            l.threads[lane as usize] -= 1;
            return;
        } else {
            sh.work[lane as usize].wait(&mut l);
        }
    }
}

fn panicked(p: &(dyn std::any::Any + Send)) -> Error {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    err!(Internal, "internal error in a request thread (please report): {what}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// The collective lane runs its jobs one at a time, in submission order.
    #[test]
    fn collective_lane_keeps_start_order() {
        let rq = Requests::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut reqs: Vec<Request> = (0..20)
            .map(|k| {
                let seen = seen.clone();
                let job: Job = Box::new(move || {
                    std::thread::sleep(Duration::from_micros(200 * (20 - k) as u64));
                    seen.lock().push(k);
                    Ok(())
                });
                Request::new(rq.submit(Lane::Collective, RequestPriority::Normal, job).unwrap(), None)
            })
            .collect();
        for r in reqs.iter_mut().rev() {
            r.wait().unwrap();
        }
        assert_eq!(*seen.lock(), (0..20).collect::<Vec<_>>());
    }

    /// drain waits for every job; errors and panics come back from wait;
    /// a closed queue refuses new work; a dropped request waited first.
    #[test]
    fn drain_errors_panics_close_and_drop() {
        let rq = Requests::default();
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..8 {
            let d = done.clone();
            let job: Job = Box::new(move || {
                std::thread::sleep(Duration::from_millis(5));
                d.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
            drop(Request::new(rq.submit(Lane::Onesided, RequestPriority::Normal, job).unwrap(), None));
            // drop waits
        }
        assert_eq!(done.load(Ordering::SeqCst), 8);
        let mut bad = Request::new(
            rq.submit(Lane::Onesided, RequestPriority::Normal, Box::new(|| bail!(Timeout, "peer gone"))).unwrap(),
            None,
        );
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let mut boom = Request::new(
            rq.submit(Lane::Onesided, RequestPriority::Normal, Box::new(|| panic!("oops"))).unwrap(),
            None,
        );
        rq.drain();
        std::panic::set_hook(hook);
        assert!(bad.is_done() && boom.is_done());
        assert_eq!(bad.wait().unwrap_err().msg, "peer gone");
        let e = boom.wait().unwrap_err();
        assert!(e.msg.contains("oops"), "{}", e.msg);
        assert!(bad.wait().unwrap_err().msg.contains("already waited"));
        rq.close();
        assert!(rq.submit(Lane::Onesided, RequestPriority::Normal, Box::new(|| Ok(()))).is_err());
    }

    #[test]
    fn threads_run_under_the_policy_asked_for() {
        for (priority, want) in [
            (RequestPriority::Batch, libc::SCHED_BATCH),
            (RequestPriority::Normal, libc::SCHED_OTHER),
            (RequestPriority::Idle, libc::SCHED_IDLE),
        ] {
            let rq = Requests::default();
            let seen = Arc::new(AtomicUsize::new(usize::MAX));
            for lane in [Lane::Onesided, Lane::Collective] {
                let s = seen.clone();
                let job: Job = Box::new(move || {
                    // SAFETY: asks about the calling thread only.
                    s.store(unsafe { libc::sched_getscheduler(0) } as usize, Ordering::SeqCst);
                    Ok(())
                });
                Request::new(rq.submit(lane, priority, job).unwrap(), None).wait().unwrap();
                assert_eq!(seen.load(Ordering::SeqCst), want as usize, "{priority:?} {lane:?}");
            }
            rq.close();
        }
    }
}
