//! POSIX shared-memory segments: the memory of a shard when node-local reads
//! are on (created and filled by its owner) and the read-only mappings of
//! peers' segments (`backend::local` maps them). Segments of 2 MiB or more
//! ask for transparent huge pages where the kernel's policy lets them.

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI64, Ordering};

/// Free bytes in /dev/shm, when it can be asked.
pub(crate) fn shm_avail() -> Option<u128> {
    // SAFETY: statvfs fills a plain struct from a NUL-terminated path.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c"/dev/shm".as_ptr(), &mut st) == 0).then(|| (st.f_bavail as u128) * (st.f_frsize as u128))
    }
}

/// Every rank maps every same-node peer's segment, so with 4 KiB pages its
/// page tables hold 2 MiB per GiB of the node's shards (0.2%). Huge pages
/// cut that 512-fold, and speed random row copies (fewer TLB misses). We ask
/// for transparent huge pages (`MADV_HUGEPAGE`) on the owner's and the
/// peers' mappings of segments of at least 2 MiB, when the kernel's policy
/// for shared memory lets the advice count: `shmem_enabled` or /dev/shm's
/// `huge=` mount option set to `advise`, `within_size` or `always` (or
/// `force`), and not `deny`. Otherwise nothing is asked and 4 KiB pages are
/// used, as is the case when the advice is refused.
fn advise_huge(p: *mut libc::c_void, len: usize) {
    const HUGE: usize = 2 << 20;
    if len >= HUGE && shmem_thp_allowed() {
        // SAFETY: advice on a mapping of len bytes we just made; failure is harmless.
        unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
    }
}

/// The kernel's shared-memory THP policy lets `MADV_HUGEPAGE` take effect
/// (read once; see `advise_huge`).
pub fn shmem_thp_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let sysfs = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").unwrap_or_default();
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        thp_policy_allows(&sysfs, &mounts)
    })
}

/// `sysfs`: the text of `shmem_enabled` (the mode in brackets); `mounts`:
/// /proc/self/mounts, whose /dev/shm line may carry `huge=`.
fn thp_policy_allows(sysfs: &str, mounts: &str) -> bool {
    let mode = sysfs.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    let mount = mounts
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("/dev/shm"))
        .find_map(|l| l.split_whitespace().nth(3)?.split(',').find_map(|o| o.strip_prefix("huge=")));
    let yes = |m: Option<&str>| matches!(m, Some("advise" | "within_size" | "always" | "force"));
    mode != Some("deny") && (yes(mode) || yes(mount))
}

fn segment_name(id: (i64, i64)) -> CString {
    CString::new(format!("/ddstore.{}.{}", id.0, id.1)).expect("no NUL in a formatted name")
}

/// A fresh shared-memory segment, mapped read-write, still linked.
pub struct Segment {
    ptr: NonNull<u8>,
    name: CString,
    id: (i64, i64),
}

impl Segment {
    /// Creates and maps a zero-filled segment of `len` (> 0) bytes; `None`
    /// when shared memory is unavailable or too small. `reserve` allocates
    /// its pages now (for a shard about to be filled anyway), so a full
    /// /dev/shm is an error here rather than a SIGBUS when the pages are
    /// first written; otherwise pages are allocated as rows are written.
    pub fn create(len: usize, reserve: bool) -> Option<Segment> {
        static SEQ: AtomicI64 = AtomicI64::new(0);
        // Refuse what /dev/shm cannot hold: touching pages of an over-committed
        // segment later would kill the process with SIGBUS.
        if shm_avail().is_some_and(|a| a < len as u128) {
            return None;
        }
        let pid = std::process::id() as i64;
        for _ in 0..64 {
            let id = (pid, SEQ.fetch_add(1, Ordering::Relaxed));
            let name = segment_name(id);
            // SAFETY: plain POSIX calls on a name we own; every failure path
            // closes and unlinks what it created.
            unsafe {
                let fd = libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600);
                if fd < 0 {
                    if std::io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
                        continue;
                    }
                    return None;
                }
                let fail = |fd| {
                    libc::close(fd);
                    libc::shm_unlink(name.as_ptr());
                    None
                };
                if libc::ftruncate(fd, len as libc::off_t) != 0 {
                    return fail(fd);
                }
                if reserve && libc::posix_fallocate(fd, 0, len as libc::off_t) != 0 {
                    return fail(fd);
                }
                let p =
                    libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
                if p == libc::MAP_FAILED {
                    return fail(fd);
                }
                libc::close(fd);
                advise_huge(p, len);
                return Some(Segment { ptr: NonNull::new_unchecked(p.cast()), name, id });
            }
        }
        None
    }

    /// Hands the mapping, its name and identity to the shard that owns them.
    pub fn into_parts(self) -> (NonNull<u8>, CString, (i64, i64)) {
        (self.ptr, self.name, self.id)
    }
}

/// A read-only mapping of a peer's segment.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// The first byte of the mapping.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn open(id: (i64, i64), len: usize) -> Option<Mapping> {
        let name = segment_name(id);
        // SAFETY: plain POSIX calls; the size is checked before mapping.
        unsafe {
            let fd = libc::shm_open(name.as_ptr(), libc::O_RDONLY, 0);
            if fd < 0 {
                return None;
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 || (st.st_size as u64) < len as u64 {
                libc::close(fd);
                return None;
            }
            let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd, 0);
            libc::close(fd);
            if p == libc::MAP_FAILED {
                return None;
            }
            advise_huge(p, len);
            Some(Mapping { ptr: NonNull::new_unchecked(p.cast()), len })
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Shard;

    #[test]
    fn huge_page_policy_follows_sysfs_and_the_dev_shm_mount() {
        let shm = |opts: &str| format!("proc /proc proc rw 0 0\ntmpfs /dev/shm tmpfs {opts} 0 0\n");
        for (sysfs, opts, want) in [
            ("always within_size advise [never] deny force", "rw,relatime", false),
            ("always within_size [advise] never deny force", "rw,relatime", true),
            ("[always] within_size advise never deny force", "rw", true),
            ("always [within_size] advise never deny force", "rw", true),
            ("always within_size advise never deny [force]", "rw", true),
            ("always within_size advise [never] deny force", "rw,huge=advise", true),
            ("always within_size advise [never] deny force", "rw,huge=never", false),
            ("always within_size advise never [deny] force", "rw,huge=always", false),
            ("", "rw", false),
            ("", "rw,size=1g,huge=within_size", true),
        ] {
            assert_eq!(thp_policy_allows(sysfs, &shm(opts)), want, "{sysfs} / {opts}");
        }
        // Another mount's huge= option does not count.
        assert!(!thp_policy_allows("[never]", "tmpfs /run tmpfs rw,huge=always 0 0\n"));
    }

    #[test]
    fn huge_segments_are_readable_by_a_peer_mapping() {
        // Large enough for the advice (whether the kernel grants it or not,
        // the bytes must be the same through both mappings).
        let len = 6 << 20;
        let s = Shard::shared(len, None).expect("shared memory on the test machine");
        s.write(len - 3, b"end");
        s.write(3 << 20, b"mid");
        let m = Mapping::open(s.shm_id().unwrap(), len).unwrap();
        // SAFETY: a read-only mapping of len bytes.
        let view = unsafe { std::slice::from_raw_parts(m.ptr.as_ptr(), len) };
        assert_eq!(&view[len - 3..], b"end");
        assert_eq!(&view[3 << 20..(3 << 20) + 3], b"mid");
        assert!(view[..3 << 20].iter().all(|&b| b == 0));
    }

    #[test]
    fn segment_is_zeroed_shared_and_unlinked() {
        let mut s = Shard::shared(10000, None).expect("shared memory on the test machine");
        let id = s.shm_id().unwrap();
        // SAFETY: the shard holds 10000 bytes.
        assert!(unsafe { std::slice::from_raw_parts(s.as_ptr(), 10000) }.iter().all(|&b| b == 0));
        s.write(9000, b"hello");
        let m = Mapping::open(id, 10000).unwrap();
        // SAFETY: a read-only mapping of 10000 bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(m.ptr.as_ptr().add(9000), 5) }, b"hello");
        s.unlink();
        assert!(s.shm_id().is_none());
        assert!(Mapping::open(id, 10000).is_none());
        s.write(0, b"x");
        // SAFETY: as above; the mapping outlives the name.
        assert_eq!(unsafe { *m.ptr.as_ptr() }, b'x');
        let c = Shard::shared(3, Some(b"abc")).unwrap();
        // SAFETY: 3 bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(c.as_ptr(), 3) }, b"abc");
        assert!(Shard::shared(0, None).unwrap().len() == 0);
    }
}
