//! Owner lookup cost: 1M random global rows over 100,000 simulated ranks with
//! uneven shards (the scale of the largest DDStore users). Run with
//! `cargo bench --bench layout`; prints ns per row (target: under 100).

use std::hint::black_box;
use std::time::Instant;

use ddstore::layout::Layout;

fn main() {
    const RANKS: usize = 100_000;
    const ROWS: usize = 1_000_000;
    let mut x: u64 = 0x2545F4914F6CDD1D;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Shards of 0..2000 rows, some empty, as after an uneven split.
    let counts: Vec<i64> = (0..RANKS).map(|_| (next() % 2000) as i64).collect();
    let layout = Layout::from_counts(&counts).unwrap();
    let rows: Vec<i64> = (0..ROWS).map(|_| (next() % layout.total() as u64) as i64).collect();

    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        let mut acc = 0usize;
        for &g in &rows {
            let (owner, local) = layout.owner(black_box(g));
            acc = acc.wrapping_add(owner).wrapping_add(local as usize);
        }
        black_box(acc);
        best = best.min(t.elapsed().as_nanos() as f64 / ROWS as f64);
    }
    println!("owner lookup, {RANKS} ranks, {ROWS} random rows: {best:.1} ns per row (best of 7)");
}
