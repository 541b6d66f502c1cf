//! Memory of a rank's shard: one contiguous, 64-byte aligned block owned by the
//! store. A heap block of 32 MiB or more asks for transparent huge pages before
//! it is first touched (see `advise_huge_heap`); a zero-filled one is zeroed
//! when allocated (as the allocator's zeroed path does for this alignment), so
//! its pages are resident from `dds_init` on.
//!
//! With node-local reads on (see `transport::local`), the block is instead a
//! shared-memory segment (`segment.rs`: a file in `DDSTORE_SHM_DIR`, default
//! /dev/shm, or on hugetlbfs, mapped with `mmap`), so the ranks of the same
//! node can map it read-only and copy rows straight out of it. It is still the
//! only copy of the shard: the same pages back the MPI window or the fabric
//! registration. A fresh segment is zero-filled by the kernel and, like the
//! heap path, costs no memory until rows are written. Its name exists only
//! while the collective registration maps it on the node's ranks: the owner
//! unlinks it right after (or when the shard is dropped first), so a process
//! that dies later leaves nothing behind in the segment directory.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::config::Segments;
use crate::error::{bail, Result};
use segment::{Segment, SegmentId};

pub(crate) mod segment;

const ALIGN: usize = 64;

/// Where a shard's bytes live.
enum Mem {
    Heap,
    /// A mapped shared-memory segment (unlinked and unmapped when dropped).
    Shm(Segment),
}

pub struct Shard {
    ptr: NonNull<u8>,
    len: usize,
    mem: Mem,
}

// SAFETY: the block is plain bytes; concurrent access follows the store's
// rules (readers read, `dds_update` writes rows the caller owns).
unsafe impl Send for Shard {}
unsafe impl Sync for Shard {}

impl Shard {
    /// A zero-filled block of `len` bytes.
    pub fn zeroed(len: usize) -> Result<Shard> {
        Shard::alloc(len, true)
    }

    /// A block holding a copy of `src`.
    pub fn copy_of(src: &[u8]) -> Result<Shard> {
        let s = Shard::alloc(src.len(), false)?;
        // SAFETY: fresh block of exactly src.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), s.ptr.as_ptr(), src.len()) };
        Ok(s)
    }

    fn alloc(len: usize, zero: bool) -> Result<Shard> {
        if len == 0 {
            return Ok(Shard { ptr: NonNull::dangling(), len: 0, mem: Mem::Heap });
        }
        let Ok(layout) = Layout::from_size_align(len, ALIGN) else {
            bail!(NoMemory, "cannot allocate a shard of {len} bytes");
        };
        // SAFETY: non-zero size.
        let p = unsafe { alloc::alloc(layout) };
        match NonNull::new(p) {
            Some(ptr) => {
                // Before the first touch, so the pages are huge from the start.
                advise_huge_heap(ptr.as_ptr(), len);
                if zero {
                    // What alloc_zeroed does for an alignment above 16 anyway.
                    // SAFETY: a fresh block of len bytes.
                    unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
                }
                Ok(Shard { ptr, len, mem: Mem::Heap })
            }
            None => bail!(NoMemory, "out of memory allocating a shard of {len} bytes"),
        }
    }

    /// A shard in a fresh shared-memory segment placed as `seg` says
    /// (`DDSTORE_SHM_DIR`, `DDSTORE_HUGEPAGES`), zero-filled or holding a
    /// copy of `src`. `Ok(None)` when shared memory is unavailable (no such
    /// file system, not enough room in it, a limit reached): the caller then
    /// uses `zeroed` or `copy_of` and serves this shard through its transport
    /// only. An error when `DDSTORE_HUGEPAGES=require` cannot be met.
    pub fn shared(len: usize, src: Option<&[u8]>, seg: &Segments) -> Result<Option<Shard>> {
        if len == 0 {
            // Nothing to share: a zero-row rank never owns a row.
            return Ok(Some(Shard { ptr: NonNull::dangling(), len: 0, mem: Mem::Heap }));
        }
        if src.is_some_and(|d| d.len() != len) {
            return Ok(None);
        }
        let Some(seg) = Segment::create(len, src.is_some(), seg)? else { return Ok(None) };
        // SAFETY: a mapping of at least len bytes, owned by the segment.
        let ptr = unsafe { NonNull::new_unchecked(seg.as_ptr()) };
        let s = Shard { ptr, len, mem: Mem::Shm(seg) };
        if let Some(data) = src {
            // SAFETY: a fresh mapping of at least len bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), s.ptr.as_ptr(), len) };
        }
        Ok(Some(s))
    }

    /// The identity (path) of the shared segment peers can open while it is
    /// still linked; `None` for heap memory or once unlinked.
    pub fn shm_id(&self) -> Option<SegmentId> {
        match &self.mem {
            Mem::Shm(seg) => seg.id(),
            Mem::Heap => None,
        }
    }

    /// True when the bytes live in a shared-memory segment.
    pub fn is_shared(&self) -> bool {
        matches!(self.mem, Mem::Shm(_))
    }

    /// True for a shared segment whose pages were allocated (or, on
    /// hugetlbfs, reserved) when it was made: writing it cannot run out.
    pub fn is_reserved(&self) -> bool {
        matches!(&self.mem, Mem::Shm(seg) if seg.is_reserved())
    }

    /// Free bytes of the file system the shared segment's unwritten pages
    /// will come from; `None` for heap memory, a reserved segment (nothing
    /// more to come) or when it cannot be asked.
    pub fn room(&self) -> Option<u128> {
        match &self.mem {
            Mem::Shm(seg) => seg.room(),
            Mem::Heap => None,
        }
    }

    /// Removes the segment's name (the mappings stay valid). Idempotent.
    pub fn unlink(&mut self) {
        if let Mem::Shm(seg) = &mut self.mem {
            seg.unlink();
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Copies `src` into the block at byte `offset` (bounds checked by the caller).
    pub fn write(&self, offset: usize, src: &[u8]) {
        debug_assert!(offset + src.len() <= self.len);
        // SAFETY: in bounds; src cannot overlap memory the store allocated.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len()) };
    }

    /// Copies `len` bytes at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: *mut u8, len: usize) {
        debug_assert!(offset + len <= self.len);
        // SAFETY: in bounds; dst is a caller buffer of at least len bytes.
        unsafe { crate::copy::copy_rows(dst, self.ptr.as_ptr().add(offset), len) };
    }
}

/// Heap shards of 32 MiB or more ask for transparent huge pages (fewer TLB
/// misses on random row reads) over their 2 MiB-aligned interior, when the
/// kernel's THP mode for private memory is `madvise` (in `always` it needs no
/// asking; in `never` asking does nothing). 32 MiB is glibc's largest mmap
/// threshold: such blocks are mappings of their own, unmapped when freed.
/// Smaller ones may live in the shared heap, where huge pages freed in part
/// make the RSS of a process that creates and frees stores jump in 2 MiB steps.
fn advise_huge_heap(p: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    const MIN: usize = 32 << 20;
    static MADVISE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on = *MADVISE.get_or_init(|| {
        let t = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        t.split_whitespace().any(|w| w == "[madvise]")
    });
    let start = (p as usize).next_multiple_of(HUGE);
    let end = (p as usize + len) / HUGE * HUGE;
    if on && len >= MIN && end > start {
        // SAFETY: advice on whole pages inside our own allocation; failure is harmless.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        // A segment unlinks and unmaps itself (windows and registrations
        // are released before the shard).
        if self.len > 0 && !self.is_shared() {
            // SAFETY: allocated in `alloc` with this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, ALIGN)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_blocks_hold_their_bytes() {
        for len in [1, 63, 4096, (2 << 20) - 1, (2 << 20) + 4097, 5 << 20] {
            let z = Shard::zeroed(len).unwrap();
            // SAFETY: the block holds len bytes.
            assert!(unsafe { std::slice::from_raw_parts(z.as_ptr(), len) }.iter().all(|&b| b == 0), "{len}");
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let c = Shard::copy_of(&data).unwrap();
            let mut back = vec![0u8; len];
            c.read(0, back.as_mut_ptr(), len);
            assert_eq!(back, data, "{len}");
        }
    }
}
