//! Node-local reads: rows owned by a rank of the same node are copied straight
//! out of the owner's shard memory, with no MPI or fabric traffic.
//!
//! Design: each shard is a POSIX shared-memory segment (`Shard::shared`). At
//! registration (collective) the ranks of a node exchange their segments'
//! identities over the node communicator, map each other's segments
//! read-only, meet at a barrier, and then every owner unlinks its segment's
//! name. From then on the segments have no name (nothing can leak if a
//! process dies) and each lives until the last mapping goes. The shard is
//! still stored once: the owner's window (method 0) or fabric registration
//! (method 1) covers the same pages, and peers only map them.
//!
//! We chose POSIX segments over `MPI_Win_allocate_shared` because the memory
//! is then the library's own, independent of MPI: it is mapped read-only by
//! the peers (a reader cannot scribble on another rank's shard), it stays
//! valid after the `MPI_Finalize` hook frees the windows (so `dds_destroy`
//! after finalisation simply unmaps it), the same code serves every method,
//! and the memory is identical to what the fabric registers.
//!
//! The node map (which store rank runs on which node) comes from
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` of the store's communicator
//! (the group's, with `width`) and an all-gather, so every rank knows it.
//! Method-0 batches rely on that: an owner must know which requesters read
//! its rows directly (same node) and leave them out of the all-to-all.
//!
//! Whether the direct path is on is agreed by all ranks: for the store
//! (`DDSTORE_NODE_LOCAL`, off if any rank turns it off) and then per
//! variable (off if any rank could not create or map a segment, e.g. a full
//! /dev/shm). Off, only the rank's own rows are copied directly.

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::mpi::{agree, Comm};
use crate::shard::Shard;

const NONE: u32 = u32::MAX;

/// Which store ranks share this rank's node.
pub struct NodeMap {
    /// Node-local reads are on for this store (agreed by all ranks).
    pub on: bool,
    me: usize,
    /// Store rank -> node id (the smallest store rank of its node). Empty when off.
    node_of: Vec<u32>,
    /// Store rank -> index among this node's ranks, or NONE. Empty when off.
    slot: Vec<u32>,
    /// Ranks on this node (this one included).
    n_local: usize,
    /// Every rank of the store is on this node.
    pub single: bool,
    /// The node's communicator (store ranks of this node, in store-rank order).
    node: Option<Comm>,
}

impl NodeMap {
    /// Collective over the store's communicator. `want` is this rank's
    /// `DDSTORE_NODE_LOCAL`; the direct path is on only if every rank wants it.
    pub fn new(comm: &Comm, want: bool) -> Result<NodeMap> {
        NodeMap::with_width(comm, want, 0)
    }

    /// As `new`; `width` > 0 (`DDSTORE_NODE_LOCAL_WIDTH`, a testing aid) cuts
    /// each node into runs of `width` ranks that act as separate nodes.
    pub fn with_width(comm: &Comm, want: bool, width: u64) -> Result<NodeMap> {
        let mut flag = [want as i64];
        comm.allreduce_min(&mut flag)?;
        let me = comm.rank();
        if flag[0] == 0 {
            return Ok(NodeMap {
                on: false,
                me,
                node_of: Vec::new(),
                slot: Vec::new(),
                n_local: 1,
                single: comm.size() == 1,
                node: None,
            });
        }
        let node = comm.split_shared()?;
        let node = if width > 0 && (width as usize) < node.size() { node.split_groups(width as usize)? } else { node };
        let mut leader = [me as i64];
        node.allreduce_min(&mut leader)?;
        let node_of: Vec<u32> = comm.allgather(&(leader[0] as u32))?;
        let mine = node_of[me];
        let mut slot = vec![NONE; node_of.len()];
        let mut n = 0u32;
        for (r, &id) in node_of.iter().enumerate() {
            if id == mine {
                slot[r] = n;
                n += 1;
            }
        }
        debug_assert_eq!(slot[me] as usize, node.rank());
        Ok(NodeMap {
            on: true,
            me,
            node_of,
            slot,
            n_local: n as usize,
            single: n as usize == comm.size(),
            node: Some(node),
        })
    }

    /// The finalisation hook: frees the node's communicator (MPI would
    /// otherwise keep it past `MPI_Finalize`).
    pub fn release_before_finalize(&self) {
        if let Some(c) = &self.node {
            c.release_before_finalize();
        }
    }

    /// True when store ranks `a` and `b` run on the same node (and the direct
    /// path is on); a rank is always on its own node.
    #[inline]
    pub fn same_node(&self, a: usize, b: usize) -> bool {
        a == b || (self.on && self.node_of[a] == self.node_of[b])
    }

    /// Ranks of the store on this node (1 when the direct path is off).
    pub fn local_ranks(&self) -> usize {
        self.n_local
    }
}

/// A variable's view of the shards of its node: where each same-node
/// owner's rows are mapped in this process.
pub struct Near {
    node: Arc<NodeMap>,
    /// The direct path serves same-node owners for this variable (agreed).
    on: bool,
    /// This rank's own shard.
    own: *const u8,
    /// Node slot -> base of that rank's shard as mapped here.
    bases: Vec<*const u8>,
    /// Read-only mappings of the peers' segments (unmapped on drop).
    _maps: Vec<Mapping>,
}

// SAFETY: the pointers refer to mappings this value keeps alive (or to the
// variable's own shard, which outlives it); readers only read through them.
unsafe impl Send for Near {}
unsafe impl Sync for Near {}

impl Near {
    /// Collective over the store's communicator `comm` (every rank of the
    /// store, in registration). Maps the node's segments and unlinks this
    /// rank's. Falls back to "own rows only" for the variable when any rank
    /// lacks a segment or fails to map one.
    pub fn share(node: &Arc<NodeMap>, comm: &Comm, shard: &mut Shard) -> Result<Near> {
        let own = shard.as_ptr() as *const u8;
        let mut near = Near { node: node.clone(), on: false, own, bases: Vec::new(), _maps: Vec::new() };
        let Some(ncomm) = node.node.as_ref().filter(|_| node.on) else {
            shard.unlink();
            return Ok(near);
        };
        let id = shard.shm_id();
        let ready = shard.len() == 0 || id.is_some();
        let (pid, seq) = id.unwrap_or((0, 0));
        let sparse = if id.is_some() && !shard.is_reserved() { shard.len() as i64 } else { 0 };
        let all = ncomm.allgather(&[pid, seq, shard.len() as i64, ready as i64, sparse]);
        let mut ok = ready;
        if let Ok(all) = &all {
            // The node's zero-filled segments get their pages as rows are
            // written: they must fit in /dev/shm together (each rank sees
            // the same sum and about the same free space).
            let sparse: i64 = all.iter().map(|m| m[4]).sum();
            if sparse > 0 && shm_avail().is_some_and(|a| a < sparse as u128) {
                ok = false;
            }
            near.bases = vec![std::ptr::null(); all.len()];
            for (s, m) in all.iter().enumerate() {
                if s == ncomm.rank() {
                    near.bases[s] = own;
                } else if m[3] == 0 {
                    ok = false;
                } else if m[2] > 0 && ok {
                    match Mapping::open((m[0], m[1]), m[2] as usize) {
                        Some(map) => {
                            near.bases[s] = map.ptr.as_ptr();
                            near._maps.push(map);
                        }
                        None => ok = false,
                    }
                }
            }
        }
        // Every peer has opened (or given up on) this rank's segment.
        let barrier = ncomm.barrier();
        shard.unlink();
        all?;
        barrier?;
        let mut flag = [ok as i64];
        comm.allreduce_min(&mut flag)?;
        if flag[0] == 1 {
            near.on = true;
        } else {
            near.bases.clear();
            near._maps.clear();
            // A zero-filled segment (not written yet) moves to the heap, where
            // a full /dev/shm cannot hurt it later; agreed, since the
            // registration goes on with collectives.
            let swap =
                if shard.is_shared() && !shard.is_reserved() { Shard::zeroed(shard.len()).map(Some) } else { Ok(None) };
            if let Some(heap) = agree(comm, swap)? {
                *shard = heap;
                near.own = shard.as_ptr();
            }
        }
        Ok(near)
    }

    /// Where `owner`'s shard can be copied from directly: this rank's own
    /// shard, or a same-node peer's mapped segment; `None` when its rows
    /// must go through the transport.
    #[inline]
    pub fn src(&self, owner: usize) -> Option<*const u8> {
        if owner == self.node.me {
            return Some(self.own);
        }
        if !self.on {
            return None;
        }
        match self.node.slot[owner] {
            NONE => None,
            s => Some(self.bases[s as usize]),
        }
    }

    /// True when the direct path serves this variable's same-node owners.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// True when every row of the variable is copied directly (one node).
    pub fn all_direct(&self) -> bool {
        self.on && self.node.single
    }

    /// Ranks whose shards this rank copies directly (itself included).
    pub fn direct_ranks(&self) -> usize {
        if self.on {
            self.node.local_ranks()
        } else {
            1
        }
    }
}

/// Free bytes in /dev/shm, when it can be asked.
fn shm_avail() -> Option<u128> {
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
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn open(id: (i64, i64), len: usize) -> Option<Mapping> {
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

impl Near {
    /// A variable this process holds no shard of and no node-local view
    /// on (a method-2 extra member's joined variable): every row goes
    /// through the transport. (Added for method 2; see store/split.rs.)
    pub fn remote_only() -> Near {
        let node = NodeMap {
            on: false,
            me: usize::MAX,
            node_of: Vec::new(),
            slot: Vec::new(),
            n_local: 0,
            single: false,
            node: None,
        };
        Near { node: Arc::new(node), on: false, own: std::ptr::null(), bases: Vec::new(), _maps: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
