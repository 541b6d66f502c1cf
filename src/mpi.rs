//! Small wrappers over mpi-sys: communicators, collectives, windows, datatypes.
//!
//! Every communicator and window we create gets `MPI_ERRORS_RETURN`, so MPI
//! failures come back as `Kind::Mpi` errors instead of aborting the job. Objects
//! are released only while MPI is still running: after `MPI_Finalize` they are
//! leaked, which is what makes `dds_destroy` safe at any time.

use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use mpi_sys as ffi;

use crate::error::{err, Error, Kind, Result};

/// Largest byte count passed to one MPI call (counts are C ints).
pub const MAX_CHUNK: usize = 1 << 30;

fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    let mut buf = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING bytes as the standard requires.
    unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr().cast(), &mut len) };
    buf.truncate(len.max(0) as usize);
    Err(err!(Mpi, "{what} failed: {} (MPI error {rc})", String::from_utf8_lossy(&buf)))
}

pub fn initialized() -> bool {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time.
    unsafe { ffi::MPI_Initialized(&mut flag) };
    flag != 0
}

pub fn finalized() -> bool {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Finalized may be called at any time.
    unsafe { ffi::MPI_Finalized(&mut flag) };
    flag != 0
}

/// True when MPI is usable now (initialised and not yet finalised).
pub fn running() -> bool {
    initialized() && !finalized()
}

/// True when MPI was initialised with `MPI_THREAD_MULTIPLE`.
pub fn thread_multiple() -> bool {
    let mut level: c_int = 0;
    // SAFETY: called only while MPI is running.
    unsafe { ffi::MPI_Query_thread(&mut level) };
    level >= ffi::MPI_THREAD_MULTIPLE as c_int
}

/// `MPI_Get_library_version` of the MPI this library is linked against, first
/// line only (MPI allows the call before `MPI_Init`).
pub fn library_version() -> String {
    let mut buf = vec![0u8; ffi::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING bytes as the standard requires.
    unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len) };
    buf.truncate(len.clamp(0, buf.len() as c_int) as usize);
    let text = String::from_utf8_lossy(&buf);
    text.lines().next().unwrap_or("").trim_matches(|c: char| c.is_whitespace() || c == '\0').to_string()
}

/// The shared object that provides our MPI symbols, and every other MPI
/// library loaded in the process. A second one means the caller (mpi4py,
/// or the program) was built against a different MPI than libddstore: the
/// two keep separate states, so MPI looks uninitialised to us. Paths are
/// canonical, so aliases of one file (libmpi.so.12 -> libmpich.so.12) match.
pub fn loaded_mpi_libraries() -> (Option<String>, Vec<String>) {
    let canonical = |p: &str| std::fs::canonicalize(p).map(|c| c.display().to_string()).unwrap_or(p.to_string());
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let sym = ffi::MPI_Initialized as *const c_void;
    // SAFETY: dladdr only reads the loader's tables; info outlives the call.
    let ours = if unsafe { libc::dladdr(sym, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
        Some(canonical(&unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy()))
    } else {
        None
    };
    unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid entry; data is the Vec below.
        let (info, names) = unsafe { (&*info, &mut *(data as *mut Vec<String>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned();
            if is_mpi_library(&name) {
                names.push(name);
            }
        }
        0
    }
    let mut names: Vec<String> = Vec::new();
    // SAFETY: visit matches the callback type and only touches `names`.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut names as *mut Vec<String>).cast()) };
    let mut others: Vec<String> = names.iter().map(|n| canonical(n)).filter(|n| Some(n) != ours.as_ref()).collect();
    others.sort();
    others.dedup();
    (ours, others)
}

/// True for the core library of an MPI implementation (not its Fortran or
/// C++ companions): Open MPI's libmpi, MPICH's libmpich or libmpi, Cray
/// MPICH's libmpi_cray and compiler-specific libmpi_gnu_NNN and the like.
fn is_mpi_library(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    let Some(stem) = base.split(".so").next().filter(|_| base.contains(".so")) else {
        return false;
    };
    const CRAY: [&str; 6] = ["libmpi_cray", "libmpi_gnu", "libmpi_intel", "libmpi_amd", "libmpi_nvidia", "libmpi_aocc"];
    stem == "libmpi" || stem == "libmpich" || CRAY.iter().any(|c| stem.starts_with(c))
}

/// The MPI family a version text names ("Open MPI", "MPICH", ...), for
/// both the build's mpi.h ("MPICH 4.0.2") and `MPI_Get_library_version`
/// ("MPICH Version: 4.0.2", "CRAY MPICH version 8.1", "Open MPI v4.1.4").
fn family(text: &str) -> Option<&'static str> {
    let t = text.to_ascii_lowercase();
    // Order matters: Intel MPI and MVAPICH are MPICH derivatives.
    [("intel", "Intel MPI"), ("mvapich", "MVAPICH"), ("open mpi", "Open MPI"), ("mpich", "MPICH")]
        .into_iter()
        .find(|(word, _)| t.contains(word))
        .map(|(_, name)| name)
}

/// The binary interface a family's mpi.h defines: MPICH, Intel MPI, MVAPICH
/// and Cray MPICH share MPICH's (integer handles, the same constants; the
/// MPICH ABI compatibility initiative), Open MPI has its own.
fn abi(family: &str) -> &str {
    match family {
        "Intel MPI" | "MVAPICH" => "MPICH",
        f => f,
    }
}

/// Whether a library built against the mpi.h named `built` may run on the
/// MPI whose version text is `running` (unknown on either side: yes).
fn abi_compatible(built: &str, running: &str) -> bool {
    match (family(built), family(running)) {
        (Some(b), Some(r)) => abi(b) == abi(r),
        _ => true,
    }
}

/// Fails when the MPI answering our calls does not have the binary interface
/// of the mpi.h we were compiled against: the caller loaded another MPI
/// first and the dynamic linker bound our MPI symbols to it (handles and
/// constants then mean nothing to it). An MPICH build runs on Intel MPI or
/// Cray MPICH (same ABI). Nothing is checked when either side is unknown.
pub fn check_same_mpi() -> Result<()> {
    let built = env!("DDSTORE_MPI_HEADER");
    let running = library_version();
    if abi_compatible(built, &running) {
        return Ok(());
    }
    let (ours, others) = loaded_mpi_libraries();
    let loaded: Vec<String> = ours.into_iter().chain(others).collect();
    Err(err!(
        BadState,
        "libddstore was built against {built} (its mpi.h), but another MPI library is loaded in this \
         process and answers its MPI calls: {running} (MPI libraries loaded: {}): the caller (mpi4py or \
         the program) was built against a different MPI. Build mpi4py against libddstore's MPI, or \
         libddstore against the caller's (docs/troubleshooting.md)",
        loaded.join(", ")
    ))
}

/// The error for `dds_create` when MPI is not initialised: names the other
/// MPI library when one is loaded, since that is the usual cause.
pub fn not_initialized_error() -> Error {
    let (ours, others) = loaded_mpi_libraries();
    let ours = ours.unwrap_or_else(|| "its MPI library".to_string());
    if others.is_empty() {
        return err!(
            BadState,
            "MPI is not initialized: call MPI_Init (or import mpi4py.MPI) before dds_create \
             (libddstore uses {ours}: {})",
            library_version()
        );
    }
    err!(
        BadState,
        "MPI is not initialized in the MPI that libddstore uses ({ours}: {}), but another MPI library is \
         loaded in this process ({}): the caller (mpi4py or the program) was built against a different MPI. \
         Build mpi4py against libddstore's MPI, or libddstore against the caller's (docs/troubleshooting.md)",
        library_version(),
        others.join(", ")
    )
}

static FINALIZE_BEGAN: AtomicBool = AtomicBool::new(false);

/// True once `MPI_Finalize` has started (and the `before_finalize` hook has
/// run). One atomic load, for read paths: a live store implies MPI was
/// initialised and the hook registered.
#[inline]
pub fn finalize_began() -> bool {
    FINALIZE_BEGAN.load(Ordering::Acquire)
}

static HOOK: once_cell::sync::OnceCell<fn()> = once_cell::sync::OnceCell::new();
static HOOK_RAN: AtomicBool = AtomicBool::new(false);

/// Runs the `before_finalize` hook, once per process however many ways
/// finalisation reaches it, then marks finalisation as begun.
fn run_finalize_hook() {
    if !HOOK_RAN.swap(true, Ordering::AcqRel) {
        if let Some(h) = HOOK.get() {
            // A panic must not unwind into MPI.
            let _ = std::panic::catch_unwind(h);
        }
    }
    FINALIZE_BEGAN.store(true, Ordering::Release);
}

/// `MPI_Finalize` as the caller reaches it through libddstore's own
/// definition (capi::finalize, the profiling interface's interception): runs
/// the hook *before* MPI begins to shut down, then the `MPI_Finalize` that
/// ours hides (the next definition in the search order: MPI's, or another
/// tool's), else `PMPI_Finalize`. Before MPI starts, unlike in the
/// attribute callback (`before_finalize`), MPICH still serialises threads.
/// `ours` is the address of libddstore's `MPI_Finalize`.
pub fn finalize_intercepted(ours: usize) -> c_int {
    run_finalize_hook();
    type Finalize = unsafe extern "C" fn() -> c_int;
    // SAFETY: dlsym only reads the loader's tables; a symbol found under
    // this name has MPI_Finalize's signature.
    unsafe {
        let next = libc::dlsym(libc::RTLD_NEXT, c"MPI_Finalize".as_ptr());
        if !next.is_null() && next as usize != ours {
            return std::mem::transmute::<*mut c_void, Finalize>(next)();
        }
        ffi::PMPI_Finalize()
    }
}

/// Arranges for `hook` to run at the start of `MPI_Finalize`, while MPI still
/// works: MPI deletes the attributes of `MPI_COMM_SELF` first thing during
/// finalisation, so a delete callback on one of them is the standard place
/// for a library to release its MPI objects. Registered once per process.
/// (MPICH 4.0 has by then stopped serialising threads, see `GATE`; where
/// the caller reaches libddstore's `MPI_Finalize`, `finalize_intercepted`
/// runs the hook before that.)
pub fn before_finalize(hook: fn()) -> Result<()> {
    use once_cell::sync::OnceCell;
    static REGISTERED: OnceCell<()> = OnceCell::new();

    unsafe extern "C" fn on_delete(_: ffi::MPI_Comm, _: c_int, _: *mut c_void, _: *mut c_void) -> c_int {
        run_finalize_hook();
        ffi::MPI_SUCCESS as c_int
    }

    // The attribute is never copied (what MPI_COMM_NULL_COPY_FN does). A NULL
    // copy function is that constant in MPICH but an invalid argument in
    // Open MPI, whose constant is a real function: so pass our own.
    unsafe extern "C" fn no_copy(
        _: ffi::MPI_Comm,
        _: c_int,
        _: *mut c_void,
        _: *mut c_void,
        _: *mut c_void,
        flag: *mut c_int,
    ) -> c_int {
        *flag = 0;
        ffi::MPI_SUCCESS as c_int
    }

    let _ = HOOK.set(hook);
    REGISTERED.get_or_try_init(|| {
        let mut key: c_int = 0;
        // SAFETY: standard keyval creation; the attribute value is unused.
        unsafe {
            check(
                ffi::MPI_Comm_create_keyval(Some(no_copy), Some(on_delete), &mut key, ptr::null_mut()),
                "MPI_Comm_create_keyval",
            )?;
            check(ffi::MPI_Comm_set_attr(ffi::RSMPI_COMM_SELF, key, ptr::null_mut()), "MPI_Comm_set_attr")
        }
    })?;
    Ok(())
}

/// The library's own threads (request threads, the method-0 progress
/// thread) call MPI one at a time, through this gate, and only in calls that
/// return at once (their blocking operations become tests in a loop, see
/// `complete_all`). Why: MPICH 4.0 stops taking its own locks early in
/// `MPI_Finalize` ("isThreaded = 0"), *before* it deletes `MPI_COMM_SELF`'s
/// attributes, i.e. before `before_finalize`'s hook can stop these threads.
/// From then until the hook has drained them, MPI no longer serialises two
/// library threads: two request threads in `MPI_Rget`/`MPI_Testsome` at once
/// aborted in UCX (`worker->inprogress++ == 0`, issue 35). Under the gate at
/// most one library thread is ever inside MPI; the caller's thread (inside
/// `MPI_Finalize`, and only calling MPI after the hook has stopped them) is
/// the other. Blocking inside the gate would let two stores' collective
/// threads deadlock across ranks (each holding its rank's gate in a
/// collective the other rank's thread cannot reach), hence only calls that
/// return at once.
static GATE: parking_lot::Mutex<()> = parking_lot::const_mutex(());

thread_local! {
    static LIBRARY_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as one of the library's own (see `GATE`).
pub fn mark_library_thread() {
    LIBRARY_THREAD.with(|t| t.set(true));
}

fn on_library_thread() -> bool {
    LIBRARY_THREAD.with(|t| t.get())
}

/// Held around each MPI call that returns at once: the gate on a library
/// thread, nothing elsewhere.
#[inline]
fn gate() -> Option<parking_lot::MutexGuard<'static, ()>> {
    on_library_thread().then(|| GATE.lock())
}

/// Runs one MPI call that returns at once; on a library thread, under the gate.
#[inline]
fn gated(call: impl FnOnce() -> c_int) -> c_int {
    let _g = gate();
    call()
}

/// A library thread waiting for MPI requests yields the core between tests
/// while requests keep completing, then sleeps `PATIENT_POLL` between them
/// once none has for `YIELD_FOR` (as one-sided request batches do).
const YIELD_FOR: std::time::Duration = std::time::Duration::from_millis(1);
const PATIENT_POLL: std::time::Duration = std::time::Duration::from_micros(100);

/// Completes every request of `reqs`: `MPI_Waitall` on the caller's
/// threads; on a library thread, `MPI_Testall` under the gate until all
/// are done (the gate is never held while waiting).
fn complete_all(reqs: &mut [ffi::MPI_Request]) -> c_int {
    if reqs.is_empty() {
        return ffi::MPI_SUCCESS as c_int;
    }
    if !on_library_thread() {
        // SAFETY: every element is a request started by this module (or null).
        return unsafe { ffi::MPI_Waitall(reqs.len() as c_int, reqs.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE) };
    }
    let started = std::time::Instant::now();
    loop {
        let mut flag: c_int = 0;
        // SAFETY: as above; MPI_Testall returns at once.
        let rc = gated(|| unsafe {
            ffi::MPI_Testall(reqs.len() as c_int, reqs.as_mut_ptr(), &mut flag, ffi::RSMPI_STATUSES_IGNORE)
        });
        if rc != ffi::MPI_SUCCESS as c_int || flag != 0 {
            return rc;
        }
        if started.elapsed() < YIELD_FOR {
            std::thread::yield_now();
        } else {
            std::thread::sleep(PATIENT_POLL);
        }
    }
}

/// The address to give MPI for a buffer of which `used` says whether any
/// element is sent or received. An empty Rust buffer's pointer is its
/// alignment (0x1 for bytes), which is `MPI_IN_PLACE` in Open MPI: MPI reads
/// nothing through a zero-count buffer, so a real, unused address stands in.
fn mpi_addr<T>(p: *const T, used: bool) -> *mut c_void {
    static NOTHING: u64 = 0;
    if used {
        p as *mut c_void
    } else {
        &NOTHING as *const u64 as *mut c_void
    }
}

/// A communicator. Owned ones (ours) are freed on drop while MPI runs.
pub struct Comm {
    raw: ffi::MPI_Comm,
    rank: usize,
    size: usize,
}

// SAFETY: MPI handles are plain values; thread safety of calls is governed by
// the MPI thread level, which the store enforces with its own locks.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

impl Comm {
    /// Duplicates the caller's communicator (given by its Fortran handle) into
    /// a private one, so our collectives never match the caller's.
    pub fn dup_from_fortran(comm_f: c_int) -> Result<Comm> {
        // SAFETY: f2c is a pure conversion; a NULL result is checked before use.
        let user = unsafe { ffi::RSMPI_Comm_f2c(comm_f) };
        if user == unsafe { ffi::RSMPI_COMM_NULL } {
            return Err(err!(InvalidArgument, "the communicator is MPI_COMM_NULL"));
        }
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: `user` is a communicator handle supplied by the caller.
        check(unsafe { ffi::MPI_Comm_dup(user, &mut raw) }, "MPI_Comm_dup")?;
        Comm::adopt(raw)
    }

    /// A private duplicate of `MPI_COMM_SELF` (method-2 extra members,
    /// which have no communicator of their own). Local.
    pub fn dup_self() -> Result<Comm> {
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: MPI_COMM_SELF is always valid while MPI runs.
        check(unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_SELF, &mut raw) }, "MPI_Comm_dup")?;
        Comm::adopt(raw)
    }

    fn adopt(raw: ffi::MPI_Comm) -> Result<Comm> {
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: `raw` is a valid communicator we just created.
        unsafe {
            check(ffi::MPI_Comm_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")?;
            check(ffi::MPI_Comm_rank(raw, &mut rank), "MPI_Comm_rank")?;
            check(ffi::MPI_Comm_size(raw, &mut size), "MPI_Comm_size")?;
        }
        Ok(Comm { raw, rank: rank as usize, size: size as usize })
    }

    /// Frees the communicator now, from the finalisation hook (MPI still
    /// runs). The handle must not be used afterwards: once MPI is finalised
    /// the store refuses every call but `dds_destroy`, and `Drop` frees
    /// nothing after finalisation, so this is the communicator's only free.
    pub fn release_before_finalize(&self) {
        let mut raw = self.raw;
        // SAFETY: a communicator we own, freed once (see above).
        unsafe { ffi::MPI_Comm_free(&mut raw) };
    }

    /// A private duplicate (collective): its collectives never match this
    /// communicator's, so another thread may run them at the same time.
    pub fn dup(&self) -> Result<Comm> {
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective over a valid communicator.
        check(unsafe { ffi::MPI_Comm_dup(self.raw, &mut raw) }, "MPI_Comm_dup")?;
        Comm::adopt(raw)
    }

    /// One turn of MPI's progress engine: an `MPI_Iprobe` on this
    /// communicator, on which nothing is ever sent (see
    /// transport::rma_progress). Needs MPI_THREAD_MULTIPLE when other threads
    /// call MPI.
    pub fn poke_progress(&self) {
        let mut flag: c_int = 0;
        // SAFETY: a valid communicator; the status is ignored.
        gated(|| unsafe {
            ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, ffi::RSMPI_ANY_TAG, self.raw, &mut flag, ffi::RSMPI_STATUS_IGNORE)
        });
    }

    /// Splits into consecutive groups of `width` ranks (key = rank).
    pub fn split_groups(&self, width: usize) -> Result<Comm> {
        let color = (self.rank / width) as c_int;
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective over a valid communicator.
        check(unsafe { ffi::MPI_Comm_split(self.raw, color, self.rank as c_int, &mut raw) }, "MPI_Comm_split")?;
        Comm::adopt(raw)
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn barrier(&self) -> Result<()> {
        // SAFETY: collective over a valid communicator.
        check(unsafe { ffi::MPI_Barrier(self.raw) }, "MPI_Barrier")
    }

    /// Gathers one plain value from every rank, in rank order.
    pub fn allgather<T: Copy + Default>(&self, mine: &T) -> Result<Vec<T>> {
        let mut all = vec![T::default(); self.size];
        let n = std::mem::size_of::<T>() as c_int;
        // SAFETY: `all` holds size * sizeof(T) bytes; T is plain data.
        check(
            unsafe {
                ffi::MPI_Allgather(
                    (mine as *const T).cast(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    all.as_mut_ptr().cast(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    self.raw,
                )
            },
            "MPI_Allgather",
        )?;
        Ok(all)
    }

    /// Concatenates every rank's `mine` (rank r contributes `counts[r]` values).
    pub fn allgatherv_i64(&self, mine: &[i64], counts: &[i64]) -> Result<Vec<i64>> {
        let total: i64 = counts.iter().sum();
        if total > i32::MAX as i64 {
            return Err(err!(
                InvalidArgument,
                "a collective batch of {total} rows over all ranks exceeds the {} rows MPI can gather at once",
                i32::MAX
            ));
        }
        let rc: Vec<c_int> = counts.iter().map(|&c| c as c_int).collect();
        let displs = exclusive_prefix(&rc);
        let mut all = vec![0i64; total as usize];
        // SAFETY: buffer sizes follow the counts and displacements just computed.
        check(
            unsafe {
                ffi::MPI_Allgatherv(
                    mpi_addr(mine.as_ptr(), !mine.is_empty()),
                    mine.len() as c_int,
                    ffi::RSMPI_INT64_T,
                    mpi_addr(all.as_mut_ptr(), !all.is_empty()),
                    rc.as_ptr(),
                    displs.as_ptr(),
                    ffi::RSMPI_INT64_T,
                    self.raw,
                )
            },
            "MPI_Allgatherv",
        )?;
        Ok(all)
    }

    /// Element-wise minimum over ranks.
    pub fn allreduce_min(&self, values: &mut [i64]) -> Result<()> {
        self.allreduce(values, unsafe { ffi::RSMPI_MIN })
    }

    /// Element-wise maximum over ranks.
    pub fn allreduce_max(&self, values: &mut [i64]) -> Result<()> {
        self.allreduce(values, unsafe { ffi::RSMPI_MAX })
    }

    fn allreduce(&self, values: &mut [i64], op: ffi::MPI_Op) -> Result<()> {
        let send = values.to_vec();
        // SAFETY: both buffers hold values.len() elements.
        check(
            unsafe {
                ffi::MPI_Allreduce(
                    mpi_addr(send.as_ptr(), !send.is_empty()),
                    mpi_addr(values.as_mut_ptr(), !values.is_empty()),
                    values.len() as c_int,
                    ffi::RSMPI_INT64_T,
                    op,
                    self.raw,
                )
            },
            "MPI_Allreduce",
        )
    }

    pub fn bcast(&self, buf: &mut [u8], root: usize) -> Result<()> {
        // SAFETY: every rank passes a buffer of the same length.
        check(
            unsafe {
                ffi::MPI_Bcast(
                    mpi_addr(buf.as_mut_ptr(), !buf.is_empty()),
                    buf.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    root as c_int,
                    self.raw,
                )
            },
            "MPI_Bcast",
        )
    }

    /// `MPI_Alltoallv` with counts and displacements in units of `dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn alltoallv(
        &self,
        send: *const u8,
        scounts: &[c_int],
        sdispls: &[c_int],
        recv: *mut u8,
        rcounts: &[c_int],
        rdispls: &[c_int],
        dtype: &Datatype,
    ) -> Result<()> {
        let (send, recv) =
            (mpi_addr(send, scounts.iter().any(|&c| c > 0)), mpi_addr(recv, rcounts.iter().any(|&c| c > 0)));
        let (sc, sd, rc, rd) = (scounts.as_ptr(), sdispls.as_ptr(), rcounts.as_ptr(), rdispls.as_ptr());
        if on_library_thread() {
            let mut r = [unsafe { ffi::RSMPI_REQUEST_NULL }];
            // SAFETY: as below; the buffers and arrays outlive the completion.
            check(
                gated(|| unsafe {
                    ffi::MPI_Ialltoallv(send, sc, sd, dtype.raw, recv, rc, rd, dtype.raw, self.raw, &mut r[0])
                }),
                "MPI_Ialltoallv",
            )?;
            return check(complete_all(&mut r), "MPI_Ialltoallv");
        }
        // SAFETY: the caller sized both buffers from these counts and displacements.
        check(
            unsafe { ffi::MPI_Alltoallv(send, sc, sd, dtype.raw, recv, rc, rd, dtype.raw, self.raw) },
            "MPI_Alltoallv",
        )
    }

    /// `MPI_Alltoall` of one C int per peer.
    pub fn alltoall_int(&self, send: &[c_int], recv: &mut [c_int]) -> Result<()> {
        debug_assert!(send.len() == self.size && recv.len() == self.size);
        let (int, s, r) = (unsafe { ffi::RSMPI_INT32_T }, send.as_ptr().cast(), recv.as_mut_ptr().cast());
        if on_library_thread() {
            let mut req = [unsafe { ffi::RSMPI_REQUEST_NULL }];
            // SAFETY: as below; both buffers outlive the completion.
            check(
                gated(|| unsafe { ffi::MPI_Ialltoall(s, 1, int, r, 1, int, self.raw, &mut req[0]) }),
                "MPI_Ialltoall",
            )?;
            return check(complete_all(&mut req), "MPI_Ialltoall");
        }
        // SAFETY: both buffers hold one int per rank.
        check(unsafe { ffi::MPI_Alltoall(s, 1, int, r, 1, int, self.raw) }, "MPI_Alltoall")
    }

    /// Starts receiving one `dtype` item from `from` into `buf` (tag 0).
    pub fn irecv(&self, buf: *mut u8, dtype: &Datatype, from: usize) -> Result<ffi::MPI_Request> {
        self.irecv_n(buf, 1, dtype, from)
    }

    /// Starts receiving `count` `dtype` items from `from` into `buf` (tag 0).
    pub fn irecv_n(&self, buf: *mut u8, count: c_int, dtype: &Datatype, from: usize) -> Result<ffi::MPI_Request> {
        let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the caller keeps `buf` (`count` items of `dtype`) alive until `waitall`.
        check(
            gated(|| unsafe { ffi::MPI_Irecv(buf.cast(), count, dtype.raw, from as c_int, 0, self.raw, &mut r) }),
            "MPI_Irecv",
        )?;
        Ok(r)
    }

    /// Starts sending one `dtype` item at `buf` to `to` (tag 0).
    pub fn isend(&self, buf: *const u8, dtype: &Datatype, to: usize, reqs: &mut Vec<ffi::MPI_Request>) -> Result<()> {
        self.isend_n(buf, 1, dtype, to, reqs)
    }

    /// Starts sending `count` `dtype` items at `buf` to `to` (tag 0).
    pub fn isend_n(
        &self,
        buf: *const u8,
        count: c_int,
        dtype: &Datatype,
        to: usize,
        reqs: &mut Vec<ffi::MPI_Request>,
    ) -> Result<()> {
        let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the caller keeps `buf` alive and unchanged until `waitall`.
        check(
            gated(|| unsafe {
                ffi::MPI_Isend(buf as *const c_void, count, dtype.raw, to as c_int, 0, self.raw, &mut r)
            }),
            "MPI_Isend",
        )?;
        reqs.push(r);
        Ok(())
    }

    /// Tests `reqs` without waiting: completed entries become
    /// `MPI_REQUEST_NULL` and their indices are left in `done`. Returns how
    /// many completed, maybe 0. Each call also turns MPI's progress engine.
    pub fn testsome(reqs: &mut [ffi::MPI_Request], done: &mut Vec<c_int>) -> Result<usize> {
        done.resize(reqs.len(), 0);
        let mut n: c_int = 0;
        // SAFETY: `done` holds reqs.len() indices; entries are requests
        // started by this module or MPI_REQUEST_NULL.
        let rc = gated(|| unsafe {
            ffi::MPI_Testsome(
                reqs.len() as c_int,
                reqs.as_mut_ptr(),
                &mut n,
                done.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        });
        check(rc, "MPI_Testsome")?;
        let n = if n == unsafe { ffi::RSMPI_UNDEFINED } { 0 } else { n.max(0) as usize };
        done.truncate(n);
        Ok(n)
    }

    /// Completes every request started by `irecv`/`isend` and empties `reqs`.
    pub fn waitall(reqs: &mut Vec<ffi::MPI_Request>) -> Result<()> {
        if reqs.is_empty() {
            return Ok(());
        }
        // Every element is a request started by this module.
        let rc = complete_all(reqs);
        reqs.clear();
        check(rc, "MPI_Waitall")
    }

    pub fn raw(&self) -> ffi::MPI_Comm {
        self.raw
    }
}

impl Comm {
    /// The ranks of this communicator that share this rank's node (one
    /// shared-memory domain), ordered by rank here. Collective.
    pub fn split_shared(&self) -> Result<Comm> {
        let mut raw = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective split of a valid communicator.
        check(
            unsafe {
                ffi::MPI_Comm_split_type(
                    self.raw,
                    ffi::MPI_COMM_TYPE_SHARED as c_int,
                    self.rank as c_int,
                    ffi::RSMPI_INFO_NULL,
                    &mut raw,
                )
            },
            "MPI_Comm_split_type",
        )?;
        Comm::adopt(raw)
    }

    /// True when every rank of this communicator runs on one node (one
    /// shared-memory domain). Collective.
    pub fn single_node(&self) -> Result<bool> {
        let mut shared = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: collective split of a valid communicator; freed below.
        unsafe {
            check(
                ffi::MPI_Comm_split_type(
                    self.raw,
                    ffi::MPI_COMM_TYPE_SHARED as c_int,
                    self.rank as c_int,
                    ffi::RSMPI_INFO_NULL,
                    &mut shared,
                ),
                "MPI_Comm_split_type",
            )?;
            let mut n: c_int = 0;
            let r = check(ffi::MPI_Comm_size(shared, &mut n), "MPI_Comm_size");
            ffi::MPI_Comm_free(&mut shared);
            r?;
            let mut all = [if n as usize == self.size { 1i64 } else { 0 }];
            self.allreduce_min(&mut all)?;
            Ok(all[0] == 1)
        }
    }
}

/// Folds each rank's local result into one decision: if any rank failed,
/// every rank returns the first failing rank's error (status and message).
/// Collective over `comm`.
pub fn agree<T>(comm: &Comm, local: Result<T>) -> Result<T> {
    let mut first = [if local.is_err() { comm.rank() as i64 } else { comm.size() as i64 }];
    comm.allreduce_min(&mut first)?;
    let root = first[0] as usize;
    if root == comm.size() {
        return local;
    }
    Err(share_error(comm, root, local.err().as_ref())?)
}

/// Collective: every rank learns rank `root`'s error (`mine` on `root`),
/// as "rank R: message" with R's kind. The message is truncated to 1 KiB.
pub fn share_error(comm: &Comm, root: usize, mine: Option<&Error>) -> Result<Error> {
    // 4 bytes of kind, then the message (truncated to fit).
    let mut buf = vec![0u8; 1024];
    if let Some(e) = mine.filter(|_| comm.rank() == root) {
        buf[..4].copy_from_slice(&(e.kind as i32).to_le_bytes());
        let msg = e.msg.as_bytes();
        let n = msg.len().min(buf.len() - 4);
        buf[4..4 + n].copy_from_slice(&msg[..n]);
    }
    comm.bcast(&mut buf, root)?;
    let kind = Kind::from_code(i32::from_le_bytes(buf[..4].try_into().unwrap()));
    let end = buf[4..].iter().position(|&b| b == 0).map_or(buf.len(), |i| i + 4);
    Ok(Error::new(kind, format!("rank {root}: {}", String::from_utf8_lossy(&buf[4..end]))))
}

impl Drop for Comm {
    fn drop(&mut self) {
        if running() {
            // SAFETY: we own this communicator; freeing is collective and the
            // store drops it from its collective tear-down path.
            unsafe { ffi::MPI_Comm_free(&mut self.raw) };
        }
    }
}

/// Exclusive prefix sums (displacements from counts).
pub fn exclusive_prefix(counts: &[c_int]) -> Vec<c_int> {
    let mut acc = 0;
    counts
        .iter()
        .map(|&c| {
            let d = acc;
            acc += c;
            d
        })
        .collect()
}

/// A committed datatype describing one row of `row_bytes` bytes, whatever its
/// size (rows over 2 GiB are built from 1 GiB blocks plus a remainder).
pub struct Datatype {
    raw: ffi::MPI_Datatype,
}

impl Datatype {
    pub fn row(row_bytes: u64) -> Result<Datatype> {
        let byte = unsafe { ffi::RSMPI_UINT8_T };
        let mut t = unsafe { ffi::RSMPI_DATATYPE_NULL };
        let _g = gate();
        // SAFETY: type constructors on valid predefined types; intermediate types are freed.
        unsafe {
            if row_bytes <= i32::MAX as u64 {
                check(ffi::MPI_Type_contiguous(row_bytes as c_int, byte, &mut t), "MPI_Type_contiguous")?;
            } else {
                let block = MAX_CHUNK as u64;
                let (blocks, rem) = (row_bytes / block, row_bytes % block);
                let mut chunk = ffi::RSMPI_DATATYPE_NULL;
                let mut body = ffi::RSMPI_DATATYPE_NULL;
                check(ffi::MPI_Type_contiguous(block as c_int, byte, &mut chunk), "MPI_Type_contiguous")?;
                check(ffi::MPI_Type_contiguous(blocks as c_int, chunk, &mut body), "MPI_Type_contiguous")?;
                if rem == 0 {
                    t = body;
                } else {
                    let mut tail = ffi::RSMPI_DATATYPE_NULL;
                    check(ffi::MPI_Type_contiguous(rem as c_int, byte, &mut tail), "MPI_Type_contiguous")?;
                    let lens = [1 as c_int, 1];
                    let displs = [0 as ffi::MPI_Aint, (blocks * block) as ffi::MPI_Aint];
                    let types = [body, tail];
                    check(
                        ffi::MPI_Type_create_struct(2, lens.as_ptr(), displs.as_ptr(), types.as_ptr(), &mut t),
                        "MPI_Type_create_struct",
                    )?;
                    ffi::MPI_Type_free(&mut body);
                    ffi::MPI_Type_free(&mut tail);
                }
                ffi::MPI_Type_free(&mut chunk);
            }
            check(ffi::MPI_Type_commit(&mut t), "MPI_Type_commit")?;
        }
        Ok(Datatype { raw: t })
    }
}

impl Drop for Datatype {
    fn drop(&mut self) {
        if running() {
            // SAFETY: we own this committed type.
            gated(|| unsafe { ffi::MPI_Type_free(&mut self.raw) });
        }
    }
}

/// An RMA window over memory the store owns, kept in a shared `lock_all`
/// epoch for its whole life so a read is just get + flush.
pub struct Window {
    raw: ffi::MPI_Win,
}

unsafe impl Send for Window {}
unsafe impl Sync for Window {}

impl Window {
    /// Collective over `comm`. `base` stays valid until `free`.
    pub fn create(base: *mut u8, bytes: usize, comm: &Comm) -> Result<Window> {
        let mut raw = unsafe { ffi::RSMPI_WIN_NULL };
        let base: *mut c_void = if bytes == 0 { ptr::null_mut() } else { base.cast() };
        // SAFETY: `base` covers `bytes` bytes and outlives the window.
        unsafe {
            check(
                ffi::MPI_Win_create(base, bytes as ffi::MPI_Aint, 1, ffi::RSMPI_INFO_NULL, comm.raw, &mut raw),
                "MPI_Win_create",
            )?;
            let w = Window { raw };
            check(ffi::MPI_Win_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN), "MPI_Win_set_errhandler")?;
            check(ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, raw), "MPI_Win_lock_all")?;
            Ok(w)
        }
    }

    /// Reads `len` bytes at byte offset `offset` of `target`'s window into `dst`,
    /// split into calls of at most 1 GiB, and waits for them.
    pub fn get(&self, dst: *mut u8, len: usize, target: usize, offset: u64) -> Result<()> {
        let started = self.get_start(dst, len, target, offset);
        // Flushed even when a piece failed to start: nothing may land later.
        let flushed = self.flush(target);
        started.and(flushed)
    }

    /// Completes every get this process started on `target` (in this
    /// window): their bytes have landed when it returns.
    pub fn flush(&self, target: usize) -> Result<()> {
        // SAFETY: flushing the epoch opened by lock_all.
        check(unsafe { ffi::MPI_Win_flush(target as c_int, self.raw) }, "MPI_Win_flush")
    }

    /// Starts reading `len` bytes at byte offset `offset` of `target`'s
    /// window into `dst` (calls of at most 1 GiB); `flush(target)` completes
    /// them. `dst` must stay valid and untouched until then.
    pub fn get_start(&self, dst: *mut u8, len: usize, target: usize, offset: u64) -> Result<()> {
        self.each_piece(dst, len, target, offset, |d, n, t, disp, byte, win| {
            // SAFETY: see `each_piece`.
            check(gated(|| unsafe { ffi::MPI_Get(d, n, byte, t, disp, n, byte, win) }), "MPI_Get")
        })
    }

    /// Starts reading like `get_start`, one request-based get (`MPI_Rget`)
    /// per piece, pushed onto `reqs`: the bytes have landed once those
    /// requests complete (`Comm::testsome`, `Comm::waitall`).
    pub fn rget(
        &self,
        dst: *mut u8,
        len: usize,
        target: usize,
        offset: u64,
        reqs: &mut Vec<ffi::MPI_Request>,
    ) -> Result<()> {
        self.each_piece(dst, len, target, offset, |d, n, t, disp, byte, win| {
            let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: see `each_piece`; the request is completed before `dst` is released.
            check(gated(|| unsafe { ffi::MPI_Rget(d, n, byte, t, disp, n, byte, win, &mut r) }), "MPI_Rget")?;
            reqs.push(r);
            Ok(())
        })
    }

    /// Calls `issue(dst, count, target, displacement, MPI_UINT8_T, window)`
    /// for each piece of at most `MAX_CHUNK` bytes of a read of `len` bytes at
    /// `offset` of `target`'s window into `dst`. The caller keeps `dst`
    /// (`len` bytes) valid until the reads complete; the store bounds-checked
    /// the target range.
    fn each_piece(
        &self,
        dst: *mut u8,
        len: usize,
        target: usize,
        offset: u64,
        mut issue: impl FnMut(*mut c_void, c_int, c_int, ffi::MPI_Aint, ffi::MPI_Datatype, ffi::MPI_Win) -> Result<()>,
    ) -> Result<()> {
        let byte = unsafe { ffi::RSMPI_UINT8_T };
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(MAX_CHUNK);
            let disp = (offset + done as u64) as ffi::MPI_Aint;
            issue(dst.wrapping_add(done).cast(), n as c_int, target as c_int, disp, byte, self.raw)?;
            done += n;
        }
        Ok(())
    }

    /// Synchronises the public and private copies of the local window memory.
    pub fn sync(&self) -> Result<()> {
        // SAFETY: inside the lock_all epoch.
        check(unsafe { ffi::MPI_Win_sync(self.raw) }, "MPI_Win_sync")
    }

    /// Collective release. Skipped (leaked) once MPI is finalised.
    pub fn free(&mut self) -> Result<()> {
        if !running() || self.raw == unsafe { ffi::RSMPI_WIN_NULL } {
            return Ok(());
        }
        // SAFETY: ends our epoch, then frees the window (collective).
        unsafe {
            let unlock = check(ffi::MPI_Win_unlock_all(self.raw), "MPI_Win_unlock_all");
            let free = check(ffi::MPI_Win_free(&mut self.raw), "MPI_Win_free");
            unlock.and(free)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_core_libraries_are_told_from_their_companions() {
        let core = [
            "/usr/lib/x86_64-linux-gnu/libmpi.so.40",
            "/usr/lib/x86_64-linux-gnu/libmpich.so.12",
            "libmpi.so.12.1.8",
            "/opt/cray/pe/lib64/libmpi_cray.so.12",
            "/opt/cray/pe/mpich/8.1.28/ofi/gnu/12.3/lib/libmpi_gnu_123.so.12",
            "/opt/cray/pe/lib64/libmpi_amd.so",
        ];
        let other = [
            "/usr/lib/x86_64-linux-gnu/libmpi_mpifh.so.40",
            "/usr/lib/x86_64-linux-gnu/libmpi_usempif08.so.40",
            "libmpi_cxx.so.40",
            "libmpicxx.so.12",
            "libmpifort.so.12",
            "libmpichfort.so.12",
            "/usr/lib/libddstore.so.0",
            "libmpi",
            "/home/u/libmpi.a",
            "",
        ];
        for p in core {
            assert!(is_mpi_library(p), "{p} is an MPI core library");
        }
        for p in other {
            assert!(!is_mpi_library(p), "{p} is not an MPI core library");
        }
    }

    #[test]
    fn mpi_families_are_named_alike_in_headers_and_version_strings() {
        let cases = [
            ("MPICH 4.0.2", Some("MPICH")),
            ("MPICH Version:\t4.0.2", Some("MPICH")),
            ("MPI VERSION    : CRAY MPICH version 8.1.28.2 (ANL base 3.4a2)", Some("MPICH")),
            ("Open MPI 4.1.4", Some("Open MPI")),
            ("Open MPI v4.1.4, package: Debian OpenMPI", Some("Open MPI")),
            ("Intel(R) MPI Library 2021.10 for Linux* OS", Some("Intel MPI")),
            ("Intel MPI 2021.10", Some("Intel MPI")),
            ("MVAPICH2 Version      :\t2.3.7", Some("MVAPICH")),
            ("", None),
            ("Some MPI 1.0", None),
        ];
        for (text, want) in cases {
            assert_eq!(family(text), want, "{text:?}");
        }
        // MPICH-ABI libraries run an MPICH build (the claim Cray and Intel MPI
        // users rely on; make test-mpis runs it under Intel MPI); Open MPI
        // does not, either way.
        assert!(abi_compatible("MPICH 4.0.2", "Intel(R) MPI Library 2021.19.0 for Linux* OS"));
        assert!(abi_compatible("MPICH 4.0.2", "MPI VERSION    : CRAY MPICH version 8.1.28.2"));
        assert!(abi_compatible("MPICH 4.0.2", "MPICH Version:      5.0.2"));
        assert!(abi_compatible("Intel MPI 2021.19", "MPICH Version:\t4.0.2"));
        assert!(!abi_compatible("MPICH 4.0.2", "Open MPI v5.0.11"));
        assert!(!abi_compatible("Open MPI 4.1.4", "Intel(R) MPI Library 2021.19.0"));
        assert!(abi_compatible("Some MPI 1.0", "Open MPI v5.0.11"));
        // The build recorded the MPI of this build, and it is the one running here.
        assert_eq!(family(env!("DDSTORE_MPI_HEADER")), family(&library_version()));
        check_same_mpi().unwrap();
    }

    #[test]
    fn our_mpi_library_is_found_and_named() {
        let (ours, _) = loaded_mpi_libraries();
        let ours = ours.expect("dladdr finds the object that defines MPI_Initialized");
        assert!(is_mpi_library(&ours), "{ours} is an MPI core library");
        assert!(!library_version().is_empty());
    }
}
