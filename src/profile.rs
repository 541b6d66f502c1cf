//! Per-variable read counters. Counts are always kept (one relaxed atomic add
//! each); times only when profiling is on, so a store without
//! `DDSTORE_PROFILE` never reads the clock on its read path.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

#[derive(Default)]
pub struct Counters {
    pub calls: AtomicU64,
    pub rows: AtomicU64,
    pub rows_local: AtomicU64,
    pub lock_wait_ns: AtomicU64,
    pub mr_ns: AtomicU64,
    pub mr_miss: AtomicU64,
    pub read_ns: AtomicU64,
    pub cq_ns: AtomicU64,
    /// Method-0 collective batches: bytes of requests (counts and indices)
    /// this rank sent to, and received from, other ranks.
    pub req_bytes_sent: AtomicU64,
    pub req_bytes_recv: AtomicU64,
    /// Method 0, auto batch mode: the `DDS_BATCH_*` code chosen at the
    /// last check (the store fills a snapshot's value for other modes),
    /// the checks made, and the batches that ran one-sided.
    pub batch_mode: AtomicU64,
    pub batch_checks: AtomicU64,
    pub batch_calls_onesided: AtomicU64,
}

/// A plain copy of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub calls: u64,
    pub rows: u64,
    pub bytes: u64,
    pub rows_local: u64,
    pub rows_remote: u64,
    pub lock_wait_ns: u64,
    pub mr_ns: u64,
    pub mr_miss: u64,
    pub read_ns: u64,
    pub cq_ns: u64,
    pub req_bytes_sent: u64,
    pub req_bytes_recv: u64,
    pub batch_mode: u64,
    pub batch_checks: u64,
    pub batch_calls_onesided: u64,
}

impl Counters {
    /// Records one read call of `rows` rows and `bytes` bytes, `local` of which
    /// rows were copied without the transport.
    /// (Bytes and remote rows are derived in `snapshot`, so a read costs
    /// two or three relaxed atomic adds.)
    #[inline]
    pub fn read_call(&self, rows: u64, local: u64) {
        self.calls.fetch_add(1, Relaxed);
        self.rows.fetch_add(rows, Relaxed);
        if local != 0 {
            self.rows_local.fetch_add(local, Relaxed);
        }
    }

    /// Records the request traffic of one collective batch.
    #[inline]
    pub fn requests(&self, sent: u64, recv: u64) {
        self.req_bytes_sent.fetch_add(sent, Relaxed);
        self.req_bytes_recv.fetch_add(recv, Relaxed);
    }

    /// The auto batch mode chose mode `code` at a check.
    pub fn batch_checked(&self, code: u64) {
        self.batch_mode.store(code, Relaxed);
        self.batch_checks.fetch_add(1, Relaxed);
    }

    /// The auto batch mode ran a batch one-sided.
    #[inline]
    pub fn batch_onesided(&self) {
        self.batch_calls_onesided.fetch_add(1, Relaxed);
    }

    /// The counters of a variable whose rows are `row_bytes` long.
    pub fn snapshot(&self, row_bytes: u64) -> Snapshot {
        Snapshot::from((self, row_bytes))
    }
}

/// The one conversion from the live counters (of a variable whose rows are
/// `row_bytes` long) to a snapshot. The plain counters are listed once, to
/// take `c` apart (no `..`) and to build the literal: a counter added to one
/// struct and not the other fails the build (as `dds_counters`'s
/// conversion in capi/types.rs does).
impl From<(&Counters, u64)> for Snapshot {
    fn from((c, row_bytes): (&Counters, u64)) -> Snapshot {
        macro_rules! load {
            ($($f:ident),*) => {{
                let Counters { rows, rows_local, $($f),* } = c;
                // Local first: `read_call` adds rows before local rows, so
                // the difference is never negative.
                let rows_local = rows_local.load(Relaxed);
                let rows = rows.load(Relaxed);
                Snapshot {
                    rows,
                    bytes: rows.wrapping_mul(row_bytes),
                    rows_local,
                    rows_remote: rows.saturating_sub(rows_local),
                    $($f: $f.load(Relaxed)),*
                }
            }};
        }
        load!(
            calls,
            lock_wait_ns,
            mr_ns,
            mr_miss,
            read_ns,
            cq_ns,
            req_bytes_sent,
            req_bytes_recv,
            batch_mode,
            batch_checks,
            batch_calls_onesided
        )
    }
}

/// A stopwatch that only runs when profiling is on.
pub struct Timer(Option<Instant>);

impl Timer {
    #[inline]
    pub fn start(on: bool) -> Timer {
        Timer(on.then(Instant::now))
    }

    /// Adds the time since `start` (or the previous `lap`) to `into` and restarts.
    #[inline]
    pub fn lap(&mut self, into: &AtomicU64) {
        if let Some(t) = self.0 {
            let now = Instant::now();
            into.fetch_add((now - t).as_nanos() as u64, Relaxed);
            self.0 = Some(now);
        }
    }
}
