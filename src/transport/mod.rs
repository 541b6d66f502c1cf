//! Transports that move rows between ranks. Nothing above this module knows
//! about MPI windows or fabric endpoints: the store hands a variable's
//! [`Transport`] reads (one range, or a batch built with [`Reads`]) and asks
//! it to sync, register destinations, describe itself and free.
//!
//! * [`mpi_rma`]: method 0, MPI windows and pipelined passive-target gets;
//! * [`exchange`]: method 0, the collective (two-sided) batch exchange;
//!   [`ranges`] the same for ragged samples;
//! * [`fabric`]: methods 1 and 2, libfabric;
//! * [`local`]: node-local reads (same-node shards mapped read-only);
//! * [`rma_progress`]: the optional thread that turns MPI's progress engine;
//! * [`waiting`]: how a read waits, by the thread it runs on.

// `fabric` is reachable from outside for the fuzz targets and
// tests/remote_access.rs (lib.rs); the rest only inside the crate. Layers
// above name only this module, `network`, `collective`, `remote` and
// `waiting` (src/layering.rs checks it), never a concrete transport.
mod collective;
pub(crate) mod exchange;
pub mod fabric;
pub(crate) mod local;
pub(crate) mod mpi_rma;
pub(crate) mod network;
pub(crate) mod ranges;
mod remote;
pub(crate) mod rma_progress;
pub(crate) mod waiting;

pub use exchange::{Scratch, Source};
pub use fabric::FabricConfig;
pub use local::{Near, NodeMap};
pub use network::Network;
pub use ranges::Range;
pub use remote::{Reader, Remote, RemoteRank};
pub use rma_progress::RmaProgress;

use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::Result;
use crate::gpu::direct::{Caps, Iface};
use crate::profile::{Counters, Timer};
use fabric::mr::Mr;
use fabric::{FabricVar, Op};
use mpi_rma::{GetOp, RmaVar};

/// How remote rows of a variable are reached.
pub enum Transport {
    Rma(RmaVar),
    Fabric(FabricVar),
}

/// What a read needs from the store besides the variable's transport.
#[derive(Clone, Copy)]
pub struct ReadCtx<'a> {
    /// The variable's counters (the fabric engine times its own phases).
    pub counters: &'a Counters,
    pub profile: bool,
    /// Held around MPI calls when MPI is not MPI_THREAD_MULTIPLE.
    pub serial: Option<&'a Mutex<()>>,
}

impl Transport {
    /// Reads `len` bytes at byte `offset` of `owner`'s shard into `dst`.
    /// MPI's read time is lapped into `read_ns` on `t`; the fabric engine
    /// times its own phases (lock, mr, read, cq).
    pub fn read_range(
        &self,
        owner: usize,
        offset: u64,
        dst: *mut u8,
        len: usize,
        cx: &ReadCtx,
        t: &mut Timer,
    ) -> Result<()> {
        match self {
            Transport::Rma(r) => {
                let _serial = cx.serial.map(|m| m.lock());
                r.read(owner, offset, dst, len)?;
                t.lap(&cx.counters.read_ns);
                Ok(())
            }
            Transport::Fabric(f) => f.read(&[f.op(owner, offset, dst, len)], dst, len, cx.counters, cx.profile),
        }
    }

    /// An empty batch of reads for this transport (see [`Reads`]) of up to
    /// `rows` rows: the fabric reserves an operation per row up front.
    pub fn reads(&self, rows: usize) -> Reads<'_> {
        match self {
            Transport::Rma(r) => Reads::Rma(r, Vec::new()),
            Transport::Fabric(f) => Reads::Fabric(f, Vec::with_capacity(rows)),
        }
    }

    /// Makes local stores visible to remote readers (epoch boundaries).
    /// Fabric reads go to the shard memory itself: the store's agreement
    /// orders them, so there is nothing to do.
    pub fn sync(&self) -> Result<()> {
        match self {
            Transport::Rma(r) => r.sync(),
            Transport::Fabric(_) => Ok(()),
        }
    }

    /// `dds_register_recv` of `[start, start + len)`: with `hmem` as
    /// GPUDirect memory of that interface and device. MPI registers nothing.
    pub fn register_recv(&self, start: usize, len: usize, hmem: Option<(Iface, i32)>) -> Result<()> {
        match self {
            Transport::Fabric(f) => f.register_recv(start, len, hmem),
            Transport::Rma(_) => Ok(()),
        }
    }

    /// Drops the registration that starts at `start`, if any.
    pub fn unregister_recv(&self, start: usize) {
        if let Transport::Fabric(f) = self {
            f.unregister_recv(start);
        }
    }

    /// What `dds_info` reports as the transport.
    pub fn describe(&self) -> String {
        match self {
            Transport::Rma(_) => "mpi-rma".to_string(),
            Transport::Fabric(f) => f.describe(),
        }
    }

    /// The capabilities device buffers are routed by (less FI_HMEM once
    /// the provider refused device memory); None for MPI, which has none.
    pub fn caps(&self) -> Option<Caps> {
        match self {
            Transport::Fabric(f) => Some(f.fabric().device_caps()),
            Transport::Rma(_) => None,
        }
    }

    /// GPUDirect: the registration of `[dst, dst + len)` as memory of
    /// `hmem`'s interface and device, or None when reads need no
    /// descriptor (`desc` false). An error is the provider's refusal, which
    /// the caller falls back from; only the fabric reads device memory.
    pub fn direct_mr(
        &self,
        dst: *mut u8,
        len: usize,
        hmem: (Iface, i32),
        desc: bool,
        counters: &Counters,
    ) -> Result<Option<Arc<Mr>>> {
        match self {
            Transport::Fabric(f) => f.direct_mr(dst, len, hmem, desc, counters),
            Transport::Rma(_) => network::needs_fabric("a GPUDirect read"),
        }
    }

    /// Releases the transport: collective for MPI (the window), local for
    /// the fabric (registrations).
    pub fn free(&mut self) -> Result<()> {
        match self {
            Transport::Rma(r) => r.free(),
            Transport::Fabric(f) => {
                f.free();
                Ok(())
            }
        }
    }
}

/// The remote reads of one one-sided batch, in the transport's own form:
/// reads adjacent both at the owner and in the destination (sorted runs)
/// are merged as they are pushed; `run` posts them all before waiting.
pub enum Reads<'a> {
    Rma(&'a RmaVar, Vec<GetOp>),
    Fabric(&'a FabricVar, Vec<Op>),
}

impl Reads<'_> {
    /// Adds a read of `len` bytes at byte `offset` of `owner`'s shard into `dst`.
    #[inline]
    pub fn push(&mut self, owner: usize, offset: u64, dst: *mut u8, len: usize) {
        match self {
            Reads::Rma(_, ops) => {
                if !ops.last_mut().is_some_and(|last| last.extend(owner, offset, dst, len)) {
                    ops.push(GetOp { owner, offset, dst, len });
                }
            }
            Reads::Fabric(f, ops) => match ops.last_mut() {
                Some(last) if f.extends(last, owner, offset, dst) => last.len += len,
                _ => ops.push(f.op(owner, offset, dst, len)),
            },
        }
    }

    /// Runs the reads, whose destinations all lie in `[dst, dst + dst_len)`
    /// (the fabric registers that range when its provider needs local
    /// descriptors). MPI's time is lapped into `read_ns` on `t`, empty or
    /// not; the fabric engine times its own phases.
    pub fn run(&self, dst: *mut u8, dst_len: usize, cx: &ReadCtx, t: &mut Timer) -> Result<()> {
        match self {
            Reads::Rma(r, ops) => {
                if !ops.is_empty() {
                    let _serial = cx.serial.map(|m| m.lock());
                    r.read_batch(ops, waiting::on_request_thread())?;
                }
                t.lap(&cx.counters.read_ns);
                Ok(())
            }
            Reads::Fabric(f, ops) => f.read(ops, dst, dst_len, cx.counters, cx.profile),
        }
    }

    /// Runs the reads into a GPUDirect destination whose registration is
    /// `mr` (None: the provider needs no descriptor). Only the fabric reads
    /// into memory the CPU may not address.
    pub fn run_direct(&self, mr: Option<&Arc<Mr>>, cx: &ReadCtx) -> Result<()> {
        match self {
            Reads::Fabric(f, ops) => f.read_direct(ops, mr, cx.counters, cx.profile),
            Reads::Rma(..) => network::needs_fabric("a GPUDirect read"),
        }
    }
}
