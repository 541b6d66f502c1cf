//! The auto batch mode's state per variable (store/batch_mode.rs runs it):
//! which batches of a check run in which mode and are timed, whether the
//! agreed means and their standard errors end the check or call for another
//! round, the choice, and the interval to the next check. Pure and the
//! same on every rank: it changes only with calls every rank makes, and
//! with agreed values.
//!
//! A check is one to `MAX_ROUNDS` rounds, each `PROBES` batches (blocks of
//! `BLOCK` in each mode in turn, the first of each block untimed) and one
//! deciding call. The deciding call agrees, over ranks, on each mode's mean
//! time per timed batch (the slowest rank's) and on the standard error of
//! that mean (the largest over ranks), counting every round of the check so
//! far. While the choice could still change within `APART` standard errors
//! of their difference (see `unclear`), and rounds are left, the check goes
//! on with another round; otherwise it chooses from the means. At most
//! `MAX_ROUNDS * (PROBES + 1)` calls from a check's first batch to its
//! choice (68).

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::config::BatchMode;

/// Batches per round of a check, half in each mode.
pub(super) const PROBES: u32 = 16;
/// Rounds a check runs at most; the last one chooses from the means pooled
/// over all of them, however close.
pub(super) const MAX_ROUNDS: u32 = 4;
/// A first check goes on only while the modes could differ by more than
/// this fraction of the smaller mean: a smaller difference is not worth
/// more batches.
const MATTERS: f64 = 0.05;
/// Two means are told apart when they differ by more than this many
/// standard errors of their difference (sqrt(se_c^2 + se_o^2)).
const APART: f64 = 2.0;
/// Words of the deciding call's agreement: the negated mean and standard
/// error (ns) of each mode (collective, one-sided).
pub(super) const WORDS: usize = 4;
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
    /// Agree on the means and their spread; either choose and run in the
    /// chosen mode, or (means not told apart, rounds left) run in the mode
    /// in use and go on with another round of the check.
    Decide,
}

/// One variable's state (the same on every rank: it changes only with
/// calls every rank makes, and with agreed values).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct VarAuto {
    /// The mode chosen at the last check (None before the first).
    choice: Option<BatchMode>,
    /// Batches of the current round of a check begun; None between checks.
    probe: Option<u32>,
    /// The current check's round, from 1 (at most `MAX_ROUNDS`).
    round: u32,
    /// Batches left before the next check (unused while checking).
    left: u64,
    /// Batches from the last choice to the next check.
    interval: u64,
    /// This rank's timed batches in the current check (all its rounds), by
    /// mode (collective, one-sided): their total time (ns), their number,
    /// and (for the spread) their running mean and sum of squared
    /// deviations from it (Welford's update: no squares of large times that
    /// cancel).
    sums: [i64; 2],
    counts: [i64; 2],
    running: [f64; 2],
    squares: [f64; 2],
}

impl Default for VarAuto {
    /// A new variable starts with a check.
    fn default() -> VarAuto {
        VarAuto {
            choice: None,
            probe: Some(0),
            round: 1,
            left: 0,
            interval: 0,
            sums: [0, 0],
            counts: [0, 0],
            running: [0.0; 2],
            squares: [0.0; 2],
        }
    }
}

/// Batch `i` of a check: collective in even blocks, one-sided in odd ones;
/// timed unless it begins its block.
fn probe_step(i: u32) -> Step {
    let mode = if (i / BLOCK) % 2 == 0 { BatchMode::Collective } else { BatchMode::Onesided };
    Step::Probe { mode, timed: i % BLOCK != 0 }
}

/// At a re-check with `current` in use, by how much (ns) the other mode's
/// time beats `SWITCH_MARGIN` of the one in use (`c`, `o`: collective and
/// one-sided means): positive switches. The one place of the margin rule,
/// which `decide` applies and `unclear` measures the spread against.
fn switch_by(current: BatchMode, c: f64, o: f64) -> f64 {
    match current {
        BatchMode::Onesided => o * (1.0 - SWITCH_MARGIN) - c,
        _ => c * (1.0 - SWITCH_MARGIN) - o,
    }
}

/// The choice after a check whose slowest ranks took `collective_ns` and
/// `onesided_ns` per timed batch: the faster mode, keeping `current` unless the
/// other beats it by more than `SWITCH_MARGIN` (ties go to the collective
/// mode, DDStore's own). Pure, so every rank given the agreed sums chooses
/// alike.
pub(super) fn decide(current: Option<BatchMode>, collective_ns: i64, onesided_ns: i64) -> BatchMode {
    let (c, o) = (collective_ns as f64, onesided_ns as f64);
    match current {
        Some(BatchMode::Onesided) if switch_by(BatchMode::Onesided, c, o) > 0.0 => BatchMode::Collective,
        Some(BatchMode::Onesided) => BatchMode::Onesided,
        Some(_) if switch_by(BatchMode::Collective, c, o) > 0.0 => BatchMode::Onesided,
        Some(_) => BatchMode::Collective,
        None if o < c => BatchMode::Onesided,
        None => BatchMode::Collective,
    }
}

/// Whether a check whose agreed means are `means` (ns, collective and
/// one-sided) with standard errors `ses` should go on, given the mode in use
/// (`current`; None at the first check). The means are known to within
/// `APART` standard errors of their difference (`band`); the check goes on
/// while the choice `decide` would make could change within that band:
/// - the first check picks the faster mode: it goes on while the faster
///   one is not told apart and the band holds a difference that would
///   matter (more than `MATTERS` of the smaller mean). Means a few percent
///   apart with a wide band are not a small difference, only an unknown one.
/// - a re-check switches where the other mode is faster by more than
///   `SWITCH_MARGIN`: it goes on while the other mode's advantage is within
///   the band of that margin.
///
/// More rounds cost little where they are likely (modes close to each
/// other: a batch in the other mode costs about as much). Pure, as
/// `decide`. A mode never timed (`UNMEASURED`) beside a timed one is apart
/// unless the other's spread is as large: more rounds are then the way to
/// time it.
pub(super) fn unclear(current: Option<BatchMode>, means: [i64; 2], ses: [i64; 2]) -> bool {
    let (c, o) = (means[0] as f64, means[1] as f64);
    let (sc, so) = (ses[0] as f64, ses[1] as f64);
    let band = APART * (sc * sc + so * so).sqrt();
    match current {
        None => {
            let diff = (c - o).abs();
            diff <= band && diff + band > MATTERS * c.min(o)
        }
        Some(mode) => switch_by(mode, c, o).abs() <= band,
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
        *self = VarAuto { choice: self.choice, interval: self.interval, left: self.left, ..VarAuto::default() };
    }

    /// The mode this variable's batches run in now (collective before the
    /// first choice, as the first timed batch is).
    pub(super) fn current(&self) -> BatchMode {
        self.choice.unwrap_or(BatchMode::Collective)
    }

    /// What this rank contributes to the deciding call's agreement (which
    /// keeps the minimum of each word): its mean per mode and the standard
    /// error of that mean (ns, whole), all negated, so the agreement keeps
    /// the largest of each. The mean of a mode never timed is `UNMEASURED`;
    /// the standard error of fewer than 2 timed batches is 0 (none to tell).
    pub(super) fn payload(&self) -> [i64; WORDS] {
        let mean = |m: usize| if self.counts[m] == 0 { UNMEASURED } else { self.sums[m] / self.counts[m] };
        let se = |m: usize| {
            let n = self.counts[m] as f64;
            if self.counts[m] < 2 {
                return 0;
            }
            let se = (self.squares[m] / (n - 1.0) / n).sqrt().ceil();
            if se.is_finite() {
                (se as i64).min(UNMEASURED)
            } else {
                UNMEASURED
            }
        };
        [-mean(0), -mean(1), -se(0), -se(1)]
    }

    /// This rank's timed batches in `mode` so far in the current check.
    pub(super) fn timed(&self, mode: BatchMode) -> i64 {
        self.counts[(mode == BatchMode::Onesided) as usize]
    }

    /// A timed batch in `mode` took `ns` on this rank.
    pub(super) fn probed(&mut self, mode: BatchMode, ns: i64) {
        let m = (mode == BatchMode::Onesided) as usize;
        self.sums[m] = self.sums[m].saturating_add(ns);
        self.counts[m] += 1;
        let x = ns as f64;
        let d = x - self.running[m];
        self.running[m] += d / self.counts[m] as f64;
        self.squares[m] += d * (x - self.running[m]);
    }

    /// The deciding call agreed `payload` (the negated largest means and
    /// standard errors, see `payload`). With rounds left and the means not
    /// told apart (`unclear`): the check goes on with another round,
    /// keeping its sums, and None. Else chooses, and counts the batches to
    /// the next check: `recheck`, or twice the last interval while the
    /// choice holds (see MAX_BACKOFF).
    pub(super) fn decided(&mut self, payload: [i64; WORDS], recheck: u64) -> Option<BatchMode> {
        let (means, ses) = ([-payload[0], -payload[1]], [-payload[2], -payload[3]]);
        if self.round < MAX_ROUNDS && unclear(self.choice, means, ses) {
            self.round += 1;
            self.probe = Some(0);
            return None;
        }
        let mode = decide(self.choice, means[0], means[1]);
        let kept = self.choice == Some(mode);
        self.choice = Some(mode);
        self.probe = None;
        self.interval = if kept { (self.interval * 2).min(recheck * MAX_BACKOFF) } else { recheck };
        // 0: never again (`step` does not count down).
        self.left = if recheck == 0 { u64::MAX } else { self.interval };
        Some(mode)
    }
}

/// Testing aid `DDSTORE_TEST_BATCH_AUTO_SPREAD_S` (`spread` ns, 0: none):
/// what it adds to a timed batch of a mode `before` batches of which were
/// timed in this check (its rounds together), on the rank where it is set:
/// `2 * spread` to every other one (the 2nd, 4th, ...), and `spread / 10`
/// to each of the mode in use (`in_use`). Each mode's times then spread from
/// 0 to `2 * spread` about means `spread / 10` apart, whatever the real
/// times (far smaller): a difference that matters (10%) and is never told
/// apart (over 24 batches a mean's standard error is still spread / 5), so
/// every check runs `MAX_ROUNDS` rounds and then leaves the mode in use
/// (by 9%, past `SWITCH_MARGIN`).
pub(super) fn spread_aid(before: i64, in_use: bool, spread: i64) -> i64 {
    (before % 2) * 2 * spread + if in_use { spread / 10 } else { 0 }
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
                Step::Decide => chosen.extend(a.decided(a.payload(), recheck)),
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
        // One batch or batches all alike: no spread.
        assert_eq!(a.payload(), [-10, -12, 0, 0]);
        assert_eq!(decide(None, 10, 12), C);
        let mut b = VarAuto::default();
        b.probed(C, 7);
        assert_eq!(b.payload(), [-7, -UNMEASURED, 0, 0]);
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
            let payload = if fast == C { [-1, -100, 0, 0] } else { [-100, -1, 0, 0] };
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
                Step::Decide => chosen.extend(a.decided(a.payload(), 1)),
                Step::Run(_) => {}
            }
        }
        assert_eq!(chosen, [O, C, O, C]);
    }

    /// The agreed payload of means `c`, `o` and standard errors `sc`, `so`.
    fn agreed(c: i64, o: i64, sc: i64, so: i64) -> [i64; WORDS] {
        [-c, -o, -sc, -so]
    }

    /// Steps a variable to its next deciding call; returns the calls made
    /// (the deciding one included).
    fn to_decide(a: &mut VarAuto, recheck: u64) -> usize {
        let mut calls = 1;
        while a.step(recheck) != Step::Decide {
            calls += 1;
        }
        calls
    }

    #[test]
    fn a_first_check_goes_on_while_a_difference_that_matters_is_within_the_spread() {
        // 10% apart, standard errors of 10: 10 < 2 * sqrt(200) = 28.3.
        assert!(unclear(None, [100, 110], [10, 10]));
        assert!(unclear(None, [110, 100], [0, 10]));
        // 1% apart with a wide spread: not a small difference, an unknown one
        // (a cold first check at 1 MiB rows measured 356 and 352 us, standard
        // errors 141 and 101, where the collective mode was 2x faster).
        assert!(unclear(None, [356, 352], [141, 101]));
        let mut a = VarAuto::default();
        assert_eq!(to_decide(&mut a, 4), PROBES as usize + 1);
        assert_eq!(a.decided(agreed(100, 110, 10, 10), 4), None);
        // No choice yet, and another round of the same pattern, then a decision.
        assert_eq!((a.choice, a.current(), a.round), (None, C, 2));
        let steps: Vec<Step> = (0..PROBES + 1).map(|_| a.step(4)).collect();
        let (first, _) = run(PROBES as usize + 1, 4, |_| 1);
        assert_eq!(steps, first);
        // Clearly apart now: chosen.
        assert_eq!(a.decided(agreed(100, 110, 1, 1), 4), Some(C));
        assert_eq!(a.choice, Some(C));
    }

    #[test]
    fn no_round_more_where_the_means_are_apart_or_surely_close() {
        // Apart: 50 > 2 * sqrt(2) * 10.
        assert!(!unclear(None, [100, 150], [10, 10]));
        assert!(!unclear(None, [150, 100], [17, 0]));
        // Within the spread, but the whole band is within 5% of the smaller.
        assert!(!unclear(None, [100, 102], [1, 1]));
        assert!(!unclear(None, [0, 0], [0, 0]));
        // Different times with no spread (one timed batch each, say): chosen.
        assert!(!unclear(None, [100, 90], [0, 0]));
        for payload in [agreed(100, 150, 10, 10), agreed(100, 101, 1, 1)] {
            let mut a = VarAuto::default();
            to_decide(&mut a, 4);
            assert_eq!(a.decided(payload, 4), Some(C));
        }
        // A mode never timed loses at once beside a timed one of modest spread.
        let mut a = VarAuto::default();
        to_decide(&mut a, 4);
        assert_eq!(a.decided(agreed(UNMEASURED, 100, 0, 50), 4), Some(O));
    }

    #[test]
    fn a_recheck_goes_on_while_the_other_modes_advantage_is_near_the_margin() {
        // Collective in use: one-sided must beat 95% of it (95 here).
        // 5 from 95, band 5.7: another round.
        assert!(unclear(Some(C), [100, 90], [2, 2]));
        // Band 2.8: switch; 4 from 95: keep.
        assert!(!unclear(Some(C), [100, 90], [1, 1]));
        assert!(!unclear(Some(C), [100, 99], [1, 1]));
        // One-sided far slower, however wide its spread: kept without more rounds.
        assert!(!unclear(Some(C), [100, 200], [5, 40]));
        // A 2x slower mode with one wild batch: one more round.
        assert!(unclear(Some(C), [297, 522], [45, 123]));
        // One-sided in use: the same the other way.
        assert!(unclear(Some(O), [90, 100], [2, 2]));
        assert!(!unclear(Some(O), [99, 100], [1, 1]));
        assert!(!unclear(Some(O), [UNMEASURED, 100], [0, 0]));
        // A re-check with the modes surely equal keeps the mode in use.
        for current in [C, O] {
            let mut a = VarAuto { choice: Some(current), ..VarAuto::default() };
            to_decide(&mut a, 4);
            assert_eq!(a.decided(agreed(100, 100, 1, 1), 4), Some(current));
        }
    }

    #[test]
    fn a_check_stops_after_max_rounds_and_chooses_from_the_means() {
        for current in [None, Some(C), Some(O)] {
            let mut a = VarAuto { choice: current, ..VarAuto::default() };
            let mut calls = 0;
            let mut outcomes = Vec::new();
            loop {
                calls += to_decide(&mut a, 4);
                // Always unclear: one-sided 10% faster, spread 100.
                let d = a.decided(agreed(110, 100, 100, 100), 4);
                outcomes.push(d);
                if d.is_some() {
                    break;
                }
            }
            assert_eq!(calls, (MAX_ROUNDS * (PROBES + 1)) as usize);
            let mut want = vec![None; MAX_ROUNDS as usize - 1];
            want.push(Some(decide(current, 110, 100)));
            assert_eq!(outcomes, want, "{current:?}");
            // The next check starts again at round 1.
            assert_eq!(a.round, MAX_ROUNDS);
            while a.probe.is_none() {
                a.step(4);
            }
            assert_eq!(a.round, 1);
        }
    }

    #[test]
    fn the_means_and_spread_pool_every_round_of_a_check() {
        let mut a = VarAuto::default();
        // Round 1: collective 100, one-sided 300; round 2: 200 and 100.
        for round_ns in [[100, 300], [200, 100]] {
            loop {
                match a.step(4) {
                    Step::Probe { mode, timed: true } => a.probed(mode, round_ns[(mode == O) as usize]),
                    Step::Probe { .. } => {}
                    Step::Decide => break,
                    other => panic!("{other:?}"),
                }
            }
            if a.round == 1 {
                let p = a.payload();
                assert_eq!(p[..2], [-100, -300]);
                // Forced on: round 2 adds to the sums.
                assert_eq!(a.decided(agreed(100, 110, 50, 50), 4), None);
            }
        }
        assert_eq!((a.timed(C), a.timed(O)), (12, 12));
        // 6 at 100 and 6 at 200: mean 150, sample variance 50^2 * 12 / 11,
        // standard error sqrt(2500 * 12 / 11 / 12) = 15.08, rounded up.
        assert_eq!(a.payload(), [-150, -200, -16, -31]);
    }

    #[test]
    fn the_agreement_keeps_the_slowest_mean_and_the_largest_spread() {
        // Two ranks: rank 0 slow and steady in collective, rank 1 fast and noisy.
        let (mut r0, mut r1) = (VarAuto::default(), VarAuto::default());
        for k in 0..6 {
            r0.probed(C, 1000);
            r1.probed(C, if k % 2 == 0 { 100 } else { 500 });
            r0.probed(O, 900 + k);
            r1.probed(O, 950);
        }
        let (p0, p1) = (r0.payload(), r1.payload());
        // Collective on rank 1: mean 300, variance 200^2 * 6 / 5, se 89.4.
        assert_eq!(p1, [-300, -950, -90, 0]);
        // One-sided on rank 0: 900..905, mean 902, se 0.76.
        assert_eq!(p0, [-1000, -902, 0, -1]);
        let mut words = [0; WORDS];
        for (w, (a, b)) in words.iter_mut().zip(p0.iter().zip(p1.iter())) {
            *w = *a.min(b);
        }
        assert_eq!(words, agreed(1000, 950, 90, 1));
        // Every rank given the agreed words does the same: 1000 against 950
        // is 5.3% apart and within 2 * 90.0: another round on both.
        for r in [&mut r0, &mut r1] {
            r.probe = Some(PROBES);
            assert_eq!(r.decided(words, 4), None);
            assert_eq!(r.round, 2);
        }
        assert_eq!(r0.clone().decided(agreed(1000, 950, 20, 1), 4), Some(O));
    }

    #[test]
    fn the_spread_aid_makes_every_check_run_every_round_then_leave_the_mode_in_use() {
        let spread = 1_000_000_000_000; // 1000 s
        let mut a = VarAuto::default();
        let (mut calls, mut chosen) = (0, Vec::new());
        while chosen.len() < 3 {
            calls += 1;
            let cur = a.current();
            match a.step(2) {
                Step::Probe { mode, timed: true } => {
                    // Real times of a few microseconds, varying.
                    let ns = 3000 + (calls % 7) * 100 + spread_aid(a.timed(mode), mode == cur, spread);
                    a.probed(mode, ns);
                }
                Step::Probe { .. } | Step::Run(_) => {}
                Step::Decide => {
                    if let Some(m) = a.decided(a.payload(), 2) {
                        assert_eq!(a.round, MAX_ROUNDS);
                        chosen.push((calls, m));
                    }
                }
            }
        }
        let check = (MAX_ROUNDS * (PROBES + 1)) as i64;
        assert_eq!(chosen, [(check, O), (2 * check + 2, C), (3 * check + 4, O)]);
    }

    /// A small deterministic generator for the property below (xorshift).
    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn any_agreed_words_choose_within_max_rounds_checks_of_calls() {
        // Property over many pseudo-random sequences of agreed payloads
        // (means and spreads near and far, unmeasured modes, zeros) and
        // re-check intervals: from a check's first call to its choice at
        // most MAX_ROUNDS * PROBES + MAX_ROUNDS calls, and between checks
        // only runs in the chosen mode.
        let bound = (MAX_ROUNDS * PROBES + MAX_ROUNDS) as usize;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rounds_seen = [0usize; MAX_ROUNDS as usize + 1];
        let word = |seed: &mut u64| match next(seed) % 6 {
            0 => 0,
            1 => UNMEASURED,
            2 => 1000 + (next(seed) % 100) as i64,
            3 => (next(seed) % 1_000_000) as i64,
            4 => (next(seed) % 100) as i64,
            _ => (next(seed) % (UNMEASURED as u64)) as i64,
        };
        for _ in 0..2000 {
            let recheck = next(&mut seed) % 4;
            let mut a = VarAuto::default();
            let (mut since_check, mut checks) = (0usize, 0);
            for _ in 0..600 {
                let before = a.probe.is_some();
                match a.step(recheck) {
                    Step::Decide => {
                        since_check += 1;
                        let p = agreed(word(&mut seed), word(&mut seed), word(&mut seed), word(&mut seed));
                        let round = a.round;
                        if a.decided(p, recheck).is_some() {
                            assert!(since_check <= bound, "{since_check} calls");
                            assert_eq!(since_check, round as usize * (PROBES as usize + 1));
                            rounds_seen[round as usize] += 1;
                            since_check = 0;
                            checks += 1;
                        }
                    }
                    Step::Probe { .. } => {
                        assert!(before);
                        since_check += 1;
                    }
                    Step::Run(m) => {
                        assert_eq!(since_check, 0);
                        assert_eq!(Some(m), a.choice);
                    }
                }
                assert!(since_check <= bound);
            }
            assert!(checks >= 1);
        }
        // The sequences reached every number of rounds.
        assert!(rounds_seen[1..].iter().all(|&n| n > 0), "{rounds_seen:?}");
    }
}
