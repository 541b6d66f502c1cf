//! The batched read engine (methods 1 and 2).
//!
//! A call posts every read before it waits. Rows longer than the piece size
//! (`DDSTORE_MAX_READ_BYTES`, lowered to the endpoint's maximum message size)
//! are read in pieces. When the transmit queue is full (`-FI_EAGAIN`) or all
//! of the reader's operation slots are in use, completions are reaped before
//! posting more. Every posted read is waited for, even after an error, so no
//! completion leaks into the next call. Waiting is bounded by
//! `DDSTORE_READ_TIMEOUT_S` without progress: then the reader endpoint is
//! closed (cancelling what is still in flight) and the call fails with
//! DDS_ERR_TIMEOUT naming the peers that did not answer.
//!
//! Waiting polls the reader's CQ, yielding the CPU between empty polls for
//! up to 1 ms without a completion, then sleeping with a growing back-off
//! (up to 1 ms), never spinning.

use std::os::raw::c_void;
use std::time::{Duration, Instant};

use libfabric_sys::*;

use super::domain::Fabric;
use super::pool::Reader;
use crate::error::{err, Error, Result};
use crate::profile::{Counters, Timer};

/// How long a waiting reader yields before it starts to sleep.
const YIELD_US: u64 = 1000;

/// One contiguous remote read (before splitting into pieces).
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub owner: u32,
    /// The owner's serving endpoint in the address vector.
    pub peer: fi_addr_t,
    /// Remote address (the owner's base + offset) and key.
    pub raddr: u64,
    pub key: u64,
    pub dst: *mut u8,
    pub len: usize,
}

/// The pieces `(offset, length)` of a read of `len` bytes, each at most `max`.
pub fn pieces(len: usize, max: u64) -> impl Iterator<Item = (usize, usize)> {
    let max = max.clamp(1, usize::MAX as u64) as usize;
    (0..len).step_by(max).map(move |off| (off, max.min(len - off)))
}

/// State of one call on one reader endpoint.
struct Call<'a> {
    fab: &'a Fabric,
    r: &'a mut Reader,
    inflight: usize,
    first_err: Option<Error>,
    /// Set when the endpoint must not be reused (CQ failure, timeout).
    broken: bool,
    last_progress: Instant,
}

impl Call<'_> {
    fn record(&mut self, e: Error) {
        self.first_err.get_or_insert(e);
    }

    /// Reads available completions; returns how many reads finished.
    fn reap(&mut self) -> usize {
        let mut entries = [fi_cq_entry::default(); 32];
        // SAFETY: the reader's CQ is open and used by this thread only.
        let n = unsafe { ddsfi_cq_read(self.r.ep.cq, entries.as_mut_ptr().cast(), entries.len()) };
        if n > 0 {
            for e in &entries[..n as usize] {
                self.finish(e.op_context);
            }
            self.last_progress = Instant::now();
            return n as usize;
        }
        if n == -(FI_EAGAIN as isize) {
            return 0;
        }
        if n == -(FI_EAVAIL as isize) {
            let mut e = fi_cq_err_entry::default();
            // SAFETY: as above.
            let got = unsafe { ddsfi_cq_readerr(self.r.ep.cq, &mut e, 0) };
            if got < 0 {
                return 0;
            }
            let mut buf = [0 as std::os::raw::c_char; 256];
            // SAFETY: buf holds its length; the returned pointer is NUL-terminated.
            let prov = unsafe {
                let p = ddsfi_cq_strerror(self.r.ep.cq, e.prov_errno, e.err_data, buf.as_mut_ptr(), buf.len());
                if p.is_null() {
                    String::new()
                } else {
                    std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            let (owner, len) = match self.r.slot_of(e.op_context) {
                Some(s) => (self.r.slot_owner[s] as i64, self.r.slot_len[s]),
                None => (-1, 0),
            };
            self.finish(e.op_context);
            self.last_progress = Instant::now();
            self.record(err!(
                Fabric,
                "{}-byte read from rank {owner} failed on {}: {} (provider: {prov})",
                len,
                self.fab.describe(),
                errstr(e.err)
            ));
            return 1;
        }
        // The CQ itself failed: nothing more can be learnt from it.
        self.broken = true;
        self.record(err!(Fabric, "fi_cq_read failed on {}: {}", self.fab.describe(), errstr(n as i32)));
        0
    }

    fn broken_err(&self) -> Error {
        self.first_err.clone().unwrap_or_else(|| err!(Fabric, "reader endpoint on {} failed", self.fab.describe()))
    }

    fn finish(&mut self, ctx: *mut c_void) {
        if let Some(s) = self.r.slot_of(ctx) {
            self.r.free.push(s as u32);
            self.inflight = self.inflight.saturating_sub(1);
        }
    }

    /// One wait step when nothing completed: back off, check the deadline.
    fn idle(&mut self, spins: &mut u32) -> Result<()> {
        // Yield for the first YIELD_US without a completion: a sleep costs
        // at least the kernel's timer slack (~50 us), more than a read over
        // loopback tcp takes. Only then back off, so a dead peer does not
        // keep a core busy.
        if self.last_progress.elapsed() < Duration::from_micros(YIELD_US) {
            std::thread::yield_now();
        } else {
            *spins += 1;
            let us = 1u64 << (*spins / 16).min(10);
            std::thread::sleep(Duration::from_micros(us));
        }
        if let Some(limit) = self.fab.read_timeout {
            if self.last_progress.elapsed() > limit {
                let mut owners: Vec<u32> = (0..self.r.ctx.len())
                    .filter(|s| !self.r.free.contains(&(*s as u32)))
                    .map(|s| self.r.slot_owner[s])
                    .collect();
                let pending = owners.len();
                owners.sort();
                owners.dedup();
                self.broken = true;
                return Err(err!(
                    Timeout,
                    "{pending} read(s) from rank(s) {owners:?} not completed within {:.1} s on {} \
                     ({}; DDSTORE_READ_TIMEOUT_S)",
                    limit.as_secs_f64(),
                    self.fab.describe(),
                    self.fab.stall_hint()
                ));
            }
        }
        Ok(())
    }

    /// Waits until a slot is free (or the CQ/timeout fails).
    fn free_slot(&mut self) -> Result<u32> {
        let mut spins = 0;
        loop {
            if let Some(s) = self.r.free.pop() {
                return Ok(s);
            }
            if self.broken {
                return Err(self.broken_err());
            }
            if self.reap() == 0 {
                self.idle(&mut spins)?;
            }
        }
    }

    fn post(&mut self, op: &Op, off: usize, n: usize, desc: *mut c_void) -> Result<()> {
        let slot = self.free_slot()?;
        let s = slot as usize;
        self.r.slot_owner[s] = op.owner;
        self.r.slot_len[s] = n;
        let ctx: *mut c_void = (&mut self.r.ctx[s] as *mut fi_context2).cast();
        let peer = op.peer;
        let mut spins = 0;
        loop {
            // SAFETY: dst + off covers n bytes of the caller's buffer, which
            // stays valid until this call has waited for the read.
            let ret = unsafe {
                ddsfi_read(self.r.ep.ep, op.dst.add(off).cast(), n, desc, peer, op.raddr + off as u64, op.key, ctx)
            };
            if ret == 0 {
                self.inflight += 1;
                return Ok(());
            }
            if ret != -(FI_EAGAIN as isize) {
                self.r.free.push(slot);
                self.record(err!(
                    Fabric,
                    "fi_read of {n} bytes from rank {} on {} failed: {}",
                    op.owner,
                    self.fab.describe(),
                    errstr(ret as i32)
                ));
                return Ok(());
            }
            if self.reap() == 0 {
                if self.broken {
                    self.r.free.push(slot);
                    return Err(self.broken_err());
                }
                if let Err(e) = self.idle(&mut spins) {
                    self.r.free.push(slot);
                    return Err(e);
                }
            }
        }
    }

    fn drain(&mut self) -> Result<()> {
        let mut spins = 0;
        while self.inflight > 0 && !self.broken {
            if self.reap() == 0 {
                self.idle(&mut spins)?;
            } else {
                spins = 0;
            }
        }
        Ok(())
    }
}

impl Fabric {
    /// Reads every op (each into its own destination), waiting for all.
    /// `desc` is the local descriptor covering every destination (or null).
    pub fn read(&self, ops: &[Op], desc: *mut c_void, counters: &Counters, profile: bool) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut t = Timer::start(profile);
        let mut reader = self.acquire()?;
        t.lap(&counters.lock_wait_ns);
        let mut call = Call {
            fab: self,
            r: &mut reader,
            inflight: 0,
            first_err: None,
            broken: false,
            last_progress: Instant::now(),
        };
        let mut outcome: Result<()> = Ok(());
        'post: for op in ops {
            for (off, n) in pieces(op.len, self.max_piece) {
                if call.first_err.is_some() {
                    break 'post;
                }
                if let Err(e) = call.post(op, off, n, desc) {
                    outcome = Err(e);
                    break 'post;
                }
            }
        }
        t.lap(&counters.read_ns);
        if outcome.is_ok() {
            outcome = call.drain();
        }
        t.lap(&counters.cq_ns);
        let healthy = outcome.is_ok() && !call.broken && call.inflight == 0;
        let first = call.first_err.take();
        self.release(reader, healthy);
        outcome?;
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn splits_rows_into_pieces() {
        assert_eq!(pieces(12004, 4096).collect::<Vec<_>>(), vec![(0, 4096), (4096, 4096), (8192, 3812)]);
        assert_eq!(pieces(4096, 4096).collect::<Vec<_>>(), vec![(0, 4096)]);
        assert_eq!(pieces(10, 1 << 30).collect::<Vec<_>>(), vec![(0, 10)]);
        assert_eq!(pieces(0, 7).count(), 0);
        assert_eq!(pieces(3, 0).collect::<Vec<_>>(), vec![(0, 1), (1, 1), (2, 1)]);
        let total: usize = pieces((5u64 << 30) as usize, 1 << 30).map(|p| p.1).sum();
        assert_eq!(total, 5usize << 30);
    }
}
