//! Every environment variable the library reads, parsed in one place.
//!
//! Values are read when a store is created (so a test can change them between
//! stores) and validated: a malformed value is an error naming the variable,
//! never a silent default.

use crate::error::{bail, err, Result};

/// How a method-0 batch moves the rows that travel (`DDSTORE_BATCH_EXCHANGE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// `SendRecv` for rows of at least `transport::exchange::SENDRECV_MIN_ROW_BYTES`, else `Alltoallv`.
    Auto,
    /// Owners pack rows into one buffer per requester; one `MPI_Alltoallv`
    /// per round; requesters reorder when the rows arrive grouped by owner.
    Alltoallv,
    /// One message per row, straight from the owner's shard into its place
    /// in the destination: no packing and no reordering copy. Each round,
    /// a requester posts the receives of its (at most the cap's worth of)
    /// rows and owners post their sends.
    SendRecv,
}

/// How a method-0 `dds_get_batch` runs (`DDSTORE_BATCH_MODE`,
/// `dds_options.batch_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchMode {
    /// DDStore 3.0's semantics: every rank calls, the same number of times,
    /// from one thread; rows move by the sparse exchange.
    Collective,
    /// Each call reads on its own with pipelined passive-target gets: no
    /// matching calls, any number of threads.
    Onesided,
    /// Calls as in `Collective`; per variable, the store times both modes
    /// on its first batches, keeps the faster (agreed by every rank) and
    /// checks again every `DDSTORE_BATCH_AUTO_RECHECK` batches
    /// (store/batch_mode.rs).
    Auto,
}

impl BatchMode {
    /// `dds_options.batch_mode` codes (`DDS_BATCH_*`; -1 is "from the environment").
    pub fn from_code(code: i32) -> Result<Option<BatchMode>> {
        match code {
            -1 => Ok(None),
            0 => Ok(Some(BatchMode::Collective)),
            1 => Ok(Some(BatchMode::Onesided)),
            2 => Ok(Some(BatchMode::Auto)),
            _ => bail!(
                InvalidArgument,
                "batch_mode {code} is not -1 (DDSTORE_BATCH_MODE), 0 (collective), 1 (one-sided) or 2 (auto)"
            ),
        }
    }
}

/// `DDSTORE_REQUEST_PRIORITY`: how the threads that carry non-blocking
/// reads (`dds_get_batch_start`) are scheduled (Linux policies; elsewhere
/// every value schedules them normally).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestPriority {
    /// `SCHED_BATCH` (default): the caller's share of the CPU, but a
    /// request thread woken by a start does not preempt the caller that
    /// started it (the kernel never lets a batch thread preempt on
    /// wake-up), so the caller goes on to its step at once.
    Batch,
    /// `SCHED_OTHER`, like the caller's threads.
    Normal,
    /// `SCHED_IDLE`: the threads run only on a core nothing else wants, so
    /// a caller thread that wakes (after a GPU step, say) never waits
    /// behind a read; a read then progresses only in idle time.
    Idle,
}

/// The spellings of `DDSTORE_REQUEST_PRIORITY`, default first.
pub const REQUEST_PRIORITIES: &[(&str, RequestPriority)] =
    &[("batch", RequestPriority::Batch), ("normal", RequestPriority::Normal), ("idle", RequestPriority::Idle)];

/// `DDSTORE_MPI_PROGRESS`: when a method-0 store runs its MPI progress
/// thread (transport/rma_progress.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpiProgress {
    Off = 0,
    On = 1,
    /// Default: on where the store's ranks span more than one node and MPI
    /// runs with MPI_THREAD_MULTIPLE. There a read of another node's rows
    /// goes through MPI, and an owner waiting outside MPI (in DDP's gloo
    /// allreduce, say) would never serve it: the job hangs. On one node
    /// same-node rows are copied from shared memory, and the thread's cost
    /// (3-5x slower prefetched one-sided steps under Open MPI 4.1) buys
    /// nothing, so it stays off.
    Auto = 2,
}

impl MpiProgress {
    pub fn name(self) -> &'static str {
        match self {
            MpiProgress::Off => "0 (off)",
            MpiProgress::On => "1 (on)",
            MpiProgress::Auto => "auto",
        }
    }
}

fn mpi_progress(value: Option<String>) -> Result<MpiProgress> {
    let Some(v) = value else { return Ok(MpiProgress::Auto) };
    let got = auto_or_switch(&v, [MpiProgress::Auto, MpiProgress::On, MpiProgress::Off]);
    got.ok_or_else(|| {
        err!(
            InvalidArgument,
            "DDSTORE_MPI_PROGRESS={v:?} is not auto or a switch: use auto, 1/0, on/off, true/false or yes/no"
        )
    })
}

/// Whether node-local segments use hugetlbfs pages (`DDSTORE_HUGEPAGES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugePages {
    /// Huge pages where they are there to take: a segment of at least one
    /// huge page goes to `DDSTORE_SHM_DIR` when that is a hugetlbfs mount
    /// with the free pages (else quietly to /dev/shm), and segments on a
    /// tmpfs ask for transparent huge pages where its `huge=` option allows.
    Auto,
    /// 4 KiB pages: no hugetlbfs, no transparent huge page advice.
    Off,
    /// Every segment in hugetlbfs pages (`DDSTORE_SHM_DIR` must be a
    /// hugetlbfs mount); a segment its pool cannot hold is an error.
    Require,
}

impl HugePages {
    fn parse(v: &str) -> Result<HugePages> {
        match v.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(HugePages::Auto),
            "off" | "0" | "no" | "false" => Ok(HugePages::Off),
            "require" => Ok(HugePages::Require),
            _ => bail!(InvalidArgument, "DDSTORE_HUGEPAGES={v:?} is not one of auto, off, require"),
        }
    }
}

/// Where node-local segments live (`DDSTORE_SHM_DIR`, `DDSTORE_HUGEPAGES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    /// Directory of the segment files: a tmpfs or hugetlbfs mount (absolute,
    /// no trailing slash).
    pub dir: String,
    pub huge: HugePages,
}

impl Default for Segments {
    fn default() -> Segments {
        Segments { dir: DEFAULT_SHM_DIR.to_string(), huge: HugePages::Auto }
    }
}

/// Default of `DDSTORE_SHM_DIR` (where `shm_open` puts POSIX shared memory).
pub const DEFAULT_SHM_DIR: &str = "/dev/shm";
/// Longest `DDSTORE_SHM_DIR`, in bytes: an owner publishes its segment's
/// whole path to its peers in a fixed-size record (`shard::segment::SegmentId`).
pub const MAX_SHM_DIR_BYTES: usize = 200;

/// Default of `DDSTORE_ALLTOALL_MAX_BYTES`: bytes a rank receives per round of
/// a method-0 batched read (DDStore 3.0's default).
pub const DEFAULT_ALLTOALL_MAX_BYTES: u64 = 2 * 1024 * 1024;
/// Default of `DDSTORE_MAX_READ_BYTES`: the largest single RDMA read.
pub const DEFAULT_MAX_READ_BYTES: u64 = 1 << 30;
/// Default of `DDSTORE_READ_TIMEOUT_S`: how long a read waits for a peer.
pub const DEFAULT_READ_TIMEOUT_S: f64 = 120.0;
/// Default of `DDSTORE_HANDSHAKE_TIMEOUT_S`.
pub const DEFAULT_HANDSHAKE_TIMEOUT_S: f64 = 300.0;
/// Default of `DDSTORE_PROGRESS_SLEEP_US`.
pub const DEFAULT_PROGRESS_SLEEP_US: u64 = 1000;
/// Default of `DDSTORE_GPU_STAGING_BYTES`: largest chunk staged through one
/// pinned bounce buffer on its way to device memory.
pub const DEFAULT_GPU_STAGING_BYTES: u64 = 8 * 1024 * 1024;
/// Default of `DDSTORE_SNAPSHOT_CHUNK_BYTES`.
pub const DEFAULT_SNAPSHOT_CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// Largest `DDSTORE_SNAPSHOT_CHUNK_BYTES` (a chunk is read into memory whole).
pub const MAX_SNAPSHOT_CHUNK_BYTES: u64 = 1 << 30;
/// Default hand-shake directory for method 2.
pub const DEFAULT_HANDSHAKE_DIR: &str = "./ddstore_hs";

/// Largest accepted time-out, in seconds (one year): far beyond any real
/// wait, and small enough that a deadline computed from it never overflows.
pub const MAX_SECONDS: f64 = 31_536_000.0;
/// Largest `DDSTORE_ALLTOALL_MAX_BYTES` and `DDSTORE_MAX_READ_BYTES` (1 TiB).
pub const MAX_TRANSFER_BYTES: u64 = 1 << 40;
/// Largest `DDSTORE_GPU_STAGING_BYTES` (16 GiB of pinned bounce buffer).
pub const MAX_STAGING_BYTES: u64 = 1 << 34;
/// Largest `DDSTORE_TEST_NODE_LOCAL_WIDTH` (ranks).
pub const MAX_NODE_LOCAL_WIDTH: u64 = i32::MAX as u64;

/// Testing aids that were public settings before they took the
/// `DDSTORE_TEST_` prefix (old name, new name). Only a test had a reason to
/// set them, so a job still setting an old name is refused, naming the new
/// one, rather than silently running without the aid (docs/dev/testing.md).
pub const RENAMED_TEST_AIDS: [(&str, &str); 3] = [
    ("DDSTORE_FABRIC_LOCAL_MR", "DDSTORE_TEST_FABRIC_LOCAL_MR"),
    ("DDSTORE_NODE_LOCAL_WIDTH", "DDSTORE_TEST_NODE_LOCAL_WIDTH"),
    ("DDSTORE_GPU_DIRECT_HOST_IFACE", "DDSTORE_TEST_GPU_DIRECT_HOST_IFACE"),
];

/// A snapshot of the environment taken by `dds_create`.
#[derive(Clone, Debug)]
pub struct Config {
    /// `DDSTORE_ALLTOALL_MAX_BYTES`: per-round receive cap of method-0 batches.
    pub alltoall_max_bytes: u64,
    /// `DDSTORE_BATCH_EXCHANGE`: how method-0 batches move rows
    /// (`auto`, `alltoallv` or `sendrecv`).
    pub batch_exchange: Exchange,
    /// `DDSTORE_BATCH_MODE`: method-0 `dds_get_batch` is `collective`
    /// (default), `onesided` or `auto` (`dds_options.batch_mode` overrides it).
    pub batch_mode: BatchMode,
    /// `DDSTORE_BATCH_AUTO_RECHECK`: in the auto batch mode, batches of a
    /// variable between one choice and the next timing of both modes
    /// (0: never again after the first).
    pub batch_auto_recheck: u64,
    /// `DDSTORE_TEST_BATCH_AUTO_PENALTY_S` (testing aid): in the auto batch
    /// mode, this many seconds are added to the measured time of every timed
    /// batch of the mode a variable runs in now (the collective one before
    /// the first choice), so the other mode wins each check whatever the
    /// machine's load and a test sees the mode switch. 0 (default): none.
    pub test_batch_auto_penalty_s: f64,
    /// `DDSTORE_TEST_BATCH_AUTO_SPREAD_S` (testing aid): in the auto batch
    /// mode, this many seconds times 2 are added to every other timed batch
    /// of each mode in a check (the 2nd, 4th, ...), and a tenth of it to
    /// every timed batch of the mode in use, so the two means differ by 10%
    /// within a spread far wider: every check runs all its rounds and then
    /// leaves the mode in use, whatever the machine's load
    /// (store/auto_check.rs `spread_aid`). 0 (default): none.
    pub test_batch_auto_spread_s: f64,
    /// `DDSTORE_MAX_READ_BYTES`: longest single RDMA read; longer rows are split.
    pub max_read_bytes: u64,
    /// `DDSTORE_READ_TIMEOUT_S`: bound on waiting for one read to complete.
    pub read_timeout_s: f64,
    /// `DDSTORE_PROFILE`: time reads (counts are always kept).
    pub profile: bool,
    /// `DDSTORE_HANDSHAKE_DIR`.
    pub handshake_dir: Option<String>,
    /// `DDSTORE_HANDSHAKE_TIMEOUT_S`.
    pub handshake_timeout_s: f64,
    /// `DDSTORE_FABRIC`: provider name (`hsn` means `tcp;ofi_rxm`).
    pub fabric: Option<String>,
    /// `FABRIC_IFACE`: libfabric domain name.
    pub fabric_iface: Option<String>,
    /// `DDSTORE_NIC_MAP`: `nic=cpus;nic=cpus`.
    pub nic_map: Option<String>,
    /// `DDSTORE_TEST_FABRIC_LOCAL_MR`: register read destinations even when the
    /// provider does not need it (a testing aid for the FI_MR_LOCAL path).
    pub fabric_local_mr: bool,
    /// `DDSTORE_PROGRESS_SLEEP_US`: how long the serving progress thread
    /// sleeps between polls when its provider offers no wait object (shm).
    pub progress_sleep_us: u64,
    /// `DDSTORE_MPI_PROGRESS`: a method-0 store's progress thread, which
    /// lets MPI serve other ranks' passive-target reads of this rank's
    /// shards while the caller makes no MPI call (see [`MpiProgress`]).
    pub mpi_progress: MpiProgress,
    /// `DDSTORE_REQUEST_PRIORITY` (see [`RequestPriority`]).
    pub request_priority: RequestPriority,
    /// `DDSTORE_NODE_LOCAL`: copy rows owned by ranks of the same node
    /// straight from their shared-memory shards (default on; `0` turns it off).
    pub node_local: bool,
    /// `DDSTORE_TEST_NODE_LOCAL_WIDTH` (testing aid): treat each run of this many
    /// consecutive ranks of a node as a node of its own, so one machine can
    /// test stores spread over several "nodes". 0 (default): real nodes.
    pub node_local_width: u64,
    /// `DDSTORE_GPU`: 0 host only, auto (default), require.
    pub gpu: crate::gpu::Mode,
    /// `DDSTORE_GPU_STAGING`: stage device buffers through host memory
    /// where the transport cannot reach them (default on; 0 refuses them).
    pub gpu_staging: bool,
    /// `DDSTORE_GPU_STAGING_BYTES`: chunk (bounce buffer) size of staged reads.
    pub gpu_staging_bytes: u64,
    /// `DDSTORE_GPU_DIRECT`: read device buffers in place through FI_HMEM
    /// (auto: where the provider offers it; 1: always, else refuse; 0: never).
    pub gpu_direct: crate::gpu::direct::Direct,
    /// `DDSTORE_TEST_GPU_DIRECT_HOST_IFACE` (testing aid): present host shards and
    /// destinations to the provider as memory of this interface, so the
    /// GPUDirect registration path runs without a GPU.
    pub gpu_direct_host_iface: Option<crate::gpu::direct::Iface>,
    /// `DDSTORE_SHM_DIR` and `DDSTORE_HUGEPAGES`: where node-local segments
    /// live and whether they use huge pages.
    pub segments: Segments,
    /// `DDSTORE_TEST_REQUEST_DELAY_S` (testing aid): a request waits this
    /// long in its queue before a thread takes it, so a test can call
    /// MPI_Finalize with requests certainly not yet started. 0 (default): none.
    pub test_request_delay_s: f64,
    /// `DDSTORE_TEST_SEGMENT_DELAY_S` (testing aid): a node-local segment's
    /// creator waits this long after creating it, before its peers map it
    /// (the window in which a killed rank could leave it behind), so a test
    /// can kill a rank there. 0 (default): none.
    pub test_segment_delay_s: f64,
    /// `DDSTORE_SNAPSHOT_CHUNK_BYTES`: `dds_save` checksums every shard file
    /// in chunks of this many bytes (recorded in the manifest), the unit
    /// `dds_load` reads and verifies. Default 4 MiB.
    pub snapshot_chunk_bytes: u64,
    /// `DDSTORE_TEST_SAVE_DELAY_S` (testing aid): `dds_save` waits this long
    /// after each shard file it writes, so a test can kill the job mid-save.
    /// 0 (default): none.
    pub test_save_delay_s: f64,
}

impl Config {
    pub fn from_env() -> Result<Config> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Parses from any key lookup (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let text = |k: &str| get(k).filter(|v| !v.is_empty());
        for (old, new) in RENAMED_TEST_AIDS {
            if text(old).is_some() {
                bail!(InvalidArgument, "{old} is no longer read: it is a testing aid now named {new} (unset {old})");
            }
        }
        Ok(Config {
            alltoall_max_bytes: bytes_in(
                "DDSTORE_ALLTOALL_MAX_BYTES",
                text("DDSTORE_ALLTOALL_MAX_BYTES"),
                DEFAULT_ALLTOALL_MAX_BYTES,
                MAX_TRANSFER_BYTES,
            )?,
            batch_exchange: match text("DDSTORE_BATCH_EXCHANGE").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
                None | Some("auto") => Exchange::Auto,
                Some("alltoallv") => Exchange::Alltoallv,
                Some("sendrecv") => Exchange::SendRecv,
                Some(v) => {
                    bail!(InvalidArgument, "DDSTORE_BATCH_EXCHANGE={v:?} is not one of auto, alltoallv, sendrecv")
                }
            },
            batch_mode: match text("DDSTORE_BATCH_MODE").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
                None | Some("collective") => BatchMode::Collective,
                Some("onesided") | Some("one-sided") => BatchMode::Onesided,
                Some("auto") => BatchMode::Auto,
                Some(v) => bail!(InvalidArgument, "DDSTORE_BATCH_MODE={v:?} is not one of collective, onesided, auto"),
            },
            batch_auto_recheck: batches(
                "DDSTORE_BATCH_AUTO_RECHECK",
                text("DDSTORE_BATCH_AUTO_RECHECK"),
                DEFAULT_BATCH_AUTO_RECHECK,
            )?,
            test_batch_auto_penalty_s: seconds(
                "DDSTORE_TEST_BATCH_AUTO_PENALTY_S",
                text("DDSTORE_TEST_BATCH_AUTO_PENALTY_S"),
                0.0,
            )?,
            test_batch_auto_spread_s: seconds(
                "DDSTORE_TEST_BATCH_AUTO_SPREAD_S",
                text("DDSTORE_TEST_BATCH_AUTO_SPREAD_S"),
                0.0,
            )?,
            max_read_bytes: bytes_in(
                "DDSTORE_MAX_READ_BYTES",
                text("DDSTORE_MAX_READ_BYTES"),
                DEFAULT_MAX_READ_BYTES,
                MAX_TRANSFER_BYTES,
            )?,
            read_timeout_s: seconds("DDSTORE_READ_TIMEOUT_S", text("DDSTORE_READ_TIMEOUT_S"), DEFAULT_READ_TIMEOUT_S)?,
            profile: switch("DDSTORE_PROFILE", text("DDSTORE_PROFILE"), false)?,
            handshake_dir: text("DDSTORE_HANDSHAKE_DIR"),
            handshake_timeout_s: seconds(
                "DDSTORE_HANDSHAKE_TIMEOUT_S",
                text("DDSTORE_HANDSHAKE_TIMEOUT_S"),
                DEFAULT_HANDSHAKE_TIMEOUT_S,
            )?,
            fabric: text("DDSTORE_FABRIC"),
            fabric_iface: text("FABRIC_IFACE"),
            nic_map: text("DDSTORE_NIC_MAP"),
            fabric_local_mr: switch("DDSTORE_TEST_FABRIC_LOCAL_MR", text("DDSTORE_TEST_FABRIC_LOCAL_MR"), false)?,
            progress_sleep_us: micros(
                "DDSTORE_PROGRESS_SLEEP_US",
                text("DDSTORE_PROGRESS_SLEEP_US"),
                DEFAULT_PROGRESS_SLEEP_US,
            )?,
            mpi_progress: mpi_progress(text("DDSTORE_MPI_PROGRESS"))?,
            request_priority: request_priority(text("DDSTORE_REQUEST_PRIORITY"))?,
            node_local: switch("DDSTORE_NODE_LOCAL", text("DDSTORE_NODE_LOCAL"), true)?,
            node_local_width: ranks("DDSTORE_TEST_NODE_LOCAL_WIDTH", text("DDSTORE_TEST_NODE_LOCAL_WIDTH"))?,
            gpu: match text("DDSTORE_GPU") {
                None => crate::gpu::Mode::Auto,
                Some(v) => crate::gpu::Mode::parse(&v)?,
            },
            gpu_staging: switch("DDSTORE_GPU_STAGING", text("DDSTORE_GPU_STAGING"), true)?,
            gpu_staging_bytes: bytes_in(
                "DDSTORE_GPU_STAGING_BYTES",
                text("DDSTORE_GPU_STAGING_BYTES"),
                DEFAULT_GPU_STAGING_BYTES,
                MAX_STAGING_BYTES,
            )?,
            gpu_direct: match text("DDSTORE_GPU_DIRECT") {
                None => crate::gpu::direct::Direct::Auto,
                Some(v) => crate::gpu::direct::Direct::parse(&v)?,
            },
            gpu_direct_host_iface: text("DDSTORE_TEST_GPU_DIRECT_HOST_IFACE")
                .map(|v| crate::gpu::direct::Iface::parse(&v))
                .transpose()?,
            segments: Segments {
                dir: shm_dir(text("DDSTORE_SHM_DIR"))?,
                huge: text("DDSTORE_HUGEPAGES").map(|v| HugePages::parse(&v)).transpose()?.unwrap_or(HugePages::Auto),
            },
            test_request_delay_s: seconds("DDSTORE_TEST_REQUEST_DELAY_S", text("DDSTORE_TEST_REQUEST_DELAY_S"), 0.0)?,
            test_segment_delay_s: seconds("DDSTORE_TEST_SEGMENT_DELAY_S", text("DDSTORE_TEST_SEGMENT_DELAY_S"), 0.0)?,
            snapshot_chunk_bytes: bytes_in(
                "DDSTORE_SNAPSHOT_CHUNK_BYTES",
                text("DDSTORE_SNAPSHOT_CHUNK_BYTES"),
                DEFAULT_SNAPSHOT_CHUNK_BYTES,
                MAX_SNAPSHOT_CHUNK_BYTES,
            )?,
            test_save_delay_s: seconds("DDSTORE_TEST_SAVE_DELAY_S", text("DDSTORE_TEST_SAVE_DELAY_S"), 0.0)?,
        })
    }
}

/// `DDSTORE_REQUEST_PRIORITY` (any case, blanks trimmed; unset: the default).
fn request_priority(value: Option<String>) -> Result<RequestPriority> {
    let Some(v) = value else { return Ok(REQUEST_PRIORITIES[0].1) };
    let word = v.trim().to_ascii_lowercase();
    match REQUEST_PRIORITIES.iter().find(|(name, _)| *name == word) {
        Some(&(_, p)) => Ok(p),
        None => {
            let names: Vec<&str> = REQUEST_PRIORITIES.iter().map(|(n, _)| *n).collect();
            bail!(InvalidArgument, "DDSTORE_REQUEST_PRIORITY={v:?} is not one of {}", names.join(", "))
        }
    }
}

/// `DDSTORE_SHM_DIR`: an absolute path of an existing directory, at most
/// `MAX_SHM_DIR_BYTES` long (trailing slashes dropped); unset is /dev/shm.
/// Checked here, so a typo fails `dds_create` instead of quietly turning
/// node-local reads off at the first variable.
fn shm_dir(value: Option<String>) -> Result<String> {
    let Some(v) = value else { return Ok(DEFAULT_SHM_DIR.to_string()) };
    let dir = match v.trim_end_matches('/') {
        "" => "/",
        d => d,
    };
    if !dir.starts_with('/') || dir.len() > MAX_SHM_DIR_BYTES {
        bail!(InvalidArgument, "DDSTORE_SHM_DIR={v:?} is not an absolute path of at most {MAX_SHM_DIR_BYTES} bytes");
    }
    if !std::path::Path::new(dir).is_dir() {
        bail!(InvalidArgument, "DDSTORE_SHM_DIR={v:?} is not a directory (it must name a tmpfs or hugetlbfs mount)");
    }
    Ok(dir.to_string())
}

/// A whole number of bytes in [1, `max`].
pub fn bytes_in(var: &str, value: Option<String>, default: u64, max: u64) -> Result<u64> {
    let Some(v) = value else { return Ok(default) };
    match v.trim().parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => bail!(InvalidArgument, "{var}={v:?} is not a whole number of bytes in [1, {max}]"),
    }
}

/// A number of ranks in [1, MAX_NODE_LOCAL_WIDTH]; unset is 0 (no override).
pub fn ranks(var: &str, value: Option<String>) -> Result<u64> {
    let Some(v) = value else { return Ok(0) };
    match v.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_NODE_LOCAL_WIDTH).contains(&n) => Ok(n),
        _ => bail!(InvalidArgument, "{var}={v:?} is not a whole number of ranks in [1, {MAX_NODE_LOCAL_WIDTH}]"),
    }
}

/// `DDSTORE_BATCH_AUTO_RECHECK`'s default: a few per cent of the batches
/// are timed again (each check runs `batch_mode::PROBES` + 1 batches).
pub const DEFAULT_BATCH_AUTO_RECHECK: u64 = 256;
/// The largest `DDSTORE_BATCH_AUTO_RECHECK` (beyond it, use 0: never).
pub const MAX_BATCH_AUTO_RECHECK: u64 = 1 << 40;

/// A whole number of batches in [0, MAX_BATCH_AUTO_RECHECK].
pub fn batches(var: &str, value: Option<String>, default: u64) -> Result<u64> {
    let Some(v) = value else { return Ok(default) };
    match v.trim().parse::<u64>() {
        Ok(n) if n <= MAX_BATCH_AUTO_RECHECK => Ok(n),
        _ => bail!(
            InvalidArgument,
            "{var}={v:?} is not a whole number of batches in [0, {MAX_BATCH_AUTO_RECHECK}] (0: never check again)"
        ),
    }
}

/// A number of microseconds between 1 and 1,000,000.
pub fn micros(var: &str, value: Option<String>, default: u64) -> Result<u64> {
    let Some(v) = value else { return Ok(default) };
    match v.trim().parse::<u64>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => bail!(InvalidArgument, "{var}={v:?} is not a whole number of microseconds in [1, 1000000]"),
    }
}

/// The accepted spellings of an on/off switch (compared case-insensitively).
pub const SWITCH_ON: [&str; 4] = ["1", "on", "true", "yes"];
/// See [`SWITCH_ON`].
pub const SWITCH_OFF: [&str; 4] = ["0", "off", "false", "no"];

/// `auto`, or a word of `SWITCH_ON` or `SWITCH_OFF` (any case, surrounding
/// blanks ignored), as the value given for it in `[auto, on, off]`; None
/// for anything else. The words of `switch`, `DDSTORE_MPI_PROGRESS` and
/// `DDSTORE_GPU_DIRECT`.
pub fn auto_or_switch<T>(v: &str, [auto, on, off]: [T; 3]) -> Option<T> {
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" => Some(auto),
        t if SWITCH_ON.contains(&t) => Some(on),
        t if SWITCH_OFF.contains(&t) => Some(off),
        _ => None,
    }
}

/// An on/off switch: exactly one of `1`/`0`, `on`/`off`, `true`/`false`,
/// `yes`/`no` (any case, surrounding blanks ignored); anything else is refused.
pub fn switch(var: &str, value: Option<String>, default: bool) -> Result<bool> {
    let Some(v) = value else { return Ok(default) };
    match auto_or_switch(&v, [None, Some(true), Some(false)]).flatten() {
        Some(on) => Ok(on),
        None => bail!(InvalidArgument, "{var}={v:?} is not a switch: use 1/0, on/off, true/false or yes/no"),
    }
}

/// A finite number of seconds in [0, MAX_SECONDS] (one year).
pub fn seconds(var: &str, value: Option<String>, default: f64) -> Result<f64> {
    let Some(v) = value else { return Ok(default) };
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=MAX_SECONDS).contains(&s) => Ok(s),
        _ => bail!(InvalidArgument, "{var}={v:?} is not a number of seconds in [0, {MAX_SECONDS}] (one year)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<Config> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn renamed_test_aids_are_refused_naming_the_new_name() {
        for (old, new, value) in [
            ("DDSTORE_FABRIC_LOCAL_MR", "DDSTORE_TEST_FABRIC_LOCAL_MR", "1"),
            ("DDSTORE_NODE_LOCAL_WIDTH", "DDSTORE_TEST_NODE_LOCAL_WIDTH", "2"),
            ("DDSTORE_GPU_DIRECT_HOST_IFACE", "DDSTORE_TEST_GPU_DIRECT_HOST_IFACE", "system"),
        ] {
            let e = parse(&[(old, value)]).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::InvalidArgument, "{old}");
            assert_eq!(e.msg, format!("{old} is no longer read: it is a testing aid now named {new} (unset {old})"));
            // Also when the new name is set beside it: the old one is not
            // quietly ignored.
            assert!(parse(&[(old, value), (new, value)]).is_err(), "{old}");
            // Empty means unset, as for every setting.
            assert!(parse(&[(old, "")]).is_ok(), "{old}");
        }
        let c = parse(&[
            ("DDSTORE_TEST_FABRIC_LOCAL_MR", "1"),
            ("DDSTORE_TEST_NODE_LOCAL_WIDTH", "2"),
            ("DDSTORE_TEST_GPU_DIRECT_HOST_IFACE", "system"),
        ])
        .unwrap();
        assert!(c.fabric_local_mr);
        assert_eq!(c.node_local_width, 2);
        assert!(c.gpu_direct_host_iface.is_some());
    }

    #[test]
    fn defaults_when_unset_or_empty() {
        let c = parse(&[("DDSTORE_ALLTOALL_MAX_BYTES", "")]).unwrap();
        assert_eq!(c.alltoall_max_bytes, DEFAULT_ALLTOALL_MAX_BYTES);
        assert_eq!(c.max_read_bytes, DEFAULT_MAX_READ_BYTES);
        assert!(!c.profile);
        assert!(c.fabric.is_none());
        assert_eq!(c.progress_sleep_us, DEFAULT_PROGRESS_SLEEP_US);
        assert!(!c.fabric_local_mr);
        assert_eq!(c.mpi_progress, MpiProgress::Auto);
        for (v, want) in [
            ("on", MpiProgress::On),
            ("1", MpiProgress::On),
            ("0", MpiProgress::Off),
            ("off", MpiProgress::Off),
            (" AUTO ", MpiProgress::Auto),
            ("", MpiProgress::Auto),
        ] {
            assert_eq!(parse(&[("DDSTORE_MPI_PROGRESS", v)]).unwrap().mpi_progress, want, "{v}");
        }
        for v in ["sometimes", "2"] {
            let e = parse(&[("DDSTORE_MPI_PROGRESS", v)]).unwrap_err().msg;
            assert!(e.contains("DDSTORE_MPI_PROGRESS") && e.contains("auto"), "{e}");
        }
        assert_eq!(c.request_priority, RequestPriority::Batch);
        for (v, want) in [
            ("idle", RequestPriority::Idle),
            (" IDLE ", RequestPriority::Idle),
            ("normal", RequestPriority::Normal),
            ("Batch", RequestPriority::Batch),
        ] {
            assert_eq!(parse(&[("DDSTORE_REQUEST_PRIORITY", v)]).unwrap().request_priority, want);
        }
        for v in ["low", "0", "idle2", "batchy"] {
            let e = parse(&[("DDSTORE_REQUEST_PRIORITY", v)]).unwrap_err();
            assert!(e.msg.contains("DDSTORE_REQUEST_PRIORITY") && e.msg.contains("batch, normal, idle"), "{}", e.msg);
        }
        assert!(c.node_local);
        assert!(!parse(&[("DDSTORE_NODE_LOCAL", "0")]).unwrap().node_local);
        assert!(parse(&[("DDSTORE_NODE_LOCAL", "1")]).unwrap().node_local);
        assert!(parse(&[("DDSTORE_NODE_LOCAL", "maybe")]).unwrap_err().msg.contains("DDSTORE_NODE_LOCAL"));
        assert_eq!(c.gpu, crate::gpu::Mode::Auto);
        assert!(c.gpu_staging);
        assert_eq!(c.gpu_staging_bytes, DEFAULT_GPU_STAGING_BYTES);
        assert_eq!(parse(&[("DDSTORE_GPU", "0")]).unwrap().gpu, crate::gpu::Mode::Off);
        assert_eq!(parse(&[("DDSTORE_GPU", "require")]).unwrap().gpu, crate::gpu::Mode::Require);
        assert_eq!(parse(&[("DDSTORE_GPU", "false")]).unwrap().gpu, crate::gpu::Mode::Off);
        assert_eq!(parse(&[("DDSTORE_GPU", "True")]).unwrap().gpu, crate::gpu::Mode::Auto);
        assert!(!parse(&[("DDSTORE_GPU_STAGING", "0")]).unwrap().gpu_staging);
        use crate::gpu::direct::{Direct, Iface};
        assert_eq!(c.gpu_direct, Direct::Auto);
        assert_eq!(c.gpu_direct_host_iface, None);
        assert_eq!(parse(&[("DDSTORE_GPU_DIRECT", "off")]).unwrap().gpu_direct, Direct::Off);
        assert_eq!(parse(&[("DDSTORE_GPU_DIRECT", "1")]).unwrap().gpu_direct, Direct::On);
        let h = parse(&[("DDSTORE_TEST_GPU_DIRECT_HOST_IFACE", "System")]).unwrap();
        assert_eq!(h.gpu_direct_host_iface, Some(Iface::System));
    }

    #[test]
    fn parses_values() {
        let c = parse(&[
            ("DDSTORE_ALLTOALL_MAX_BYTES", "4096"),
            ("DDSTORE_PROFILE", "1"),
            ("DDSTORE_READ_TIMEOUT_S", "2.5"),
            ("DDSTORE_FABRIC", "hsn"),
            ("DDSTORE_BATCH_EXCHANGE", " SendRecv"),
            ("DDSTORE_BATCH_MODE", "OneSided "),
        ])
        .unwrap();
        assert_eq!(c.batch_mode, BatchMode::Onesided);
        assert_eq!(parse(&[]).unwrap().batch_mode, BatchMode::Collective);
        assert_eq!(parse(&[("DDSTORE_BATCH_MODE", "collective")]).unwrap().batch_mode, BatchMode::Collective);
        assert_eq!(parse(&[("DDSTORE_BATCH_MODE", " AUTO")]).unwrap().batch_mode, BatchMode::Auto);
        assert_eq!(c.batch_auto_recheck, DEFAULT_BATCH_AUTO_RECHECK);
        assert_eq!(parse(&[("DDSTORE_BATCH_AUTO_RECHECK", " 0")]).unwrap().batch_auto_recheck, 0);
        assert_eq!(parse(&[("DDSTORE_BATCH_AUTO_RECHECK", "3")]).unwrap().batch_auto_recheck, 3);
        assert_eq!(BatchMode::from_code(2).unwrap(), Some(BatchMode::Auto));
        assert!(BatchMode::from_code(3).unwrap_err().msg.contains("2 (auto)"));
        assert_eq!(c.alltoall_max_bytes, 4096);
        assert_eq!(c.batch_exchange, Exchange::SendRecv);
        assert!(c.profile);
        assert_eq!(c.read_timeout_s, 2.5);
        assert_eq!(c.fabric.as_deref(), Some("hsn"));
        assert!(!parse(&[("DDSTORE_PROFILE", "0")]).unwrap().profile);
    }

    #[test]
    fn rejects_bad_values_naming_the_variable() {
        for (k, v) in [
            ("DDSTORE_ALLTOALL_MAX_BYTES", "0"),
            ("DDSTORE_ALLTOALL_MAX_BYTES", "-5"),
            ("DDSTORE_MAX_READ_BYTES", "lots"),
            ("DDSTORE_READ_TIMEOUT_S", "-1"),
            ("DDSTORE_HANDSHAKE_TIMEOUT_S", "inf"),
            ("DDSTORE_PROGRESS_SLEEP_US", "0"),
            ("DDSTORE_PROGRESS_SLEEP_US", "2000000"),
            ("DDSTORE_BATCH_EXCHANGE", "p2p"),
            ("DDSTORE_BATCH_MODE", "async"),
            ("DDSTORE_BATCH_AUTO_RECHECK", "-1"),
            ("DDSTORE_BATCH_AUTO_RECHECK", "often"),
            ("DDSTORE_BATCH_AUTO_RECHECK", "1e3"),
            ("DDSTORE_BATCH_AUTO_RECHECK", "1099511627777"),
            ("DDSTORE_TEST_BATCH_AUTO_PENALTY_S", "-0.5"),
            ("DDSTORE_TEST_BATCH_AUTO_SPREAD_S", "wide"),
            ("DDSTORE_GPU", "sometimes"),
            ("DDSTORE_GPU_STAGING", "2"),
            ("DDSTORE_GPU_STAGING_BYTES", "0"),
            ("DDSTORE_GPU_DIRECT", "2"),
            ("DDSTORE_TEST_GPU_DIRECT_HOST_IFACE", "gpu"),
            ("DDSTORE_HUGEPAGES", "on"),
            ("DDSTORE_HUGEPAGES", "required"),
            ("DDSTORE_SHM_DIR", "dev/shm"),
            ("DDSTORE_SHM_DIR", "/no/such/ddstore/dir"),
            ("DDSTORE_SHM_DIR", "/proc/self/status"),
        ] {
            let e = parse(&[(k, v)]).unwrap_err();
            assert!(e.msg.contains(k), "{e}");
        }
    }

    #[test]
    fn segment_placement() {
        assert_eq!(parse(&[]).unwrap().segments, Segments::default());
        assert_eq!(Segments::default().dir, "/dev/shm");
        let c = parse(&[("DDSTORE_SHM_DIR", "/tmp//"), ("DDSTORE_HUGEPAGES", " Require")]).unwrap();
        assert_eq!(c.segments, Segments { dir: "/tmp".into(), huge: HugePages::Require });
        assert_eq!(parse(&[("DDSTORE_SHM_DIR", "/")]).unwrap().segments.dir, "/");
        for (v, want) in [("auto", HugePages::Auto), ("OFF", HugePages::Off), ("0", HugePages::Off)] {
            assert_eq!(parse(&[("DDSTORE_HUGEPAGES", v)]).unwrap().segments.huge, want, "{v}");
        }
        // The path must fit the record a segment's owner publishes.
        let long = format!("/tmp/{}", "d".repeat(MAX_SHM_DIR_BYTES));
        let e = parse(&[("DDSTORE_SHM_DIR", &long)]).unwrap_err();
        assert!(e.msg.contains("DDSTORE_SHM_DIR") && e.msg.contains("200 bytes"), "{e}");
        let e = parse(&[("DDSTORE_SHM_DIR", "/no/such/ddstore/dir")]).unwrap_err();
        assert!(e.msg.contains("not a directory"), "{e}");
    }

    /// Every number has a documented range (docs/environment.md): a value
    /// outside it is refused naming the variable and the range, never
    /// converted (1e300 seconds used to panic making a Duration).
    #[test]
    fn numbers_outside_their_range_are_refused_naming_the_range() {
        for (k, v, range) in [
            ("DDSTORE_READ_TIMEOUT_S", "1e300", "[0, 31536000]"),
            ("DDSTORE_HANDSHAKE_TIMEOUT_S", "1e300", "[0, 31536000]"),
            ("DDSTORE_READ_TIMEOUT_S", "31536000.5", "[0, 31536000]"),
            ("DDSTORE_HANDSHAKE_TIMEOUT_S", "NaN", "[0, 31536000]"),
            ("DDSTORE_ALLTOALL_MAX_BYTES", "18446744073709551615", "[1, 1099511627776]"),
            ("DDSTORE_ALLTOALL_MAX_BYTES", "9223372036854775808", "[1, 1099511627776]"),
            ("DDSTORE_MAX_READ_BYTES", "1099511627777", "[1, 1099511627776]"),
            ("DDSTORE_GPU_STAGING_BYTES", "17179869185", "[1, 17179869184]"),
            ("DDSTORE_PROGRESS_SLEEP_US", "1000001", "[1, 1000000]"),
            ("DDSTORE_TEST_NODE_LOCAL_WIDTH", "0", "[1, 2147483647]"),
            ("DDSTORE_TEST_NODE_LOCAL_WIDTH", "2147483648", "[1, 2147483647]"),
        ] {
            let e = parse(&[(k, v)]).unwrap_err();
            assert!(e.msg.contains(k) && e.msg.contains(range), "{k}={v}: {e}");
        }
        // The bounds themselves are accepted.
        let c = parse(&[
            ("DDSTORE_READ_TIMEOUT_S", "31536000"),
            ("DDSTORE_HANDSHAKE_TIMEOUT_S", "0"),
            ("DDSTORE_ALLTOALL_MAX_BYTES", "1099511627776"),
            ("DDSTORE_MAX_READ_BYTES", "1"),
            ("DDSTORE_GPU_STAGING_BYTES", "17179869184"),
            ("DDSTORE_TEST_NODE_LOCAL_WIDTH", "2147483647"),
        ])
        .unwrap();
        assert_eq!(c.read_timeout_s, MAX_SECONDS);
        assert_eq!(c.alltoall_max_bytes, MAX_TRANSFER_BYTES);
        assert_eq!(c.node_local_width, i32::MAX as u64);
        // A count of ranks is not called bytes.
        let e = parse(&[("DDSTORE_TEST_NODE_LOCAL_WIDTH", "-1")]).unwrap_err();
        assert!(e.msg.contains("ranks") && !e.msg.contains("bytes"), "{e}");
    }

    /// Every boolean variable accepts exactly 1/0, on/off, true/false,
    /// yes/no in any case; anything else is refused naming the variable
    /// (DDSTORE_PROFILE=off used to turn profiling on).
    #[test]
    fn every_switch_accepts_exactly_the_documented_spellings() {
        type Get = fn(&Config) -> bool;
        let switches: [(&str, Get); 4] = [
            ("DDSTORE_PROFILE", |c| c.profile),
            ("DDSTORE_TEST_FABRIC_LOCAL_MR", |c| c.fabric_local_mr),
            ("DDSTORE_NODE_LOCAL", |c| c.node_local),
            ("DDSTORE_GPU_STAGING", |c| c.gpu_staging),
        ];
        for (k, get) in &switches {
            for v in ["1", "on", "ON", "True", "yes", " Yes "] {
                assert!(get(&parse(&[(k, v)]).unwrap()), "{k}={v:?} should be on");
            }
            for v in ["0", "off", "OFF", "false", "FALSE", "no", "No"] {
                assert!(!get(&parse(&[(k, v)]).unwrap()), "{k}={v:?} should be off");
            }
            for v in ["2", "maybe", "enable", "y", "n", "00", "-1", "onn", "of"] {
                let e = parse(&[(k, v)]).unwrap_err();
                assert!(e.msg.contains(k) && e.msg.contains("on/off"), "{k}={v:?}: {e}");
            }
        }
    }
}
