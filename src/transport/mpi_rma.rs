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
//! they touched.

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
    /// `MAX_GETS_IN_FLIGHT` at a time, each group followed by one
    /// `MPI_Win_flush` per target it touched (not `MPI_Win_flush_all`, which
    /// MPICH 4.0.2 ch4:ucx completes early; see docs/performance.md). After
    /// an error the gets already posted are still flushed, so none lands in
    /// the destination after this returns. `touched` is scratch.
    pub fn read_batch(&self, ops: &[GetOp], touched: &mut Vec<usize>) -> Result<()> {
        for group in ops.chunks(MAX_GETS_IN_FLIGHT) {
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
            posted.and(flushed)?;
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
