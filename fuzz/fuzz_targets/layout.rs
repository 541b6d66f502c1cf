//! Row ownership and round planning against a direct reference: for any
//! shard counts, `owner(g)` names the rank whose shard holds g, and the rounds
//! of a batched read cover every request exactly once.
#![no_main]

use ddstore::layout::{n_rounds, round_slice, rows_per_round, Layout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    // Small counts (0..=7 rows per rank) make empty ranks and boundaries common.
    let counts: Vec<i64> = data[2..].iter().take(64).map(|b| (b % 8) as i64).collect();
    let layout = Layout::from_counts(&counts).expect("non-negative counts");
    let mut g = 0i64;
    for (rank, &c) in counts.iter().enumerate() {
        assert_eq!(layout.shard(rank), (g, g + c));
        for local in 0..c {
            assert!(layout.check(g).is_ok());
            assert_eq!(layout.owner(g), (rank, local));
            g += 1;
        }
    }
    assert_eq!(layout.total(), g);
    assert!(layout.check(g).is_err() && layout.check(-1).is_err());

    // Every requester's list is covered by the rounds, in order, once.
    let row_bytes = 1 + data[0] as u64 * 97;
    let cap = 1 + data[1] as u64 * 131;
    let per = rows_per_round(row_bytes, cap, counts.len());
    assert!(per >= 1);
    let rounds = n_rounds(&counts, per);
    for &c in &counts {
        let mut next = 0;
        for k in 0..rounds {
            let (lo, hi) = round_slice(c, per, k);
            assert!(lo == next && hi >= lo && hi - lo <= per);
            next = hi;
        }
        assert_eq!(next, c);
    }
});
