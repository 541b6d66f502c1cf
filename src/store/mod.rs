//! The store: one communicator (or group of it), its registry of variables,
//! and dispatch of every operation to the layout and the transports.
//!
//! Collective operations first agree on whether every rank's arguments are
//! valid (`agree`), so a bad argument on one rank fails the call on all ranks
//! with the same status instead of leaving the others waiting.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::config::Config;
use crate::error::{bail, Result};
use crate::mpi::Comm;
use crate::transport::{Network, NodeMap, RmaProgress, Scratch};
use crate::var::Variable;

mod auto_check;
mod batch;
mod batch_mode;
mod blob;
mod collective;
mod create;
mod direct;
mod gpu;
mod gpu_route;
mod lifecycle;
mod process;
mod ragged;
mod ragged_batch;
mod reads;
mod registry;
mod request;
mod request_threads;
mod settings;
mod snapshot;
mod snapshot_chunks;
mod snapshot_file;
mod snapshot_format;
mod snapshot_load;
mod snapshot_read;
mod split;
mod split_extra;

pub use blob::BLOB_MAX_BYTES;
pub use collective::Collective;
use collective::{enter, NO_PAYLOAD};
use create::{check_nic_map, fabric_config};
pub use gpu::GpuSettings;
pub use process::{
    before_mpi_finalize, gpu_devices, mpi_finalize_intercepted, pointer_kind, BatchMode, DevicePath, GpuMode, MemKind,
    Snapshot, Stream,
};
pub use ragged::RaggedSpec;
use reads::{batch_rows, copy_or_queue, Tally};
use registry::validate_shape;
pub use request_threads::{Request, Requests};
pub use settings::Settings;
use split::Split;

/// Longest accepted variable name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Mpi,
    Fabric,
    Split,
}

impl Method {
    pub fn from_code(m: i32) -> Result<Method> {
        match m {
            0 => Ok(Method::Mpi),
            1 => Ok(Method::Fabric),
            2 => Ok(Method::Split),
            _ => bail!(InvalidArgument, "method {m} is not 0 (MPI), 1 (libfabric) or 2 (split jobs)"),
        }
    }

    pub fn code(self) -> i32 {
        self as i32
    }
}

/// Store options after the C layer has decoded them.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub method: i32,
    pub role: i32,
    pub width: i32,
    pub n_core: i32,
    pub handshake_dir: Option<String>,
    pub fabric_provider: Option<String>,
    pub fabric_iface: Option<String>,
    pub nic_map: Option<String>,
    /// `dds_options.gpu` (-1: `DDSTORE_GPU`).
    pub gpu: i32,
    /// `dds_options.gpu_staging` (-1: `DDSTORE_GPU_STAGING`).
    pub gpu_staging: i32,
    /// `dds_options.batch_mode` (None: `DDSTORE_BATCH_MODE`).
    pub batch_mode: Option<BatchMode>,
}

/// Shape of a variable to register.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub local_rows: i64,
    pub row_elems: i64,
    pub item_size: i32,
}

/// What `dds_info` reports.
pub struct VarInfo {
    pub total_rows: i64,
    pub local_rows: i64,
    pub row_elems: i64,
    pub item_size: i32,
    pub row_bytes: u64,
    pub method: Method,
    pub n_ranks: usize,
    pub transport: String,
    /// Same-node owners' rows are copied directly.
    pub node_local: bool,
    /// Ranks whose rows are copied directly (this one included).
    pub node_ranks: usize,
    /// How rows reach device destinations.
    pub device_path: crate::gpu::Path,
    /// Ragged variables: (total samples, local samples).
    pub samples: Option<(i64, i64)>,
}

pub struct Store {
    comm: Comm,
    method: Method,
    cfg: Config,
    vars: RwLock<BTreeMap<String, Variable>>,
    epoch_open: Mutex<bool>,
    /// Method-0 collective batches run one at a time (they are collective)
    /// and reuse this staging memory.
    exchange: Mutex<Scratch>,
    /// Method 0: how `dds_get_batch` runs (the same on every rank).
    batch_mode: BatchMode,
    /// Method 0, auto batch mode: each variable's choice (batch_mode.rs).
    auto: auto_check::Auto,
    /// Held around MPI calls from read paths when MPI is not THREAD_MULTIPLE.
    mpi_lock: Option<Mutex<()>>,
    /// How peers' shards are reached: MPI windows (method 0) or the
    /// store's fabric, domain and endpoints (methods 1 and 2).
    network: Network,
    /// Which store ranks share this node (node-local reads).
    node: Arc<NodeMap>,
    /// Method 2: role, hand-shake directory and state (split.rs).
    split: Option<Split>,
    /// Device-memory handling (gpu.rs).
    gpu: GpuSettings,
    /// Non-blocking batches in flight and their threads (store/request.rs).
    requests: Requests,
    /// Method 0, collective batch mode with MPI_THREAD_MULTIPLE: the
    /// communicator non-blocking batches exchange on, apart from the
    /// caller's collectives.
    async_comm: Option<Comm>,
    /// Method 0: the thread that lets MPI serve peers' passive-target reads
    /// while this rank's caller makes no MPI call (transport::RmaProgress).
    mpi_progress: Mutex<Option<RmaProgress>>,
}

/// A cheap fingerprint to check that ranks name the same variable.
pub(crate) fn fingerprint(name: &str) -> i64 {
    crate::hash::fnv1a(name.as_bytes()) as i64
}
