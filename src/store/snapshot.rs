//! Snapshots of a store (`dds_save`, `dds_load`): a restarted job, on any
//! number of ranks, rebuilds its variables from a directory instead of from
//! the source files. The format is in snapshot_format.rs, the shard files'
//! writes and checked reads (O_DIRECT) in snapshot_file.rs.
//!
//! Save: every rank writes its own shards into `<dir>.partial-<token>` (the
//! token agreed on every rank), each file 0600 and fsynced; rank 0 writes the
//! manifest with every file's chunk checksums, fsyncs the directory and makes
//! it visible in one step: a rename, or, when `dir` holds an older snapshot,
//! an exchange of the two (renameat2 RENAME_EXCHANGE) before the old one is
//! removed. A job killed at any point leaves the old snapshot (or none) at
//! `dir`, and at worst a `.partial-*` directory, which load refuses.
//!
//! Load: rank r of P takes global rows (ragged: samples) [r*T/P + min(r, T%P),
//! ...) of each variable, an even contiguous split with the remainder on the
//! first ranks, reads only the checksum chunks of the shard files that hold
//! them, verifies them, and registers the variable through the same path as
//! `dds_add` / `dds_add_ragged`.

use std::borrow::Cow;
use std::fs::{self, DirBuilder, File};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::collective::enter;
use super::snapshot_file::write_new;
use super::snapshot_format::{self as format, Manifest, VarEntry, MANIFEST};
use super::{Collective, Store};
use crate::error::{bail, err, Result};
use crate::mpi::{agree, Comm};
use crate::trust::my_uid;
use crate::var::{Variable, INDEX_ROW_BYTES};

const PARTIAL: &str = ".partial-";

/// A directory this user may trust: owned by them, written by no one else.
pub(super) fn check_trusted_dir(dir: &Path, what: &str) -> Result<()> {
    let m = fs::metadata(dir).map_err(|e| err!(Io, "{what} {}: {e}", dir.display()))?;
    if !m.is_dir() {
        bail!(Io, "{what} {} is not a directory", dir.display());
    }
    if m.uid() != my_uid() {
        bail!(Io, "{what} {} is owned by uid {}, not by this user: refusing to trust it", dir.display(), m.uid());
    }
    if m.mode() & 0o002 != 0 {
        bail!(Io, "{what} {} may be written by other users (mode {:o}): refusing it", dir.display(), m.mode() & 0o777);
    }
    Ok(())
}

pub(super) fn refuse_partial(dir: &Path) -> Result<()> {
    if dir.file_name().is_some_and(|n| n.to_string_lossy().contains(PARTIAL)) {
        bail!(
            InvalidArgument,
            "{} is an unfinished snapshot (a save that did not complete): refusing to use it",
            dir.display()
        );
    }
    Ok(())
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err!(Io, "cannot fsync {}: {e}", dir.display()))
}

/// Whether a directory holds a snapshot and nothing else (so replacing it
/// removes only what a save made).
fn is_snapshot(dir: &Path) -> Result<bool> {
    let entries = fs::read_dir(dir).map_err(|e| err!(Io, "cannot list {}: {e}", dir.display()))?;
    let mut manifest = false;
    for e in entries {
        let e = e.map_err(|e| err!(Io, "cannot list {}: {e}", dir.display()))?;
        let n = e.file_name();
        let n = n.to_string_lossy();
        manifest |= n == MANIFEST;
        let ours = n == MANIFEST || (n.starts_with('v') && (n.ends_with(".data") || n.ends_with(".index")));
        if !ours {
            return Ok(false);
        }
    }
    Ok(manifest)
}

/// True on every rank only if `fp` is the same on every rank.
pub(super) fn same_everywhere(comm: &Comm, fp: i64) -> Result<bool> {
    let mut w = [fp, !fp];
    comm.allreduce_min(&mut w)?;
    Ok(w[0] == !w[1])
}

fn names_fingerprint(names: &[String]) -> i64 {
    crate::hash::fnv1a(names.join("\0").as_bytes()) as i64
}

/// Rank `r`'s part [lo, hi) of `total` items split evenly over `p` ranks.
pub(crate) fn even_split(total: i64, p: usize, r: usize) -> (i64, i64) {
    let (p, r) = (p as i64, r as i64);
    let (base, rem) = (total / p, total % p);
    let lo = r * base + r.min(rem);
    (lo, lo + base + (r < rem) as i64)
}

/// Rows (or samples) rank `r` holds in `layout`.
fn count(layout: &crate::layout::Layout, r: usize) -> i64 {
    let (start, end) = layout.shard(r);
    end - start
}

fn shard_bytes(v: &Variable) -> &[u8] {
    // SAFETY: the shard is host memory of len() bytes that lives as long as v.
    unsafe { std::slice::from_raw_parts(v.shard.as_ptr(), v.shard.len()) }
}

/// A ragged index shard in the file's byte order (little-endian).
fn index_le(ix: &Variable) -> Vec<u8> {
    shard_bytes(ix).chunks(8).flat_map(|w| u64::from_ne_bytes(w.try_into().unwrap()).to_le_bytes()).collect()
}

impl Store {
    /// Collective: writes the variables `names` (empty: all) to snapshot
    /// directory `dir`, replacing an older snapshot there atomically.
    pub fn save(&self, dir: Result<&str>, names: Result<Vec<String>>) -> Result<()> {
        self.check_running()?;
        self.refuse_extra("save", "")?;
        self.drain_requests();
        let vars = self.vars.read();
        let me = self.comm.rank();
        let token = if me == 0 {
            (crate::handshake::now_ns() ^ ((std::process::id() as u64) << 40)) as i64 & i64::MAX
        } else {
            i64::MAX
        };
        let local = (|| {
            let dir = PathBuf::from(dir?);
            let names = names?;
            let list: Vec<&Variable> = if names.is_empty() {
                vars.values().collect()
            } else {
                let mut seen = std::collections::BTreeSet::new();
                let mut l = Vec::new();
                for n in &names {
                    if !seen.insert(n) {
                        bail!(InvalidArgument, "variable '{n}' is named twice");
                    }
                    l.push(vars.get(n).ok_or_else(|| err!(UnknownVariable, "no variable named '{n}' in this store"))?);
                }
                l
            };
            refuse_partial(&dir)?;
            if dir.file_name().is_none() {
                bail!(InvalidArgument, "snapshot directory '{}' has no name", dir.display());
            }
            if me == 0 {
                let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                check_trusted_dir(parent, "snapshot parent directory")?;
                if fs::symlink_metadata(&dir).is_ok() && !is_snapshot(&dir)? {
                    bail!(InvalidArgument, "{} exists and is not a snapshot: refusing to replace it", dir.display());
                }
            }
            Ok((dir, list))
        })();
        let ((dir, list), [token, ..]) = enter(&self.comm, Collective::Save, "", local, [token, 0, 0, 0])?;
        let listed: Vec<String> = list.iter().map(|v| v.name.clone()).collect();
        if !same_everywhere(&self.comm, names_fingerprint(&listed))? {
            bail!(InvalidArgument, "dds_save: ranks named different lists of variables");
        }
        let mut tmp = dir.clone().into_os_string();
        tmp.push(format!("{PARTIAL}{token:x}"));
        let tmp = PathBuf::from(tmp);
        let made = if me == 0 {
            DirBuilder::new().mode(0o700).create(&tmp).map_err(|e| err!(Io, "cannot create {}: {e}", tmp.display()))
        } else {
            Ok(())
        };
        agree(&self.comm, made)?;
        let chunk = self.cfg.snapshot_chunk_bytes;
        let written = (|| {
            let mut sums: Vec<i64> = Vec::new();
            for (i, v) in list.iter().enumerate() {
                // The shard is written in place (no copy of up to GiBs);
                // only a ragged index is converted to little-endian.
                let mut files = vec![(format::data_file(i, me), Cow::Borrowed(shard_bytes(v)))];
                if let Some(r) = &v.ragged {
                    files.push((format::index_file(i, me), Cow::Owned(index_le(&r.index))));
                }
                for (name, bytes) in files {
                    write_new(&tmp.join(name), &bytes)?;
                    sums.extend(format::chunk_sums(&bytes, chunk).iter().map(|&s| s as i64));
                    if self.cfg.test_save_delay_s > 0.0 {
                        std::thread::sleep(std::time::Duration::from_secs_f64(self.cfg.test_save_delay_s));
                    }
                }
            }
            Ok(sums)
        })();
        let published = agree(&self.comm, written).and_then(|sums| self.publish(&dir, &tmp, &list, chunk, &sums));
        if published.is_err() && me == 0 {
            let _ = fs::remove_dir_all(&tmp);
        }
        published
    }

    /// Gathers the checksums on rank 0, which writes the manifest and makes
    /// the snapshot visible; every rank returns rank 0's outcome.
    fn publish(&self, dir: &Path, tmp: &Path, list: &[&Variable], chunk: u64, sums: &[i64]) -> Result<()> {
        let p = self.comm.size();
        let mut counts = vec![0i64; p];
        for v in list {
            for (r, c) in counts.iter_mut().enumerate() {
                *c += format::n_chunks(count(&v.layout, r) as u64 * v.row_bytes, chunk) as i64;
                if let Some(ix) = &v.ragged {
                    *c += format::n_chunks(count(&ix.index.layout, r) as u64 * INDEX_ROW_BYTES, chunk) as i64;
                }
            }
        }
        let all = self.comm.allgatherv_i64(sums, &counts)?;
        if self.comm.rank() != 0 {
            return agree(&self.comm, Ok(()));
        }
        let mut at = 0usize;
        let mut take = |n: usize| {
            let s: Vec<u64> = all[at..at + n].iter().map(|&x| x as u64).collect();
            at += n;
            s
        };
        let mut entries: Vec<VarEntry> = list
            .iter()
            .map(|v| VarEntry {
                name: v.name.clone(),
                ragged: v.ragged.is_some(),
                row_elems: v.row_elems,
                item_size: v.item_size,
                rows: (0..p).map(|r| count(&v.layout, r)).collect(),
                samples: v
                    .ragged
                    .as_ref()
                    .map_or(Vec::new(), |ix| (0..p).map(|r| count(&ix.index.layout, r)).collect()),
                data_sums: vec![Vec::new(); p],
                index_sums: vec![Vec::new(); if v.ragged.is_some() { p } else { 0 }],
            })
            .collect();
        // Rank-major, as each rank appended its own.
        for r in 0..p {
            for e in entries.iter_mut() {
                e.data_sums[r] = take(format::n_chunks(e.rows[r] as u64 * e.row_bytes(), chunk));
                if e.ragged {
                    e.index_sums[r] = take(format::n_chunks(e.samples[r] as u64 * INDEX_ROW_BYTES, chunk));
                }
            }
        }
        let m = Manifest { library: env!("CARGO_PKG_VERSION").into(), chunk, ranks: p, vars: entries };
        let done = (|| {
            write_new(&tmp.join(MANIFEST), &format::serialize(&m))?;
            fsync_dir(tmp)?;
            publish_dir(tmp, dir)
        })();
        agree(&self.comm, done)
    }
}

/// Makes `tmp` visible as `dir`: a rename, or an atomic exchange with the
/// snapshot already there, which is then removed.
fn publish_dir(tmp: &Path, dir: &Path) -> Result<()> {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if fs::symlink_metadata(dir).is_err() {
        fs::rename(tmp, dir).map_err(|e| err!(Io, "cannot rename {} to {}: {e}", tmp.display(), dir.display()))?;
        return fsync_dir(parent);
    }
    let c =
        |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| err!(InvalidArgument, "NUL in path"));
    let (a, b) = (c(tmp)?, c(dir)?);
    // SAFETY: two NUL-terminated paths; the raw syscall works with any libc.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        bail!(Io, "cannot exchange {} with the snapshot at {}: {e}", tmp.display(), dir.display());
    }
    fsync_dir(parent)?;
    // The old snapshot now lives at `tmp`.
    fs::remove_dir_all(tmp).map_err(|e| err!(Io, "saved, but cannot remove the old snapshot {}: {e}", tmp.display()))
}

#[cfg(test)]
mod tests {
    use super::even_split;

    #[test]
    fn even_split_covers_in_order() {
        for total in 0..20 {
            for p in 1..6 {
                let mut next = 0;
                for r in 0..p {
                    let (lo, hi) = even_split(total, p, r);
                    assert_eq!(lo, next);
                    assert!(hi - lo == total / p as i64 || hi - lo == total / p as i64 + 1);
                    next = hi;
                }
                assert_eq!(next, total);
            }
        }
    }
}
