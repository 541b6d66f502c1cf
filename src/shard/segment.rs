//! Shared-memory segments: the memory of a shard when node-local reads are
//! on (created and filled by its owner) and the read-only mappings of
//! peers' segments (`transport::local` maps them).
//!
//! A segment is a file in `DDSTORE_SHM_DIR` (default /dev/shm, where
//! `shm_open` would put it), so any tmpfs or hugetlbfs mount can hold it; its
//! owner publishes the file's whole path (`SegmentId`), so a peer opens the
//! backing the owner chose even when the owner fell back elsewhere.
//!
//! Huge pages, and why: every rank maps every same-node peer's segment, so
//! with 4 KiB pages its page tables hold 2 MiB per GiB of the node's shards
//! (0.2%). 2 MiB pages cut that 512-fold and speed random row copies (fewer
//! TLB misses). Two ways, both governed by `DDSTORE_HUGEPAGES`:
//! - hugetlbfs (`DDSTORE_SHM_DIR` on a hugetlbfs mount): pages come from the
//!   pool the administrator reserved (vm.nr_hugepages) and are reserved for
//!   the whole segment when it is mapped, so a segment either gets them all
//!   or fails at once (`auto` then quietly uses /dev/shm, `require` fails).
//!   File and mapping sizes are whole huge pages (the kernel refuses less).
//! - transparent huge pages on a tmpfs: `MADV_HUGEPAGE` on the owner's and
//!   the peers' mappings of segments of at least 2 MiB, where the mount's
//!   policy lets the advice count (see `thp_policy_allows`); best effort.
//!
//! We do not scan the system for hugetlbfs mounts: their pool is shared with
//! the MPI library and other jobs' settings, so only a directory the user
//! names is drawn from.

use std::ffi::{CStr, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::config::{HugePages, Segments, DEFAULT_SHM_DIR};
use crate::error::{bail, Result};

/// Transparent huge pages (and the advice) concern mappings of at least this.
const THP_BYTES: usize = 2 << 20;
/// Bytes of a `SegmentId`: `MAX_SHM_DIR_BYTES` plus the longest file name.
const ID_BYTES: usize = 256;

/// What a segment's owner publishes so that a peer can open it: the file's
/// whole path, NUL-padded (plain bytes, so it travels in an all-gather).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SegmentId {
    path: [u8; ID_BYTES],
}

impl Default for SegmentId {
    fn default() -> SegmentId {
        SegmentId { path: [0; ID_BYTES] }
    }
}

impl SegmentId {
    fn new(path: &str) -> SegmentId {
        let mut id = SegmentId::default();
        debug_assert!(path.len() < ID_BYTES, "DDSTORE_SHM_DIR's length is bounded");
        let n = path.len().min(ID_BYTES - 1);
        id.path[..n].copy_from_slice(&path.as_bytes()[..n]);
        id
    }

    /// The segment file; `None` for an empty (default) identity.
    pub fn path(&self) -> Option<&CStr> {
        CStr::from_bytes_until_nul(&self.path).ok().filter(|p| !p.is_empty())
    }

    fn dir(&self) -> &str {
        let p = self.path().and_then(|p| p.to_str().ok()).unwrap_or("");
        p.rsplit_once('/').map_or("", |(d, _)| d)
    }
}

/// Free bytes of the file system holding `dir`, when it can be asked.
pub(crate) fn room(dir: &str) -> Option<u128> {
    let c = CString::new(dir).ok()?;
    // SAFETY: statvfs fills a plain struct from a NUL-terminated path.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut st) == 0).then(|| (st.f_bavail as u128) * (st.f_frsize as u128))
    }
}

/// The huge page size of `dir` when it is on a hugetlbfs mount (the mount's
/// `pagesize=`, which the kernel reports as the block size).
fn hugetlb_page(dir: &str) -> Option<usize> {
    let c = CString::new(dir).ok()?;
    // SAFETY: statfs fills a plain struct from a NUL-terminated path.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        (libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type == libc::HUGETLBFS_MAGIC as _)
            .then_some(st.f_bsize as usize)
    }
}

/// Huge pages of `page` bytes a new mapping in `dir` can reserve: the
/// pool's free and unreserved pages plus what it may still overcommit,
/// within the mount's own `size=` limit if it has one.
fn hugetlb_free(dir: &str, page: usize) -> u64 {
    let sys = |f: &str| {
        let path = format!("/sys/kernel/mm/hugepages/hugepages-{}kB/{f}", page >> 10);
        std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    let pool = sys("free_hugepages").saturating_sub(sys("resv_hugepages"))
        + sys("nr_overcommit_hugepages").saturating_sub(sys("surplus_hugepages"));
    let Ok(c) = CString::new(dir) else { return pool };
    // SAFETY: statvfs fills a plain struct from a NUL-terminated path.
    let limit = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        // A hugetlbfs mount without size= reports no blocks.
        (libc::statvfs(c.as_ptr(), &mut st) == 0 && st.f_blocks > 0).then_some(st.f_bavail as u64)
    };
    limit.map_or(pool, |l| l.min(pool))
}

/// The kernel's policy lets `MADV_HUGEPAGE` take effect on files in `dir`
/// (read from sysfs and /proc/self/mounts each time: segments are made
/// and mapped once per variable).
fn thp_allowed(dir: &str) -> bool {
    let sysfs = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let dir = std::fs::canonicalize(dir).ok().and_then(|p| p.to_str().map(str::to_string)).unwrap_or(dir.into());
    thp_policy_allows(&sysfs, &mounts, &dir)
}

/// `sysfs`: the text of `shmem_enabled` (the mode in brackets); `mounts`:
/// /proc/self/mounts; `dir`: a canonical path. On a tmpfs mount the kernel
/// applies the mount's own `huge=` option (`advise`, `within_size` and
/// `always` let the advice count; `never` is the default), and
/// `shmem_enabled` matters only as `deny` (no huge pages anywhere) or
/// `force` (huge pages on every tmpfs); its other modes are the policy of
/// the kernel's internal mount (SysV shm, memfd), which holds no segment.
fn thp_policy_allows(sysfs: &str, mounts: &str, dir: &str) -> bool {
    let mode = sysfs.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    let Some((fstype, opts)) = mount_of(mounts, dir) else { return false };
    let huge = opts.split(',').find_map(|o| o.strip_prefix("huge="));
    fstype == "tmpfs"
        && match mode {
            Some("deny") => false,
            Some("force") => true,
            _ => matches!(huge, Some("advise" | "within_size" | "always")),
        }
}

/// The file system type and options of the mount holding `dir` (the
/// longest mount point above it; the later line for the same point, which
/// hides the earlier).
fn mount_of<'a>(mounts: &'a str, dir: &str) -> Option<(&'a str, &'a str)> {
    let mut best: Option<(usize, &str, &str)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [_, point, fstype, opts, ..] = f[..] else { continue };
        // /proc/mounts escapes blanks and backslashes as octal.
        let point = point.replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\");
        let under =
            point == "/" || dir == point || dir.strip_prefix(point.as_str()).is_some_and(|r| r.starts_with('/'));
        if under && best.map_or(true, |(n, ..)| point.len() >= n) {
            best = Some((point.len(), fstype, opts));
        }
    }
    best.map(|(_, t, o)| (t, o))
}

/// Asks for transparent huge pages on a mapping we just made; failure is harmless.
fn advise_huge(p: *mut libc::c_void, len: usize) {
    // SAFETY: advice on a mapping of len bytes we own.
    unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
}

/// A fresh shared-memory segment, mapped read-write, still linked until
/// `unlink` (or drop), unmapped on drop.
pub struct Segment {
    ptr: NonNull<u8>,
    /// Bytes mapped (the file's size: whole huge pages on hugetlbfs).
    map_len: usize,
    /// The file (what `id()` publishes).
    path: CString,
    linked: bool,
    /// Pages allocated when it was made (a copied shard), or on hugetlbfs
    /// reserved by the mapping: writing it can never run out of memory.
    reserved: bool,
}

// SAFETY: plain bytes of a mapping this value owns; the shard that holds it
// follows the store's rules for concurrent access.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

impl Segment {
    /// A zero-filled segment of `len` (> 0) bytes placed as `seg` says.
    /// `Ok(None)` when shared memory is unavailable or too small (the
    /// caller then uses the heap and the transport); an error only when
    /// `DDSTORE_HUGEPAGES` forbids what is there. `reserve` allocates the
    /// pages now (for a shard about to be filled anyway), so a full file
    /// system is an error here rather than a SIGBUS when pages are first
    /// written; otherwise pages are allocated as rows are written.
    pub fn create(len: usize, reserve: bool, seg: &Segments) -> Result<Option<Segment>> {
        let dir = seg.dir.as_str();
        let page = hugetlb_page(dir);
        match (seg.huge, page) {
            (HugePages::Off, Some(_)) => bail!(
                InvalidArgument,
                "DDSTORE_HUGEPAGES=off, but DDSTORE_SHM_DIR={dir} is a hugetlbfs mount (all of its pages are huge \
                 pages); point DDSTORE_SHM_DIR at a tmpfs such as /dev/shm"
            ),
            (HugePages::Require, None) => bail!(
                Unsupported,
                "DDSTORE_HUGEPAGES=require needs DDSTORE_SHM_DIR on a hugetlbfs mount, and {dir} is not one (mount \
                 one with `mount -t hugetlbfs none DIR` and reserve pages with vm.nr_hugepages; transparent huge \
                 pages on a tmpfs are best effort and do not count)"
            ),
            (HugePages::Auto, Some(p)) if len < p => Ok(Segment::in_tmpfs(DEFAULT_SHM_DIR, len, reserve, true)),
            (huge, Some(p)) => {
                let need = len.div_ceil(p) as u64;
                let free = hugetlb_free(dir, p);
                let made = if free >= need { Some(Segment::make(dir, need as usize * p, false, false)) } else { None };
                match made {
                    Some(Ok(mut s)) => {
                        s.reserved = true;
                        Ok(Some(s))
                    }
                    _ if huge == HugePages::Auto => Ok(Segment::in_tmpfs(DEFAULT_SHM_DIR, len, reserve, true)),
                    // Another process took the pages between the count and the mapping.
                    Some(Err(e)) if e.raw_os_error() != Some(libc::ENOMEM) => {
                        bail!(Io, "DDSTORE_HUGEPAGES=require: cannot make a segment in {dir}: {e}")
                    }
                    _ => {
                        let free = hugetlb_free(dir, p).min(need);
                        bail!(
                            NoMemory,
                            "DDSTORE_HUGEPAGES=require: a segment of {len} bytes needs {need} huge pages of {} kB in \
                             DDSTORE_SHM_DIR={dir}, but only {free} are free (short by {}); raise vm.nr_hugepages (or \
                             the mount's size=), or set DDSTORE_HUGEPAGES=auto to fall back to 4 KiB pages",
                            p >> 10,
                            need - free
                        )
                    }
                }
            }
            (huge, None) => Ok(Segment::in_tmpfs(dir, len, reserve, huge != HugePages::Off)),
        }
    }

    /// A segment in a tmpfs (or any file system of ordinary pages), asking
    /// for transparent huge pages if `thp` and the mount allows them.
    fn in_tmpfs(dir: &str, len: usize, reserve: bool, thp: bool) -> Option<Segment> {
        // Refuse what the file system cannot hold: touching pages of an
        // over-committed segment later would kill the process with SIGBUS.
        if room(dir).is_some_and(|a| a < len as u128) {
            return None;
        }
        let thp = thp && len >= THP_BYTES && thp_allowed(dir);
        Segment::make(dir, len, reserve, thp).ok()
    }

    /// Creates, sizes and maps `dir/ddstore.<pid>.<n>` (mode 0600, a fresh
    /// name); `thp` advises before any page exists, and `reserve` then
    /// allocates the pages through the mapping, so they get the advice.
    fn make(dir: &str, len: usize, reserve: bool, thp: bool) -> std::io::Result<Segment> {
        static SEQ: AtomicI64 = AtomicI64::new(0);
        let pid = std::process::id();
        let last = std::io::Error::last_os_error;
        for _ in 0..64 {
            let path = format!("{}/ddstore.{pid}.{}", dir.trim_end_matches('/'), SEQ.fetch_add(1, Ordering::Relaxed));
            let Ok(c) = CString::new(path) else { return Err(std::io::Error::from_raw_os_error(libc::EINVAL)) };
            // SAFETY: plain POSIX calls on a name we own; every failure path
            // unmaps, closes and unlinks what it created.
            unsafe {
                let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
                let fd = libc::open(c.as_ptr(), flags, 0o600);
                if fd < 0 {
                    let e = last();
                    if e.raw_os_error() == Some(libc::EEXIST) {
                        continue;
                    }
                    return Err(e);
                }
                let fail = |fd, p: *mut libc::c_void, e: std::io::Error| {
                    if !p.is_null() {
                        libc::munmap(p, len);
                    }
                    libc::close(fd);
                    libc::unlink(c.as_ptr());
                    Err(e)
                };
                if libc::ftruncate(fd, len as libc::off_t) != 0 {
                    return fail(fd, std::ptr::null_mut(), last());
                }
                // On hugetlbfs this reserves the huge pages of the whole file (ENOMEM if the pool lacks them).
                let p =
                    libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
                if p == libc::MAP_FAILED {
                    return fail(fd, std::ptr::null_mut(), last());
                }
                if thp {
                    advise_huge(p, len);
                }
                if reserve && libc::madvise(p, len, libc::MADV_POPULATE_WRITE) != 0 {
                    // Kernels before 5.14 lack MADV_POPULATE_WRITE: allocate through the file (4 KiB pages on
                    // an advise-only tmpfs, as the advice reaches the pages only through the mapping).
                    let e = last();
                    if e.raw_os_error() != Some(libc::EINVAL) {
                        return fail(fd, p, e);
                    }
                    let rc = libc::posix_fallocate(fd, 0, len as libc::off_t);
                    if rc != 0 {
                        return fail(fd, p, std::io::Error::from_raw_os_error(rc));
                    }
                }
                libc::close(fd);
                return Ok(Segment {
                    ptr: NonNull::new_unchecked(p.cast()),
                    map_len: len,
                    path: c,
                    linked: true,
                    reserved: reserve,
                });
            }
        }
        Err(std::io::Error::from_raw_os_error(libc::EEXIST))
    }

    /// The first byte of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The identity peers open while the segment is linked.
    pub fn id(&self) -> Option<SegmentId> {
        self.linked.then(|| SegmentId::new(self.path.to_str().unwrap_or("")))
    }

    pub fn is_reserved(&self) -> bool {
        self.reserved
    }

    /// Free bytes where the segment's unwritten pages will come from;
    /// `None` when it has none to come (reserved), so that the node's check
    /// of its sparse segments is made by the ranks that draw from a tmpfs,
    /// not against a hugetlbfs mount it has already taken its pages from.
    pub fn room(&self) -> Option<u128> {
        if self.reserved {
            return None;
        }
        room(SegmentId::new(self.path.to_str().ok()?).dir())
    }

    /// Removes the segment's name (the mappings stay valid). Idempotent.
    pub fn unlink(&mut self) {
        if std::mem::take(&mut self.linked) {
            // SAFETY: a NUL-terminated path we created.
            unsafe { libc::unlink(self.path.as_ptr()) };
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.unlink();
        // SAFETY: our own mapping; nothing refers to it any more (windows and
        // registrations are released before the shard).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}

/// Removes the segments in `dir` that a process which no longer exists left
/// behind (`ddstore.<pid>.<n>`: a rank killed between creating its segment
/// and unlinking it once its node's peers have mapped it, see
/// transport::local). A file is removed only when all of these hold: it is a
/// regular file (not a link), owned by this process's effective user, its
/// pid is not ours, and `kill(pid, 0)` fails with ESRCH (no such process).
/// A live process, another user's, or a pid that cannot be asked
/// (EPERM) keeps its files. Caveat: a process of this user in another pid
/// namespace sharing this directory looks gone from here; its segments are
/// named only while it registers a variable, and losing the name then makes
/// its peers fall back to the transport for that variable, never read wrong
/// rows. Returns the paths removed. `python -m pyddstore.cleanup` applies
/// the same rule by hand (docs/troubleshooting.md).
pub fn remove_stale(dir: &str) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return removed };
    // SAFETY: plain queries of this process.
    let (me, uid) = unsafe { (libc::getpid(), libc::geteuid()) };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(stale_pid) else { continue };
        if pid == me {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else { continue };
        use std::os::unix::fs::MetadataExt;
        if !meta.file_type().is_file() || meta.uid() != uid {
            continue;
        }
        // SAFETY: signal 0 only asks whether the process exists.
        let gone =
            unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone && std::fs::remove_file(e.path()).is_ok() {
            removed.push(e.path().display().to_string());
        }
    }
    removed
}

/// The pid in a segment's file name `ddstore.<pid>.<n>` (digits only).
fn stale_pid(name: &str) -> Option<libc::pid_t> {
    let rest = name.strip_prefix("ddstore.")?;
    let (pid, n) = rest.split_once('.')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(n) {
        return None;
    }
    pid.parse::<libc::pid_t>().ok().filter(|&p| p > 0)
}

/// A read-only mapping of a peer's segment.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    map_len: usize,
}

// SAFETY: a read-only mapping this value owns.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// The first byte of the mapping.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Maps the first `len` bytes of the segment `id` read-only (whole huge
    /// pages on hugetlbfs, whose block size is its page size); `None` when
    /// it cannot be opened or is shorter.
    pub(crate) fn open(id: &SegmentId, len: usize) -> Option<Mapping> {
        let path = id.path()?;
        // SAFETY: plain POSIX calls; the size is checked before mapping.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW);
            if fd < 0 {
                return None;
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 || (st.st_size as u64) < len as u64 {
                libc::close(fd);
                return None;
            }
            let map_len = len.next_multiple_of((st.st_blksize as usize).max(1));
            let p = libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ, libc::MAP_SHARED, fd, 0);
            libc::close(fd);
            if p == libc::MAP_FAILED {
                return None;
            }
            if len >= THP_BYTES && thp_allowed(id.dir()) {
                advise_huge(p, map_len);
            }
            Some(Mapping { ptr: NonNull::new_unchecked(p.cast()), map_len })
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Shard;

    fn shared(len: usize, src: Option<&[u8]>) -> Shard {
        Shard::shared(len, src, &Segments::default()).unwrap().expect("shared memory on the test machine")
    }

    #[test]
    fn huge_page_policy_follows_the_mount_of_the_directory() {
        let mounts = |opts: &str| format!("proc /proc proc rw 0 0\ntmpfs /dev/shm tmpfs {opts} 0 0\n");
        for (sysfs, opts, want) in [
            ("always within_size advise [never] deny force", "rw,relatime", false),
            // shmem_enabled is the internal mount's policy, not /dev/shm's.
            ("always within_size [advise] never deny force", "rw,relatime", false),
            ("[always] within_size advise never deny force", "rw", false),
            ("always within_size advise never deny [force]", "rw", true),
            ("always within_size advise [never] deny force", "rw,huge=advise", true),
            ("always within_size advise [never] deny force", "rw,size=1g,huge=within_size", true),
            ("always within_size advise [never] deny force", "rw,huge=always", true),
            ("always within_size advise [never] deny force", "rw,huge=never", false),
            ("always within_size advise never [deny] force", "rw,huge=always", false),
            ("", "rw", false),
            ("", "rw,huge=advise", true),
        ] {
            assert_eq!(thp_policy_allows(sysfs, &mounts(opts), "/dev/shm"), want, "{sysfs} / {opts}");
            assert_eq!(thp_policy_allows(sysfs, &mounts(opts), "/dev/shm/sub"), want, "{sysfs} / {opts} (below)");
        }
        // Another mount's huge= option does not count; the deepest mount does; a later one hides an earlier.
        let m = "tmpfs /run tmpfs rw,huge=always 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n";
        assert!(!thp_policy_allows("[never]", m, "/dev/shm"));
        assert!(!thp_policy_allows("[never]", m, "/runner"));
        assert!(thp_policy_allows("[never]", m, "/run/x"));
        let m =
            "/dev/sda1 / ext4 rw 0 0\ntmpfs /tmp/a\\040b tmpfs rw,huge=advise 0 0\ntmpfs /tmp/a\\040b/c tmpfs rw 0 0\n";
        assert!(thp_policy_allows("[never]", m, "/tmp/a b"));
        assert!(!thp_policy_allows("[never]", m, "/tmp/a b/c/d"));
        assert!(!thp_policy_allows("[force]", m, "/home"), "force concerns tmpfs only");
        assert!(!thp_policy_allows("[never]", &format!("{m}tmpfs /tmp/a\\040b tmpfs rw 0 0\n"), "/tmp/a b"));
        assert!(!thp_policy_allows("[never]", "hugetlbfs /h hugetlbfs rw,huge=always 0 0\n", "/h"));
    }

    #[test]
    fn stale_segments_of_gone_processes_are_removed() {
        assert_eq!(stale_pid("ddstore.123.4"), Some(123));
        for bad in
            ["ddstore.123", "ddstore..4", "ddstore.12x.4", "ddstore.0.1", "ddstore.1.2.3", "x.1.2", "ddstore.1.-2"]
        {
            assert_eq!(stale_pid(bad), None, "{bad}");
        }
        let dir = std::env::temp_dir().join(format!("ddstore-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A pid that is gone: a child that has exited and been reaped.
        let gone = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = gone.id();
        let mut gone = gone;
        gone.wait().unwrap();
        let me = std::process::id();
        let dead = dir.join(format!("ddstore.{gone_pid}.0"));
        let alive = dir.join(format!("ddstore.{me}.7"));
        let init = dir.join("ddstore.1.3"); // pid 1 exists
        let other = dir.join(format!("other.{gone_pid}.0"));
        let link = dir.join(format!("ddstore.{gone_pid}.1"));
        for f in [&dead, &alive, &init, &other] {
            std::fs::write(f, b"x").unwrap();
        }
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let removed = remove_stale(dir.to_str().unwrap());
        assert_eq!(removed, vec![dead.display().to_string()]);
        assert!(!dead.exists() && alive.exists() && init.exists() && other.exists() && link.exists());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(remove_stale("/nonexistent-ddstore-dir").is_empty());
    }

    #[test]
    fn identities_carry_the_path() {
        assert!(SegmentId::default().path().is_none());
        let id = SegmentId::new("/dev/shm/ddstore.12.3");
        assert_eq!(id.path().unwrap().to_str().unwrap(), "/dev/shm/ddstore.12.3");
        assert_eq!(id.dir(), "/dev/shm");
        let long =
            format!("/{}/ddstore.4294967295.18446744073709551615", "d".repeat(crate::config::MAX_SHM_DIR_BYTES - 1));
        assert_eq!(SegmentId::new(&long).path().unwrap().to_bytes(), long.as_bytes());
    }

    #[test]
    fn huge_segments_are_readable_by_a_peer_mapping() {
        // Large enough for the advice (whether the kernel grants it or not,
        // the bytes must be the same through both mappings).
        let len = 6 << 20;
        let s = shared(len, None);
        s.write(len - 3, b"end");
        s.write(3 << 20, b"mid");
        let m = Mapping::open(&s.shm_id().unwrap(), len).unwrap();
        // SAFETY: a read-only mapping of len bytes.
        let view = unsafe { std::slice::from_raw_parts(m.ptr.as_ptr(), len) };
        assert_eq!(&view[len - 3..], b"end");
        assert_eq!(&view[3 << 20..(3 << 20) + 3], b"mid");
        assert!(view[..3 << 20].iter().all(|&b| b == 0));
    }

    #[test]
    fn segment_is_zeroed_shared_and_unlinked() {
        let mut s = shared(10000, None);
        let id = s.shm_id().unwrap();
        assert!(std::path::Path::new(id.path().unwrap().to_str().unwrap()).starts_with("/dev/shm"));
        // SAFETY: the shard holds 10000 bytes.
        assert!(unsafe { std::slice::from_raw_parts(s.as_ptr(), 10000) }.iter().all(|&b| b == 0));
        s.write(9000, b"hello");
        let m = Mapping::open(&id, 10000).unwrap();
        // SAFETY: a read-only mapping of 10000 bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(m.ptr.as_ptr().add(9000), 5) }, b"hello");
        assert!(Mapping::open(&id, 10001).is_none(), "longer than the segment");
        s.unlink();
        assert!(s.shm_id().is_none());
        assert!(Mapping::open(&id, 10000).is_none());
        s.write(0, b"x");
        // SAFETY: as above; the mapping outlives the name.
        assert_eq!(unsafe { *m.ptr.as_ptr() }, b'x');
        let c = shared(3, Some(b"abc"));
        assert!(c.is_reserved());
        // SAFETY: 3 bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(c.as_ptr(), 3) }, b"abc");
        assert!(shared(0, None).len() == 0);
        // Dropped before unlinking: the name goes with it.
        let d = shared(4096, None);
        let path = d.shm_id().unwrap().path().unwrap().to_str().unwrap().to_string();
        assert!(std::path::Path::new(&path).exists());
        drop(d);
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn placement_errors_name_the_variables() {
        // /dev/shm is a tmpfs: require refuses it, off and auto use it.
        let seg = |huge| Segments { dir: "/dev/shm".into(), huge };
        let e = Shard::shared(4096, None, &seg(HugePages::Require)).err().expect("refused");
        assert!(e.msg.contains("DDSTORE_HUGEPAGES=require") && e.msg.contains("hugetlbfs"), "{e}");
        for huge in [HugePages::Off, HugePages::Auto] {
            assert!(Shard::shared(4096, None, &seg(huge)).unwrap().unwrap().is_shared());
        }
        // A directory that is no mount of its own works too (the file system above it decides).
        let dir = std::env::temp_dir().join(format!("ddstore-seg-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let seg = Segments { dir: dir.to_str().unwrap().into(), huge: HugePages::Auto };
        let s = Shard::shared(8192, Some(&[7u8; 8192]), &seg).unwrap().unwrap();
        assert!(s.shm_id().unwrap().path().unwrap().to_str().unwrap().starts_with(&seg.dir));
        drop(s);
        std::fs::remove_dir(&dir).expect("the directory is empty again");
    }
}
