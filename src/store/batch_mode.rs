//! Method 0's auto batch mode (`DDSTORE_BATCH_MODE=auto`): per variable,
//! the store times both batch modes on a few batches, keeps the faster, and
//! times them again every `DDSTORE_BATCH_AUTO_RECHECK` batches.
//!
//! Every rank must make every `dds_get_batch` call of the variable, as in
//! the collective mode: the choice is the same on every rank because each
//! rank counts the same calls, and each timed call starts with the call's
//! agreement (`collective::enter`), whose payload carries every rank's time
//! so far (the slowest rank's sum counts: a batch is done when every rank
//! has its rows). That agreement also settles argument errors, so a timed
//! call fails on every rank together whichever mode it runs in; between
//! checks, a batch run one-sided fails only where its arguments are bad.
//!
//! A check is `PROBES` timed batches, alternating the modes as
//! C O O C C O O C (so a trend in the timings favours neither), then one
//! batch that agrees on the sums, chooses, and runs in the chosen mode.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::collective::{enter, Collective};
use super::{Store, Tally};
use crate::config::BatchMode;
use crate::error::Result;
use crate::var::Variable;

/// Timed batches per check, half in each mode.
pub const PROBES: u32 = 8;
/// At a re-check the mode in use is kept unless the other one was faster by
/// more than this fraction (noise would otherwise flip it back and forth).
const SWITCH_MARGIN: f64 = 0.05;

/// What one `dds_get_batch` call of a variable does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Run in this mode, untimed, with no agreement of its own.
    Run(BatchMode),
    /// Agree, then run in this mode and add its time to this check's sums.
    Probe(BatchMode),
    /// Agree on the sums, choose, and run in the chosen mode.
    Decide,
}

/// One variable's state (the same on every rank: it changes only with
/// calls every rank makes, and with agreed values).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct VarAuto {
    /// The mode chosen at the last check (None before the first).
    choice: Option<BatchMode>,
    /// Timed batches done in the current check; None between checks.
    probe: Option<u32>,
    /// Batches left before the next check (unused while checking).
    left: u64,
    /// This rank's time in the current check: collective, one-sided (ns).
    sums: [i64; 2],
}

impl Default for VarAuto {
    /// A new variable starts with a check.
    fn default() -> VarAuto {
        VarAuto { choice: None, probe: Some(0), left: 0, sums: [0, 0] }
    }
}

/// The mode of timed batch `i` of a check: C O O C, repeated.
fn probe_mode(i: u32) -> BatchMode {
    if matches!(i % 4, 0 | 3) {
        BatchMode::Collective
    } else {
        BatchMode::Onesided
    }
}

/// The choice after a check whose slowest ranks took `collective_ns` and
/// `onesided_ns` in total: the faster mode, keeping `current` unless the
/// other beats it by more than `SWITCH_MARGIN` (ties go to the collective
/// mode, DDStore's own). Pure, so every rank given the agreed sums chooses
/// alike.
pub(super) fn decide(current: Option<BatchMode>, collective_ns: i64, onesided_ns: i64) -> BatchMode {
    let (c, o) = (collective_ns as f64, onesided_ns as f64);
    match current {
        Some(BatchMode::Onesided) if c >= o * (1.0 - SWITCH_MARGIN) => BatchMode::Onesided,
        Some(BatchMode::Onesided) => BatchMode::Collective,
        Some(_) if o < c * (1.0 - SWITCH_MARGIN) => BatchMode::Onesided,
        Some(_) => BatchMode::Collective,
        None if o < c => BatchMode::Onesided,
        None => BatchMode::Collective,
    }
}

impl VarAuto {
    /// This call's step; a `Run` is counted now (every rank counts it,
    /// whatever its outcome), the others by `probed` and `decided` once
    /// the call's agreement succeeded.
    pub(super) fn step(&mut self, recheck: u64) -> Step {
        match (self.probe, self.choice) {
            (Some(p), _) if p < PROBES => Step::Probe(probe_mode(p)),
            (Some(_), _) => Step::Decide,
            (None, Some(mode)) => {
                if recheck > 0 {
                    self.left -= 1;
                    if self.left == 0 {
                        self.start_check();
                    }
                }
                Step::Run(mode)
            }
            (None, None) => unreachable!("a variable leaves its first check with a choice"),
        }
    }

    fn start_check(&mut self) {
        self.probe = Some(0);
        self.sums = [0, 0];
    }

    /// The mode this variable's batches run in now (collective before the
    /// first choice, as the first timed batch is).
    pub(super) fn current(&self) -> BatchMode {
        self.choice.unwrap_or(BatchMode::Collective)
    }

    /// What this rank contributes to a timed call's agreement (which keeps
    /// the minimum of each word): its sums, negated.
    fn payload(&self) -> [i64; 2] {
        [-self.sums[0], -self.sums[1]]
    }

    /// A timed batch in `mode` took `ns` on this rank.
    pub(super) fn probed(&mut self, mode: BatchMode, ns: i64) {
        self.sums[(mode == BatchMode::Onesided) as usize] += ns;
        self.probe = self.probe.map(|p| p + 1);
    }

    /// The deciding call agreed `payload` (the negated slowest sums):
    /// chooses, and counts `recheck` batches to the next check.
    pub(super) fn decided(&mut self, payload: [i64; 2], recheck: u64) -> BatchMode {
        let mode = decide(self.choice, -payload[0], -payload[1]);
        self.choice = Some(mode);
        self.probe = None;
        self.left = recheck;
        if recheck == 0 {
            // Never again: `step` does not count down.
            self.left = u64::MAX;
        }
        mode
    }
}

/// The auto state of a store's variables, by name.
#[derive(Default)]
pub(super) struct Auto(Mutex<BTreeMap<String, VarAuto>>);

impl Auto {
    /// A variable registered now starts afresh (a name used again after
    /// `dds_remove` names a new variable).
    pub(super) fn reset(&self, name: &str) {
        self.0.lock().remove(name);
    }

    fn with<T>(&self, name: &str, f: impl FnOnce(&mut VarAuto) -> T) -> T {
        f(self.0.lock().entry(name.to_string()).or_default())
    }
}

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
        let mode = match step {
            Step::Run(mode) => return self.batch_in(mode, v, dst, dst_bytes, indices, tally),
            Step::Probe(mode) => mode,
            Step::Decide => BatchMode::Collective,
        };
        // The agreement of a timed call: its errors fail every rank, and
        // it starts every rank's clock together.
        let local = indices.and_then(|idx| {
            v.check_dst("destination", dst_bytes, idx.len() as i64)?;
            v.check_indices(idx, "its")?;
            Ok(idx)
        });
        let payload = self.auto.with(name, |a| a.payload());
        let serial = self.mpi_lock.as_ref().map(|m| m.lock());
        let (idx, agreed) = enter(&self.comm, Collective::GetBatch, name, local, payload)?;
        drop(serial);
        if step == Step::Decide {
            let chosen = self.auto.with(name, |a| a.decided(agreed, recheck));
            v.counters.batch_checked(chosen as u64);
            return self.batch_in(chosen, v, dst, dst_bytes, Ok(idx), tally);
        }
        let t = Instant::now();
        let r = self.batch_in(mode, v, dst, dst_bytes, Ok(idx), tally);
        let mut took = t.elapsed();
        if mode == current {
            // Testing aid (0 unless set): the mode in use loses this check.
            took += Duration::from_secs_f64(self.cfg.test_batch_auto_penalty_s);
        }
        let ns = took.as_nanos().min(i64::MAX as u128 / 4) as i64;
        self.auto.with(name, |a| a.probed(mode, ns));
        r
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

#[cfg(test)]
mod tests {
    use super::*;
    use BatchMode::{Collective as C, Onesided as O};

    #[test]
    fn first_choice_is_the_faster_and_ties_are_collective() {
        assert_eq!(decide(None, 100, 99), O);
        assert_eq!(decide(None, 99, 100), C);
        assert_eq!(decide(None, 100, 100), C);
        assert_eq!(decide(None, 0, 0), C);
    }

    #[test]
    fn a_recheck_switches_only_past_the_margin() {
        // One-sided in use: collective must be more than 5% faster.
        assert_eq!(decide(Some(O), 96, 100), O);
        assert_eq!(decide(Some(O), 94, 100), C);
        assert_eq!(decide(Some(O), 200, 100), O);
        // Collective in use: the same the other way.
        assert_eq!(decide(Some(C), 100, 96), C);
        assert_eq!(decide(Some(C), 100, 94), O);
        assert_eq!(decide(Some(C), 100, 200), C);
    }

    /// Runs `calls` steps, with every timed batch taking `ns(mode)`; returns
    /// the steps and the modes chosen.
    fn run(calls: usize, recheck: u64, ns: impl Fn(BatchMode) -> i64) -> (Vec<Step>, Vec<BatchMode>) {
        let mut a = VarAuto::default();
        let (mut steps, mut chosen) = (Vec::new(), Vec::new());
        for _ in 0..calls {
            let s = a.step(recheck);
            match s {
                Step::Probe(m) => a.probed(m, ns(m)),
                Step::Decide => chosen.push(a.decided(a.payload(), recheck)),
                Step::Run(m) => assert_eq!(m, a.current()),
            }
            steps.push(s);
        }
        (steps, chosen)
    }

    #[test]
    fn a_check_alternates_both_modes_equally_then_decides() {
        let (steps, chosen) = run(PROBES as usize + 3, 4, |m| if m == O { 1 } else { 2 });
        let probes: Vec<BatchMode> = steps[..PROBES as usize]
            .iter()
            .map(|s| match s {
                Step::Probe(m) => *m,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(probes.iter().filter(|&&m| m == O).count(), PROBES as usize / 2);
        assert_eq!(probes[..4], [C, O, O, C]);
        assert_eq!(steps[PROBES as usize], Step::Decide);
        assert_eq!(steps[PROBES as usize + 1..], [Step::Run(O), Step::Run(O)]);
        assert_eq!(chosen, [O]);
    }

    #[test]
    fn rechecks_come_every_recheck_batches_and_zero_means_never() {
        let check = PROBES as usize + 1;
        for recheck in [1u64, 2, 5] {
            let period = check + recheck as usize;
            let (steps, chosen) = run(period * 3, recheck, |m| if m == C { 1 } else { 5 });
            assert_eq!(chosen, [C, C, C], "recheck {recheck}");
            for (i, s) in steps.iter().enumerate() {
                let run = i % period >= check;
                assert_eq!(matches!(s, Step::Run(_)), run, "recheck {recheck}, call {i}: {s:?}");
            }
        }
        let (steps, chosen) = run(check + 1000, 0, |_| 1);
        assert_eq!(chosen.len(), 1);
        assert!(steps[check..].iter().all(|s| *s == Step::Run(C)));
    }

    #[test]
    fn the_slower_mode_in_use_is_left_when_the_other_wins() {
        // The mode in use is slow at every check (as the testing aid
        // makes it): the choice flips at each check.
        let mut a = VarAuto::default();
        let mut chosen = Vec::new();
        for _ in 0..(PROBES as usize + 2) * 4 {
            let cur = a.current();
            match a.step(1) {
                Step::Probe(m) => a.probed(m, if m == cur { 1000 } else { 10 }),
                Step::Decide => chosen.push(a.decided(a.payload(), 1)),
                Step::Run(_) => {}
            }
        }
        assert_eq!(chosen, [O, C, O, C]);
    }
}
