//! Method 0's collective batches, on the same `Transport` as its one-sided
//! reads: every rank plans its rows locally (`plan_rows`, `plan_ranges`),
//! the store agrees on the number of rounds, and every rank moves them
//! (`move_rows`, `move_ranges`) with the two-sided exchange of
//! `exchange` (fixed rows) or `ranges` (ragged samples). Only the MPI
//! transport runs them: the fabric's batches are one-sided.

use super::exchange::{self, Plan, ReqBytes, Scratch, Source};
use super::ranges::{self, Range, Traffic};
use super::Transport;
use crate::config::Exchange;
use crate::error::{bail, Result};
use crate::mpi::Comm;
use crate::shard::Shard;

impl Transport {
    /// Splits a batch (row i of the destination receives global row
    /// `idx[i]`, indices checked) into rows copied directly and rows that
    /// travel, into `scratch`. Local; the destination is untouched.
    pub fn plan_rows(&self, src: &Source, cap: u64, n_ranks: usize, idx: &[i64], scratch: &mut Scratch) -> Plan {
        exchange::plan(src, cap, n_ranks, idx, scratch)
    }

    /// Moves the rows `scratch` plans: direct copies, then `rounds` rounds
    /// of the exchange on `comm` (agreed: every rank calls with the same).
    ///
    /// # Safety
    /// `dst` holds the rows of the planned batch; `scratch` is its plan.
    #[allow(clippy::too_many_arguments)] // a batch's plan, destination and exchange settings
    pub unsafe fn move_rows(
        &self,
        comm: &Comm,
        src: &Source,
        cap: u64,
        mode: Exchange,
        rounds: i64,
        dst: *mut u8,
        scratch: &mut Scratch,
    ) -> Result<ReqBytes> {
        self.check_collective()?;
        // SAFETY: the caller's promise.
        unsafe { exchange::copy_direct(src, dst, scratch) };
        // Rounds are agreed: a rank with nothing to read still serves.
        if rounds <= 0 {
            return Ok(ReqBytes::default());
        }
        // SAFETY: as above.
        unsafe { exchange::exchange(comm, src, cap, mode, rounds, dst, scratch) }
    }

    /// Where the rounds of the travelling sample ranges `travel` start, so
    /// that a rank receives at most `cap` bytes a round (or one sample).
    pub fn plan_ranges(&self, travel: &[Range], row_bytes: u64, cap: u64, n_ranks: usize) -> Result<Vec<usize>> {
        ranges::round_starts(travel, row_bytes, cap, n_ranks)
    }

    /// Moves `travel` in `rounds` rounds (agreed) starting at `starts`;
    /// `shard` is this rank's payload of `shard_rows` rows.
    ///
    /// # Safety
    /// Every range's destination `[at, at + rows * row_bytes)` lies in `dst`.
    #[allow(clippy::too_many_arguments)] // the ranges, their rounds and the exchange settings
    pub unsafe fn move_ranges(
        &self,
        comm: &Comm,
        shard: &Shard,
        shard_rows: u64,
        row_bytes: u64,
        travel: &[Range],
        starts: &[usize],
        rounds: usize,
        mode: Exchange,
        dst: *mut u8,
    ) -> Result<Traffic> {
        self.check_collective()?;
        // SAFETY: the caller's promise.
        unsafe { ranges::exchange(comm, shard, shard_rows, row_bytes, travel, starts, rounds, mode, dst) }
    }

    fn check_collective(&self) -> Result<()> {
        match self {
            Transport::Rma(_) => Ok(()),
            Transport::Fabric(_) => bail!(Internal, "a collective batch needs the MPI transport (method 0)"),
        }
    }
}
