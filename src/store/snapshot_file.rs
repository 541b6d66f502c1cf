//! A snapshot's shard files on the disk: written by `dds_save` (`write_new`)
//! and, for `dds_load`, opened and checked like a hand-shake record
//! (trust.rs) and read (`ShardFile`); both with O_DIRECT, as `dd
//! oflag=direct` and `iflag=direct` do, where the file system has it and the
//! memory and offset are page-aligned (a page-aligned buffer, `Bounce`,
//! stands in for a destination that is not), through the page cache
//! otherwise. Which chunks a load reads, and their checks, are
//! snapshot_chunks.rs's.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{bail, err, Result};
use crate::trust::{check_private, open_no_link};

/// O_DIRECT's alignment of addresses, offsets and lengths (a page covers the
/// logical block size of every file system we know).
pub(super) const ALIGN: usize = 4096;

/// Below this, a file is written through the page cache only.
const DIRECT_MIN: usize = 1 << 20;

/// Writes a new file, 0600, never through a link, and fsyncs it. A large
/// page-aligned shard (a shared-memory segment) goes to the disk with
/// O_DIRECT up to its last whole page, as `dd oflag=direct` does: no copy
/// into the page cache, which made saves slower than the disk. The rest,
/// and everything where the file system refuses O_DIRECT, is written
/// through the page cache.
pub(super) fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |what: &str, e: std::io::Error| err!(Io, "cannot {what} {}: {e}", path.display());
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io("create", e))?;
    let bulk = bytes.len() / ALIGN * ALIGN;
    let mut done = 0;
    if bytes.len() >= DIRECT_MIN && (bytes.as_ptr() as usize) % ALIGN == 0 {
        // The file was just created in our private directory: the path is ours.
        let direct = OpenOptions::new().write(true).custom_flags(libc::O_DIRECT | libc::O_NOFOLLOW).open(path);
        if let Ok(d) = direct {
            match d.write_all_at(&bytes[..bulk], 0) {
                Ok(()) => done = bulk,
                // Refused (EINVAL: alignment or a file system without it): all through the page cache.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(io("write", e)),
            }
        }
    }
    f.write_all_at(&bytes[done..], done as u64).map_err(|e| io("write", e))?;
    f.sync_all().map_err(|e| io("fsync", e))
}

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

#[cfg(test)]
mod tests {
    use super::{write_new, ALIGN, DIRECT_MIN};

    /// Page-aligned buffers of several sizes (the O_DIRECT bulk plus a
    /// buffered tail, or all buffered) and an unaligned one: the file holds
    /// exactly the bytes, 0600. /dev/shm refuses O_DIRECT (the fallback).
    #[test]
    fn write_new_direct_and_buffered() {
        let n = 3 * DIRECT_MIN + 1234;
        let layout = std::alloc::Layout::from_size_align(n + 1, ALIGN).unwrap();
        // SAFETY: a fresh allocation of n + 1 bytes, filled before use, freed below.
        let buf = unsafe {
            let p = std::alloc::alloc(layout);
            for i in 0..=n {
                *p.add(i) = (i * 131 % 251) as u8;
            }
            std::slice::from_raw_parts(p, n + 1)
        };
        for base in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
            let dir = base.join(format!("dds-write-new-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            for (k, bytes) in [&buf[..n], &buf[..DIRECT_MIN], &buf[..DIRECT_MIN - 1], &buf[1..n + 1], &buf[..10]]
                .into_iter()
                .enumerate()
            {
                let path = dir.join(format!("f{k}"));
                write_new(&path, bytes).unwrap();
                assert_eq!(std::fs::read(&path).unwrap(), bytes, "{} case {k}", dir.display());
                use std::os::unix::fs::PermissionsExt;
                assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
                assert!(write_new(&path, bytes).is_err(), "a second write of {} must be refused", path.display());
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(buf.as_ptr() as *mut u8, layout) };
    }
}
