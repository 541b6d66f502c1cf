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

    /// The counters of a variable whose rows are `row_bytes` long.
    pub fn snapshot(&self, row_bytes: u64) -> Snapshot {
        // Local first: `read_call` adds rows before local rows, so the
        // difference is never negative.
        let rows_local = self.rows_local.load(Relaxed);
        let rows = self.rows.load(Relaxed);
        Snapshot {
            calls: self.calls.load(Relaxed),
            rows,
            bytes: rows.wrapping_mul(row_bytes),
            rows_local,
            rows_remote: rows.saturating_sub(rows_local),
            lock_wait_ns: self.lock_wait_ns.load(Relaxed),
            mr_ns: self.mr_ns.load(Relaxed),
            mr_miss: self.mr_miss.load(Relaxed),
            read_ns: self.read_ns.load(Relaxed),
            cq_ns: self.cq_ns.load(Relaxed),
            req_bytes_sent: self.req_bytes_sent.load(Relaxed),
            req_bytes_recv: self.req_bytes_recv.load(Relaxed),
        }
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
