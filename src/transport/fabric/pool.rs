//! The pool of reader endpoints of a store's fabric: each reading thread
//! takes one, with its operation contexts, and gives it back. The pool
//! starts empty: endpoints open at the first reads that need them.

use libfabric_sys::*;

use super::domain::Fabric;
use super::endpoint::Endpoint;
use crate::error::{Error, Result};

/// Reader endpoints per store when the provider allows several.
pub(super) const MAX_READERS: usize = 4;
/// Reads in flight per reader endpoint (bounded by the provider's queue).
pub(super) const MAX_SLOTS: usize = 256;
/// A reader endpoint with its operation contexts. Slot i's context is
/// `ctx[i]`; a completion's context pointer gives back the slot.
pub struct Reader {
    pub ep: Endpoint,
    pub ctx: Vec<fi_context2>,
    pub free: Vec<u32>,
    /// Owner rank and length of the read in each busy slot.
    pub slot_owner: Vec<u32>,
    pub slot_len: Vec<usize>,
}

impl Reader {
    pub fn slot_of(&self, ctx: *mut std::os::raw::c_void) -> Option<usize> {
        let base = self.ctx.as_ptr() as usize;
        let off = (ctx as usize).checked_sub(base)?;
        let i = off / std::mem::size_of::<fi_context2>();
        (off % std::mem::size_of::<fi_context2>() == 0 && i < self.ctx.len()).then_some(i)
    }
}

pub(super) struct Pool {
    pub(super) idle: Vec<Reader>,
    pub(super) count: usize,
}
impl Fabric {
    pub(super) fn new_reader(&self) -> Result<Reader> {
        // SAFETY: open objects of this domain.
        let ep = unsafe { Endpoint::open(self.domain, self.info, self.av, FI_WAIT_NONE, self.slots * 2) }
            .map_err(|e| Error::new(e.kind, format!("{}: opening a reader endpoint: {}", self.describe(), e.msg)))?;
        Ok(Reader {
            ep,
            ctx: vec![fi_context2::default(); self.slots],
            free: (0..self.slots as u32).rev().collect(),
            slot_owner: vec![0; self.slots],
            slot_len: vec![0; self.slots],
        })
    }

    /// Takes a reader endpoint for the calling thread: an idle one, a new one
    /// while the pool is below its size, or waits for one. A failed open is
    /// this read's error; the next read tries again.
    pub fn acquire(&self) -> Result<Reader> {
        let mut pool = self.pool.lock();
        loop {
            if let Some(r) = pool.idle.pop() {
                return Ok(r);
            }
            if pool.count < self.max_readers {
                pool.count += 1;
                drop(pool);
                let r = self.new_reader();
                if r.is_err() {
                    self.pool.lock().count -= 1;
                    self.pool_cv.notify_one();
                }
                return r;
            }
            self.pool_cv.wait(&mut pool);
        }
    }

    /// Returns a reader; `healthy` false closes it (reads may still be in
    /// flight on it: closing the endpoint cancels them).
    pub fn release(&self, r: Reader, healthy: bool) {
        let mut pool = self.pool.lock();
        if healthy {
            pool.idle.push(r);
        } else {
            pool.count -= 1;
            drop(pool);
            drop(r);
        }
        self.pool_cv.notify_one();
    }
}
