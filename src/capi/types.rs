//! Types shared by every C entry point: status codes, the options struct, the
//! variable-info and counter structs, and the opaque store handle.
//!
//! Structs that cross the ABI start with `struct_size`, so a newer library can
//! accept an older caller's (smaller) struct and an older library can refuse a
//! struct it does not know.

use std::os::raw::c_char;

/// Result of every libddstore call. `DDS_OK` (0) is success; any other value is
/// an error whose explanation `dds_last_error()` returns on the same thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum dds_status {
    /// Success.
    DDS_OK = 0,
    /// An argument is invalid: NULL pointer, negative count, bad option value.
    DDS_ERR_INVALID_ARGUMENT = 1,
    /// No variable of that name is registered in the store.
    DDS_ERR_UNKNOWN_VARIABLE = 2,
    /// A variable of that name is already registered in the store.
    DDS_ERR_DUPLICATE_VARIABLE = 3,
    /// A global row index or local row offset is outside the variable.
    DDS_ERR_INDEX_OUT_OF_RANGE = 4,
    /// A buffer size, item size or row width does not match the variable.
    DDS_ERR_MISMATCH = 5,
    /// The call is not valid in the store's current state or role (epoch
    /// misuse, destroyed handle, MPI already finalised, wrong method-2 role).
    DDS_ERR_BAD_STATE = 6,
    /// The operation or option is not supported by this build or backend.
    DDS_ERR_UNSUPPORTED = 7,
    /// An MPI call failed.
    DDS_ERR_MPI = 8,
    /// A libfabric call failed.
    DDS_ERR_FABRIC = 9,
    /// A GPU runtime call failed.
    DDS_ERR_GPU = 10,
    /// A wait exceeded its time limit (a peer is gone or unreachable).
    DDS_ERR_TIMEOUT = 11,
    /// Memory could not be allocated.
    DDS_ERR_NO_MEMORY = 12,
    /// A file operation failed (method-2 hand-shake directory).
    DDS_ERR_IO = 13,
    /// A bug in libddstore (a caught panic); please report it.
    DDS_ERR_INTERNAL = 14,
}

/// Opaque store handle: one distributed store over one communicator (or one
/// group of it). Created by `dds_create`, released by `dds_destroy`.
pub struct dds_store {
    _private: [u8; 0],
}

/// Method 0: MPI one-sided (RMA windows). Batched reads are collective.
pub const DDS_METHOD_MPI: i32 = 0;
/// Method 1: libfabric RDMA, addresses exchanged over MPI. Reads are one-sided.
pub const DDS_METHOD_FABRIC: i32 = 1;
/// Method 2: libfabric RDMA between a core job and separate extra jobs.
pub const DDS_METHOD_SPLIT: i32 = 2;

/// Method 2 role: a member of the core job, which holds and publishes data.
pub const DDS_ROLE_CORE: i32 = 0;
/// Method 2 role: an extra member, which joins published variables and reads.
pub const DDS_ROLE_EXTRA: i32 = 1;

/// Options for `dds_create`. Always initialise with `dds_options_init`, then
/// change the fields you need; string fields are copied by `dds_create`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct dds_options {
    /// Size of this struct in bytes, set by `dds_options_init`.
    pub struct_size: u32,
    /// Backend: `DDS_METHOD_MPI` (default), `DDS_METHOD_FABRIC` or `DDS_METHOD_SPLIT`.
    pub method: i32,
    /// Method 2 only: `DDS_ROLE_CORE` (default) or `DDS_ROLE_EXTRA`.
    pub role: i32,
    /// Group width: split the communicator into consecutive groups of this many
    /// ranks, each an independent store holding its own copy of the data
    /// (DDStore's `ddstore_width`). 0 (default) means one group of all ranks.
    pub width: i32,
    /// Method 2 extra members: number of ranks in the core job.
    pub n_core: i32,
    /// Method 2: hand-shake directory; NULL means `DDSTORE_HANDSHAKE_DIR`, else `./ddstore_hs`.
    pub handshake_dir: *const c_char,
    /// Methods 1 and 2: libfabric provider; NULL means `DDSTORE_FABRIC`, else automatic.
    pub fabric_provider: *const c_char,
    /// Methods 1 and 2: libfabric domain (interface); NULL means `FABRIC_IFACE`, else automatic.
    pub fabric_iface: *const c_char,
    /// Methods 1 and 2: CPU-to-NIC map `nic=cpus;nic=cpus`; NULL means `DDSTORE_NIC_MAP`.
    pub nic_map: *const c_char,
    /// Device memory: `DDS_GPU_ENV` (default: `DDSTORE_GPU` decides),
    /// `DDS_GPU_OFF` (every buffer is host memory), `DDS_GPU_AUTO` (device
    /// buffers are recognised when a GPU driver is present) or
    /// `DDS_GPU_REQUIRE` (as auto; `dds_create` fails with DDS_ERR_GPU when no
    /// driver is usable). (A later field, with `gpu_staging`: callers built
    /// against older headers pass a smaller `struct_size` and get the default.)
    pub gpu: i32,
    /// -1 (default: `DDSTORE_GPU_STAGING` decides), 1 to stage device
    /// buffers through pinned host memory, 0 to refuse them with DDS_ERR_GPU.
    pub gpu_staging: i32,
    /// Method 0 `dds_get_batch`: `DDS_BATCH_ENV` (default: `DDSTORE_BATCH_MODE`
    /// decides, else collective), `DDS_BATCH_COLLECTIVE` (DDStore 3.0: every
    /// rank calls, the same number of times, from one thread) or
    /// `DDS_BATCH_ONESIDED` (pipelined passive-target gets: no matching calls,
    /// thread-safe) or `DDS_BATCH_AUTO` (called as collective; each variable
    /// runs in the mode its first batches found faster). Must be the same on
    /// every rank. Methods 1 and 2 are always one-sided. (A later field:
    /// older callers get the default.)
    pub batch_mode: i32,
}

/// `dds_options.batch_mode`: `DDSTORE_BATCH_MODE` decides (default collective).
pub const DDS_BATCH_ENV: i32 = -1;
/// `dds_options.batch_mode`: method-0 batches are collective (DDStore 3.0).
pub const DDS_BATCH_COLLECTIVE: i32 = 0;
/// `dds_options.batch_mode`: method-0 batches are one-sided and thread-safe.
pub const DDS_BATCH_ONESIDED: i32 = 1;
/// `dds_options.batch_mode`: method-0 batches are called as collective; per
/// variable the store times both modes and keeps the faster (every rank
/// must make every call, even while one-sided is chosen).
pub const DDS_BATCH_AUTO: i32 = 2;

/// `dds_fail_collective`: the call is `dds_add` or `dds_init`.
pub const DDS_CALL_ADD: i32 = 1;
/// `dds_fail_collective`: the call is `dds_get_batch` (collective for method 0).
pub const DDS_CALL_GET_BATCH: i32 = 2;
/// `dds_fail_collective`: the call is `dds_remove`.
pub const DDS_CALL_REMOVE: i32 = 3;
/// `dds_fail_collective`: the call is `dds_epoch_begin`.
pub const DDS_CALL_EPOCH_BEGIN: i32 = 4;
/// `dds_fail_collective`: the call is `dds_epoch_end`.
pub const DDS_CALL_EPOCH_END: i32 = 5;
/// `dds_fail_collective`: the call is `dds_wait_extras`.
pub const DDS_CALL_WAIT_EXTRAS: i32 = 6;
/// `dds_fail_collective`: the call is `dds_add_ragged`.
pub const DDS_CALL_ADD_RAGGED: i32 = 7;
/// `dds_fail_collective`: the call is `dds_get_ragged_batch` or
/// `dds_get_ragged` (collective in the method-0 collective batch mode).
pub const DDS_CALL_GET_RAGGED_BATCH: i32 = 8;
/// `dds_fail_collective`: the call is `dds_ragged_lengths` (collective in
/// the method-0 collective batch mode).
pub const DDS_CALL_RAGGED_LENGTHS: i32 = 9;
/// `dds_fail_collective`: the call is `dds_get_batch_start` (collective in
/// the method-0 collective batch mode).
pub const DDS_CALL_GET_BATCH_START: i32 = 10;
/// `dds_fail_collective`: the call is `dds_save`.
pub const DDS_CALL_SAVE: i32 = 11;
/// `dds_fail_collective`: the call is `dds_load`.
pub const DDS_CALL_LOAD: i32 = 12;

/// `dds_options.gpu`: use `DDSTORE_GPU` (default auto).
pub const DDS_GPU_ENV: i32 = -1;
/// `dds_options.gpu`: host memory only; pointers are not classified.
pub const DDS_GPU_OFF: i32 = 0;
/// `dds_options.gpu`: recognise device memory when a GPU driver is present.
pub const DDS_GPU_AUTO: i32 = 1;
/// `dds_options.gpu`: as `DDS_GPU_AUTO`, and fail at `dds_create` without a driver.
pub const DDS_GPU_REQUIRE: i32 = 2;

/// `dds_pointer_kind`: memory the CPU can address (heap, stack, mmap, shared,
/// pinned or managed memory).
pub const DDS_MEM_HOST: i32 = 0;
/// `dds_pointer_kind`: CUDA device memory.
pub const DDS_MEM_CUDA: i32 = 1;
/// `dds_pointer_kind`: ROCm (HIP) device memory.
pub const DDS_MEM_ROCM: i32 = 2;

/// `dds_var_info.device_path`: device buffers are not recognised (GPU
/// support off, or no GPU driver); every pointer is taken as host memory.
pub const DDS_PATH_HOST_ONLY: i32 = 0;
/// `dds_var_info.device_path`: rows reach device buffers through pinned
/// host bounce buffers and an asynchronous host-to-device copy.
pub const DDS_PATH_STAGED: i32 = 1;
/// `dds_var_info.device_path`: rows are read straight into device memory
/// (libfabric FI_HMEM, methods 1 and 2 with a provider reporting it).
pub const DDS_PATH_GPUDIRECT: i32 = 2;
/// `dds_var_info.device_path`: device buffers are refused with DDS_ERR_GPU
/// (`DDSTORE_GPU_STAGING=0` and no GPUDirect).
pub const DDS_PATH_REFUSED: i32 = 3;

// The codes above are the header's; the library's own enums carry the same
// numbers, and the build fails if the two lists ever differ.
const _: () = {
    use crate::store::{DevicePath as Path, MemKind};
    assert!(MemKind::Host.code() == DDS_MEM_HOST);
    assert!(MemKind::Cuda(0).code() == DDS_MEM_CUDA);
    assert!(MemKind::Rocm(0).code() == DDS_MEM_ROCM);
    assert!(Path::HostOnly as i32 == DDS_PATH_HOST_ONLY);
    assert!(Path::Staged as i32 == DDS_PATH_STAGED);
    assert!(Path::GpuDirect as i32 == DDS_PATH_GPUDIRECT);
    assert!(Path::Refused as i32 == DDS_PATH_REFUSED);
    use crate::store::BatchMode;
    assert!(BatchMode::Collective as i32 == DDS_BATCH_COLLECTIVE);
    assert!(BatchMode::Onesided as i32 == DDS_BATCH_ONESIDED);
    assert!(BatchMode::Auto as i32 == DDS_BATCH_AUTO);
};

/// Longest hand-shake directory `dds_settings` holds, with its NUL.
pub const DDS_SETTINGS_PATH_BYTES: usize = 4096;

/// The settings a store runs with once its options and the environment are
/// resolved, filled by `dds_store_settings`. Set `struct_size =
/// sizeof(dds_settings)` first.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct dds_settings {
    /// Size of this struct in bytes, set by the caller.
    pub struct_size: u32,
    /// `DDS_METHOD_MPI`, `DDS_METHOD_FABRIC` or `DDS_METHOD_SPLIT`.
    pub method: i32,
    /// `DDS_ROLE_CORE`, or `DDS_ROLE_EXTRA` for a method-2 extra member.
    pub role: i32,
    /// `DDS_BATCH_COLLECTIVE`, `DDS_BATCH_ONESIDED` or `DDS_BATCH_AUTO`
    /// (methods 1 and 2 are always one-sided); never `DDS_BATCH_ENV`.
    pub batch_mode: i32,
    /// `DDS_GPU_OFF`, `DDS_GPU_AUTO` or `DDS_GPU_REQUIRE`; never `DDS_GPU_ENV`.
    pub gpu: i32,
    /// 1 if device buffers are staged through pinned host memory, 0 if refused.
    pub gpu_staging: i32,
    /// 1 if `DDSTORE_PROFILE` timers run.
    pub profiling: i32,
    /// 1 if same-node rows are read from shared memory (`DDSTORE_NODE_LOCAL`).
    pub node_local: i32,
    /// 1 if the method-0 progress thread runs (`DDSTORE_MPI_PROGRESS`).
    pub mpi_progress: i32,
    /// Method 2's hand-shake directory (for other methods, the one a
    /// method-2 store would use), NUL-terminated. (4096 is
    /// `DDS_SETTINGS_PATH_BYTES`, written out for the bindings' parsers.)
    pub handshake_dir: [c_char; 4096],
}
const _: () = assert!(std::mem::size_of::<[c_char; DDS_SETTINGS_PATH_BYTES]>() == 4096);

/// Description of one variable, filled by `dds_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct dds_var_info {
    /// Set by the caller to `sizeof(dds_var_info)` before the call.
    pub struct_size: u32,
    /// Bytes per element (1, 2, 4 or 8).
    pub item_size: i32,
    /// Rows of the whole variable (all ranks of the group).
    pub total_rows: i64,
    /// Rows held by the calling rank (0 for method-2 extra members).
    pub local_rows: i64,
    /// Elements per row.
    pub row_elems: i64,
    /// Bytes per row (`row_elems * item_size`).
    pub row_bytes: i64,
    /// Backend of the store (`DDS_METHOD_*`).
    pub method: i32,
    /// Number of ranks holding shards of this variable.
    pub n_ranks: i32,
    /// NUL-terminated name of the transport serving remote rows, e.g.
    /// `"mpi-rma"` or `"fabric:tcp;ofi_rxm@lo"`.
    pub transport: [c_char; 64],
    /// 1 when rows owned by ranks of this node are copied directly from
    /// their shared memory (node-local reads, `DDSTORE_NODE_LOCAL`); 0 when
    /// only this rank's own rows are. (From here on, later fields: older
    /// callers pass a smaller `struct_size` and do not receive them.)
    pub node_local: i32,
    /// Ranks whose rows this rank copies directly, itself included (the
    /// store's ranks on this node when `node_local` is 1, else 1).
    pub node_ranks: i32,
    /// How rows reach device destinations: `DDS_PATH_*`.
    pub device_path: i32,
    /// 1 for a ragged variable (`dds_add_ragged`): its rows are the
    /// samples' rows back to back, `total_rows` and `local_rows` count
    /// rows, the fields below count samples. 0 for fixed rows. (Added in
    /// 0.4; older callers pass a smaller `struct_size` and do not receive
    /// it or the fields below.)
    pub is_ragged: i32,
    /// Ragged: samples of the whole variable (fixed rows: `total_rows`).
    pub total_samples: i64,
    /// Ragged: samples held by the calling rank (fixed rows: `local_rows`).
    pub local_samples: i64,
    /// Ragged: rows of all samples together (the same as `total_rows`).
    pub total_items: i64,
}

/// Per-variable counters, filled by `dds_profile`. Times are in nanoseconds and
/// only advance while profiling is on (`DDSTORE_PROFILE=1`); counts always do.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct dds_counters {
    /// Set by the caller to `sizeof(dds_counters)` before the call.
    pub struct_size: u32,
    /// 1 when timing is on (`DDSTORE_PROFILE` set and not "0"), else 0.
    pub profiling: u32,
    /// `dds_get` calls plus non-empty `dds_get_batch` calls.
    pub calls: u64,
    /// Rows read (`count` for `dds_get`, batch length for `dds_get_batch`).
    pub rows: u64,
    /// Bytes read into destinations.
    pub bytes: u64,
    /// Rows copied directly from memory of the same process or node.
    pub rows_local: u64,
    /// Rows that travelled through the transport (MPI or libfabric).
    pub rows_remote: u64,
    /// Time waiting for the variable's read lock.
    pub lock_wait_ns: u64,
    /// Time choosing or registering destination memory.
    pub mr_ns: u64,
    /// Destination registrations done because no registered buffer covered the destination.
    pub mr_miss: u64,
    /// Time posting reads (method 1/2) or exchanging rows (method 0).
    pub read_ns: u64,
    /// Time waiting for completions.
    pub cq_ns: u64,
    /// Method-0 collective batches: bytes of requests (per-peer counts and
    /// row indices) this rank sent to other ranks. (A later field: older
    /// callers pass a smaller `struct_size` and do not receive it.)
    pub req_bytes_sent: u64,
    /// Method-0 collective batches: bytes of requests this rank received
    /// from other ranks (what it was asked for, and the counts).
    pub req_bytes_recv: u64,
    /// Method 0: the mode this variable's batches run in now,
    /// `DDS_BATCH_COLLECTIVE` or `DDS_BATCH_ONESIDED` (in the auto batch
    /// mode, the last check's choice; collective before the first). Methods
    /// 1 and 2: `DDS_BATCH_ONESIDED`. (A later field, as are the two
    /// below: older callers pass a smaller `struct_size`.)
    pub batch_mode: u64,
    /// Auto batch mode: checks made (each times both modes, in 1 to 4
    /// rounds of 16 batches, and chooses; counted once, at its choice).
    pub batch_checks: u64,
    /// Auto batch mode: batches that ran one-sided (timed ones included).
    pub batch_calls_onesided: u64,
}

/// The one conversion from a counter snapshot to the C struct (with
/// `struct_size` the full size and `profiling` 0: the caller sets both).
impl From<crate::store::Snapshot> for dds_counters {
    fn from(s: crate::store::Snapshot) -> dds_counters {
        // One list of fields takes `s` apart (no `..`) and builds the
        // literal: a counter in one struct and not the other fails the build.
        macro_rules! carry {
            ($($f:ident),*) => {{
                let crate::store::Snapshot { $($f),* } = s;
                dds_counters { struct_size: std::mem::size_of::<dds_counters>() as u32, profiling: 0, $($f),* }
            }};
        }
        carry!(
            calls,
            rows,
            bytes,
            rows_local,
            rows_remote,
            lock_wait_ns,
            mr_ns,
            mr_miss,
            read_ns,
            cq_ns,
            req_bytes_sent,
            req_bytes_recv,
            batch_mode,
            batch_checks,
            batch_calls_onesided
        )
    }
}
