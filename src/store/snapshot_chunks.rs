//! The chunk reader of `dds_load` (snapshot_read.rs decides which byte
//! ranges of which shard files a rank needs): every checksum chunk covering
//! them is read with O_DIRECT, as `dd iflag=direct` reads, by `READERS`
//! threads taking chunks in file order, so one thread verifies its chunk
//! while the other's read waits on the disk. A chunk wholly wanted whose
//! destination is page-aligned like its file offset (a load on as many ranks
//! as saved, or rows that line up) is read straight into the new shard and
//! verified there; any other goes through a per-thread aligned buffer and is
//! copied. Through the page cache, the kernel's copy out of it and the
//! shard's page faults on one thread held a cold load to 0.58x the disk.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::snapshot_file::{Bounce, ShardFile, ALIGN};
use crate::error::{bail, Error, Result};

/// Reader threads per rank: two keep a read in flight while a chunk is
/// verified (the checksum runs at memory speed, the disk is the limit).
pub(super) const READERS: usize = 2;

/// Bytes [range.0, range.1) of `file` into `out` (exactly that long), with
/// `sums` the checksums of the file's chunks.
pub(super) struct Piece<'a> {
    pub file: ShardFile,
    pub sums: &'a [u64],
    pub range: (u64, u64),
    pub out: &'a mut [u8],
}

/// How the bytes read came in (unit tests check the direct path is taken).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Tally {
    /// Bytes read with O_DIRECT straight into the destination.
    pub in_place: u64,
    /// Bytes read with O_DIRECT into a reader's buffer, then copied.
    pub bounced: u64,
    /// Bytes read through the page cache (unaligned tails, no O_DIRECT).
    pub cached: u64,
}

/// Checksum chunk `index`, bytes [from, to) of `file`, whose checksum is `sum`.
struct Chunk<'a> {
    file: &'a ShardFile,
    index: u64,
    from: u64,
    to: u64,
    sum: u64,
}

/// A chunk to read; `dst` receives its bytes from `skip` on (all of them
/// when `dst` is as long as the chunk).
struct Task<'a> {
    chunk: Chunk<'a>,
    skip: usize,
    dst: &'a mut [u8],
}

impl Task<'_> {
    fn run(self, bounce: &mut Option<Bounce>, chunk: u64, tally: &mut Tally) -> Result<()> {
        let Task { chunk: c, skip, dst } = self;
        let len = (c.to - c.from) as usize;
        if dst.len() == len && dst.as_ptr() as usize % ALIGN == 0 && c.from % ALIGN as u64 == 0 {
            let direct = c.fill(dst)?;
            tally.in_place += direct;
            tally.cached += len as u64 - direct;
            return Ok(());
        }
        let buf = bounce.get_or_insert_with(|| Bounce::new(chunk as usize)).bytes(len);
        let direct = c.fill(buf)?;
        tally.bounced += direct;
        tally.cached += len as u64 - direct;
        dst.copy_from_slice(&buf[skip..skip + dst.len()]);
        Ok(())
    }
}

impl Chunk<'_> {
    /// Reads the chunk into `buf` and verifies it; returns the bytes read
    /// with O_DIRECT.
    fn fill(&self, buf: &mut [u8]) -> Result<u64> {
        let direct = self.file.read_at(buf, self.from)? as u64;
        if crate::hash::fnv1a_wide(buf) != self.sum {
            bail!(
                Io,
                "{}: checksum mismatch in chunk {} (bytes {}..{})",
                self.file.path.display(),
                self.index,
                self.from,
                self.to
            );
        }
        Ok(direct)
    }
}

/// The chunks of every piece, in file order, each with its part of `out`.
fn tasks<'a>(pieces: &'a mut [Piece<'_>], chunk: u64) -> Vec<Task<'a>> {
    let mut tasks = Vec::new();
    for p in pieces.iter_mut() {
        let (start, end) = p.range;
        debug_assert_eq!(p.out.len() as u64, end - start);
        let mut rest: &mut [u8] = &mut *p.out;
        for c in start / chunk..end.div_ceil(chunk) {
            let (from, to) = (c * chunk, ((c + 1) * chunk).min(p.file.len));
            let (a, b) = (start.max(from), end.min(to));
            let (dst, tail) = std::mem::take(&mut rest).split_at_mut((b - a) as usize);
            rest = tail;
            let ck = Chunk { file: &p.file, index: c, from, to, sum: p.sums[c as usize] };
            tasks.push(Task { chunk: ck, skip: (a - from) as usize, dst });
        }
    }
    tasks
}

/// Reads every piece on up to `threads` threads; chunks are taken in order,
/// so the error reported is that of the first failing chunk, as a reading
/// on one thread would report it.
pub(super) fn read_pieces(mut pieces: Vec<Piece<'_>>, chunk: u64, threads: usize) -> Result<Tally> {
    let tasks = tasks(&mut pieces, chunk);
    let threads = threads.clamp(1, tasks.len().max(1));
    let queue = Mutex::new(tasks.into_iter().enumerate());
    let failed: Mutex<Option<(usize, Error)>> = Mutex::new(None);
    let total = Mutex::new(Tally::default());
    let stop = AtomicBool::new(false);
    let work = || {
        let (mut bounce, mut tally) = (None, Tally::default());
        while !stop.load(Ordering::Relaxed) {
            let Some((k, task)) = queue.lock().next() else { break };
            if let Err(e) = task.run(&mut bounce, chunk, &mut tally) {
                stop.store(true, Ordering::Relaxed);
                let mut f = failed.lock();
                if !matches!(*f, Some((j, _)) if j < k) {
                    *f = Some((k, e));
                }
            }
        }
        let mut t = total.lock();
        t.in_place += tally.in_place;
        t.bounced += tally.bounced;
        t.cached += tally.cached;
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    match failed.into_inner() {
        Some((_, e)) => Err(e),
        None => Ok(total.into_inner()),
    }
}

#[cfg(test)]
mod tests {
    use super::{read_pieces, Bounce, Piece, ShardFile, Tally, ALIGN};
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    fn write(path: &Path, bytes: &[u8]) {
        let _ = std::fs::remove_file(path);
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).unwrap();
        std::io::Write::write_all(&mut f, bytes).unwrap();
        f.sync_all().unwrap();
    }

    /// Reads [start, end) of `path` into a destination at `shift` bytes past
    /// a page boundary.
    fn read(
        path: &Path,
        data_len: u64,
        sums: &[u64],
        chunk: u64,
        (start, end): (u64, u64),
        shift: usize,
        threads: usize,
    ) -> crate::error::Result<(Vec<u8>, Tally)> {
        let n = (end - start) as usize;
        let mut dst = Bounce::new(n + shift + 1);
        let out = &mut dst.bytes(n + shift)[shift..];
        out.fill(0xa5);
        let file = ShardFile::open(path, data_len)?;
        let tally = read_pieces(vec![Piece { file, sums, range: (start, end), out }], chunk, threads)?;
        Ok((out.to_vec(), tally))
    }

    /// A file of odd length (an unaligned tail) in page-multiple chunks:
    /// every range, on 1 to 4 threads, into page-aligned and unaligned
    /// destinations, gives exactly its bytes; aligned whole chunks are read
    /// in place with O_DIRECT where the file system has it, the rest
    /// through a buffer, and the tail through the page cache.
    #[test]
    fn ranges_threads_and_alignments() {
        let dir = std::env::temp_dir().join(format!("dds-snap-chunks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let chunk = 4 * ALIGN as u64;
        let len = 5 * chunk + ALIGN as u64 + 1234;
        let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
        write(&path, &data);
        let sums = super::super::snapshot_format::chunk_sums(&data, chunk);
        let direct = ShardFile::open(&path, len).unwrap().direct.is_some();
        let ranges = [
            (0, len),
            (0, 1),
            (chunk, 3 * chunk),
            (chunk - 1, 2 * chunk + 1),
            (7, len - 3),
            (len - 1234, len),
            (len - 5, len),
        ];
        for threads in 1..=4 {
            for &(start, end) in &ranges {
                for shift in [0, 1, 8, ALIGN - 1] {
                    let (got, t) = read(&path, len, &sums, chunk, (start, end), shift, threads).unwrap();
                    let at = format!("[{start}, {end}) shift {shift}, {threads} threads");
                    assert_eq!(got, &data[start as usize..end as usize], "{at}");
                    let chunks_read: u64 =
                        (start / chunk..end.div_ceil(chunk)).map(|c| ((c + 1) * chunk).min(len) - c * chunk).sum();
                    assert_eq!(t.in_place + t.bounced + t.cached, chunks_read, "{at}: {t:?}");
                    if direct && (start, end, shift) == (0, len, 0) {
                        assert_eq!(t.in_place, 5 * chunk + ALIGN as u64, "{at}: {t:?}");
                        assert_eq!(t.cached, 1234, "{at}: {t:?}");
                    }
                    // (Shift ALIGN - 1 lines chunk 1 of [chunk - 1, ..) up again.)
                    if direct && (shift == 1 || shift == 8) {
                        assert_eq!(t.in_place, 0, "{at}: {t:?}");
                    }
                }
            }
        }
        // Chunks not a multiple of a page: nothing is aligned past chunk 0, all still exact.
        let odd = 3 * ALIGN as u64 + 100;
        let osums = super::super::snapshot_format::chunk_sums(&data, odd);
        for threads in [1, 2, 3] {
            let (got, _) = read(&path, len, &osums, odd, (0, len), 0, threads).unwrap();
            assert_eq!(got, data);
            let (got, _) = read(&path, len, &osums, odd, (odd + 5, len - 7), 3, threads).unwrap();
            assert_eq!(got, &data[odd as usize + 5..len as usize - 7]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A flipped byte in a later chunk fails the read whichever thread reads
    /// it, and with two bad chunks the error names the first, as one thread
    /// reading in order would.
    #[test]
    fn a_bad_later_chunk_fails_and_the_first_is_named() {
        let dir = std::env::temp_dir().join(format!("dds-snap-chunks-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let chunk = 2 * ALIGN as u64;
        let len = 9 * chunk + 77;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let sums = super::super::snapshot_format::chunk_sums(&data, chunk);
        let mut bad = data.clone();
        bad[(7 * chunk + 5) as usize] ^= 1;
        write(&path, &bad);
        for threads in 1..=4 {
            for shift in [0, 1] {
                let e = read(&path, len, &sums, chunk, (0, len), shift, threads).unwrap_err();
                assert!(
                    e.msg.contains(&format!("checksum mismatch in chunk 7 (bytes {}..{})", 7 * chunk, 8 * chunk)),
                    "{e}"
                );
                // Ranges that skip chunk 7 read fine.
                let (got, _) = read(&path, len, &sums, chunk, (0, 7 * chunk), shift, threads).unwrap();
                assert_eq!(got, &data[..(7 * chunk) as usize]);
            }
        }
        // The unaligned tail chunk is verified too; two bad chunks: the first is named.
        bad[(len - 1) as usize] ^= 1;
        bad[(2 * chunk) as usize] ^= 1;
        write(&path, &bad);
        for threads in 1..=4 {
            let e = read(&path, len, &sums, chunk, (3 * chunk, len), 0, threads).unwrap_err();
            assert!(e.msg.contains("checksum mismatch in chunk 7 "), "{e}");
            let e = read(&path, len, &sums, chunk, (len - 1, len), 0, threads).unwrap_err();
            assert!(e.msg.contains("checksum mismatch in chunk 9 "), "{e}");
            let e = read(&path, len, &sums, chunk, (0, len), 1, threads).unwrap_err();
            assert!(e.msg.contains("checksum mismatch in chunk 2 "), "{e}");
        }
        // A truncated file is refused at open.
        write(&path, &data[..len as usize - 1]);
        let e = read(&path, len, &sums, chunk, (0, 10), 0, 2).unwrap_err();
        assert!(e.msg.contains("truncated or resized"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
