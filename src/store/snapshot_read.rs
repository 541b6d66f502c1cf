//! Reading a snapshot's shard files for `dds_load` (store/snapshot.rs):
//! each rank opens only the files holding its new rows, checks them like
//! the method-2 records (plain file, this user's, not writable by group or
//! others, the manifest's length) and verifies every checksum chunk it reads
//! (snapshot_file.rs opens and checks a file, snapshot_chunks.rs reads the
//! chunks).

use std::path::Path;

use super::snapshot_chunks::{read_pieces, Piece, READERS};
use super::snapshot_file::ShardFile;
use super::snapshot_format::{self as format, Manifest};
use crate::error::{bail, Result};
use crate::var::INDEX_ROW_BYTES;

/// Bytes [start, end) of a file of `len` bytes into `out` (exactly that
/// long), reading and verifying the whole checksum chunks that cover them.
fn read_range(path: &Path, len: u64, sums: &[u64], chunk: u64, range: (u64, u64), out: &mut [u8]) -> Result<()> {
    if range.0 == range.1 {
        return Ok(());
    }
    let file = ShardFile::open(path, len)?;
    read_pieces(vec![Piece { file, sums, range, out }], chunk, READERS).map(drop)
}

/// `read_range`, appended to `out`.
fn read_range_vec(path: &Path, len: u64, sums: &[u64], chunk: u64, range: (u64, u64), out: &mut Vec<u8>) -> Result<()> {
    let at = out.len();
    out.resize(at + (range.1 - range.0) as usize, 0);
    let got = read_range(path, len, sums, chunk, range, &mut out[at..]);
    if got.is_err() {
        out.truncate(at);
    }
    got
}

/// Global rows [lo, hi) of fixed variable `i`, from the shards holding
/// them, into `out` ((hi - lo) rows long: the new shard).
pub(super) fn read_rows(dir: &Path, m: &Manifest, i: usize, (lo, hi): (i64, i64), out: &mut [u8]) -> Result<()> {
    let v = &m.vars[i];
    let rb = v.row_bytes();
    if out.len() as u64 != (hi - lo) as u64 * rb {
        bail!(Internal, "snapshot load: a shard of {} bytes for {} rows of {rb} bytes", out.len(), hi - lo);
    }
    // Every file's chunks in one pass of the reader threads.
    let (mut pieces, mut rest, mut s0) = (Vec::new(), out, 0i64);
    for (r, &n) in v.rows.iter().enumerate() {
        let (a, b) = (lo.max(s0), hi.min(s0 + n));
        if a < b {
            let file = ShardFile::open(&dir.join(format::data_file(i, r)), n as u64 * rb)?;
            let (dst, tail) = std::mem::take(&mut rest).split_at_mut(((b - a) as u64 * rb) as usize);
            rest = tail;
            let range = ((a - s0) as u64 * rb, (b - s0) as u64 * rb);
            pieces.push(Piece { file, sums: &v.data_sums[r], range, out: dst });
        }
        s0 += n;
    }
    read_pieces(pieces, m.chunk, READERS).map(drop)
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
            let mut ix = Vec::new();
            read_range_vec(&ipath, ilen, &v.index_sums[r], m.chunk, (ia, ib), &mut ix)?;
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
            read_range_vec(
                &dpath,
                v.rows[r] as u64 * rb,
                &v.data_sums[r],
                m.chunk,
                (first * rb, row * rb),
                &mut payload,
            )?;
        }
        s0 += n;
    }
    Ok((payload, lengths))
}

#[cfg(test)]
mod tests {
    use super::read_range_vec as read_range;
    use std::os::unix::fs::OpenOptionsExt;

    /// Every range of a 1000-byte file with 64-byte chunks (whole chunks read
    /// in place, partial ones through the buffer) gives exactly its bytes; a
    /// flipped byte is refused exactly when its chunk is read.
    #[test]
    fn ranges_read_exactly_and_checked() {
        let dir = std::env::temp_dir().join(format!("dds-snap-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 + 7) as u8).collect();
        let write = |bytes: &[u8]| {
            let _ = std::fs::remove_file(&path);
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).unwrap();
            std::io::Write::write_all(&mut f, bytes).unwrap();
        };
        let chunk = 64u64;
        let sums: Vec<u64> = data.chunks(chunk as usize).map(crate::hash::fnv1a_wide).collect();
        write(&data);
        for start in (0..1000u64).step_by(13) {
            for end in (start..=1000).step_by(29).chain([1000]) {
                let mut out = vec![9u8; 3]; // appended to, never replaced
                read_range(&path, 1000, &sums, chunk, (start, end), &mut out).unwrap();
                assert_eq!(&out[..3], &[9, 9, 9]);
                assert_eq!(&out[3..], &data[start as usize..end as usize], "[{start}, {end})");
            }
        }
        let mut bad = data.clone();
        bad[500] ^= 0x40; // chunk 7: bytes 448..512
        write(&bad);
        for (start, end, refused) in
            [(0, 448, false), (512, 1000, false), (440, 450, true), (448, 512, true), (0, 1000, true)]
        {
            let mut out = Vec::new();
            let got = read_range(&path, 1000, &sums, chunk, (start, end), &mut out);
            assert_eq!(got.is_err(), refused, "[{start}, {end})");
            if let Err(e) = got {
                assert!(e.msg.contains("checksum mismatch in chunk 7 (bytes 448..512)"), "{e}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
