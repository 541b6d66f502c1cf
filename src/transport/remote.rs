//! Method 2's view of a variable from outside its job: the descriptor the
//! core publishes (how to reach each rank's shard) and the reader that an
//! extra member opens to read through one. The store only passes a
//! descriptor between a transport and the hand-shake record; `handshake`
//! writes its fields to the record file and reads them back.

use std::sync::Arc;

use super::fabric::{Fabric, FabricConfig, FabricVar};
use super::network::needs_fabric;
use super::Transport;
use crate::error::Result;

/// How to reach one variable's shards over the fabric from another job.
#[derive(Clone, Default)]
pub struct Remote {
    pub provider: String,
    pub domain: String,
    pub addr_format: u32,
    /// One per core rank, in rank order.
    pub ranks: Vec<RemoteRank>,
}

/// One rank's endpoint address and its shard's registration (no Debug:
/// the key and base give read access to the core's memory).
#[derive(Clone, Default)]
pub struct RemoteRank {
    pub addr: Vec<u8>,
    pub key: u64,
    pub base: u64,
}

impl Transport {
    /// The descriptor of this variable's `n_ranks` shards (method 2 core).
    pub fn remote(&self, n_ranks: usize) -> Result<Remote> {
        let Transport::Fabric(f) = self else { return needs_fabric("a method-2 record") };
        let fab = f.fabric();
        let (provider, domain, addr_format) = fab.identity();
        let ranks = (0..n_ranks)
            .map(|r| {
                let (key, base) = f.key_base(r);
                RemoteRank { addr: fab.address(r).to_vec(), key, base }
            })
            .collect();
        Ok(Remote { provider, domain, addr_format, ranks })
    }
}

/// A method-2 extra member's fabric: opened once, then checked against
/// every variable it joins.
#[derive(Clone)]
pub struct Reader(Arc<Fabric>);

impl Reader {
    /// Opens a fabric to read with (no communicator: an extra is alone).
    pub fn open(cfg: &FabricConfig) -> Result<Reader> {
        Fabric::open_reader(cfg).map(|f| Reader(Arc::new(f)))
    }

    pub fn provider(&self) -> &str {
        self.0.provider()
    }

    /// Why this reader cannot read a variable that `provider` serves with
    /// addresses of `addr_format`, if it cannot.
    pub fn can_read(&self, provider: &str, addr_format: u32) -> std::result::Result<(), String> {
        self.0.can_read(provider, addr_format)
    }

    /// The transport that reads the shards `remote` describes.
    pub fn join(&self, remote: &Remote) -> Result<Transport> {
        let addrs: Vec<Vec<u8>> = remote.ranks.iter().map(|r| r.addr.clone()).collect();
        let keys = remote.ranks.iter().map(|r| r.key).collect();
        let bases = remote.ranks.iter().map(|r| r.base).collect();
        FabricVar::joined(&self.0, &addrs, keys, bases).map(Transport::Fabric)
    }
}
