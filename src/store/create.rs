//! `dds_create`: the store's collective set-up (settings agreed across
//! ranks, communicators, progress thread, node map, fabric, method-2 role).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::{enter, BatchMode, Collective, GpuSettings, Method, Options, Requests, Split, Store, NO_PAYLOAD};
use crate::config::{Config, MpiProgress};
use crate::error::{bail, err, Result};
use crate::mpi::{self, agree, Comm};
use crate::transport::{network, FabricConfig, Network, NodeMap, RmaProgress, Scratch};

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
        let network = Network::open(&comm, (method != Method::Mpi).then_some(&fcfg))?;
        let split = match (&split_opts, method) {
            (Some(o), Method::Split) => Some(Split::core(&comm, o, &cfg)?),
            _ => None,
        };
        Ok(Store {
            mpi_lock,
            network,
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
    pub(super) fn empty(comm: Comm, method: Method, cfg: Config, node: Arc<NodeMap>, gpu: GpuSettings) -> Store {
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
            network: Network::default(),
            node,
            split: None,
            gpu,
            requests,
            async_comm: None,
            mpi_progress: Mutex::new(None),
        }
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
pub(super) fn fabric_config(o: &Options, cfg: &Config, gpu: &GpuSettings) -> FabricConfig {
    FabricConfig {
        provider: o.fabric_provider.clone().or_else(|| cfg.fabric.clone()),
        iface: o.fabric_iface.clone().or_else(|| cfg.fabric_iface.clone()),
        nic_map: o.nic_map.clone().or_else(|| cfg.nic_map.clone()),
        max_read_bytes: cfg.max_read_bytes,
        read_timeout_s: cfg.read_timeout_s,
        force_local_mr: cfg.fabric_local_mr,
        progress_sleep_us: cfg.progress_sleep_us,
        hmem: gpu.wants_hmem(),
        hmem_shm: gpu.wants_hmem_on_shm(),
    }
}

/// Checks the NIC map a method-1/2 store would use (the option, else
/// DDSTORE_NIC_MAP) whether or not an interface is also given, so a malformed
/// map is never ignored; the error names its source and the bad entry.
pub(super) fn check_nic_map(option: Option<&str>, env: Option<&str>) -> Result<()> {
    let (map, source) = match (option, env) {
        (Some(m), _) => (m, "options.nic_map"),
        (None, Some(m)) => (m, "DDSTORE_NIC_MAP"),
        (None, None) => return Ok(()),
    };
    match network::check_nic_map(map, source) {
        Ok(_) => Ok(()),
        Err(e) => bail!(InvalidArgument, "{e} (in {source}={map:?})"),
    }
}
