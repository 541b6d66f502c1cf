//! Method 1: one-sided reads over libfabric (RDMA where the network has it).
//!
//! * [`select`]: provider and domain choice (environment, options);
//!   [`nic_map`]: the NIC map that picks an interface by CPU affinity;
//! * [`domain`]: one fabric/domain/address vector per store and the serving
//!   endpoint with its [`progress`] thread, opened collectively by [`open`];
//!   [`pool`]: its reader endpoints;
//!   [`iface`]: the network interface, agreed across nodes (the rule of
//!   that agreement in [`iface_choice`]); [`info`]: the `fi_getinfo` queries;
//! * [`mr`]: shard registrations (remote read only) and destination
//!   registrations (only where the provider needs local descriptors);
//! * [`engine`]: the batched read engine used by `dds_get` and `dds_get_batch`.
//!
//! Addresses are exchanged over MPI when the store is created; each
//! variable's key and base address when it is registered (collective).

// domain, mr (tests/remote_access.rs), select and nic_map (fuzz/) are reachable
// from outside the crate; the others are not.
pub mod domain;
pub(crate) mod endpoint;
pub(crate) mod engine;
pub(crate) mod iface;
pub(crate) mod iface_choice;
pub(crate) mod info;
pub mod mr;
pub mod nic_map;
pub(crate) mod open;
pub(crate) mod pool;
pub(crate) mod progress;
pub mod select;

use std::sync::Arc;

use libfabric_sys::*;

pub use domain::{Fabric, FabricConfig};
pub use engine::Op;

use crate::error::{bail, Result};
use crate::gpu::direct::Iface;
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
    /// GPUDirect destinations (registered with their interface); boxed:
    /// most variables never have one.
    direct: Box<RecvRegs>,
    /// The interface the shard was registered with through
    /// `fi_mr_regattr` (None: plain `fi_mr_reg`, or that call's fallback).
    shard_iface: Option<Iface>,
}

impl FabricVar {
    /// Collective: registers `shard` for remote read and exchanges keys.
    /// With `iface` (FI_HMEM), through `fi_mr_regattr` with that interface;
    /// where the provider refuses it, with plain `fi_mr_reg` (local choice).
    pub fn new(fab: &Arc<Fabric>, shard: &Shard, comm: &Comm, iface: Option<Iface>) -> Result<FabricVar> {
        let (buf, len) = (shard.as_ptr(), shard.len());
        let mut shard_iface = None;
        let local = if len == 0 {
            Ok(None)
        } else {
            let hmem =
                iface.and_then(|i| Mr::register_as(fab, buf, len, mr::SHARD_ACCESS, fab.bind_ep(), Some((i, 0))).ok());
            shard_iface = hmem.as_ref().and(iface);
            match hmem {
                Some(m) => Ok(Some(m)),
                None => Mr::register_shard(fab, buf, len).map(Some),
            }
        };
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
            direct: Box::default(),
            shard_iface,
        })
    }

    /// Method 2 extra member: a variable held by the core ranks whose
    /// serving addresses, keys and bases come from a hand-shake record.
    pub fn joined(fab: &Arc<Fabric>, addrs: &[Vec<u8>], keys: Vec<u64>, bases: Vec<u64>) -> Result<FabricVar> {
        let peers = fab.insert_names(addrs)?;
        Ok(FabricVar {
            fab: fab.clone(),
            mr: None,
            keys,
            bases,
            peers,
            recv: RecvRegs::default(),
            direct: Box::default(),
            shard_iface: None,
        })
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
            let (mr, miss) = self.recv.lookup(&self.fab, dst as usize, dst_len, None)?;
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

    /// GPUDirect: the registration of [dst, dst + len) as memory of
    /// `hmem`'s interface and device (pinned, cached or new), or None when
    /// reads need no descriptor (`desc` false). An error is the provider's
    /// refusal: the caller falls back for this buffer.
    pub fn direct_mr(
        &self,
        dst: *mut u8,
        len: usize,
        hmem: (Iface, i32),
        desc: bool,
        counters: &Counters,
    ) -> Result<Option<Arc<Mr>>> {
        if !desc {
            return Ok(None);
        }
        let (mr, miss) = self.direct.lookup(&self.fab, dst as usize, len, Some(hmem))?;
        if miss {
            counters.mr_miss.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(Some(mr))
    }

    /// Runs `ops` into a GPUDirect destination whose registration is `mr`.
    pub fn read_direct(&self, ops: &[Op], mr: Option<&Arc<Mr>>, counters: &Counters, profile: bool) -> Result<()> {
        let desc = mr.map_or(std::ptr::null_mut(), |m| m.desc());
        self.fab.read(ops, desc, counters, profile)
    }

    /// `dds_register_recv`: registers the range when the provider needs
    /// local descriptors (otherwise there is nothing to do); with `hmem`
    /// (a GPUDirect buffer) as memory of that interface and device.
    pub fn register_recv(&self, start: usize, len: usize, hmem: Option<(Iface, i32)>) -> Result<()> {
        match hmem {
            Some(h) => self.direct.pin(&self.fab, start, len, Some(h)),
            None if self.fab.need_local => self.recv.pin(&self.fab, start, len, None),
            None => Ok(()),
        }
    }

    pub fn unregister_recv(&self, start: usize) {
        self.recv.unpin(start);
        self.direct.unpin(start);
    }

    /// The fabric's name; `+hmem:<iface>` when the shard was registered
    /// through `fi_mr_regattr` with that interface.
    pub fn describe(&self) -> String {
        match self.shard_iface {
            Some(i) => format!("{}:{}", self.fab.describe(), i.name()),
            None => self.fab.describe(),
        }
    }

    /// Local: closes the registrations.
    pub fn free(&mut self) {
        self.recv.clear();
        self.direct.clear();
        self.mr = None;
    }
}
