//! Communicators, their collectives, and the agreement on failures.

use std::os::raw::{c_int, c_void};

use mpi_sys as ffi;

use crate::error::{err, Error, Kind, Result};

use super::check;

use super::gate::{complete_all, gated, on_library_thread};
use super::{running, Datatype};

/// The address to give MPI for a buffer of which `used` says whether any
/// element is sent or received. An empty Rust buffer's pointer is its
/// alignment (0x1 for bytes), which is `MPI_IN_PLACE` in Open MPI: MPI reads
/// nothing through a zero-count buffer, so a real, unused address stands in.
fn mpi_addr<T>(p: *const T, used: bool) -> *mut c_void {
    static NOTHING: u64 = 0;
    if used {
        p as *mut c_void
    } else {
        &NOTHING as *const u64 as *mut c_void
    }
}

/// A communicator. Owned ones (ours) are freed on drop while MPI runs.
pub struct Comm {
    raw: ffi::MPI_Comm,
    rank: usize,
    size: usize,
}

// SAFETY: MPI handles are plain values; thread safety of calls is governed by
// the MPI thread level, which the store enforces with its own locks.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

impl Comm {
    /// Duplicates the caller's communicator (given by its Fortran handle) into
    /// a private one, so our collectives never match the caller's.
    pub fn dup_from_fortran(comm_f: c_int) -> Result<Comm> {
        // SAFETY: f2c is a pure conversion; a NULL result is checked before use.
        let user = unsafe { ffi::RSMPI_Comm_f2c(comm_f) };
        if user == unsafe { ffi::RSMPI_COMM_NULL } {
            return Err(err!(InvalidArgument, "the communicator is MPI_COMM_NULL"));
        }
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: `user` is a communicator handle supplied by the caller.
        check(unsafe { ffi::MPI_Comm_dup(user, &mut raw) }, "MPI_Comm_dup")?;
        Comm::adopt(raw)
    }

    /// A private duplicate of `MPI_COMM_SELF` (method-2 extra members,
    /// which have no communicator of their own). Local.
    pub fn dup_self() -> Result<Comm> {
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: MPI_COMM_SELF is always valid while MPI runs.
        check(unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_SELF, &mut raw) }, "MPI_Comm_dup")?;
        Comm::adopt(raw)
    }

    fn adopt(raw: ffi::MPI_Comm) -> Result<Comm> {
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: `raw` is a valid communicator we just created.
        unsafe {
            check(ffi::MPI_Comm_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")?;
            check(ffi::MPI_Comm_rank(raw, &mut rank), "MPI_Comm_rank")?;
            check(ffi::MPI_Comm_size(raw, &mut size), "MPI_Comm_size")?;
        }
        Ok(Comm { raw, rank: rank as usize, size: size as usize })
    }

    /// Frees the communicator now, from the finalisation hook (MPI still
    /// runs). The handle must not be used afterwards: once MPI is finalised
    /// the store refuses every call but `dds_destroy`, and `Drop` frees
    /// nothing after finalisation, so this is the communicator's only free.
    pub fn release_before_finalize(&self) {
        let mut raw = self.raw;
        // SAFETY: a communicator we own, freed once (see above).
        unsafe { ffi::MPI_Comm_free(&mut raw) };
    }

    /// A private duplicate (collective): its collectives never match this
    /// communicator's, so another thread may run them at the same time.
    pub fn dup(&self) -> Result<Comm> {
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective over a valid communicator.
        check(unsafe { ffi::MPI_Comm_dup(self.raw, &mut raw) }, "MPI_Comm_dup")?;
        Comm::adopt(raw)
    }

    /// One turn of MPI's progress engine: an `MPI_Iprobe` on this
    /// communicator, on which nothing is ever sent (see
    /// transport::rma_progress). Needs MPI_THREAD_MULTIPLE when other threads
    /// call MPI.
    pub fn poke_progress(&self) {
        let mut flag: c_int = 0;
        // SAFETY: a valid communicator; the status is ignored.
        gated(|| unsafe {
            ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, ffi::RSMPI_ANY_TAG, self.raw, &mut flag, ffi::RSMPI_STATUS_IGNORE)
        });
    }

    /// Splits into consecutive groups of `width` ranks (key = rank).
    pub fn split_groups(&self, width: usize) -> Result<Comm> {
        let color = (self.rank / width) as c_int;
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective over a valid communicator.
        check(unsafe { ffi::MPI_Comm_split(self.raw, color, self.rank as c_int, &mut raw) }, "MPI_Comm_split")?;
        Comm::adopt(raw)
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn barrier(&self) -> Result<()> {
        // SAFETY: collective over a valid communicator.
        check(unsafe { ffi::MPI_Barrier(self.raw) }, "MPI_Barrier")
    }

    /// Gathers one plain value from every rank, in rank order.
    pub fn allgather<T: Copy + Default>(&self, mine: &T) -> Result<Vec<T>> {
        let mut all = vec![T::default(); self.size];
        let n = std::mem::size_of::<T>() as c_int;
        // SAFETY: `all` holds size * sizeof(T) bytes; T is plain data.
        check(
            unsafe {
                ffi::MPI_Allgather(
                    (mine as *const T).cast(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    all.as_mut_ptr().cast(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    self.raw,
                )
            },
            "MPI_Allgather",
        )?;
        Ok(all)
    }

    /// Concatenates every rank's `mine` (rank r contributes `counts[r]` values).
    pub fn allgatherv_i64(&self, mine: &[i64], counts: &[i64]) -> Result<Vec<i64>> {
        let total: i64 = counts.iter().sum();
        if total > i32::MAX as i64 {
            return Err(err!(
                InvalidArgument,
                "a collective batch of {total} rows over all ranks exceeds the {} rows MPI can gather at once",
                i32::MAX
            ));
        }
        let rc: Vec<c_int> = counts.iter().map(|&c| c as c_int).collect();
        let displs = exclusive_prefix(&rc);
        let mut all = vec![0i64; total as usize];
        // SAFETY: buffer sizes follow the counts and displacements just computed.
        check(
            unsafe {
                ffi::MPI_Allgatherv(
                    mpi_addr(mine.as_ptr(), !mine.is_empty()),
                    mine.len() as c_int,
                    ffi::RSMPI_INT64_T,
                    mpi_addr(all.as_mut_ptr(), !all.is_empty()),
                    rc.as_ptr(),
                    displs.as_ptr(),
                    ffi::RSMPI_INT64_T,
                    self.raw,
                )
            },
            "MPI_Allgatherv",
        )?;
        Ok(all)
    }

    /// Element-wise minimum over ranks.
    pub fn allreduce_min(&self, values: &mut [i64]) -> Result<()> {
        self.allreduce(values, unsafe { ffi::RSMPI_MIN })
    }

    /// Element-wise maximum over ranks.
    pub fn allreduce_max(&self, values: &mut [i64]) -> Result<()> {
        self.allreduce(values, unsafe { ffi::RSMPI_MAX })
    }

    fn allreduce(&self, values: &mut [i64], op: ffi::MPI_Op) -> Result<()> {
        let send = values.to_vec();
        // SAFETY: both buffers hold values.len() elements.
        check(
            unsafe {
                ffi::MPI_Allreduce(
                    mpi_addr(send.as_ptr(), !send.is_empty()),
                    mpi_addr(values.as_mut_ptr(), !values.is_empty()),
                    values.len() as c_int,
                    ffi::RSMPI_INT64_T,
                    op,
                    self.raw,
                )
            },
            "MPI_Allreduce",
        )
    }

    pub fn bcast(&self, buf: &mut [u8], root: usize) -> Result<()> {
        // SAFETY: every rank passes a buffer of the same length.
        check(
            unsafe {
                ffi::MPI_Bcast(
                    mpi_addr(buf.as_mut_ptr(), !buf.is_empty()),
                    buf.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    root as c_int,
                    self.raw,
                )
            },
            "MPI_Bcast",
        )
    }

    /// `MPI_Alltoallv` with counts and displacements in units of `dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn alltoallv(
        &self,
        send: *const u8,
        scounts: &[c_int],
        sdispls: &[c_int],
        recv: *mut u8,
        rcounts: &[c_int],
        rdispls: &[c_int],
        dtype: &Datatype,
    ) -> Result<()> {
        let (send, recv) =
            (mpi_addr(send, scounts.iter().any(|&c| c > 0)), mpi_addr(recv, rcounts.iter().any(|&c| c > 0)));
        let (sc, sd, rc, rd) = (scounts.as_ptr(), sdispls.as_ptr(), rcounts.as_ptr(), rdispls.as_ptr());
        if on_library_thread() {
            let mut r = [unsafe { ffi::RSMPI_REQUEST_NULL }];
            // SAFETY: as below; the buffers and arrays outlive the completion.
            check(
                gated(|| unsafe {
                    ffi::MPI_Ialltoallv(send, sc, sd, dtype.raw, recv, rc, rd, dtype.raw, self.raw, &mut r[0])
                }),
                "MPI_Ialltoallv",
            )?;
            return check(complete_all(&mut r), "MPI_Ialltoallv");
        }
        // SAFETY: the caller sized both buffers from these counts and displacements.
        check(
            unsafe { ffi::MPI_Alltoallv(send, sc, sd, dtype.raw, recv, rc, rd, dtype.raw, self.raw) },
            "MPI_Alltoallv",
        )
    }

    /// `MPI_Alltoall` of one C int per peer.
    pub fn alltoall_int(&self, send: &[c_int], recv: &mut [c_int]) -> Result<()> {
        debug_assert!(send.len() == self.size && recv.len() == self.size);
        let (int, s, r) = (unsafe { ffi::RSMPI_INT32_T }, send.as_ptr().cast(), recv.as_mut_ptr().cast());
        if on_library_thread() {
            let mut req = [unsafe { ffi::RSMPI_REQUEST_NULL }];
            // SAFETY: as below; both buffers outlive the completion.
            check(
                gated(|| unsafe { ffi::MPI_Ialltoall(s, 1, int, r, 1, int, self.raw, &mut req[0]) }),
                "MPI_Ialltoall",
            )?;
            return check(complete_all(&mut req), "MPI_Ialltoall");
        }
        // SAFETY: both buffers hold one int per rank.
        check(unsafe { ffi::MPI_Alltoall(s, 1, int, r, 1, int, self.raw) }, "MPI_Alltoall")
    }

    /// Starts receiving one `dtype` item from `from` into `buf` (tag 0).
    pub fn irecv(&self, buf: *mut u8, dtype: &Datatype, from: usize) -> Result<ffi::MPI_Request> {
        self.irecv_n(buf, 1, dtype, from)
    }

    /// Starts receiving `count` `dtype` items from `from` into `buf` (tag 0).
    pub fn irecv_n(&self, buf: *mut u8, count: c_int, dtype: &Datatype, from: usize) -> Result<ffi::MPI_Request> {
        let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the caller keeps `buf` (`count` items of `dtype`) alive until `waitall`.
        check(
            gated(|| unsafe { ffi::MPI_Irecv(buf.cast(), count, dtype.raw, from as c_int, 0, self.raw, &mut r) }),
            "MPI_Irecv",
        )?;
        Ok(r)
    }

    /// Starts sending one `dtype` item at `buf` to `to` (tag 0).
    pub fn isend(&self, buf: *const u8, dtype: &Datatype, to: usize, reqs: &mut Vec<ffi::MPI_Request>) -> Result<()> {
        self.isend_n(buf, 1, dtype, to, reqs)
    }

    /// Starts sending `count` `dtype` items at `buf` to `to` (tag 0).
    pub fn isend_n(
        &self,
        buf: *const u8,
        count: c_int,
        dtype: &Datatype,
        to: usize,
        reqs: &mut Vec<ffi::MPI_Request>,
    ) -> Result<()> {
        let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the caller keeps `buf` alive and unchanged until `waitall`.
        check(
            gated(|| unsafe {
                ffi::MPI_Isend(buf as *const c_void, count, dtype.raw, to as c_int, 0, self.raw, &mut r)
            }),
            "MPI_Isend",
        )?;
        reqs.push(r);
        Ok(())
    }

    /// Tests `reqs` without waiting: completed entries become
    /// `MPI_REQUEST_NULL` and their indices are left in `done`. Returns how
    /// many completed, maybe 0. Each call also turns MPI's progress engine.
    pub fn testsome(reqs: &mut [ffi::MPI_Request], done: &mut Vec<c_int>) -> Result<usize> {
        done.resize(reqs.len(), 0);
        let mut n: c_int = 0;
        // SAFETY: `done` holds reqs.len() indices; entries are requests
        // started by this module or MPI_REQUEST_NULL.
        let rc = gated(|| unsafe {
            ffi::MPI_Testsome(
                reqs.len() as c_int,
                reqs.as_mut_ptr(),
                &mut n,
                done.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        });
        check(rc, "MPI_Testsome")?;
        let n = if n == unsafe { ffi::RSMPI_UNDEFINED } { 0 } else { n.max(0) as usize };
        done.truncate(n);
        Ok(n)
    }

    /// Completes every request started by `irecv`/`isend` and empties `reqs`.
    pub fn waitall(reqs: &mut Vec<ffi::MPI_Request>) -> Result<()> {
        if reqs.is_empty() {
            return Ok(());
        }
        // Every element is a request started by this module.
        let rc = complete_all(reqs);
        reqs.clear();
        check(rc, "MPI_Waitall")
    }

    pub fn raw(&self) -> ffi::MPI_Comm {
        self.raw
    }
}

impl Comm {
    /// The ranks of this communicator that share this rank's node (one
    /// shared-memory domain), ordered by rank here. Collective.
    pub fn split_shared(&self) -> Result<Comm> {
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective split of a valid communicator.
        check(
            unsafe {
                ffi::MPI_Comm_split_type(
                    self.raw,
                    ffi::MPI_COMM_TYPE_SHARED as c_int,
                    self.rank as c_int,
                    ffi::RSMPI_INFO_NULL,
                    &mut raw,
                )
            },
            "MPI_Comm_split_type",
        )?;
        Comm::adopt(raw)
    }

    /// True when every rank of this communicator runs on one node (one
    /// shared-memory domain). Collective.
    pub fn single_node(&self) -> Result<bool> {
        let mut shared = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective split of a valid communicator; freed below.
        unsafe {
            check(
                ffi::MPI_Comm_split_type(
                    self.raw,
                    ffi::MPI_COMM_TYPE_SHARED as c_int,
                    self.rank as c_int,
                    ffi::RSMPI_INFO_NULL,
                    &mut shared,
                ),
                "MPI_Comm_split_type",
            )?;
            let mut n: c_int = 0;
            let r = check(ffi::MPI_Comm_size(shared, &mut n), "MPI_Comm_size");
            ffi::MPI_Comm_free(&mut shared);
            r?;
            let mut all = [if n as usize == self.size { 1i64 } else { 0 }];
            self.allreduce_min(&mut all)?;
            Ok(all[0] == 1)
        }
    }
}

/// Folds each rank's local result into one decision: if any rank failed,
/// every rank returns the first failing rank's error (status and message).
/// Collective over `comm`.
pub fn agree<T>(comm: &Comm, local: Result<T>) -> Result<T> {
    let mut first = [if local.is_err() { comm.rank() as i64 } else { comm.size() as i64 }];
    comm.allreduce_min(&mut first)?;
    let root = first[0] as usize;
    if root == comm.size() {
        return local;
    }
    Err(share_error(comm, root, local.err().as_ref())?)
}

/// Collective: every rank learns rank `root`'s error (`mine` on `root`),
/// as "rank R: message" with R's kind. The message is truncated to 1 KiB.
pub fn share_error(comm: &Comm, root: usize, mine: Option<&Error>) -> Result<Error> {
    // 4 bytes of kind, then the message (truncated to fit).
    let mut buf = vec![0u8; 1024];
    if let Some(e) = mine.filter(|_| comm.rank() == root) {
        buf[..4].copy_from_slice(&(e.kind as i32).to_le_bytes());
        let msg = e.msg.as_bytes();
        let n = msg.len().min(buf.len() - 4);
        buf[4..4 + n].copy_from_slice(&msg[..n]);
    }
    comm.bcast(&mut buf, root)?;
    let kind = Kind::from_code(i32::from_le_bytes(buf[..4].try_into().unwrap()));
    let end = buf[4..].iter().position(|&b| b == 0).map_or(buf.len(), |i| i + 4);
    Ok(Error::new(kind, format!("rank {root}: {}", String::from_utf8_lossy(&buf[4..end]))))
}

impl Drop for Comm {
    fn drop(&mut self) {
        if running() {
            // SAFETY: we own this communicator; freeing is collective and the
            // store drops it from its collective tear-down path.
            unsafe { ffi::MPI_Comm_free(&mut self.raw) };
        }
    }
}

/// Exclusive prefix sums (displacements from counts).
pub fn exclusive_prefix(counts: &[c_int]) -> Vec<c_int> {
    let mut acc = 0;
    counts
        .iter()
        .map(|&c| {
            let d = acc;
            acc += c;
            d
        })
        .collect()
}
