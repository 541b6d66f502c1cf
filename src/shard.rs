//! Memory of a rank's shard: one contiguous, 64-byte aligned block owned by the
//! store. Zero-filled blocks come from the allocator's zeroed path (fresh pages
//! from the OS), so `dds_init` of a large shard costs no resident memory until
//! rows are written.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::error::{bail, Result};

const ALIGN: usize = 64;

pub struct Shard {
    ptr: NonNull<u8>,
    len: usize,
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
            return Ok(Shard { ptr: NonNull::dangling(), len: 0 });
        }
        let Ok(layout) = Layout::from_size_align(len, ALIGN) else {
            bail!(NoMemory, "cannot allocate a shard of {len} bytes");
        };
        // SAFETY: non-zero size.
        let p = unsafe { if zero { alloc::alloc_zeroed(layout) } else { alloc::alloc(layout) } };
        match NonNull::new(p) {
            Some(ptr) => Ok(Shard { ptr, len }),
            None => bail!(NoMemory, "out of memory allocating a shard of {len} bytes"),
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
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), dst, len) };
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `alloc` with this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, ALIGN)) };
        }
    }
}
