//! Row ownership: which rank holds global row g, and where in its shard.
//!
//! A variable is the concatenation of the ranks' shards in rank order. We keep
//! inclusive prefix sums of the shard row counts; the owner of row g is the
//! first rank whose prefix sum exceeds g (a binary search, O(log ranks), since
//! stores run on up to ~100,000 ranks). Ranks with zero rows never own a row.

use crate::error::{bail, Result};

#[derive(Clone, Debug)]
pub struct Layout {
    /// `prefix[r]` = rows held by ranks 0..=r.
    prefix: Vec<i64>,
}

impl Layout {
    /// Builds the layout from each rank's row count (checked: non-negative, no overflow).
    pub fn from_counts(counts: &[i64]) -> Result<Layout> {
        let mut prefix = Vec::with_capacity(counts.len());
        let mut total: i64 = 0;
        for (rank, &n) in counts.iter().enumerate() {
            if n < 0 {
                bail!(InvalidArgument, "rank {rank} has a negative row count ({n})");
            }
            total = match total.checked_add(n) {
                Some(t) => t,
                None => bail!(InvalidArgument, "total row count overflows 64 bits at rank {rank}"),
            };
            prefix.push(total);
        }
        Ok(Layout { prefix })
    }

    /// Number of ranks holding a shard (zero-row ranks included).
    pub fn n_ranks(&self) -> usize {
        self.prefix.len()
    }

    /// Rows of the whole variable.
    pub fn total(&self) -> i64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Global rows [start, end) held by `rank`.
    pub fn shard(&self, rank: usize) -> (i64, i64) {
        let start = if rank == 0 { 0 } else { self.prefix[rank - 1] };
        (start, self.prefix[rank])
    }

    /// Owner of global row `g` and its row index inside the owner's shard.
    /// The caller has checked `0 <= g < total()`.
    #[inline]
    pub fn owner(&self, g: i64) -> (usize, i64) {
        let rank = self.prefix.partition_point(|&p| p <= g);
        let start = if rank == 0 { 0 } else { self.prefix[rank - 1] };
        (rank, g - start)
    }

    /// Checks that `g` is a row of the variable.
    #[inline]
    pub fn check(&self, g: i64) -> Result<()> {
        if g < 0 || g >= self.total() {
            bail!(OutOfRange, "global row {g} is out of range [0, {})", self.total());
        }
        Ok(())
    }
}

/// Rows per round of a method-0 batched read: as many rows as fit in `cap`
/// bytes, at least one, and few enough that per-peer counts and displacements
/// (C ints in MPI) cannot overflow with `n_ranks` peers.
pub fn rows_per_round(row_bytes: u64, cap: u64, n_ranks: usize) -> i64 {
    let fit = cap.checked_div(row_bytes).unwrap_or(cap);
    let int_limit = (i32::MAX as u64) / (n_ranks.max(1) as u64);
    fit.clamp(1, int_limit.max(1)) as i64
}

/// Number of rounds so that every requester's list is covered `per` rows at a time.
pub fn n_rounds(counts: &[i64], per: i64) -> i64 {
    let most = counts.iter().copied().max().unwrap_or(0);
    (most + per - 1) / per
}

/// The slice [lo, hi) of a requester's list that travels in round `k`.
#[inline]
pub fn round_slice(count: i64, per: i64, k: i64) -> (i64, i64) {
    let lo = (k * per).min(count);
    (lo, ((k + 1) * per).min(count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_and_local_row() {
        let l = Layout::from_counts(&[3, 0, 2, 5]).unwrap();
        assert_eq!(l.total(), 10);
        let owners: Vec<_> = (0..10).map(|g| l.owner(g)).collect();
        assert_eq!(owners, vec![(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4)]);
        assert_eq!(l.shard(1), (3, 3));
        assert_eq!(l.shard(3), (5, 10));
    }

    #[test]
    fn empty_ranks_first_and_last_never_own() {
        let l = Layout::from_counts(&[0, 0, 4, 0]).unwrap();
        assert_eq!(l.owner(0), (2, 0));
        assert_eq!(l.owner(3), (2, 3));
        assert!(l.check(4).is_err());
        let none = Layout::from_counts(&[0, 0]).unwrap();
        assert!(none.check(0).is_err());
    }

    #[test]
    fn rejects_bad_counts_and_indices() {
        assert!(Layout::from_counts(&[1, -1]).unwrap_err().msg.contains("rank 1"));
        assert!(Layout::from_counts(&[i64::MAX, 1]).unwrap_err().msg.contains("overflow"));
        let l = Layout::from_counts(&[2, 2]).unwrap();
        let e = l.check(-1).unwrap_err();
        assert!(e.msg.contains("-1") && e.msg.contains("[0, 4)"));
        assert!(l.check(4).is_err());
        assert!(l.check(3).is_ok());
    }

    #[test]
    fn matches_linear_scan_on_random_layouts() {
        // A small deterministic generator keeps the test free of dependencies.
        let mut x: u64 = 0x9E3779B97F4A7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..50 {
            let n = (next() % 40 + 1) as usize;
            let counts: Vec<i64> = (0..n).map(|_| (next() % 4) as i64).collect();
            let l = Layout::from_counts(&counts).unwrap();
            let mut g = 0;
            for (r, &c) in counts.iter().enumerate() {
                for i in 0..c {
                    assert_eq!(l.owner(g), (r, i));
                    g += 1;
                }
            }
        }
    }

    #[test]
    fn round_planning() {
        assert_eq!(rows_per_round(1000, 2_097_152, 4), 2097);
        assert_eq!(rows_per_round(4 << 20, 2_097_152, 4), 1); // a row larger than the cap
        assert_eq!(rows_per_round(1, u64::MAX, 2), (i32::MAX / 2) as i64);
        assert_eq!(n_rounds(&[0, 0], 5), 0);
        assert_eq!(n_rounds(&[3, 11, 0], 5), 3);
        assert_eq!(round_slice(11, 5, 2), (10, 11));
        assert_eq!(round_slice(3, 5, 1), (3, 3));
    }
}
