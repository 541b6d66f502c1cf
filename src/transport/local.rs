//! Node-local reads: rows owned by a rank of the same node are copied straight
//! out of the owner's shard memory, with no MPI or fabric traffic.
//!
//! Design: each shard is a shared-memory segment (`Shard::shared`: a file in
//! `DDSTORE_SHM_DIR`, /dev/shm by default). At registration (collective) the
//! ranks of a node exchange their segments' identities (paths) over the node
//! communicator, map each other's segments read-only, meet at a barrier, and
//! then every owner unlinks its segment's name. From then on the segments have no name (nothing can leak if a
//! process dies) and each lives until the last mapping goes. The shard is
//! still stored once: the owner's window (method 0) or fabric registration
//! (method 1) covers the same pages, and peers only map them.
//!
//! We chose POSIX segments over `MPI_Win_allocate_shared` because the memory
//! is then the library's own, independent of MPI: it is mapped read-only by
//! the peers (a reader cannot scribble on another rank's shard), it stays
//! valid after the `MPI_Finalize` hook frees the windows (so `dds_destroy`
//! after finalisation simply unmaps it), the same code serves every method,
//! and the memory is identical to what the fabric registers.
//!
//! The node map (which store rank runs on which node) comes from
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` of the store's communicator
//! (the group's, with `width`) and an all-gather. A requester copies the
//! rows of its node's owners directly, so they never enter a method-0
//! all-to-all (owners only answer the requests they receive).
//!
//! Whether the direct path is on is agreed by all ranks: for the store
//! (`DDSTORE_NODE_LOCAL`, off if any rank turns it off) and then per
//! variable (off if any rank could not create or map a segment, e.g. a full
//! /dev/shm). Off, only the rank's own rows are copied directly.

use std::sync::Arc;

use crate::copy::copy_rows;
use crate::error::Result;
use crate::mpi::{agree, Comm};
use crate::shard::segment::{Mapping, SegmentId};
use crate::shard::Shard;

const NONE: u32 = u32::MAX;

/// What a rank tells the others of its node about its shard.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Offer {
    /// Where its segment is (empty without one).
    id: SegmentId,
    len: i64,
    /// It has a segment, or needs none (no rows).
    ready: i64,
    /// Bytes of its segment whose pages are not allocated yet.
    sparse: i64,
}

/// Which store ranks share this rank's node.
pub struct NodeMap {
    /// Node-local reads are on for this store (agreed by all ranks).
    pub on: bool,
    me: usize,
    /// Store rank -> index among this node's ranks, or NONE. Empty when off.
    slot: Vec<u32>,
    /// Ranks on this node (this one included).
    n_local: usize,
    /// The node's communicator (store ranks of this node, in store-rank order).
    node: Option<Comm>,
}

impl NodeMap {
    /// Collective over the store's communicator. `want` is this rank's
    /// `DDSTORE_NODE_LOCAL`; the direct path is on only if every rank wants it.
    pub fn new(comm: &Comm, want: bool) -> Result<NodeMap> {
        NodeMap::with_width(comm, want, 0)
    }

    /// As `new`; `width` > 0 (`DDSTORE_TEST_NODE_LOCAL_WIDTH`, a testing aid) cuts
    /// each node into runs of `width` ranks that act as separate nodes.
    pub fn with_width(comm: &Comm, want: bool, width: u64) -> Result<NodeMap> {
        let mut flag = [want as i64];
        comm.allreduce_min(&mut flag)?;
        let me = comm.rank();
        if flag[0] == 0 {
            return Ok(NodeMap { on: false, me, slot: Vec::new(), n_local: 1, node: None });
        }
        let node = comm.split_shared()?;
        let node = if width > 0 && (width as usize) < node.size() { node.split_groups(width as usize)? } else { node };
        let mut leader = [me as i64];
        node.allreduce_min(&mut leader)?;
        let node_of: Vec<u32> = comm.allgather(&(leader[0] as u32))?;
        let mine = node_of[me];
        let mut slot = vec![NONE; node_of.len()];
        let mut n = 0u32;
        for (r, &id) in node_of.iter().enumerate() {
            if id == mine {
                slot[r] = n;
                n += 1;
            }
        }
        debug_assert_eq!(slot[me] as usize, node.rank());
        Ok(NodeMap { on: true, me, slot, n_local: n as usize, node: Some(node) })
    }

    /// The finalisation hook: frees the node's communicator (MPI would
    /// otherwise keep it past `MPI_Finalize`).
    pub fn release_before_finalize(&self) {
        if let Some(c) = &self.node {
            c.release_before_finalize();
        }
    }

    /// Ranks of the store on this node (1 when the direct path is off).
    pub fn local_ranks(&self) -> usize {
        self.n_local
    }
}

/// A variable's view of the shards of its node: where each same-node
/// owner's rows are mapped in this process.
pub struct Near {
    node: Arc<NodeMap>,
    /// The direct path serves same-node owners for this variable (agreed).
    on: bool,
    /// This rank's own shard.
    own: *const u8,
    /// Node slot -> base of that rank's shard as mapped here.
    bases: Vec<*const u8>,
    /// Read-only mappings of the peers' segments (unmapped on drop).
    _maps: Vec<Mapping>,
}

// SAFETY: the pointers refer to mappings this value keeps alive (or to the
// variable's own shard, which outlives it); readers only read through them.
unsafe impl Send for Near {}
unsafe impl Sync for Near {}

impl Near {
    /// Collective over the store's communicator `comm` (every rank of the
    /// store, in registration). Maps the node's segments and unlinks this
    /// rank's. Falls back to "own rows only" for the variable when any rank
    /// lacks a segment or fails to map one.
    pub fn share(node: &Arc<NodeMap>, comm: &Comm, shard: &mut Shard) -> Result<Near> {
        let own = shard.as_ptr() as *const u8;
        let mut near = Near { node: node.clone(), on: false, own, bases: Vec::new(), _maps: Vec::new() };
        let Some(ncomm) = node.node.as_ref().filter(|_| node.on) else {
            shard.unlink();
            return Ok(near);
        };
        let id = shard.shm_id();
        let ready = shard.len() == 0 || id.is_some();
        let sparse = if id.is_some() && !shard.is_reserved() { shard.len() as i64 } else { 0 };
        let offer = Offer { id: id.unwrap_or_default(), len: shard.len() as i64, ready: ready as i64, sparse };
        let all = ncomm.allgather(&offer);
        let mut ok = ready;
        if let Ok(all) = &all {
            // The node's zero-filled segments get their pages as rows are
            // written: they must fit together (each rank sees the same sum
            // and about the same free space in its segment directory).
            let sparse: i64 = all.iter().map(|m| m.sparse).sum();
            if sparse > 0 && shard.room().is_some_and(|a| a < sparse as u128) {
                ok = false;
            }
            near.bases = vec![std::ptr::null(); all.len()];
            for (s, m) in all.iter().enumerate() {
                if s == ncomm.rank() {
                    near.bases[s] = own;
                } else if m.ready == 0 {
                    ok = false;
                } else if m.len > 0 && ok {
                    match Mapping::open(&m.id, m.len as usize) {
                        Some(map) => {
                            near.bases[s] = map.as_ptr();
                            near._maps.push(map);
                        }
                        None => ok = false,
                    }
                }
            }
        }
        // Every peer has opened (or given up on) this rank's segment.
        let barrier = ncomm.barrier();
        shard.unlink();
        all?;
        barrier?;
        let mut flag = [ok as i64];
        comm.allreduce_min(&mut flag)?;
        if flag[0] == 1 {
            near.on = true;
        } else {
            near.bases.clear();
            near._maps.clear();
            // A zero-filled segment (not written yet) moves to the heap, where
            // a full /dev/shm cannot hurt it later; agreed, since the
            // registration goes on with collectives.
            let swap =
                if shard.is_shared() && !shard.is_reserved() { Shard::zeroed(shard.len()).map(Some) } else { Ok(None) };
            if let Some(heap) = agree(comm, swap)? {
                *shard = heap;
                near.own = shard.as_ptr();
            }
        }
        Ok(near)
    }

    /// Where `owner`'s shard can be copied from directly: this rank's own
    /// shard, or a same-node peer's mapped segment; `None` when its rows
    /// must go through the transport.
    #[inline]
    pub fn src(&self, owner: usize) -> Option<*const u8> {
        if owner == self.node.me {
            return Some(self.own);
        }
        if !self.on {
            return None;
        }
        match self.node.slot[owner] {
            NONE => None,
            s => Some(self.bases[s as usize]),
        }
    }

    /// Copies `len` bytes at byte `offset` of `owner`'s shard into `dst`
    /// when this rank maps that shard (its own, or a same-node peer's);
    /// false when the bytes must travel by the transport. Every direct copy
    /// of a read (single, one-sided or collective batch, ragged) is this one.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes, and `offset + len` lies inside the
    /// owner's shard.
    #[inline]
    pub unsafe fn copy(&self, owner: usize, offset: u64, dst: *mut u8, len: usize) -> bool {
        match self.src(owner) {
            Some(base) => {
                // SAFETY: the caller's contract.
                unsafe { copy_rows(dst, base.add(offset as usize), len) };
                true
            }
            None => false,
        }
    }

    /// True when the direct path serves this variable's same-node owners.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Ranks whose shards this rank copies directly (itself included).
    pub fn direct_ranks(&self) -> usize {
        if self.on {
            self.node.local_ranks()
        } else {
            1
        }
    }
}

impl Near {
    /// A variable this process holds no shard of and no node-local view
    /// on (a method-2 extra member's joined variable): every row goes
    /// through the transport. (Added for method 2; see store/split.rs.)
    pub fn remote_only() -> Near {
        let node = NodeMap { on: false, me: usize::MAX, slot: Vec::new(), n_local: 0, node: None };
        Near { node: Arc::new(node), on: false, own: std::ptr::null(), bases: Vec::new(), _maps: Vec::new() }
    }
}
