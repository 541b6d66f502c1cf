//! The auto batch mode's state per variable (store/batch_mode.rs runs it):
//! which batches of a check run in which mode and are timed, the choice
//! from the agreed means, and the interval to the next check. Pure and the
//! same on every rank: it changes only with calls every rank makes, and
//! with agreed values.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::config::BatchMode;

/// Batches per check, half in each mode.
pub(super) const PROBES: u32 = 16;
/// Batches in a row in one mode within a check (the first untimed).
const BLOCK: u32 = 4;
/// The mean of a mode no batch of which was timed (every one failed):
/// slower than any measured one.
pub(super) const UNMEASURED: i64 = i64::MAX / 4;
/// Each check that keeps the mode doubles the batches to the next one, up
/// to this many times `DDSTORE_BATCH_AUTO_RECHECK`; a change of mode
/// starts again from it. A check runs 8 batches in the mode not in use: at
/// 2x slower, 3% of the time every 256 batches, 0.2% every 4096.
const MAX_BACKOFF: u64 = 16;
/// At a re-check the mode in use is kept unless the other one was faster by
/// more than this fraction (noise would otherwise flip it back and forth).
const SWITCH_MARGIN: f64 = 0.05;

/// What one `dds_get_batch` call of a variable does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Run in this mode, untimed, with no agreement of its own.
    Run(BatchMode),
    /// Run in this mode as part of a check; if `timed`, add its time to
    /// this check's sums.
    Probe { mode: BatchMode, timed: bool },
    /// Agree on the sums, choose, and run in the chosen mode.
    Decide,
}

/// One variable's state (the same on every rank: it changes only with
/// calls every rank makes, and with agreed values).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct VarAuto {
    /// The mode chosen at the last check (None before the first).
    choice: Option<BatchMode>,
    /// Batches of the current check begun; None between checks.
    probe: Option<u32>,
    /// Batches left before the next check (unused while checking).
    left: u64,
    /// Batches from the last choice to the next check.
    interval: u64,
    /// This rank's timed batches in the current check, by mode (collective,
    /// one-sided): their total time (ns) and their number.
    sums: [i64; 2],
    counts: [i64; 2],
}

impl Default for VarAuto {
    /// A new variable starts with a check.
    fn default() -> VarAuto {
        VarAuto { choice: None, probe: Some(0), left: 0, interval: 0, sums: [0, 0], counts: [0, 0] }
    }
}

/// Batch `i` of a check: collective in even blocks, one-sided in odd ones;
/// timed unless it begins its block.
fn probe_step(i: u32) -> Step {
    let mode = if (i / BLOCK) % 2 == 0 { BatchMode::Collective } else { BatchMode::Onesided };
    Step::Probe { mode, timed: i % BLOCK != 0 }
}

/// The choice after a check whose slowest ranks took `collective_ns` and
/// `onesided_ns` per timed batch: the faster mode, keeping `current` unless the
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
    /// This call's step. Runs and probes are counted now (every rank counts
    /// them, whatever their outcome); the deciding call by `decided`, once
    /// its agreement succeeded (it fails on every rank together).
    pub(super) fn step(&mut self, recheck: u64) -> Step {
        match (self.probe, self.choice) {
            (Some(p), _) if p < PROBES => {
                self.probe = Some(p + 1);
                probe_step(p)
            }
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
        self.counts = [0, 0];
    }

    /// The mode this variable's batches run in now (collective before the
    /// first choice, as the first timed batch is).
    pub(super) fn current(&self) -> BatchMode {
        self.choice.unwrap_or(BatchMode::Collective)
    }

    /// What this rank contributes to the deciding call's agreement (which
    /// keeps the minimum of each word): its mean per mode, negated.
    pub(super) fn payload(&self) -> [i64; 2] {
        let mean = |m: usize| if self.counts[m] == 0 { UNMEASURED } else { self.sums[m] / self.counts[m] };
        [-mean(0), -mean(1)]
    }

    /// A timed batch in `mode` took `ns` on this rank.
    pub(super) fn probed(&mut self, mode: BatchMode, ns: i64) {
        let m = (mode == BatchMode::Onesided) as usize;
        self.sums[m] += ns;
        self.counts[m] += 1;
    }

    /// The deciding call agreed `payload` (the negated slowest means):
    /// chooses, and counts the batches to the next check: `recheck`, or
    /// twice the last interval while the choice holds (see MAX_BACKOFF).
    pub(super) fn decided(&mut self, payload: [i64; 2], recheck: u64) -> BatchMode {
        let mode = decide(self.choice, -payload[0], -payload[1]);
        let kept = self.choice == Some(mode);
        self.choice = Some(mode);
        self.probe = None;
        self.interval = if kept { (self.interval * 2).min(recheck * MAX_BACKOFF) } else { recheck };
        // 0: never again (`step` does not count down).
        self.left = if recheck == 0 { u64::MAX } else { self.interval };
        mode
    }
}

/// The auto state of a store's variables, by name.
#[derive(Default)]
pub(super) struct Auto(pub(super) Mutex<BTreeMap<String, VarAuto>>);

impl Auto {
    /// A variable registered now starts afresh (a name used again after
    /// `dds_remove` names a new variable).
    pub(super) fn reset(&self, name: &str) {
        self.0.lock().remove(name);
    }

    pub(super) fn with<T>(&self, name: &str, f: impl FnOnce(&mut VarAuto) -> T) -> T {
        let mut vars = self.0.lock();
        // Looked up first: the name is copied only at a variable's first batch.
        match vars.get_mut(name) {
            Some(a) => f(a),
            None => f(vars.entry(name.to_string()).or_default()),
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
                Step::Probe { mode, timed: true } => a.probed(mode, ns(mode)),
                Step::Probe { .. } => {}
                Step::Decide => chosen.push(a.decided(a.payload(), recheck)),
                Step::Run(m) => assert_eq!(m, a.current()),
            }
            steps.push(s);
        }
        (steps, chosen)
    }

    #[test]
    fn a_check_runs_blocks_of_each_mode_timing_all_but_their_first_then_decides() {
        let (steps, chosen) = run(PROBES as usize + 3, 4, |m| if m == O { 1 } else { 2 });
        let probes: Vec<(BatchMode, bool)> = steps[..PROBES as usize]
            .iter()
            .map(|s| match s {
                Step::Probe { mode, timed } => (*mode, *timed),
                other => panic!("{other:?}"),
            })
            .collect();
        let one_block = |m| [(m, false), (m, true), (m, true), (m, true)];
        assert_eq!(probes, [one_block(C), one_block(O), one_block(C), one_block(O)].concat());
        assert_eq!(steps[PROBES as usize], Step::Decide);
        assert_eq!(steps[PROBES as usize + 1..], [Step::Run(O), Step::Run(O)]);
        assert_eq!(chosen, [O]);
    }

    #[test]
    fn the_choice_compares_means_and_a_mode_never_timed_loses() {
        let mut a = VarAuto::default();
        // Collective: 3 batches of 10; one-sided: 1 of 12 (the others failed).
        for ns in [10, 10, 10] {
            a.probed(C, ns);
        }
        a.probed(O, 12);
        assert_eq!(a.payload(), [-10, -12]);
        assert_eq!(decide(None, 10, 12), C);
        let mut b = VarAuto::default();
        b.probed(C, 7);
        assert_eq!(b.payload(), [-7, -UNMEASURED]);
        assert_eq!(decide(None, 7, UNMEASURED), C);
    }

    #[test]
    fn rechecks_come_at_intervals_doubling_while_the_choice_holds_and_zero_means_never() {
        let check = PROBES as usize + 1;
        for recheck in [1u64, 2, 5] {
            // Intervals recheck, 2, 4, ... 16 times it, then 16 times it again.
            let intervals: Vec<usize> = [1, 2, 4, 8, 16, 16, 16].iter().map(|k| k * recheck as usize).collect();
            let calls: usize = intervals.iter().map(|i| check + i).sum();
            let (steps, chosen) = run(calls, recheck, |m| if m == C { 1 } else { 5 });
            assert_eq!(chosen, vec![C; intervals.len()], "recheck {recheck}");
            let mut want = Vec::new();
            for i in &intervals {
                want.extend(std::iter::repeat(false).take(check).chain(std::iter::repeat(true).take(*i)));
            }
            let got: Vec<bool> = steps.iter().map(|s| matches!(s, Step::Run(_))).collect();
            assert_eq!(got, want, "recheck {recheck}");
        }
        let (steps, chosen) = run(check + 1000, 0, |_| 1);
        assert_eq!(chosen.len(), 1);
        assert!(steps[check..].iter().all(|s| *s == Step::Run(C)));
    }

    #[test]
    fn a_change_of_mode_restarts_the_interval() {
        let mut a = VarAuto::default();
        let check = |a: &mut VarAuto, fast: BatchMode| {
            while a.step(3) != Step::Decide {}
            let payload = if fast == C { [-1, -100] } else { [-100, -1] };
            a.decided(payload, 3);
            a.left
        };
        assert_eq!([check(&mut a, C), check(&mut a, C), check(&mut a, C)], [3, 6, 12]);
        assert_eq!(check(&mut a, O), 3);
        assert_eq!(check(&mut a, O), 6);
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
                Step::Probe { mode: m, timed: true } => a.probed(m, if m == cur { 1000 } else { 10 }),
                Step::Probe { .. } => {}
                Step::Decide => chosen.push(a.decided(a.payload(), 1)),
                Step::Run(_) => {}
            }
        }
        assert_eq!(chosen, [O, C, O, C]);
    }
}
