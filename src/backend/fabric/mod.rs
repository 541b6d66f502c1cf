//! Method 1: one-sided reads over libfabric (RDMA where the network has it).
//!
//! * [`select`]: provider and domain choice (environment, options, NIC map);
//! * [`domain`]: one fabric/domain/address vector per store, the serving
//!   endpoint with its [`progress`] thread, and a pool of reader endpoints;
//! * [`mr`]: shard registrations (remote read only) and destination
//!   registrations (only where the provider needs local descriptors);
//! * [`engine`]: the batched read engine used by `dds_get` and `dds_get_batch`.
//!
//! Addresses are exchanged over MPI when the store is created; each
//! variable's key and base address when it is registered (collective).

pub mod domain;
pub mod endpoint;
pub mod engine;
pub mod mr;
pub mod progress;
pub mod select;

use std::sync::Arc;

use libfabric_sys::*;

pub use domain::{Fabric, FabricConfig};
pub use engine::Op;

use crate::error::{bail, Result};
use crate::mpi::{agree, Comm};
use crate::profile::{Counters, Timer};
use crate::shard::Shard;
use mr::{Mr, RecvRegs};

/// Turns a libfabric return code into an error naming the call.
pub(crate) fn fi_err(ret: isize, what: &str) -> Result<()> {
    if ret < 0 {
        bail!(Fabric, "{what} failed: {} ({ret})", errstr(ret as i32));
    }
    Ok(())
}

/// A variable's method-1 state: its shard registration and every rank's key
/// and base address.
pub struct FabricVar {
    fab: Arc<Fabric>,
    mr: Option<Mr>,
    keys: Vec<u64>,
    bases: Vec<u64>,
    /// Each owner's serving endpoint (the store's peers, or for a joined
    /// method-2 variable, the core ranks of its record).
    peers: Vec<fi_addr_t>,
    recv: RecvRegs,
}

impl FabricVar {
    /// Collective: registers `shard` for remote read and exchanges keys.
    pub fn new(fab: &Arc<Fabric>, shard: &Shard, comm: &Comm) -> Result<FabricVar> {
        let local =
            if shard.len() == 0 { Ok(None) } else { Mr::register_shard(fab, shard.as_ptr(), shard.len()).map(Some) };
        let mr = agree(comm, local)?;
        let key = mr.as_ref().map_or(0, |m| m.key());
        let base = Mr::remote_base(fab, shard.as_ptr());
        let all = comm.allgather(&[key, base])?;
        Ok(FabricVar {
            fab: fab.clone(),
            mr,
            keys: all.iter().map(|a| a[0]).collect(),
            bases: all.iter().map(|a| a[1]).collect(),
            peers: fab.peers.clone(),
            recv: RecvRegs::default(),
        })
    }

    /// Method 2 extra member: a variable held by the core ranks whose
    /// serving addresses, keys and bases come from a hand-shake record.
    pub fn joined(fab: &Arc<Fabric>, addrs: &[Vec<u8>], keys: Vec<u64>, bases: Vec<u64>) -> Result<FabricVar> {
        let peers = fab.insert_names(addrs)?;
        Ok(FabricVar { fab: fab.clone(), mr: None, keys, bases, peers, recv: RecvRegs::default() })
    }

    /// Key and remote base of `rank`'s shard (for the method-2 record).
    pub fn key_base(&self, rank: usize) -> (u64, u64) {
        (self.keys[rank], self.bases[rank])
    }

    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fab
    }

    /// A read of `len` bytes at byte `offset` of `owner`'s shard into `dst`.
    pub fn op(&self, owner: usize, offset: u64, dst: *mut u8, len: usize) -> Op {
        Op {
            owner: owner as u32,
            peer: self.peers[owner],
            raddr: self.bases[owner] + offset,
            key: self.keys[owner],
            dst,
            len,
        }
    }

    /// True when a read of `owner`'s bytes at `offset` into `dst` continues `op`.
    pub fn extends(&self, op: &Op, owner: usize, offset: u64, dst: *mut u8) -> bool {
        op.owner as usize == owner
            && op.raddr + op.len as u64 == self.bases[owner] + offset
            && op.dst.wrapping_add(op.len) == dst
    }

    /// Runs `ops`, whose destinations all lie in [dst, dst + dst_len).
    pub fn read(&self, ops: &[Op], dst: *mut u8, dst_len: usize, counters: &Counters, profile: bool) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut t = Timer::start(profile);
        let held = if self.fab.need_local {
            let (mr, miss) = self.recv.lookup(&self.fab, dst as usize, dst_len)?;
            if miss {
                counters.mr_miss.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Some(mr)
        } else {
            None
        };
        t.lap(&counters.mr_ns);
        let desc = held.as_ref().map_or(std::ptr::null_mut(), |m| m.desc());
        self.fab.read(ops, desc, counters, profile)
    }

    /// `dds_register_recv`: registers the range when the provider needs
    /// local descriptors (otherwise there is nothing to do).
    pub fn register_recv(&self, start: usize, len: usize) -> Result<()> {
        if self.fab.need_local {
            self.recv.pin(&self.fab, start, len)?;
        }
        Ok(())
    }

    pub fn unregister_recv(&self, start: usize) {
        self.recv.unpin(start);
    }

    pub fn describe(&self) -> String {
        self.fab.describe()
    }

    /// Local: closes the registrations.
    pub fn free(&mut self) {
        self.recv.clear();
        self.mr = None;
    }
}
