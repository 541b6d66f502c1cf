//! Non-blocking batched reads (`dds_get_batch_start`): the request a caller
//! holds, and the library threads that carry its read out.
//!
//! A read must progress while the caller computes. Method-1 reads need
//! their completion queue driven; MPI's non-blocking collectives progress
//! only inside MPI calls in most implementations (the standard promises no
//! asynchronous progress); passive-target gets complete at a flush. A
//! library thread that runs the ordinary blocking read covers all three with
//! the code, checks and counters of `dds_get_batch`, and needs no busy loop:
//! it sleeps in the transport's own wait.
//!
//! Two lanes of threads per store, started on first use:
//! - collective (method 0, collective batch mode): one thread, running the
//!   exchanges in start order on a communicator of their own
//!   (`Store::async_comm`), so every rank runs them in the order every rank
//!   started them. The agreement on arguments (which makes every rank fail
//!   together) runs inside the start call, on the caller's thread.
//! - one-sided (methods 1 and 2, method-0 one-sided mode): a small pool.
//!
//! Calls that change the registry or free MPI objects (add, init, remove,
//! join, epochs, destroy) first drain the requests: a running read holds the
//! registry's read lock, and a collective one waits for the other ranks.
//!
//! MPI_Finalize with requests in flight (the finalize hook, `finalize`): no
//! request that has not started may start (it would call MPI while MPI
//! shuts down): one-sided requests still queued complete at once with
//! DDS_ERR_BAD_STATE ("MPI was finalized with this request in flight");
//! reads already running finish (their MPI requests must complete before
//! their windows go); the collective lane runs its queue to the end, since
//! every rank started the same exchanges and a rank that skipped one would
//! leave its peers waiting in it. Then the threads are joined, before MPI
//! goes on shutting down. Library threads call MPI through `mpi`'s gate
//! (one at a time, calls that return at once), which is what keeps them
//! safe in the moments of `MPI_Finalize` before the hook runs.
//!
//! Device destinations: the rows arrive in a host bounce buffer the request
//! owns, copied to the device by the wait (on the waiting thread, which is
//! where the caller's CUDA context is).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{Collective, Method, Store};
use crate::config::RequestPriority;
use crate::error::{bail, err, Error, Result};
use crate::gpu::{self, MemKind, Mode};
use crate::transport::waiting;
use crate::transport::Scratch;

/// Threads of the one-sided lane: two keep one read waiting on the network
/// while the next is being posted; more would only contend for the cores
/// the caller computes on.
const ONESIDED_THREADS: usize = 2;

type Job = Box<dyn FnOnce() -> Result<()> + Send>;
type Finish = Box<dyn FnOnce() -> Result<()> + Send>;
/// A start's checked indices and where its rows land.
type Target<'a> = (&'a [i64], (Dst, Option<Finish>));

/// Completion of one request: its result, once known.
#[derive(Default)]
struct Done {
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
    fn new(done: Arc<Done>, finish: Option<Finish>) -> Request {
        Request { done, finish, waited: false }
    }

    fn completed(r: Result<()>, finish: Option<Finish>) -> Request {
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
enum Lane {
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
    fn submit(&self, lane: Lane, priority: RequestPriority, job: Job) -> Result<Arc<Done>> {
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

/// A destination address that crosses to a request thread (the caller
/// keeps the memory valid until the request completes).
#[derive(Clone, Copy)]
struct Dst(*mut u8);
// SAFETY: see above; the address is only written by the one read.
unsafe impl Send for Dst {}
impl Dst {
    fn ptr(self) -> *mut u8 {
        self.0
    }
}

impl Store {
    /// Starts a batched read (`dds_get_batch_start`): the checks of
    /// `dds_get_batch` run now and their errors are returned here; the read
    /// runs on a request thread. Method 0 in the collective batch mode is
    /// collective (the agreement runs here, every rank in the same order).
    /// `indices` carries this rank's argument check.
    pub fn get_batch_start(
        self: &Arc<Self>,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
    ) -> Result<Request> {
        self.check_running()?;
        if self.method == Method::Mpi && self.mpi_lock.is_some() {
            // MPI without THREAD_MULTIPLE: no library thread may call MPI,
            // so the read runs now (docs/c-api.md says there is no overlap).
            return self.get_batch_to(name, dst, dst_bytes, indices, None).map(|()| Request::completed(Ok(()), None));
        }
        let target = indices.and_then(|idx| Ok((idx, self.destination(name, dst, dst_bytes)?)));
        if !self.batch_is_onesided() {
            return self.start_collective(name, dst_bytes, target);
        }
        let (idx, (to, finish)) = target?;
        self.with_var(name, |v| {
            v.check_dst("destination", dst_bytes, idx.len() as i64)?;
            v.check_indices(idx, "the")
        })?;
        let (store, name, idx) = (self.clone(), name.to_string(), idx.to_vec());
        let job = Box::new(move || store.get_batch(&name, to.ptr(), dst_bytes, Ok(&idx)));
        Ok(Request::new(self.requests.submit(Lane::Onesided, self.cfg.request_priority, job)?, finish))
    }

    /// Method 0, collective mode: agree now, exchange on the collective lane.
    fn start_collective(self: &Arc<Self>, name: &str, dst_bytes: usize, target: Result<Target>) -> Result<Request> {
        if self.async_comm.is_none() {
            bail!(Internal, "method-0 store without a request communicator");
        }
        let vars = self.vars.read();
        let (local, finish) = match target {
            Ok((idx, (to, finish))) => (Ok((idx, to)), finish),
            Err(e) => (Err(e), None),
        };
        let to = local.as_ref().map(|(_, to)| *to).unwrap_or(Dst(std::ptr::null_mut()));
        let local = local.and_then(|(idx, _)| match vars.get(name) {
            None => bail!(UnknownVariable, "no variable named '{name}' in this store"),
            Some(v) => {
                v.check_dst("destination", dst_bytes, idx.len() as i64)?;
                Ok((v, idx))
            }
        });
        let mut scratch = Scratch::default();
        let (_, idx, rounds) = self.collective_agree(Collective::GetBatchStart, name, local, &mut scratch)?;
        let (store, name, rows) = (self.clone(), name.to_string(), idx.len());
        drop(vars);
        let job = Box::new(move || {
            let vars = store.vars.read();
            let (Some(v), Some(comm)) = (vars.get(&name), &store.async_comm) else {
                bail!(Internal, "variable '{name}' vanished while a request was in flight")
            };
            // SAFETY: dst holds `rows` rows (checked at start); scratch is the plan.
            unsafe { store.collective_move(comm, v, rows, rounds, to.ptr(), &mut scratch) }
        });
        // Every rank agreed; a failure to queue here is a lone rank's.
        Ok(Request::new(self.requests.submit(Lane::Collective, self.cfg.request_priority, job)?, finish))
    }

    /// Where a request's rows land: `dst` itself (host memory), or a host
    /// bounce buffer the request owns and copies to the device at wait.
    fn destination(&self, name: &str, dst: *mut u8, dst_bytes: usize) -> Result<(Dst, Option<Finish>)> {
        let kind = if self.gpu.mode == Mode::Off || dst_bytes == 0 { MemKind::Host } else { gpu::classify(dst)? };
        match kind {
            MemKind::Host => Ok((Dst(dst), None)),
            MemKind::Rocm(_) => bail!(
                Gpu,
                "GPU destination buffer for variable '{name}' is ROCm memory: this build classifies it but cannot copy it yet"
            ),
            MemKind::Cuda(dev) => {
                if !self.gpu.staging {
                    bail!(
                        Gpu,
                        "GPU destination buffer for variable '{name}' needs staging through host memory, \
                         which DDSTORE_GPU_STAGING=0 (or options.gpu_staging = 0) forbids"
                    );
                }
                let mut bounce = vec![0u8; dst_bytes].into_boxed_slice();
                let to = Dst(bounce.as_mut_ptr());
                let out = Dst(dst);
                let finish: Finish = Box::new(move || copy_to_device(dev, out.ptr(), &bounce));
                Ok((to, Some(finish)))
            }
        }
    }

    /// Waits for every request of this store (calls that change the
    /// registry or free MPI objects run after them).
    pub(crate) fn drain_requests(&self) {
        self.requests.drain();
    }
}

#[cfg(feature = "cuda")]
fn copy_to_device(dev: i32, dst: *mut u8, rows: &[u8]) -> Result<()> {
    let d = gpu::cuda::driver().map_err(|why| err!(Gpu, "{why}"))?;
    // SAFETY: dst is device memory of rows.len() bytes (classified at start);
    // the event is waited for before `rows` can be freed.
    d.on_device(dev, || unsafe { d.copy_to_device(dst, rows.as_ptr(), rows.len(), None)?.wait() })
}

#[cfg(not(feature = "cuda"))]
fn copy_to_device(_dev: i32, _dst: *mut u8, _rows: &[u8]) -> Result<()> {
    bail!(Internal, "a CUDA destination in a build without CUDA")
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
