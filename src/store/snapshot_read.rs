//! Reading a snapshot's shard files for `dds_load` (store/snapshot.rs):
//! each rank opens only the files holding its new rows, checks them like
//! the method-2 records (plain file, this user's, not writable by group or
//! others, the manifest's length) and verifies every checksum chunk it reads.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::snapshot_format::{self as format, Manifest};
use crate::error::{bail, err, Result};
use crate::var::INDEX_ROW_BYTES;

fn my_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// Opens a shard file, checks it like a hand-shake record (plain file, this
/// user's, not writable by group or others) and its length.
fn open_checked(path: &Path, want_len: u64) -> Result<File> {
    let f = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(Io, "{}: shard file missing", path.display()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            bail!(Io, "{} is a symbolic link: refusing to trust it", path.display())
        }
        Err(e) => bail!(Io, "cannot open {}: {e}", path.display()),
    };
    let md = f.metadata().map_err(|e| err!(Io, "cannot stat {}: {e}", path.display()))?;
    if !md.is_file() {
        bail!(Io, "{} is not a plain file", path.display());
    }
    if md.uid() != my_uid() {
        bail!(Io, "{} is owned by uid {}, not by this user: refusing to trust it", path.display(), md.uid());
    }
    if md.mode() & 0o022 != 0 {
        bail!(
            Io,
            "{} may be written by group or others (mode {:o}): refusing to trust it",
            path.display(),
            md.mode() & 0o777
        );
    }
    if md.len() != want_len {
        bail!(Io, "{}: truncated or resized: {} bytes, the manifest says {want_len}", path.display(), md.len());
    }
    Ok(f)
}

/// Bytes [start, end) of a file of `len` bytes, reading and verifying the
/// whole checksum chunks that cover them.
fn read_range(path: &Path, len: u64, sums: &[u64], chunk: u64, start: u64, end: u64) -> Result<Vec<u8>> {
    if start == end {
        return Ok(Vec::new());
    }
    let f = open_checked(path, len)?;
    let (c0, c1) = (start / chunk, end.div_ceil(chunk));
    let (from, to) = (c0 * chunk, (c1 * chunk).min(len));
    let mut buf = vec![0u8; (to - from) as usize];
    f.read_exact_at(&mut buf, from).map_err(|e| err!(Io, "cannot read {}: {e}", path.display()))?;
    for (k, piece) in buf.chunks(chunk as usize).enumerate() {
        let c = c0 as usize + k;
        if crate::hash::fnv1a_wide(piece) != sums[c] {
            bail!(
                Io,
                "{}: checksum mismatch in chunk {c} (bytes {}..{})",
                path.display(),
                c as u64 * chunk,
                c as u64 * chunk + piece.len() as u64
            );
        }
    }
    buf.drain(..(start - from) as usize);
    buf.truncate((end - start) as usize);
    Ok(buf)
}

/// Global rows [lo, hi) of fixed variable `i`, from the shards holding them.
pub(super) fn read_rows(dir: &Path, m: &Manifest, i: usize, lo: i64, hi: i64) -> Result<Vec<u8>> {
    let v = &m.vars[i];
    let rb = v.row_bytes();
    let mut out = Vec::with_capacity(((hi - lo) as u64 * rb) as usize);
    let mut s0 = 0i64;
    for (r, &n) in v.rows.iter().enumerate() {
        let (a, b) = (lo.max(s0), hi.min(s0 + n));
        if a < b {
            let path = dir.join(format::data_file(i, r));
            let len = n as u64 * rb;
            out.extend(read_range(&path, len, &v.data_sums[r], m.chunk, (a - s0) as u64 * rb, (b - s0) as u64 * rb)?);
        }
        s0 += n;
    }
    Ok(out)
}

/// Samples [lo, hi) of ragged variable `i`: their rows back to back and
/// their lengths.
pub(super) fn read_samples(dir: &Path, m: &Manifest, i: usize, lo: i64, hi: i64) -> Result<(Vec<u8>, Vec<i64>)> {
    let v = &m.vars[i];
    let rb = v.row_bytes();
    let (mut payload, mut lengths) = (Vec::new(), Vec::new());
    let mut s0 = 0i64;
    for (r, &n) in v.samples.iter().enumerate() {
        let (a, b) = (lo.max(s0), hi.min(s0 + n));
        if a < b {
            let ipath = dir.join(format::index_file(i, r));
            let ilen = n as u64 * INDEX_ROW_BYTES;
            let (ia, ib) = ((a - s0) as u64 * INDEX_ROW_BYTES, (b - s0) as u64 * INDEX_ROW_BYTES);
            let ix = read_range(&ipath, ilen, &v.index_sums[r], m.chunk, ia, ib)?;
            let word = |k: usize| u64::from_le_bytes(ix[k * 8..k * 8 + 8].try_into().unwrap());
            let first = word(0);
            let mut row = first;
            for k in 0..(b - a) as usize {
                let (f, c) = (word(2 * k), word(2 * k + 1));
                if f != row || c > v.rows[r] as u64 || f + c > v.rows[r] as u64 {
                    bail!(
                        Io,
                        "{}: corrupt index entry {} (first row {f}, {c} rows)",
                        ipath.display(),
                        a - s0 + k as i64
                    );
                }
                lengths.push(c as i64);
                row += c;
            }
            let dpath = dir.join(format::data_file(i, r));
            payload.extend(read_range(&dpath, v.rows[r] as u64 * rb, &v.data_sums[r], m.chunk, first * rb, row * rb)?);
        }
        s0 += n;
    }
    Ok((payload, lengths))
}
