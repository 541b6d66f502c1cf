//! Method 0's auto batch mode (`DDSTORE_BATCH_MODE=auto`): per variable,
//! the store times both batch modes on a few batches, keeps the faster, and
//! times them again every `DDSTORE_BATCH_AUTO_RECHECK` batches.
//!
//! Every rank must make every `dds_get_batch` call of the variable, as in
//! the collective mode: the choice is the same on every rank because each
//! rank counts the same calls (whatever their outcome) and the choice is
//! made from values every rank agrees on.
//!
//! A check is one to four rounds. A round is 16 batches in blocks of 4:
//! collective, one-sided, collective, one-sided, each batch run as its mode
//! runs between checks (a collective one agrees as always; a one-sided one
//! makes no agreement of its own, so its argument errors fail only its
//! rank). The first batch of each block is not timed: it pays for the
//! change of mode (a collective batch after one-sided ones waits for the
//! last rank to arrive), which the chosen mode never pays. Then one batch
//! agrees on each mode's mean time per batch over the check's rounds (the
//! slowest rank's) and the standard error of that mean (the largest over
//! ranks). Where the choice could still change within twice the standard
//! error of their difference (at the first check: which mode is faster,
//! where it could matter by more than 5%; at a re-check: whether the other
//! mode beats the one in use by more than 5%), and fewer than four rounds
//! were run, that batch runs in the mode in use and the check goes on with
//! another round (its times pooled with the earlier ones); else it
//! chooses, and runs in the chosen mode. So a check is 17, 34, 51
//! or 68 calls, and `batch_checks` counts it once, at its choice.
//!
//! Why blocks and no agreement before a timed batch: one-sided batches
//! timed right after an agreement (every rank had just made an MPI call)
//! lacked the long tail of one-sided batches in a run of them, and with 4
//! samples a mode single outliers decided; checks chose one-sided where the
//! collective mode was 2x faster (docs/dev/performance.md). Why rounds: at
//! 1 MiB rows one batch's time spread 2x between repeats, so 6 timed
//! batches a mode chose the slower mode where the two differed by 20-40%.
//! The state machine is store/auto_check.rs.

use std::time::{Duration, Instant};

use super::auto_check::{spread_aid, Step, UNMEASURED};
use super::collective::{enter, Collective};
use super::{Store, Tally};
use crate::config::BatchMode;
use crate::error::Result;
use crate::var::Variable;

impl Store {
    /// `dds_get_batch` of `v` in the auto batch mode.
    pub(super) fn batch_auto(
        &self,
        v: &Variable,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        tally: Option<&Tally>,
    ) -> Result<()> {
        let recheck = self.cfg.batch_auto_recheck;
        let name = v.name.as_str();
        let (step, current) = self.auto.with(name, |a| (a.step(recheck), a.current()));
        let (mode, timed) = match step {
            Step::Run(mode) => return self.batch_in(mode, v, dst, dst_bytes, indices, tally),
            Step::Probe { mode, timed } => (mode, timed),
            Step::Decide => return self.batch_decide(v, dst, dst_bytes, indices, tally),
        };
        let t = Instant::now();
        let r = self.batch_in(mode, v, dst, dst_bytes, indices, tally);
        if timed && r.is_ok() {
            let mut took = t.elapsed();
            if mode == current {
                // Testing aid (0 unless set): the mode in use loses this check.
                took += Duration::from_secs_f64(self.cfg.test_batch_auto_penalty_s);
            }
            let ns = took.as_nanos().min(UNMEASURED as u128) as i64;
            // Testing aid (0 unless set): each mode's times spread widely.
            let spread = (self.cfg.test_batch_auto_spread_s * 1e9) as i64;
            self.auto.with(name, |a| {
                let aid = if spread > 0 { spread_aid(a.timed(mode), mode == current, spread) } else { 0 };
                a.probed(mode, ns.saturating_add(aid).min(UNMEASURED))
            });
        }
        r
    }

    /// The call that ends a round of a check: its agreement (argument errors
    /// fail every rank, and the round is then still to be decided) carries
    /// every rank's means and their standard errors. The slowest rank's
    /// means and the largest errors either choose the mode this batch runs
    /// in (a check counted), or call for another round: this batch then
    /// runs in the mode in use, and no check is counted yet.
    fn batch_decide(
        &self,
        v: &Variable,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        tally: Option<&Tally>,
    ) -> Result<()> {
        let (name, recheck) = (v.name.as_str(), self.cfg.batch_auto_recheck);
        let local = indices.and_then(|idx| {
            v.check_dst("destination", dst_bytes, idx.len() as i64)?;
            v.check_indices(idx, "its")?;
            Ok(idx)
        });
        let payload = self.auto.with(name, |a| a.payload());
        let serial = self.mpi_lock.as_ref().map(|m| m.lock());
        let (idx, agreed) = enter(&self.comm, Collective::GetBatch, name, local, payload)?;
        drop(serial);
        let (chosen, current) = self.auto.with(name, |a| (a.decided(agreed, recheck), a.current()));
        if let Some(mode) = chosen {
            v.counters.batch_checked(mode as u64);
        }
        self.batch_in(chosen.unwrap_or(current), v, dst, dst_bytes, Ok(idx), tally)
    }

    /// One batch of `v` in `mode` (collective or one-sided).
    fn batch_in(
        &self,
        mode: BatchMode,
        v: &Variable,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        tally: Option<&Tally>,
    ) -> Result<()> {
        if mode == BatchMode::Onesided {
            v.counters.batch_onesided();
            return self.batch_onesided(v, dst, dst_bytes, indices?, tally);
        }
        let local = indices.and_then(|idx| {
            v.check_dst("destination", dst_bytes, idx.len() as i64)?;
            Ok((v, idx))
        });
        self.batch_collective(&v.name, local, dst)
    }

    /// The `DDS_BATCH_*` code of the mode `name`'s batches run in now.
    pub(super) fn batch_mode_of(&self, name: &str) -> u64 {
        match self.batch_mode {
            _ if self.method != super::Method::Mpi => BatchMode::Onesided as u64,
            BatchMode::Auto => self.auto.0.lock().get(name).map_or(BatchMode::Collective, |a| a.current()) as u64,
            fixed => fixed as u64,
        }
    }
}
