//! Method 0, collective batch mode: moving ragged samples (ranges of rows of
//! different lengths) between ranks.
//!
//! The requester already knows each sample's owner, its first row in the
//! owner's payload shard and its row count (it read the samples' index
//! entries first, by the fixed-row exchange of `transport::exchange`). So both
//! sides can size every message: per round one `MPI_Alltoall` of range
//! counts, one `MPI_Alltoallv` of the ranges (16 bytes each, to their owners
//! only), then one `MPI_Alltoallv` of the rows, packed by the owner in the
//! order asked and put in place by the requester. Samples of at least
//! `SENDRECV_MIN_ROW_BYTES` (or all, or none, as `DDSTORE_BATCH_EXCHANGE`
//! says) travel instead as one message each, from the owner's shard straight
//! into the destination, as large fixed rows do: both sides know every
//! sample's size, so both pick the same way. Rounds bound what a rank
//! receives to `cap` bytes (at least one sample per round); the number of
//! rounds is agreed by the caller.

use std::os::raw::c_int;

use crate::config::Exchange;
use crate::copy::copy_rows;
use crate::error::{bail, Result};
use crate::mpi::{exclusive_prefix, Comm, Datatype};
use crate::shard::Shard;
use crate::transport::exchange::SENDRECV_MIN_ROW_BYTES;

/// One sample that travels: `rows` rows from row `first` of `owner`'s
/// payload shard into the destination at byte `at`.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub owner: u32,
    pub first: u64,
    pub rows: u64,
    pub at: usize,
}

/// Where each round starts in a requester's list of ranges (request order):
/// a round holds at most `cap` bytes, or one sample, and few enough rows that
/// per-peer counts and displacements (C ints) cannot overflow with `n_ranks`
/// peers. Err names the first sample too long for one round.
pub fn round_starts(ranges: &[Range], row_bytes: u64, cap: u64, n_ranks: usize) -> Result<Vec<usize>> {
    let row_limit = (i32::MAX as u64) / (n_ranks.max(1) as u64);
    let mut starts = Vec::new();
    let (mut bytes, mut rows) = (0u64, 0u64);
    for (i, r) in ranges.iter().enumerate() {
        if r.rows > row_limit {
            bail!(
                Unsupported,
                "a sample of {} rows is longer than the {row_limit} rows one collective round can move with {n_ranks} ranks \
                 (use the one-sided batch mode)",
                r.rows
            );
        }
        let b = r.rows * row_bytes;
        if starts.is_empty() || (rows > 0 && (bytes + b > cap || rows + r.rows > row_limit)) {
            starts.push(i);
            (bytes, rows) = (0, 0);
        }
        bytes += b;
        rows += r.rows;
    }
    Ok(starts)
}

/// Bytes of requests this rank sent and received.
#[derive(Default)]
pub struct Traffic {
    pub sent: u64,
    pub recv: u64,
}

/// Runs `rounds` rounds (the most any rank of `comm` needs; every rank calls
/// with the same number) moving `ranges`, whose rounds start at `starts`.
/// `shard` is this rank's payload, `shard_rows` its rows.
///
/// # Safety
/// Every range's destination `[at, at + rows * row_bytes)` lies inside `dst`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn exchange(
    comm: &Comm,
    shard: &Shard,
    shard_rows: u64,
    row_bytes: u64,
    ranges: &[Range],
    starts: &[usize],
    rounds: usize,
    mode: Exchange,
    dst: *mut u8,
) -> Result<Traffic> {
    let p = comm.size();
    // Whether a sample of `rows` rows travels as a message of its own.
    let alone = |rows: u64| match mode {
        Exchange::Auto => rows * row_bytes >= SENDRECV_MIN_ROW_BYTES,
        Exchange::SendRecv => true,
        Exchange::Alltoallv => false,
    };
    let mut reqs = Vec::new();
    let rb = row_bytes as usize;
    let dtype = Datatype::row(row_bytes)?;
    let pair = Datatype::row(16)?;
    let mut t = Traffic::default();
    let count_bytes = (std::mem::size_of::<c_int>() * (p - 1)) as u64;
    let (mut sent, mut asked): (Vec<[u64; 2]>, Vec<[u64; 2]>) = (Vec::new(), Vec::new());
    let mut perm = Vec::new();
    let (mut send, mut recv) = (Vec::<u8>::new(), Vec::<u8>::new());
    for k in 0..rounds {
        let lo = starts.get(k).copied().unwrap_or(ranges.len());
        let hi = starts.get(k + 1).copied().unwrap_or(ranges.len()).max(lo);
        let mine = &ranges[lo..hi];
        // Ranges grouped by owner (request order within an owner).
        let mut scounts = vec![0 as c_int; p];
        let mut srows = vec![0 as c_int; p];
        for r in mine {
            scounts[r.owner as usize] += 1;
            if !alone(r.rows) {
                srows[r.owner as usize] += r.rows as c_int;
            }
        }
        let sdispls = exclusive_prefix(&scounts);
        let mut cursor = sdispls.clone();
        sent.clear();
        sent.resize(mine.len(), [0; 2]);
        perm.clear();
        perm.resize(mine.len(), 0usize);
        for (j, r) in mine.iter().enumerate() {
            let pos = cursor[r.owner as usize] as usize;
            sent[pos] = [r.first, r.rows];
            perm[pos] = j;
            cursor[r.owner as usize] += 1;
        }
        let mut rcounts = vec![0 as c_int; p];
        comm.alltoall_int(&scounts, &mut rcounts)?;
        let rdispls = exclusive_prefix(&rcounts);
        let n_asked: usize = rcounts.iter().map(|&c| c as usize).sum();
        asked.clear();
        asked.resize(n_asked, [0; 2]);
        comm.alltoallv(sent.as_ptr().cast(), &scounts, &sdispls, asked.as_mut_ptr().cast(), &rcounts, &rdispls, &pair)?;
        t.sent += count_bytes + 16 * mine.len() as u64;
        t.recv += count_bytes + 16 * n_asked as u64;
        // Ranges come from index entries this rank serves; one outside the
        // shard means a broken peer. Counted per requester, in rows.
        let mut rrows = vec![0 as c_int; p];
        for q in 0..p {
            let (d, c) = (rdispls[q] as usize, rcounts[q] as usize);
            for &[first, rows] in &asked[d..d + c] {
                if first.checked_add(rows).map_or(true, |end| end > shard_rows) {
                    bail!(
                        Internal,
                        "rank {q} asked for rows [{first}, +{rows}) of a payload shard of {shard_rows} rows"
                    );
                }
                if !alone(rows) {
                    rrows[q] += rows as c_int;
                }
            }
        }
        // Large samples: receives first (fewer unexpected messages), then
        // the sends; both sides walk the ranges in the order `sent` lists
        // them, which is the order MPI matches messages between two ranks.
        for &j in perm.iter() {
            let r = &mine[j];
            if alone(r.rows) {
                // SAFETY: the caller's promise for the destination.
                reqs.push(comm.irecv_n(unsafe { dst.add(r.at) }, r.rows as c_int, &dtype, r.owner as usize)?);
            }
        }
        for q in 0..p {
            let (d, c) = (rdispls[q] as usize, rcounts[q] as usize);
            for &[first, rows] in &asked[d..d + c] {
                if alone(rows) {
                    // SAFETY: inside this rank's shard (checked above).
                    let from = unsafe { shard.as_ptr().add(first as usize * rb) };
                    comm.isend_n(from, rows as c_int, &dtype, q, &mut reqs)?;
                }
            }
        }
        let total_out: usize = rrows.iter().map(|&c| c as usize).sum();
        send.clear();
        send.reserve(total_out * rb);
        let mut w = 0usize;
        for &[first, rows] in asked.iter().filter(|a| !alone(a[1])) {
            let n = rows as usize * rb;
            // SAFETY: the range is inside this rank's shard (checked above);
            // send has room for every asked row.
            unsafe { copy_rows(send.as_mut_ptr().add(w), shard.as_ptr().add(first as usize * rb), n) };
            w += n;
        }
        // SAFETY: the loop wrote total_out rows.
        unsafe { send.set_len(total_out * rb) };
        let total_in: usize = srows.iter().map(|&c| c as usize).sum();
        recv.clear();
        recv.reserve(total_in * rb);
        comm.alltoallv(
            send.as_ptr(),
            &rrows,
            &exclusive_prefix(&rrows),
            recv.as_mut_ptr(),
            &srows,
            &exclusive_prefix(&srows),
            &dtype,
        )?;
        // The rows arrived grouped by owner, in the order `sent` lists them.
        let mut from = 0usize;
        for &j in perm.iter() {
            let r = &mine[j];
            if alone(r.rows) {
                continue;
            }
            let n = r.rows as usize * rb;
            // SAFETY: recv holds total_in rows written by MPI; the caller's
            // promise for the destination.
            unsafe { copy_rows(dst.add(r.at), recv.as_ptr().add(from), n) };
            from += n;
        }
        Comm::waitall(&mut reqs)?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(rows: u64) -> Range {
        Range { owner: 0, first: 0, rows, at: 0 }
    }

    #[test]
    fn rounds_hold_at_most_cap_bytes_or_one_sample() {
        assert!(round_starts(&[], 8, 100, 2).unwrap().is_empty());
        // 8-byte rows, cap 100 bytes: 5+5 rows = 80, the next 5 would pass it.
        assert_eq!(round_starts(&[r(5), r(5), r(5), r(0), r(20), r(1)], 8, 100, 2).unwrap(), vec![0, 2, 4, 5]);
        // Zero-row samples never open a round of their own.
        assert_eq!(round_starts(&[r(0), r(0), r(0)], 8, 100, 2).unwrap(), vec![0]);
        let e = round_starts(&[r(1), r(i32::MAX as u64)], 1, 100, 2).unwrap_err();
        assert!(e.msg.contains("rows"), "{e}");
    }
}
