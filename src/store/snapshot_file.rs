//! A snapshot's shard file as `dds_load` reads it: opened and checked like
//! a hand-shake record (trust.rs), and read with O_DIRECT, as `dd
//! iflag=direct` reads, where the file system has it and the destination
//! and offset are page-aligned (a page-aligned buffer, `Bounce`, stands in
//! for a destination that is not), through the page cache otherwise. Which
//! chunks are read, and their checks, are snapshot_chunks.rs's.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{bail, err, Result};
use crate::trust::{check_private, open_no_link};

/// O_DIRECT's alignment of addresses, offsets and lengths (a page covers the
/// logical block size of every file system we know).
pub(super) const ALIGN: usize = 4096;

/// A shard file opened for reading and checked like a hand-shake record.
pub(super) struct ShardFile {
    pub(super) path: PathBuf,
    pub(super) len: u64,
    buffered: File,
    /// The same file opened with O_DIRECT; `None` where the file system
    /// refuses it (tmpfs) or the path no longer names the checked file.
    pub(super) direct: Option<File>,
}

impl ShardFile {
    /// Opens `path` and checks it: a plain file of this user's, not
    /// writable by group or others, `want_len` bytes long, no symbolic link.
    pub(super) fn open(path: &Path, want_len: u64) -> Result<ShardFile> {
        let Some((f, md)) = open_no_link(path, "")? else { bail!(Io, "{}: shard file missing", path.display()) };
        if !md.is_file() {
            bail!(Io, "{} is not a plain file", path.display());
        }
        check_private(path, &md, "")?;
        if md.len() != want_len {
            bail!(Io, "{}: truncated or resized: {} bytes, the manifest says {want_len}", path.display(), md.len());
        }
        // A second open (O_DIRECT cannot be set on the checked descriptor
        // alone: flags are shared with its duplicates); used only if it is
        // the same file.
        let direct = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT | libc::O_NOFOLLOW)
            .open(path)
            .ok()
            .filter(|d| d.metadata().is_ok_and(|m| (m.dev(), m.ino()) == (md.dev(), md.ino())));
        Ok(ShardFile { path: path.to_path_buf(), len: want_len, buffered: f, direct })
    }

    /// Exactly `buf.len()` bytes from offset `at`: the whole pages with
    /// O_DIRECT when `buf` and `at` are page-aligned, the rest (a file's
    /// unaligned tail, or all where O_DIRECT is refused) through the page
    /// cache. Returns the bytes read with O_DIRECT.
    pub(super) fn read_at(&self, buf: &mut [u8], at: u64) -> Result<usize> {
        let mut done = 0;
        if let Some(d) = &self.direct {
            if buf.as_ptr() as usize % ALIGN == 0 && at % ALIGN as u64 == 0 {
                let bulk = buf.len() / ALIGN * ALIGN;
                match d.read_exact_at(&mut buf[..bulk], at) {
                    Ok(()) => done = bulk,
                    // Refused after all (alignment this file system wants larger): the page cache.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                    Err(e) => bail!(Io, "cannot read {}: {e}", self.path.display()),
                }
            }
        }
        self.buffered
            .read_exact_at(&mut buf[done..], at + done as u64)
            .map_err(|e| err!(Io, "cannot read {}: {e}", self.path.display()))?;
        Ok(done)
    }
}

/// A page-aligned buffer of at least `len` bytes (O_DIRECT's destination
/// when the shard is not aligned like the file).
pub(super) struct Bounce {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl Bounce {
    pub(super) fn new(len: usize) -> Bounce {
        let layout = std::alloc::Layout::from_size_align(len.max(1).next_multiple_of(ALIGN), ALIGN).unwrap();
        // SAFETY: a layout of non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Bounce { ptr, layout }
    }

    pub(super) fn bytes(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.layout.size());
        // SAFETY: an initialized allocation of layout.size() >= len bytes
        // owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), len) }
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: the buffer is owned and used by one thread at a time.
unsafe impl Send for Bounce {}
