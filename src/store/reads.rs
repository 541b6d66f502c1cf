//! Single reads (`dds_get`) and the pieces every batch shares: the range
//! checks, the tally of staged reads, the per-row walk and copy-or-queue.

use super::Store;
use crate::error::{bail, err, Result};
use crate::profile::Timer;
use crate::transport::Reads;
use crate::var::Variable;

impl Store {
    /// One-sided: reads `count` consecutive rows from global row `start`; they
    /// must lie in one rank's shard.
    pub fn get(&self, name: &str, dst: *mut u8, dst_bytes: usize, start: i64, count: i64) -> Result<()> {
        self.get_tallied(name, dst, dst_bytes, start, count, None)
    }

    /// `get`, counted as a call of its own (`tally` None) or added to a
    /// staged read's running total, which counts the user's call once.
    pub(crate) fn get_tallied(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        start: i64,
        count: i64,
        tally: Option<&Tally>,
    ) -> Result<()> {
        self.check_running()?;
        self.with_var(name, |v| {
            let Some((owner, offset)) = self.check_get(v, dst_bytes, start, count)? else { return Ok(()) };
            let mut t = Timer::start(self.cfg.profile);
            // SAFETY: dst holds dst_bytes; the rows lie inside the owner's shard (checked above).
            let direct = unsafe { v.near.copy(owner, offset, dst, dst_bytes) };
            if direct {
                t.lap(&v.counters.read_ns);
            } else {
                v.transport.read_range(owner, offset, dst, dst_bytes, &self.read_ctx(v), &mut t)?;
            }
            Tally::record(tally, v, count as u64, if direct { count as u64 } else { 0 });
            Ok(())
        })
    }

    /// Every check of a `dds_get` (count, destination size, range): the
    /// owner and the first row's byte offset within its shard, or None for
    /// an empty read (which moves nothing).
    pub(crate) fn check_get(
        &self,
        v: &Variable,
        dst_bytes: usize,
        start: i64,
        count: i64,
    ) -> Result<Option<(usize, u64)>> {
        if count < 0 {
            bail!(InvalidArgument, "count {count} is negative");
        }
        v.check_dst("destination", dst_bytes, count)?;
        if count == 0 {
            check_empty_start(v, start)?;
            return Ok(None);
        }
        let (owner, local) = self.check_range(v, start, count)?;
        Ok(Some((owner, local as u64 * v.row_bytes)))
    }

    /// Checks that `count` (> 0) rows from `start` lie in one shard; returns
    /// the owner and the first row's index within its shard.
    fn check_range(&self, v: &Variable, start: i64, count: i64) -> Result<(usize, i64)> {
        let name = &v.name;
        v.layout.check(start).map_err(|e| err!(OutOfRange, "variable '{name}': {}", e.msg))?;
        let (owner, local) = v.layout.owner(start);
        let (lo, hi) = v.layout.shard(owner);
        // `local + count` would wrap for a count near i64::MAX, which a
        // size_t dst_bytes can match when rows are 1 or 2 bytes: compare
        // against the rows left instead (0 <= local < hi - lo).
        if count > (hi - lo) - local {
            bail!(
                InvalidArgument,
                "rows [{start}, {}) of '{name}' cross the end of rank {owner}'s shard [{lo}, {hi}); \
                 dds_get reads inside one shard, use dds_get_batch for rows of several ranks",
                start.saturating_add(count)
            );
        }
        Ok((owner, local))
    }
}

/// Rows read by the chunks of one staged read (`gpu.rs`), which
/// counts them as the one call the user made.
#[derive(Default)]
pub(crate) struct Tally {
    rows: std::cell::Cell<u64>,
    local: std::cell::Cell<u64>,
}

impl Tally {
    /// Counts a read of `rows` rows (`local` of them copied directly): as a
    /// call of its own, or into `tally`.
    pub(super) fn record(tally: Option<&Tally>, v: &Variable, rows: u64, local: u64) {
        match tally {
            None => v.counters.read_call(rows, local),
            Some(t) => {
                t.rows.set(t.rows.get() + rows);
                t.local.set(t.local.get() + local);
            }
        }
    }

    /// Counts everything the chunks read as one call of variable `name`.
    pub(crate) fn finish(&self, store: &Store, name: &str) {
        if self.rows.get() > 0 {
            let _ = store.with_var(name, |v| {
                v.counters.read_call(self.rows.get(), self.local.get());
                Ok(())
            });
        }
    }
}

/// The rows of a one-sided batch, the same for every route: row i of `dst`
/// receives global row `idx[i]`, which lies at byte `offset` of rank
/// `owner`'s shard; `read(owner, offset, at, row_bytes)` is called for each
/// row in order. The destination size and the indices are checked by the
/// caller. `at` is only computed here (a GPUDirect destination may not be
/// addressable by the CPU), never dereferenced.
pub(super) fn batch_rows(v: &Variable, dst: *mut u8, idx: &[i64], mut read: impl FnMut(usize, u64, *mut u8, usize)) {
    let rb = v.row_bytes as usize;
    for (i, &g) in idx.iter().enumerate() {
        let (owner, local) = v.layout.owner(g);
        read(owner, local as u64 * v.row_bytes, dst.wrapping_add(i * rb), rb);
    }
}

/// One piece of a batched read into host memory (one-sided and ragged
/// batches alike): `len` bytes at byte `offset` of `owner`'s shard are copied to `at` here
/// when this rank maps that shard (true), else queued on `reads` for the
/// transport (false).
///
/// # Safety
/// `at` holds `len` writable bytes and the range lies inside the owner's
/// shard (both checked by the caller).
pub(super) unsafe fn copy_or_queue(
    v: &Variable,
    reads: &mut Reads<'_>,
    owner: usize,
    offset: u64,
    at: *mut u8,
    len: usize,
) -> bool {
    // SAFETY: the caller's promise.
    let copied = unsafe { v.near.copy(owner, offset, at, len) };
    if !copied {
        reads.push(owner, offset, at, len);
    }
    copied
}

/// An empty read moves nothing, but its `start` must still name a place in
/// the variable: [0, total rows] (the end included, as for a slice).
fn check_empty_start(v: &Variable, start: i64) -> Result<()> {
    let total = v.layout.total();
    if !(0..=total).contains(&start) {
        bail!(OutOfRange, "variable '{}': start {start} of a 0-row read is outside [0, {total}]", v.name);
    }
    Ok(())
}
