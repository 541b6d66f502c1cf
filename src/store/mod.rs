//! The store: one communicator (or group of it), its registry of variables,
//! and dispatch of every operation to the layout and the transports.
//!
//! Collective operations first agree on whether every rank's arguments are
//! valid (`agree`), so a bad argument on one rank fails the call on all ranks
//! with the same status instead of leaving the others waiting.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::config::{Config, MpiProgress};
use crate::error::{bail, err, Error, Result};
use crate::layout::Layout;
use crate::mpi::{self, agree, Comm};
use crate::profile::Timer;
use crate::shard::Shard;
use crate::transport::exchange::{self, Scratch, Source};
use crate::transport::fabric::{Fabric, FabricConfig, FabricVar};
use crate::transport::local::{Near, NodeMap};
use crate::transport::mpi_rma::RmaVar;
use crate::transport::rma_progress::RmaProgress;
use crate::transport::{ReadCtx, Reads, Transport};
use crate::var::{Parts, Variable};

mod batch_mode;
mod collective;
pub use collective::Collective;
use collective::{enter, NO_PAYLOAD};
mod split;
use split::Split;
mod gpu;
pub use gpu::GpuSettings;
mod direct;
mod ragged;
pub use ragged::RaggedSpec;
mod request;
pub use request::{Request, Requests};
mod settings;
pub use settings::Settings;
mod process;
mod snapshot;
mod snapshot_format;
mod snapshot_read;
pub use process::{
    before_mpi_finalize, gpu_devices, mpi_finalize_intercepted, pointer_kind, BatchMode, DevicePath, GpuMode, MemKind,
    Snapshot, Stream,
};

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
    auto: batch_mode::Auto,
    /// Held around MPI calls from read paths when MPI is not THREAD_MULTIPLE.
    mpi_lock: Option<Mutex<()>>,
    /// Method 1: the store's fabric, domain and endpoints.
    fabric: Option<Arc<Fabric>>,
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
    /// while this rank's caller makes no MPI call (transport::rma_progress).
    mpi_progress: Mutex<Option<RmaProgress>>,
}

/// A cheap fingerprint to check that ranks name the same variable.
pub(crate) fn fingerprint(name: &str) -> i64 {
    crate::hash::fnv1a(name.as_bytes()) as i64
}

impl Store {
    /// Collective over the communicator whose Fortran handle is `comm_f`.
    /// `opts` carries the caller's (possibly invalid) options; `extra` says
    /// the caller's raw fields ask for a method-2 extra member (read even
    /// when the options as a whole did not decode), which is local: any
    /// error is returned without touching `comm_f`, which extras ignore.
    pub fn create(comm_f: i32, opts: Result<Options>, extra: bool) -> Result<Store> {
        mpi::check_same_mpi()?;
        if !mpi::initialized() {
            return Err(mpi::not_initialized_error());
        }
        if mpi::finalized() {
            bail!(BadState, "MPI has been finalized");
        }
        let extra = extra || opts.as_ref().is_ok_and(|o| o.method == 2 && o.role == 1);
        if extra {
            // No collective: an extra member has no communicator.
            return Store::create_extra(opts?);
        }
        let split_opts = opts.as_ref().ok().filter(|o| o.method == 2).cloned();
        let world = Comm::dup_from_fortran(comm_f)?;
        let local = opts.and_then(|o| {
            let method = Method::from_code(o.method)?;
            if o.width < 0 {
                bail!(InvalidArgument, "width {} is negative (0 means all ranks)", o.width);
            }
            if !(0..=1).contains(&o.role) {
                bail!(InvalidArgument, "role {} is not 0 (core) or 1 (extra)", o.role);
            }
            let mut cfg = Config::from_env()?;
            // The option overrides DDSTORE_BATCH_MODE.
            cfg.batch_mode = o.batch_mode.unwrap_or(cfg.batch_mode);
            let gpu = GpuSettings::resolve(&o, &cfg)?;
            if method != Method::Mpi {
                check_nic_map(o.nic_map.as_deref(), cfg.nic_map.as_deref())?;
            }
            let fcfg = fabric_config(&o, &cfg, &gpu);
            Ok((method, o.width as i64, cfg, fcfg, gpu))
        });
        let ((method, width, cfg, fcfg, gpu), _) = enter(&world, Collective::Create, "", local, NO_PAYLOAD)?;
        // Segments that killed processes left on this node (their names
        // carry the pid): removed by the next store made here.
        let mut dirs = vec![cfg.segments.dir.as_str(), crate::config::DEFAULT_SHM_DIR];
        dirs.dedup();
        for dir in dirs {
            crate::shard::segment::remove_stale(dir);
        }
        check_same_settings(&world, method, width, &cfg)?;
        let comm =
            if width == 0 || width as usize >= world.size() { world } else { world.split_groups(width as usize)? };
        let mpi_lock = (!mpi::thread_multiple()).then(|| Mutex::new(()));
        // Every rank agreed on the method and batch mode (above).
        let async_comm = match (method, cfg.batch_mode, &mpi_lock) {
            (Method::Mpi, BatchMode::Collective | BatchMode::Auto, None) => Some(comm.dup()?),
            _ => None,
        };
        // Agreed, so that every rank runs the thread or none does (it is
        // collective to start: a private duplicate of the communicator).
        let progress_wanted = match (method, cfg.mpi_progress) {
            (Method::Mpi, MpiProgress::On) if mpi_lock.is_some() => Err(err!(
                InvalidArgument,
                "DDSTORE_MPI_PROGRESS=1 needs MPI initialised with MPI_THREAD_MULTIPLE (the thread calls MPI \
                 beside the caller's calls)"
            )),
            (Method::Mpi, MpiProgress::On) => Ok(true),
            (Method::Mpi, MpiProgress::Auto) => progress_auto(&comm, mpi_lock.is_none()),
            _ => Ok(false),
        };
        let mpi_progress = if agree(&comm, progress_wanted)? {
            let sleep = std::time::Duration::from_micros(cfg.progress_sleep_us);
            Some(agree(&comm, RmaProgress::start(&comm, sleep))?)
        } else {
            None
        };
        let node = Arc::new(NodeMap::with_width(&comm, cfg.node_local, cfg.node_local_width)?);
        let fabric = match method {
            Method::Fabric | Method::Split => Some(Arc::new(Fabric::open(&comm, &fcfg)?)),
            _ => None,
        };
        let split = match (&split_opts, method) {
            (Some(o), Method::Split) => Some(Split::core(&comm, o, &cfg)?),
            _ => None,
        };
        Ok(Store {
            mpi_lock,
            fabric,
            split,
            async_comm,
            mpi_progress: Mutex::new(mpi_progress),
            ..Store::empty(comm, method, cfg, node, gpu)
        })
    }

    /// A store with no variables, no fabric, no method-2 state, no
    /// asynchronous communicator and no progress thread, serialising MPI
    /// calls unless MPI is MPI_THREAD_MULTIPLE: what `create` and
    /// `create_extra` start from.
    fn empty(comm: Comm, method: Method, cfg: Config, node: Arc<NodeMap>, gpu: GpuSettings) -> Store {
        let requests = Requests::default();
        requests.set_test_delay(cfg.test_request_delay_s);
        Store {
            batch_mode: cfg.batch_mode,
            auto: Default::default(),
            comm,
            method,
            cfg,
            vars: RwLock::new(BTreeMap::new()),
            epoch_open: Mutex::new(false),
            exchange: Mutex::new(Scratch::default()),
            mpi_lock: (!mpi::thread_multiple()).then(|| Mutex::new(())),
            fabric: None,
            node,
            split: None,
            gpu,
            requests,
            async_comm: None,
            mpi_progress: Mutex::new(None),
        }
    }

    /// The first step of every collective call on this store
    /// (`collective::enter`, with nothing of the call's own to agree on).
    pub(crate) fn enter<T>(&self, call: Collective, name: &str, local: Result<T>) -> Result<T> {
        enter(&self.comm, call, name, local, NO_PAYLOAD).map(|(v, _)| v)
    }

    /// True when `dds_get_batch` needs no matching calls on other ranks:
    /// methods 1 and 2, and method 0 in the one-sided batch mode.
    pub fn batch_is_onesided(&self) -> bool {
        self.method != Method::Mpi || self.batch_mode == BatchMode::Onesided
    }

    #[inline]
    pub(crate) fn check_running(&self) -> Result<()> {
        if mpi::finalize_began() {
            bail!(BadState, "MPI has been finalized; only dds_destroy is allowed");
        }
        Ok(())
    }

    /// Collective: registers `name` with a zero-filled shard (`src` None) or a
    /// copy of `src`. `shape` is this rank's (possibly invalid) request;
    /// `call` is `Add` or `Init` (the entry point, for messages).
    pub fn register(&self, call: Collective, name: &str, shape: Result<Shape>, src: Option<&[u8]>) -> Result<()> {
        self.register_filled(call, name, shape, src, |_| Ok(()))
    }

    /// `register`, with `fill` writing the new shard's bytes before the
    /// ranks agree (dds_load reads a snapshot straight into it); a failure
    /// of `fill` fails the call on every rank like any local error.
    pub(crate) fn register_filled(
        &self,
        call: Collective,
        name: &str,
        shape: Result<Shape>,
        src: Option<&[u8]>,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        self.check_running()?;
        self.refuse_extra("add or init", name)?;
        self.drain_requests();
        let mut vars = self.vars.write();
        let local = shape.and_then(|s| {
            if vars.contains_key(name) {
                bail!(DuplicateVariable, "variable '{name}' already exists in this store");
            }
            let row_bytes = validate_shape(name, &s)?;
            let bytes = (s.local_rows as u128) * (row_bytes as u128);
            if bytes > isize::MAX as u128 {
                bail!(
                    InvalidArgument,
                    "variable '{name}': {} rows x {row_bytes} bytes overflows memory sizes",
                    s.local_rows
                );
            }
            let shard = self.new_shard(bytes as usize, src)?;
            // SAFETY: a shard made just now, of len() bytes, that no other
            // rank or thread can reach before the agreement below.
            fill(unsafe { std::slice::from_raw_parts_mut(shard.as_ptr(), shard.len()) })?;
            Ok((s, row_bytes, shard))
        });
        // On an error every rank has dropped the shard it made, so its
        // memory (huge pages, /dev/shm) is free when any rank returns and,
        // say, retries with less.
        let (s, row_bytes, shard) = self.enter(call, name, local)?;
        let var = self.build_var(name, name, s, row_bytes, shard)?;
        vars.insert(name.to_string(), var);
        Ok(())
    }

    /// A shard of `bytes` bytes, zero-filled or a copy of `src`. Node-local
    /// reads need it in shared memory (placed per `DDSTORE_SHM_DIR` and
    /// `DDSTORE_HUGEPAGES`); without them (or when that fails quietly) the
    /// heap, and the transport for peers.
    pub(crate) fn new_shard(&self, bytes: usize, src: Option<&[u8]>) -> Result<Shard> {
        let seg = &self.cfg.segments;
        if !self.node.on && seg.huge == crate::config::HugePages::Require {
            bail!(
                InvalidArgument,
                "DDSTORE_HUGEPAGES=require asks for node-local segments in huge pages, but node-local reads are off \
                 (DDSTORE_NODE_LOCAL=0 on some rank)"
            );
        }
        let shared = if self.node.on { Shard::shared(bytes, src, seg)? } else { None };
        if shared.is_some() && self.cfg.test_segment_delay_s > 0.0 {
            // Testing aid: hold the window in which the segment has a name.
            std::thread::sleep(std::time::Duration::from_secs_f64(self.cfg.test_segment_delay_s));
        }
        match (shared, src) {
            (Some(s), _) => Ok(s),
            (None, Some(data)) => Shard::copy_of(data),
            (None, None) => Shard::zeroed(bytes),
        }
    }

    /// Makes a shard shared among the store's ranks (collective, after every
    /// rank's request was agreed valid): checks the ranks describe one
    /// variable, builds its layout, node-local view and transport, and
    /// publishes it for method-2 extras. `record` names it in hand-shake
    /// records (a ragged variable's index has a name no user can give).
    pub(crate) fn build_var(
        &self,
        name: &str,
        record: &str,
        s: Shape,
        row_bytes: u64,
        mut shard: Shard,
    ) -> Result<Variable> {
        // Every rank now has a valid request; check they describe one variable.
        let all = self.comm.allgather(&[s.local_rows, s.row_elems, s.item_size as i64, fingerprint(name)])?;
        for (r, m) in all.iter().enumerate() {
            if m[3] != all[0][3] {
                bail!(InvalidArgument, "ranks 0 and {r} registered different variable names (this rank: '{name}')");
            }
            if m[1] != all[0][1] || m[2] != all[0][2] {
                bail!(
                    Mismatch,
                    "variable '{name}': rank {r} has rows of {} elements x {} bytes but rank 0 has {} x {}",
                    m[1],
                    m[2],
                    all[0][1],
                    all[0][2]
                );
            }
        }
        let counts: Vec<i64> = all.iter().map(|m| m[0]).collect();
        let layout = Layout::from_counts(&counts).map_err(|e| err!(InvalidArgument, "variable '{name}': {}", e.msg))?;
        let near = Near::share(&self.node, &self.comm, &mut shard)?;
        // MPI may fail a window on some ranks only (Open MPI does, when no
        // one-sided component suits the window): every rank fails together.
        // A rank whose part succeeded leaks it: freeing is collective.
        // (Store policy, not a transport match: the store's method picks
        // the transport of every variable it registers.)
        let transport = match &self.fabric {
            Some(f) => FabricVar::new(f, &shard, &self.comm, self.shard_iface()).map(Transport::Fabric),
            None => RmaVar::new(&shard, &self.comm).map(Transport::Rma),
        };
        let transport =
            agree(&self.comm, transport).map_err(|e| Error::new(e.kind, format!("variable '{name}': {}", e.msg)))?;
        self.publish_if_core(record, &s, &layout, &transport)?;
        self.auto.reset(name);
        Ok(Variable::new(Parts {
            name: name.to_string(),
            row_elems: s.row_elems,
            item_size: s.item_size,
            row_bytes,
            layout,
            rank: self.comm.rank(),
            shard,
            near,
            transport,
        }))
    }

    /// What `v`'s transport needs from the store for a read.
    pub(crate) fn read_ctx<'a>(&'a self, v: &'a Variable) -> ReadCtx<'a> {
        ReadCtx { counters: &v.counters, profile: self.cfg.profile, serial: self.mpi_lock.as_ref() }
    }

    /// Runs `f` on variable `name` under the registry's read lock.
    pub(crate) fn with_var<T>(&self, name: &str, f: impl FnOnce(&Variable) -> Result<T>) -> Result<T> {
        let vars = self.vars.read();
        match vars.get(name) {
            Some(v) => f(v),
            None => bail!(UnknownVariable, "no variable named '{name}' in this store"),
        }
    }

    /// Local: copies whole rows into this rank's shard from local row `offset`.
    pub fn update(&self, name: &str, data: &[u8], offset: i64) -> Result<()> {
        self.refuse_extra("update", name)?;
        self.with_var(name, |v| {
            if data.len() as u64 % v.row_bytes != 0 {
                bail!(
                    Mismatch,
                    "dds_update of {} bytes into '{name}': not a whole number of {}-byte rows",
                    data.len(),
                    v.row_bytes
                );
            }
            let rows = (data.len() as u64 / v.row_bytes) as i64;
            let have = v.local_rows();
            if offset < 0 || offset > have || rows > have - offset {
                bail!(
                    OutOfRange,
                    "rows [{offset}, {}) of '{name}' are outside this rank's shard of {have} rows",
                    offset.saturating_add(rows)
                );
            }
            v.shard.write(offset as usize * v.row_bytes as usize, data);
            Ok(())
        })
    }

    /// One-sided: reads `count` consecutive rows from global row `start`; they
    /// must lie in one rank's shard.
    pub fn get(&self, name: &str, dst: *mut u8, dst_bytes: usize, start: i64, count: i64) -> Result<()> {
        self.get_tallied(name, dst, dst_bytes, start, count, None)
    }

    /// `get`, counted as a call of its own (`tally` None) or added to a
    /// staged read's running total, which counts the user's call once.
    pub(crate) fn get_tallied(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        start: i64,
        count: i64,
        tally: Option<&Tally>,
    ) -> Result<()> {
        self.check_running()?;
        self.with_var(name, |v| {
            let Some((owner, offset)) = self.check_get(v, dst_bytes, start, count)? else { return Ok(()) };
            let mut t = Timer::start(self.cfg.profile);
            // SAFETY: dst holds dst_bytes; the rows lie inside the owner's shard (checked above).
            let direct = unsafe { v.near.copy(owner, offset, dst, dst_bytes) };
            if direct {
                t.lap(&v.counters.read_ns);
            } else {
                v.transport.read_range(owner, offset, dst, dst_bytes, &self.read_ctx(v), &mut t)?;
            }
            Tally::record(tally, v, count as u64, if direct { count as u64 } else { 0 });
            Ok(())
        })
    }

    /// Every check of a `dds_get` (count, destination size, range): the
    /// owner and the first row's byte offset within its shard, or None for
    /// an empty read (which moves nothing).
    pub(crate) fn check_get(
        &self,
        v: &Variable,
        dst_bytes: usize,
        start: i64,
        count: i64,
    ) -> Result<Option<(usize, u64)>> {
        if count < 0 {
            bail!(InvalidArgument, "count {count} is negative");
        }
        v.check_dst("destination", dst_bytes, count)?;
        if count == 0 {
            check_empty_start(v, start)?;
            return Ok(None);
        }
        let (owner, local) = self.check_range(v, start, count)?;
        Ok(Some((owner, local as u64 * v.row_bytes)))
    }

    /// Checks that `count` (> 0) rows from `start` lie in one shard; returns
    /// the owner and the first row's index within its shard.
    fn check_range(&self, v: &Variable, start: i64, count: i64) -> Result<(usize, i64)> {
        let name = &v.name;
        v.layout.check(start).map_err(|e| err!(OutOfRange, "variable '{name}': {}", e.msg))?;
        let (owner, local) = v.layout.owner(start);
        let (lo, hi) = v.layout.shard(owner);
        // `local + count` would wrap for a count near i64::MAX, which a
        // size_t dst_bytes can match when rows are 1 or 2 bytes: compare
        // against the rows left instead (0 <= local < hi - lo).
        if count > (hi - lo) - local {
            bail!(
                InvalidArgument,
                "rows [{start}, {}) of '{name}' cross the end of rank {owner}'s shard [{lo}, {hi}); \
                 dds_get reads inside one shard, use dds_get_batch for rows of several ranks",
                start.saturating_add(count)
            );
        }
        Ok((owner, local))
    }

    /// Reads arbitrary rows; row i of `dst` receives global row `indices[i]`.
    /// Collective for method 0 (unless its batch mode is one-sided),
    /// one-sided for methods 1 and 2. `indices` carries
    /// this rank's argument check.
    pub fn get_batch(&self, name: &str, dst: *mut u8, dst_bytes: usize, indices: Result<&[i64]>) -> Result<()> {
        self.get_batch_tallied(name, dst, dst_bytes, indices, None)
    }

    /// `get_batch` with a staged read's running total (see `get_tallied`);
    /// only one-sided batches are staged in several chunks.
    pub(crate) fn get_batch_tallied(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        tally: Option<&Tally>,
    ) -> Result<()> {
        self.check_running()?;
        let vars = self.vars.read();
        let var = vars.get(name);
        if self.batch_is_onesided() {
            let idx = indices?;
            let Some(v) = var else { bail!(UnknownVariable, "no variable named '{name}' in this store") };
            return self.batch_onesided(v, dst, dst_bytes, idx, tally);
        }
        if let (BatchMode::Auto, Some(v)) = (self.batch_mode, var) {
            return self.batch_auto(v, dst, dst_bytes, indices, tally);
        }
        let local = indices.and_then(|idx| match var {
            None => bail!(UnknownVariable, "no variable named '{name}' in this store"),
            Some(v) => {
                v.check_dst("destination", dst_bytes, idx.len() as i64)?;
                Ok((v, idx))
            }
        });
        self.batch_collective(name, local, dst)
    }

    /// A one-sided batch (methods 1 and 2; method 0 in the one-sided batch
    /// mode): every index is checked, rows this rank maps are copied
    /// (`copy_or_queue`), and the others are read by the transport, every
    /// read posted before any is waited for. Needs no other rank's call.
    fn batch_onesided(
        &self,
        v: &Variable,
        dst: *mut u8,
        dst_bytes: usize,
        idx: &[i64],
        tally: Option<&Tally>,
    ) -> Result<()> {
        v.check_dst("destination", dst_bytes, idx.len() as i64)?;
        v.check_indices(idx, "the")?;
        if idx.is_empty() {
            return Ok(());
        }
        let mut t = Timer::start(self.cfg.profile);
        let mut reads = v.transport.reads(idx.len());
        let mut local_rows = 0u64;
        batch_rows(v, dst, idx, |owner, offset, at, rb| {
            // SAFETY: dst holds idx.len() rows and every index is checked.
            local_rows += unsafe { copy_or_queue(v, &mut reads, owner, offset, at, rb) } as u64;
        });
        reads.run(dst, dst_bytes, &self.read_ctx(v), &mut t)?;
        Tally::record(tally, v, idx.len() as u64, local_rows);
        Ok(())
    }

    /// Method 0, collective batch mode: the sparse exchange of requests and
    /// the rounds of rows (transport::exchange).
    fn batch_collective(&self, name: &str, local: Result<(&Variable, &[i64])>, dst: *mut u8) -> Result<()> {
        let mut scratch = self.exchange.lock();
        let _serial = self.mpi_lock.as_ref().map(|m| m.lock());
        let (v, idx, rounds) = self.collective_agree(Collective::GetBatch, name, local, &mut scratch)?;
        // SAFETY: dst holds idx.len() rows (checked); scratch is this batch's plan.
        unsafe { self.collective_move(&self.comm, v, idx.len(), rounds, dst, &mut scratch) }
    }

    /// The agreement step of a collective batch (every rank calls it with
    /// its own arguments; `call` is the entry point): plans this rank's rows
    /// into `scratch` and returns the variable, the indices and the agreed
    /// number of rounds, or the error every rank returns.
    fn collective_agree<'v>(
        &self,
        call: Collective,
        name: &str,
        local: Result<(&'v Variable, &'v [i64])>,
        scratch: &mut Scratch,
    ) -> Result<(&'v Variable, &'v [i64], i64)> {
        // The call's agreement (`enter`) settles the call, argument errors
        // and the variable; its payload, indices out of range (the lowest
        // failing rank) and the number of rounds (max over ranks, as a min
        // of negatives). Every rank sees the same outcome.
        let (me, p) = (self.comm.rank() as i64, self.comm.size() as i64);
        let range = match &local {
            Ok((v, idx)) => v.check_indices(idx, "its").err(),
            Err(_) => None,
        };
        let cap = self.cfg.alltoall_max_bytes;
        // Local work only: the destination is untouched until all agree.
        let plan = match (&local, &range) {
            (Ok((v, idx)), None) => {
                let src = Source { layout: &v.layout, shard: &v.shard, near: &v.near, row_bytes: v.row_bytes };
                exchange::plan(&src, cap, p as usize, idx, scratch)
            }
            _ => exchange::Plan::default(),
        };
        let payload = [if range.is_some() { me } else { p }, -plan.rounds];
        let ((v, idx), agreed) = enter(&self.comm, call, name, local, payload)?;
        if agreed[0] < p {
            agree(&self.comm, range.map_or(Ok(()), Err))?;
            bail!(Internal, "{}: ranks disagree on the outcome of the index check", call.entry());
        }
        Ok((v, idx, -agreed[1]))
    }

    /// The moving step of a collective batch on `comm` (every rank calls it
    /// with the same `rounds`): direct copies, then the exchange of the rows
    /// `scratch` plans.
    ///
    /// # Safety
    /// `dst` holds `rows` rows of `v`; `scratch` is this batch's plan.
    unsafe fn collective_move(
        &self,
        comm: &Comm,
        v: &Variable,
        rows: usize,
        rounds: i64,
        dst: *mut u8,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let mut t = Timer::start(self.cfg.profile);
        let src = Source { layout: &v.layout, shard: &v.shard, near: &v.near, row_bytes: v.row_bytes };
        // SAFETY: the caller's promise.
        unsafe { exchange::copy_direct(&src, dst, scratch) };
        // Rounds are agreed: a rank with nothing to read still serves.
        if rounds > 0 {
            let cap = self.cfg.alltoall_max_bytes;
            // SAFETY: as above.
            let req = unsafe { exchange::exchange(comm, &src, cap, self.cfg.batch_exchange, rounds, dst, scratch)? };
            v.counters.requests(req.sent, req.recv);
        }
        t.lap(&v.counters.read_ns);
        if rows > 0 {
            v.counters.read_call(rows as u64, scratch.direct_rows() as u64);
        }
        Ok(())
    }

    pub fn register_recv(&self, name: &str, start: usize, len: usize) -> Result<()> {
        self.with_var(name, |v| {
            if len == 0 {
                return Ok(());
            }
            // Staged device buffers are never transport destinations;
            // GPUDirect ones are registered with their memory interface.
            let how = self.recv_route(name, start as *const u8)?;
            v.register_recv(start, len, || match how {
                Some(hmem) => v.transport.register_recv(start, len, hmem),
                None => Ok(()),
            })
        })
    }

    pub fn unregister_recv(&self, name: &str, start: usize) -> Result<()> {
        self.with_var(name, |v| v.unregister_recv(start, || v.transport.unregister_recv(start)))
    }

    pub fn info(&self, name: &str) -> Result<VarInfo> {
        self.with_var(name, |v| {
            Ok(VarInfo {
                total_rows: v.layout.total(),
                local_rows: v.local_rows(),
                row_elems: v.row_elems,
                item_size: v.item_size,
                row_bytes: v.row_bytes,
                method: self.method,
                n_ranks: v.layout.n_ranks(),
                transport: v.transport.describe(),
                node_local: v.near.is_on(),
                node_ranks: v.near.direct_ranks(),
                device_path: self.device_path(v),
                samples: v.ragged.as_ref().map(|r| (r.index.layout.total(), r.index.local_rows())),
            })
        })
    }

    pub fn profile(&self, name: &str) -> Result<(Snapshot, bool)> {
        let mode = self.batch_mode_of(name);
        self.with_var(name, |v| {
            Ok((Snapshot { batch_mode: mode, ..v.counters.snapshot(v.row_bytes) }, self.cfg.profile))
        })
    }

    /// Collective: opens (`open` true) or closes a read epoch. Makes local
    /// updates visible to remote readers and synchronises the ranks.
    /// `local` carries a failure a binding found on this rank
    /// (`dds_fail_collective`); it fails the call on every rank.
    pub fn epoch(&self, open: bool, local: Result<()>) -> Result<()> {
        self.check_running()?;
        self.drain_requests();
        let mut state = self.epoch_open.lock();
        let local = local.and_then(|()| {
            if *state == open {
                bail!(
                    BadState,
                    "{}",
                    if open {
                        "an epoch is already open (call dds_epoch_end first)"
                    } else {
                        "no epoch is open (call dds_epoch_begin first)"
                    }
                );
            }
            Ok(())
        });
        self.enter(if open { Collective::EpochBegin } else { Collective::EpochEnd }, "", local)?;
        // A rank whose window sync fails must still reach the agreement that
        // replaces the closing barrier, or the others would wait for it.
        let mut synced = Ok(());
        for v in self.vars.read().values() {
            if let Err(e) = v.transport.sync() {
                synced = Err(Error::new(e.kind, format!("variable '{}': {}", v.name, e.msg)));
                break;
            }
        }
        agree(&self.comm, synced)?;
        *state = open;
        Ok(())
    }

    /// Collective: takes part in `call` as the other ranks do, contributing
    /// `failure`, so every rank fails together with the lowest failing
    /// rank's status and message (`dds_fail_collective`). One-sided batches
    /// (methods 1 and 2, method 0 in the one-sided batch mode) are not
    /// collective: the failure is only returned here.
    pub fn fail_collective(self: &Arc<Self>, call: Collective, name: &str, failure: Error) -> Result<()> {
        let none = std::ptr::null_mut();
        match call {
            Collective::Add | Collective::Init => self.register(call, name, Err(failure), None),
            Collective::GetBatch => self.get_batch(name, none, 0, Err(failure)),
            Collective::GetBatchStart => self.get_batch_start(name, none, 0, Err(failure)).map(|_| ()),
            Collective::Remove => self.remove(Err(failure)),
            Collective::EpochBegin => self.epoch(true, Err(failure)),
            Collective::EpochEnd => self.epoch(false, Err(failure)),
            Collective::WaitExtras => self.wait_extras_checked(Err(failure)),
            Collective::AddRagged => self.register_ragged(name, Err(failure), &[], &[]),
            Collective::GetRaggedBatch => self.get_ragged_batch(name, none, 0, Err(failure), None).map(|_| ()),
            Collective::RaggedLengths => self.ragged_lengths(name, Err(failure)),
            Collective::Save => self.save(Err(failure), Ok(Vec::new())),
            Collective::Load => self.load(Err(failure), Ok(Vec::new())),
            Collective::Create | Collective::Destroy => {
                bail!(InvalidArgument, "{} cannot be failed through dds_fail_collective", call.entry())
            }
        }
    }

    /// Releases the MPI objects of every variable (windows) and the store's
    /// communicators while MPI still runs; local memory stays until
    /// `destroy`. Called from the
    /// finalisation hook for stores the program never destroyed: every rank
    /// runs it for its live stores in creation order, which is the order the
    /// collective creations happened in.
    pub fn release_mpi(&self) {
        // No request thread may call MPI once this returns (request.rs).
        self.requests.finalize();
        // The progress thread calls MPI: it stops before anything is freed.
        if let Some(mut p) = self.mpi_progress.lock().take() {
            p.stop();
        }
        for v in self.vars.write().values_mut() {
            let _ = v.free();
        }
        // The communicators too: MPI does not free them at MPI_Finalize.
        self.node.release_before_finalize();
        self.comm.release_before_finalize();
        if let Some(c) = &self.async_comm {
            c.release_before_finalize();
        }
    }

    /// The agreement `dds_destroy` makes before it takes a core store's
    /// handle, so that ranks in another collective call fail it and the
    /// store stays. None for a method-2 extra member (its destroy is local)
    /// or once MPI_Finalize has begun (the communicator is gone).
    pub fn enter_destroy(&self) -> Result<()> {
        if self.is_extra() || !mpi::running() || mpi::finalize_began() {
            return Ok(());
        }
        self.enter(Collective::Destroy, "", Ok(()))
    }

    /// Collective: releases every variable in name order (the same on every
    /// rank). Method 1 first waits at a barrier, so no peer is still reading
    /// this rank's memory when it is deregistered. After MPI_Finalize only
    /// local memory is released.
    pub fn destroy(&self) -> Result<()> {
        // Requests in flight finish first (their reads use the variables).
        self.requests.close();
        // Method 2 core: extras that join from now on learn it is gone.
        let mut first_err = self.withdraw_all().err();
        if let Some(mut p) = self.mpi_progress.lock().take() {
            p.stop();
        }
        if self.fabric.is_some() && mpi::running() {
            if let Err(e) = self.comm.barrier() {
                first_err.get_or_insert(e);
            }
        }
        for (_, mut v) in std::mem::take(&mut *self.vars.write()) {
            if let Err(e) = v.free() {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Collective: `DDSTORE_MPI_PROGRESS=auto`'s choice, the same on every rank:
/// on where the store spans more than one node (MPI's shared-memory split
/// of its communicator, not the testing aid's simulated nodes) and every
/// rank has MPI_THREAD_MULTIPLE (see config::MpiProgress).
fn progress_auto(comm: &Comm, thread_multiple: bool) -> Result<bool> {
    let node = comm.split_shared()?;
    let mut all = [(node.size() == comm.size()) as i64, thread_multiple as i64];
    comm.allreduce_min(&mut all)?;
    Ok(all[0] == 0 && all[1] == 1)
}

/// Collective over the ranks of `dds_create`: the settings every rank must
/// share are the same on every rank, or every rank fails with a message
/// naming the setting, where it comes from, two ranks and their values.
fn check_same_settings(world: &Comm, method: Method, width: i64, cfg: &Config) -> Result<()> {
    use crate::config::Exchange;
    let mode = |v: i64| match v {
        x if x == BatchMode::Onesided as i64 => "onesided",
        x if x == BatchMode::Auto as i64 => "auto",
        _ => "collective",
    };
    let exchange = |v: i64| match v {
        x if x == Exchange::Alltoallv as i64 => "alltoallv",
        x if x == Exchange::SendRecv as i64 => "sendrecv",
        _ => "auto",
    };
    let progress = |v: i64| {
        [MpiProgress::Off, MpiProgress::On, MpiProgress::Auto]
            .into_iter()
            .find(|p| *p as i64 == v)
            .map_or("?", |p| p.name())
    };
    // (what, where it comes from, how to show a value)
    type Show = Box<dyn Fn(i64) -> String>;
    let settings: [(&str, &str, Show); 6] = [
        ("width", "options.width", Box::new(|v| v.to_string())),
        ("DDSTORE_ALLTOALL_MAX_BYTES", "the environment", Box::new(|v| v.to_string())),
        ("method", "options.method", Box::new(|v| v.to_string())),
        ("DDSTORE_BATCH_EXCHANGE", "the environment", Box::new(move |v| exchange(v).to_string())),
        ("batch mode", "DDSTORE_BATCH_MODE or options.batch_mode", Box::new(move |v| mode(v).to_string())),
        ("DDSTORE_MPI_PROGRESS", "the environment, method 0", Box::new(move |v| progress(v).to_string())),
    ];
    let mine = [
        width,
        cfg.alltoall_max_bytes as i64,
        method.code() as i64,
        cfg.batch_exchange as i64,
        cfg.batch_mode as i64,
        if method == Method::Mpi { cfg.mpi_progress as i64 } else { MpiProgress::Off as i64 },
    ];
    let all = world.allgather(&mine)?;
    for (i, (what, source, show)) in settings.iter().enumerate() {
        if let Some(r) = all.iter().position(|m| m[i] != all[0][i]) {
            bail!(
                InvalidArgument,
                "{what} differs across ranks ({source}): rank 0 has {}, rank {r} has {}; it must be the same on \
                 every rank",
                show(all[0][i]),
                show(all[r][i])
            );
        }
    }
    Ok(())
}

/// The fabric settings of a method-1/2 store (or a method-2 extra's reader
/// fabric): the options override the environment.
pub(crate) fn fabric_config(o: &Options, cfg: &Config, gpu: &GpuSettings) -> FabricConfig {
    FabricConfig {
        provider: o.fabric_provider.clone().or_else(|| cfg.fabric.clone()),
        iface: o.fabric_iface.clone().or_else(|| cfg.fabric_iface.clone()),
        nic_map: o.nic_map.clone().or_else(|| cfg.nic_map.clone()),
        max_read_bytes: cfg.max_read_bytes,
        read_timeout_s: cfg.read_timeout_s,
        force_local_mr: cfg.fabric_local_mr,
        progress_sleep_us: cfg.progress_sleep_us,
        hmem: gpu.wants_hmem(),
    }
}

/// Checks the NIC map a method-1/2 store would use (the option, else
/// DDSTORE_NIC_MAP) whether or not an interface is also given, so a malformed
/// map is never ignored; the error names its source and the bad entry.
pub(crate) fn check_nic_map(option: Option<&str>, env: Option<&str>) -> Result<()> {
    let (map, source) = match (option, env) {
        (Some(m), _) => (m, "options.nic_map"),
        (None, Some(m)) => (m, "DDSTORE_NIC_MAP"),
        (None, None) => return Ok(()),
    };
    match crate::transport::fabric::select::parse_nic_map_from(map, source) {
        Ok(_) => Ok(()),
        Err(e) => bail!(InvalidArgument, "{e} (in {source}={map:?})"),
    }
}

/// Rows read by the chunks of one staged read (`gpu.rs`), which
/// counts them as the one call the user made.
#[derive(Default)]
pub(crate) struct Tally {
    rows: std::cell::Cell<u64>,
    local: std::cell::Cell<u64>,
}

impl Tally {
    /// Counts a read of `rows` rows (`local` of them copied directly): as a
    /// call of its own, or into `tally`.
    fn record(tally: Option<&Tally>, v: &Variable, rows: u64, local: u64) {
        match tally {
            None => v.counters.read_call(rows, local),
            Some(t) => {
                t.rows.set(t.rows.get() + rows);
                t.local.set(t.local.get() + local);
            }
        }
    }

    /// Counts everything the chunks read as one call of variable `name`.
    pub(crate) fn finish(&self, store: &Store, name: &str) {
        if self.rows.get() > 0 {
            let _ = store.with_var(name, |v| {
                v.counters.read_call(self.rows.get(), self.local.get());
                Ok(())
            });
        }
    }
}

/// The rows of a one-sided batch, the same for every route: row i of `dst`
/// receives global row `idx[i]`, which lies at byte `offset` of rank
/// `owner`'s shard; `read(owner, offset, at, row_bytes)` is called for each
/// row in order. The destination size and the indices are checked by the
/// caller. `at` is only computed here (a GPUDirect destination may not be
/// addressable by the CPU), never dereferenced.
pub(super) fn batch_rows(v: &Variable, dst: *mut u8, idx: &[i64], mut read: impl FnMut(usize, u64, *mut u8, usize)) {
    let rb = v.row_bytes as usize;
    for (i, &g) in idx.iter().enumerate() {
        let (owner, local) = v.layout.owner(g);
        read(owner, local as u64 * v.row_bytes, dst.wrapping_add(i * rb), rb);
    }
}

/// One piece of a batched read into host memory (one-sided and ragged
/// batches alike): `len` bytes at byte `offset` of `owner`'s shard are copied to `at` here
/// when this rank maps that shard (true), else queued on `reads` for the
/// transport (false).
///
/// # Safety
/// `at` holds `len` writable bytes and the range lies inside the owner's
/// shard (both checked by the caller).
pub(super) unsafe fn copy_or_queue(
    v: &Variable,
    reads: &mut Reads<'_>,
    owner: usize,
    offset: u64,
    at: *mut u8,
    len: usize,
) -> bool {
    // SAFETY: the caller's promise.
    let copied = unsafe { v.near.copy(owner, offset, at, len) };
    if !copied {
        reads.push(owner, offset, at, len);
    }
    copied
}

/// An empty read moves nothing, but its `start` must still name a place in
/// the variable: [0, total rows] (the end included, as for a slice).
fn check_empty_start(v: &Variable, start: i64) -> Result<()> {
    let total = v.layout.total();
    if !(0..=total).contains(&start) {
        bail!(OutOfRange, "variable '{}': start {start} of a 0-row read is outside [0, {total}]", v.name);
    }
    Ok(())
}

/// Validates a shape and returns its row size in bytes.
fn validate_shape(name: &str, s: &Shape) -> Result<u64> {
    if s.local_rows < 0 {
        bail!(InvalidArgument, "variable '{name}': local row count {} is negative", s.local_rows);
    }
    if s.row_elems <= 0 {
        bail!(InvalidArgument, "variable '{name}': elements per row must be positive, got {}", s.row_elems);
    }
    if ![1, 2, 4, 8].contains(&s.item_size) {
        bail!(InvalidArgument, "variable '{name}': item size {} is not 1, 2, 4 or 8 bytes", s.item_size);
    }
    match (s.row_elems as u64).checked_mul(s.item_size as u64) {
        Some(b) if b <= i64::MAX as u64 => Ok(b),
        _ => bail!(
            InvalidArgument,
            "variable '{name}': {} elements x {} bytes per row overflows 64 bits",
            s.row_elems,
            s.item_size
        ),
    }
}
