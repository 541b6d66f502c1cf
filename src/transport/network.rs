//! The store's side of the transports: which transport a store's variables
//! get (the one place that chooses), the store-wide state behind it (a
//! fabric for methods 1 and 2, nothing more for method 0), and the few
//! fabric facts the store's policies ask about (GPUDirect capabilities,
//! NIC map syntax, provider names of method-2 records).

use std::sync::Arc;

use super::fabric::{nic_map, select, Fabric, FabricConfig, FabricVar};
use super::mpi_rma::RmaVar;
use super::Transport;
use crate::error::{bail, Result};
use crate::gpu::direct::{Caps, Iface};
use crate::mpi::Comm;
use crate::shard::Shard;

/// What a store reaches its peers' shards through: MPI windows (method 0)
/// or one fabric, with its domain and endpoints (methods 1 and 2).
#[derive(Default)]
pub struct Network {
    fabric: Option<Arc<Fabric>>,
}

impl Network {
    /// Collective over `comm`: opens the fabric that `fabric` configures
    /// (methods 1 and 2); None: MPI windows, nothing to open.
    pub fn open(comm: &Comm, fabric: Option<&FabricConfig>) -> Result<Network> {
        let fabric = match fabric {
            Some(cfg) => Some(Arc::new(Fabric::open(comm, cfg)?)),
            None => None,
        };
        Ok(Network { fabric })
    }

    /// Collective: the transport of a new variable whose shard is `shard`
    /// (registered with `iface` when the fabric reads device memory).
    pub fn transport_for(&self, shard: &Shard, comm: &Comm, iface: Option<Iface>) -> Result<Transport> {
        match &self.fabric {
            Some(f) => FabricVar::new(f, shard, comm, iface).map(Transport::Fabric),
            None => RmaVar::new(shard, comm).map(Transport::Rma),
        }
    }

    /// The provider's GPUDirect capabilities; None without a fabric.
    pub fn caps(&self) -> Option<Caps> {
        self.fabric.as_ref().map(|f| f.caps)
    }

    /// The provider's answer when it refused device memory for want of
    /// the interface in its libfabric build (FI_ENOSYS); None otherwise.
    pub fn device_refusal(&self) -> Option<String> {
        self.fabric.as_ref().and_then(|f| f.device_mr_refused.get().cloned())
    }

    /// The fabric as `dds_info` shows it; None without one.
    pub fn describe(&self) -> Option<String> {
        self.fabric.as_ref().map(|f| f.describe())
    }

    /// True when peers read this rank's memory with no call of its own
    /// (the fabric): freeing it must wait until they stopped.
    pub fn peers_read_unannounced(&self) -> bool {
        self.fabric.is_some()
    }
}

/// Checks the syntax of a NIC map (`source` names where it came from).
pub fn check_nic_map(map: &str, source: &str) -> std::result::Result<(), String> {
    nic_map::parse_nic_map_from(map, source).map(|_| ())
}

/// A provider name as records and the fabric compare it.
pub fn normalize_provider(name: &str) -> String {
    select::normalize_provider(name)
}

/// Whether a record's provider `prov` is the normalised `want`.
pub fn provider_matches(want: &str, prov: &str) -> bool {
    select::provider_matches(want, prov)
}

/// A refusal for what only a fabric transport does.
pub(super) fn needs_fabric<T>(what: &str) -> Result<T> {
    bail!(Internal, "{what} needs a fabric transport")
}
