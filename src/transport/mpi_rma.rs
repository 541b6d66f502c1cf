//! Method 0: the variable's MPI window, passive-target reads and the
//! one-sided (pipelined-get) batch. The collective batch exchange is in
//! `transport::exchange`.
//!
//! Single reads (`dds_get`) are passive-target gets on the variable's window.
//!
//! One-sided batches (`DDSTORE_BATCH_MODE=onesided`) need no other rank:
//! every travelling row is a passive-target `MPI_Get` inside the window's
//! permanent `lock_all` epoch, adjacent rows merged into one get, at most
//! `MAX_GETS_IN_FLIGHT` gets outstanding before a flush of the targets
//! they touched. On a request thread the gets are request-based
//! (`MPI_Rget`) and tested, yielding the core between tests, instead (see
//! `waiting`).

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::mpi::{Comm, Window};
use crate::shard::Shard;

/// A variable's method-0 state: its window.
pub struct RmaVar {
    win: Window,
}

/// One get of a one-sided batch: `len` bytes at byte `offset` of `owner`'s
/// shard into `dst`.
#[derive(Clone, Copy, Debug)]
pub struct GetOp {
    pub owner: usize,
    pub offset: u64,
    pub dst: *mut u8,
    pub len: usize,
}

impl GetOp {
    /// Grows this get by `len` bytes when the next row continues it both at
    /// the owner and in the destination (a sorted run).
    #[inline]
    pub fn extend(&mut self, owner: usize, offset: u64, dst: *mut u8, len: usize) -> bool {
        let next = self.len as u64;
        if owner == self.owner && offset == self.offset + next && dst == self.dst.wrapping_add(self.len) {
            self.len += len;
            return true;
        }
        false
    }
}

/// Gets posted before the targets they touched are flushed: bounds what
/// the MPI library has to track for one batch, while keeping the pipeline
/// deep enough that a batch of 128 small rows is one flush.
pub const MAX_GETS_IN_FLIGHT: usize = 256;

/// A request thread's batch yields between tests while a get completed
/// within `YIELD_FOR`, and then sleeps `PATIENT_POLL` between them.
const YIELD_FOR: Duration = Duration::from_millis(1);
const PATIENT_POLL: Duration = Duration::from_micros(100);

impl RmaVar {
    /// Collective: exposes `shard` to the ranks of `comm`.
    pub fn new(shard: &Shard, comm: &Comm) -> Result<RmaVar> {
        Ok(RmaVar { win: Window::create(shard.as_ptr(), shard.len(), comm)? })
    }

    /// Reads `len` bytes at `offset` of `owner`'s shard into `dst`.
    pub fn read(&self, owner: usize, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        self.win.get(dst, len, owner, offset)
    }

    /// One-sided batch: posts the gets of `ops`, at most
    /// `MAX_GETS_IN_FLIGHT` at a time, and completes each group before the
    /// next. After an error the gets already posted are still completed, so
    /// none lands in the destination after this returns. `patient` (a
    /// request thread): test request-based gets rather than block in the
    /// flush.
    pub fn read_batch(&self, ops: &[GetOp], patient: bool) -> Result<()> {
        let mut touched = Vec::new();
        for group in ops.chunks(MAX_GETS_IN_FLIGHT) {
            if patient {
                self.group_tested(group)?;
            } else {
                self.group_flushed(group, &mut touched)?;
            }
        }
        Ok(())
    }

    /// Gets, then one `MPI_Win_flush` per target touched (not
    /// `MPI_Win_flush_all`, which MPICH 4.0.2 ch4:ucx completes early; see
    /// docs/dev/performance.md).
    fn group_flushed(&self, group: &[GetOp], touched: &mut Vec<usize>) -> Result<()> {
        touched.clear();
        let mut posted = Ok(());
        for op in group {
            if let Err(e) = self.win.get_start(op.dst, op.len, op.owner, op.offset) {
                posted = Err(e);
                break;
            }
            if touched.last() != Some(&op.owner) {
                touched.push(op.owner);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        let mut flushed = Ok(());
        for &t in touched.iter() {
            if let Err(e) = self.win.flush(t) {
                flushed = flushed.and(Err(e));
            }
        }
        posted.and(flushed)
    }

    /// `MPI_Rget`s, then `MPI_Testsome` until they have all landed: the
    /// thread yields between tests while gets keep completing (so a caller
    /// whose step ends takes the core back at once), and sleeps
    /// `PATIENT_POLL` between tests once none has completed for
    /// `YIELD_FOR` (an owner that serves late costs no core). Each test also
    /// turns MPI's progress engine, serving the peers' reads of this shard.
    fn group_tested(&self, group: &[GetOp]) -> Result<()> {
        let mut reqs = Vec::with_capacity(group.len());
        let mut posted = Ok(());
        for op in group {
            if let Err(e) = self.win.rget(op.dst, op.len, op.owner, op.offset, &mut reqs) {
                posted = Err(e);
                break;
            }
        }
        if posted.is_err() {
            let _ = Comm::waitall(&mut reqs);
            return posted;
        }
        let (mut left, mut done, mut last) = (reqs.len(), Vec::new(), Instant::now());
        while left > 0 {
            match Comm::testsome(&mut reqs, &mut done) {
                Ok(0) if last.elapsed() < YIELD_FOR => std::thread::yield_now(),
                Ok(0) => std::thread::sleep(PATIENT_POLL),
                Ok(n) => {
                    left -= n;
                    last = Instant::now();
                }
                Err(e) => {
                    let _ = Comm::waitall(&mut reqs);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Makes local stores visible to remote readers (epoch boundaries).
    pub fn sync(&self) -> Result<()> {
        self.win.sync()
    }

    /// Collective: frees the window.
    pub fn free(&mut self) -> Result<()> {
        self.win.free()
    }
}
