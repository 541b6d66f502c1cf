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

use std::sync::Arc;

use super::request_threads::{Finish, Lane, Request};
use super::{Collective, Method, Store};
use crate::error::{bail, err, Result};
use crate::gpu::{self, MemKind, Mode};
use crate::transport::Scratch;

/// A start's checked indices and where its rows land.
type Target<'a> = (&'a [i64], (Dst, Option<Finish>));

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
