//! Method 0, collective batch mode: the sparse two-sided exchange of
//! requests and rows (every rank of the store calls it).
//!
//! Collective batches keep DDStore 3.0's semantics (every rank calls, rows
//! move in rounds that bound what a rank receives per round,
//! `DDSTORE_ALLTOALL_MAX_BYTES`) but not its request exchange: DDStore
//! all-gathers every rank's whole request list, O(P·B) bytes and index scans
//! per rank. Here a rank sends each owner only the indices that owner holds:
//! per round one `MPI_Alltoall` of counts (O(P) ints), one `MPI_Alltoallv`
//! of the indices (O(B) in and out, plus what is asked of it), then the rows;
//! the number of rounds is agreed inside the batch's argument all-reduce
//! (`Store::batch_collective`), so it costs no extra collective.
//! docs/dev/performance.md explains the choice over NBX and neighbourhood
//! collectives. Refinements over DDStore that stay:
//! - rows owned by the rank itself or by a rank of the same node (node-local
//!   reads, see `transport::local`) are copied directly; they never travel
//!   and do not count against the cap;
//! - large rows travel as one message each, from the owner's shard straight
//!   into the destination (`Exchange::SendRecv`), instead of being packed
//!   and reordered around an `MPI_Alltoallv`;
//! - with `MPI_Alltoallv`, a list already grouped by owner lands in place.

use std::os::raw::c_int;

use crate::config::Exchange;
use crate::copy::copy_rows;
use crate::error::{bail, Result};
use crate::layout::{round_slice, rows_per_round, Layout};
use crate::mpi::{exclusive_prefix, Comm, Datatype};
use crate::shard::Shard;
use crate::transport::local::Near;

/// From this row size up, the two extra copies of `Alltoallv` (pack, then
/// reorder) cost more than a message per row; below it, per-message
/// overhead dominates (measured by `make bench`, docs/dev/performance.md).
pub const SENDRECV_MIN_ROW_BYTES: u64 = 64 * 1024;

/// Memory reused across batched reads (grown, never shrunk, so a training
/// loop stops allocating after its first batch).
#[derive(Default)]
pub struct Scratch {
    send: Vec<u8>,
    recv: Vec<u8>,
    /// Rows copied directly: their positions in the destination and their
    /// owners and byte offsets in the owners' shards.
    direct_at: Vec<usize>,
    direct_src: Vec<(usize, u64)>,
    /// This rank's rows that travel (row index in the owner's shard), their
    /// positions in the destination, and their owners, in request order.
    travel: Vec<i64>,
    at: Vec<usize>,
    owner: Vec<u32>,
    /// One round: the indices sent (grouped by owner), the slice position
    /// of each, and the indices received (grouped by requester).
    sidx: Vec<i64>,
    perm: Vec<usize>,
    ridx: Vec<i64>,
    /// Counts and displacements: 4 arrays of P.
    counts: Vec<c_int>,
    reqs: Vec<mpi_sys::MPI_Request>,
}

// SAFETY: `MPI_Request` is an integer in MPICH but a pointer in Open MPI,
// so the compiler cannot tell that it may cross threads. The scratch lives
// behind the store's exchange mutex, and every request in it completes
// (waitall) before the exchange returns: between batches it holds
// no live request, only capacity.
unsafe impl Send for Scratch {}

impl Scratch {
    /// Rows the last `plan` copies directly.
    pub fn direct_rows(&self) -> usize {
        self.direct_at.len()
    }
}

/// A variable's data as one batch sees it.
pub struct Source<'a> {
    pub layout: &'a Layout,
    pub shard: &'a Shard,
    pub near: &'a Near,
    pub row_bytes: u64,
}

/// What a collective batch will do on this rank, from `plan`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Rows copied directly.
    pub direct: u64,
    /// Rounds this rank's travelling rows need (the batch runs the most
    /// any rank needs).
    pub rounds: i64,
}

/// Request traffic of one collective batch on this rank: counts and indices
/// sent to, and received from, other ranks (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReqBytes {
    pub sent: u64,
    pub recv: u64,
}

/// Splits a collective batch (row i of the destination receives global row
/// `idx[i]`, the indices already checked) into rows copied directly and
/// rows that travel, without touching the destination. Local and O(B log P).
pub fn plan(src: &Source, cap: u64, n_ranks: usize, idx: &[i64], scratch: &mut Scratch) -> Plan {
    let s = scratch;
    s.direct_at.clear();
    s.direct_src.clear();
    s.travel.clear();
    s.at.clear();
    s.owner.clear();
    for (i, &g) in idx.iter().enumerate() {
        let (o, local) = src.layout.owner(g);
        if src.near.src(o).is_some() {
            s.direct_at.push(i);
            s.direct_src.push((o, local as u64 * src.row_bytes));
        } else {
            s.travel.push(local);
            s.at.push(i);
            s.owner.push(o as u32);
        }
    }
    let per = rows_per_round(src.row_bytes, cap, n_ranks);
    Plan { direct: s.direct_at.len() as u64, rounds: (s.travel.len() as i64 + per - 1) / per }
}

/// Copies the rows `plan` found directly reachable into `dst`.
///
/// # Safety
/// `dst` holds the rows of the batch `plan` was given, and `scratch` is
/// still that plan's.
pub unsafe fn copy_direct(src: &Source, dst: *mut u8, scratch: &Scratch) {
    let rb = src.row_bytes as usize;
    for (&i, &(owner, offset)) in scratch.direct_at.iter().zip(&scratch.direct_src) {
        // SAFETY: the row lies inside a shard this rank maps (plan); dst
        // holds the batch's rows.
        unsafe { src.near.copy(owner, offset, dst.add(i * rb), rb) };
    }
}

/// Moves the travelling rows `plan` left in `scratch`, in `rounds` rounds
/// (the most any rank needs; every rank of `comm` calls this with the same
/// `rounds`). Each round takes the next `per` travelling rows of every
/// rank's list (request order), so a rank receives at most `cap` bytes of
/// rows per round: counts by `MPI_Alltoall`, indices by `MPI_Alltoallv`
/// (to their owners only), rows by `MPI_Alltoallv` or one message per row.
///
/// # Safety
/// `dst` holds the rows of the batch `plan` was given, and `scratch` is
/// still that plan's.
pub unsafe fn exchange(
    comm: &Comm,
    src: &Source,
    cap: u64,
    mode: Exchange,
    rounds: i64,
    dst: *mut u8,
    scratch: &mut Scratch,
) -> Result<ReqBytes> {
    let (me, p) = (comm.rank(), comm.size());
    let rb = src.row_bytes as usize;
    let per = rows_per_round(src.row_bytes, cap, p);
    let sendrecv = match mode {
        Exchange::Auto => src.row_bytes >= SENDRECV_MIN_ROW_BYTES,
        Exchange::SendRecv => true,
        Exchange::Alltoallv => false,
    };
    let dtype = Datatype::row(src.row_bytes)?;
    let itype = Datatype::row(8)?;
    let base = src.shard.as_ptr();
    let (my_lo, my_hi) = src.layout.shard(me);
    let my_rows = my_hi - my_lo;
    let Scratch { send, recv, travel, at, owner, sidx, perm, ridx, counts, reqs, .. } = scratch;
    let mut bytes = ReqBytes::default();
    let count_bytes = (std::mem::size_of::<c_int>() * (p - 1)) as u64;
    for k in 0..rounds {
        let (lo, hi) = round_slice(travel.len() as i64, per, k);
        let (lo, hi) = (lo as usize, hi as usize);
        counts.clear();
        counts.resize(4 * p, 0);
        let (scounts, rest) = counts.split_at_mut(p);
        let (rcounts, rest) = rest.split_at_mut(p);
        let (cursor, rdispls) = rest.split_at_mut(p);
        // This round's indices, grouped by owner (request order within an
        // owner): a counting sort, O(slice + P).
        let mut sorted = true;
        for j in lo..hi {
            let o = owner[j] as usize;
            scounts[o] += 1;
            sorted &= j == lo || (owner[j - 1] as usize <= o && at[j] == at[j - 1] + 1);
        }
        let sdispls = exclusive_prefix(scounts);
        cursor.copy_from_slice(&sdispls);
        sidx.clear();
        sidx.resize(hi - lo, 0);
        perm.clear();
        perm.resize(hi - lo, 0);
        for j in lo..hi {
            let o = owner[j] as usize;
            let pos = cursor[o] as usize;
            sidx[pos] = travel[j];
            perm[pos] = j;
            cursor[o] += 1;
        }
        comm.alltoall_int(scounts, rcounts)?;
        let asked: usize = rcounts.iter().map(|&c| c as usize).sum();
        rdispls.copy_from_slice(&exclusive_prefix(rcounts));
        ridx.clear();
        ridx.resize(asked, 0);
        comm.alltoallv(sidx.as_ptr().cast(), scounts, &sdispls, ridx.as_mut_ptr().cast(), rcounts, rdispls, &itype)?;
        bytes.sent += count_bytes + 8 * (hi - lo) as u64;
        bytes.recv += count_bytes + 8 * asked as u64;
        // Requests come from checked indices of ranks running this same
        // layout; a row outside this shard means a broken peer.
        if let Some(&bad) = ridx.iter().find(|&&r| r < 0 || r >= my_rows) {
            bail!(Internal, "a peer asked for row {bad} of a shard of {my_rows} rows");
        }

        if sendrecv {
            // Receives first (fewer unexpected messages), then one send per
            // row asked of this rank, straight from the shard. MPI matches
            // messages between two ranks in posting order, and both sides
            // walk the requester's owner-grouped list in the same order.
            for &j in perm.iter() {
                // SAFETY: at[j] < the destination's row count.
                let r = comm.irecv(unsafe { dst.add(at[j] * rb) }, &dtype, owner[j] as usize)?;
                reqs.push(r);
            }
            for q in 0..p {
                let (d, c) = (rdispls[q] as usize, rcounts[q] as usize);
                for &row in &ridx[d..d + c] {
                    // SAFETY: row is inside this rank's shard (checked above).
                    comm.isend(unsafe { base.add(row as usize * rb) }, &dtype, q, reqs)?;
                }
            }
            Comm::waitall(reqs)?;
            continue;
        }

        // Alltoallv: owners pack the rows asked of them, per requester in
        // the order asked; requesters receive them grouped by owner.
        send.clear();
        send.reserve(asked * rb);
        for (k, &row) in ridx.iter().enumerate() {
            // SAFETY: row is inside this rank's shard (checked above); send
            // has room for the asked rows.
            unsafe { copy_rows(send.as_mut_ptr().add(k * rb), base.add(row as usize * rb), rb) };
        }
        // SAFETY: the loop wrote all asked * rb bytes.
        unsafe { send.set_len(asked * rb) };
        // A run of consecutive destination rows already grouped by owner
        // lands in place; anything else is staged and put in order after.
        let recv_base = if sorted && hi > lo {
            // SAFETY: at[lo] is a row of the destination.
            unsafe { dst.add(at[lo] * rb) }
        } else {
            recv.clear();
            recv.reserve((hi - lo) * rb);
            recv.as_mut_ptr()
        };
        comm.alltoallv(send.as_ptr(), rcounts, rdispls, recv_base, scounts, &sdispls, &dtype)?;
        if !(sorted && hi > lo) {
            for (pos, &j) in perm.iter().enumerate() {
                // SAFETY: position pos of the staging buffer holds a row MPI
                // wrote; at[j] is a row of the destination.
                unsafe { copy_rows(dst.add(at[j] * rb), recv_base.add(pos * rb), rb) };
            }
        }
    }
    Ok(bytes)
}
