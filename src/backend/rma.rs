//! Method 0: MPI one-sided reads and the collective batched exchange.
//!
//! Single reads (`dds_get`) are passive-target gets on the variable's window.
//! Batched reads follow DDStore 3.0 (after MDLoader): every rank learns every
//! rank's request list, then rows move in rounds that bound what a rank
//! receives per round (`DDSTORE_ALLTOALL_MAX_BYTES`). Refinements over
//! DDStore:
//! - rows owned by the rank itself or by a rank of the same node (node-local
//!   reads, see `backend::local`) are copied directly; they are left out of
//!   the gathered lists, so they neither travel nor count against the cap;
//! - large rows travel as one message each, from the owner's shard straight
//!   into the destination (`Exchange::SendRecv`), instead of being packed
//!   and reordered around an `MPI_Alltoallv`;
//! - with `MPI_Alltoallv`, a list ordered by owner lands in place.

use std::os::raw::c_int;

use crate::backend::local::Near;
use crate::error::Result;
use crate::layout::{n_rounds, round_slice, rows_per_round, Layout};
use crate::mpi::{exclusive_prefix, Comm, Datatype, Window};
use crate::shard::Shard;

/// A variable's method-0 state: its window.
pub struct RmaVar {
    win: Window,
}

impl RmaVar {
    /// Collective: exposes `shard` to the ranks of `comm`.
    pub fn new(shard: &Shard, comm: &Comm) -> Result<RmaVar> {
        Ok(RmaVar { win: Window::create(shard.as_ptr(), shard.len(), comm)? })
    }

    /// Reads `len` bytes at `offset` of `owner`'s shard into `dst`.
    pub fn read(&self, owner: usize, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        self.win.get(dst, len, owner, offset)
    }

    /// Makes local stores visible to remote readers (epoch boundaries).
    pub fn sync(&self) -> Result<()> {
        self.win.sync()
    }

    /// Collective: frees the window.
    pub fn free(&mut self) -> Result<()> {
        self.win.free()
    }
}

/// How a method-0 batch moves the rows that travel (`DDSTORE_BATCH_EXCHANGE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// `SendRecv` for rows of at least `SENDRECV_MIN_ROW_BYTES`, else `Alltoallv`.
    Auto,
    /// Owners pack rows into one buffer per requester; one `MPI_Alltoallv`
    /// per round; requesters reorder when the rows arrive grouped by owner.
    Alltoallv,
    /// One message per row, straight from the owner's shard into its place
    /// in the destination: no packing and no reordering copy. Owners post
    /// every send at once; each requester keeps at most the cap's worth of
    /// receives posted, which paces the transfer without global rounds.
    SendRecv,
}

/// From this row size up, the two extra copies of `Alltoallv` (pack, then
/// reorder) cost more than a message per row; below it, per-message
/// overhead dominates (measured by `make bench`, docs/performance.md).
pub const SENDRECV_MIN_ROW_BYTES: u64 = 64 * 1024;

/// Memory reused across batched reads (grown, never shrunk, so a training
/// loop stops allocating after its first batch).
#[derive(Default)]
pub struct Scratch {
    send: Vec<u8>,
    recv: Vec<u8>,
    /// This rank's rows that travel, their positions in the destination,
    /// and their owners.
    travel: Vec<i64>,
    at: Vec<usize>,
    owner: Vec<u32>,
    counts: Vec<c_int>,
    reqs: Vec<mpi_sys::MPI_Request>,
    /// `SendRecv`: the posted receives, their free slots, completed slots.
    window: Vec<mpi_sys::MPI_Request>,
    free: Vec<usize>,
    done: Vec<c_int>,
}

// SAFETY: `MPI_Request` is an integer in MPICH but a pointer in Open MPI,
// so the compiler cannot tell that it may cross threads. The scratch lives
// behind the store's exchange mutex, and every request in it completes
// (waitall / waitsome) before the exchange returns: between batches it holds
// no live request, only capacity.
unsafe impl Send for Scratch {}

/// A variable's data as one batch sees it.
pub struct Source<'a> {
    pub layout: &'a Layout,
    pub shard: &'a Shard,
    pub near: &'a Near,
    pub row_bytes: u64,
}

/// Moves the rows of a collective batch: row i of `dst` receives global row
/// `idx[i]`. Every rank of `comm` calls this (with its own `idx`). Rows of
/// owners `near` reaches directly are copied at once and never travel; the
/// others are all-gathered, so every owner knows what to send and every rank
/// can derive the same rounds of at most `cap` received bytes per rank
/// (`Alltoallv`), or keeps at most `cap` bytes of receives posted
/// (`SendRecv`). Returns how many rows were copied directly.
pub fn exchange(
    comm: &Comm,
    src: &Source,
    cap: u64,
    mode: Exchange,
    idx: &[i64],
    dst: *mut u8,
    scratch: &mut Scratch,
) -> Result<u64> {
    let (me, p) = (comm.rank(), comm.size());
    let rb = src.row_bytes as usize;
    let Scratch { send, recv, travel, at, owner, counts: rcounts_buf, reqs, window: slots, free, done } = scratch;
    travel.clear();
    at.clear();
    owner.clear();
    let mut direct = 0u64;
    for (i, &g) in idx.iter().enumerate() {
        let (o, local) = src.layout.owner(g);
        if let Some(base) = src.near.src(o) {
            // SAFETY: the row lies inside o's shard; dst holds idx.len() rows.
            unsafe { std::ptr::copy_nonoverlapping(base.add(local as usize * rb), dst.add(i * rb), rb) };
            direct += 1;
        } else {
            travel.push(g);
            at.push(i);
            owner.push(o as u32);
        }
    }

    let counts = comm.allgather(&(travel.len() as i64))?;
    let per = rows_per_round(src.row_bytes, cap, p);
    let rounds = n_rounds(&counts, per);
    if rounds == 0 {
        return Ok(direct);
    }
    let all = comm.allgatherv_i64(travel, &counts)?;
    let starts: Vec<usize> = counts
        .iter()
        .scan(0usize, |acc, &c| {
            let s = *acc;
            *acc += c as usize;
            Some(s)
        })
        .collect();
    let dtype = Datatype::row(src.row_bytes)?;
    let sendrecv = match mode {
        Exchange::Auto => src.row_bytes >= SENDRECV_MIN_ROW_BYTES,
        Exchange::SendRecv => true,
        Exchange::Alltoallv => false,
    };
    let (my_lo, my_hi) = src.layout.shard(me);
    // The rows of positions [lo, hi) of requester q's list that this rank
    // owns, as byte offsets in its shard (request order).
    let (all, starts, counts) = (&all[..], &starts[..], &counts[..]);
    let wanted = move |q: usize, lo: i64, hi: i64| {
        all[starts[q] + lo as usize..starts[q] + hi as usize]
            .iter()
            .filter(move |&&g| g >= my_lo && g < my_hi)
            .map(move |&g| (g - my_lo) as usize * rb)
    };
    let base = src.shard.as_ptr();

    if sendrecv {
        // Every row asked of this rank is sent now, straight from the
        // shard; requesters pace the transfer by how many receives they
        // keep posted (`per` rows, the cap), so no global rounds are needed.
        // MPI matches messages between two ranks in posting order, and both
        // sides walk the requester's list in the same order.
        for q in (0..p).filter(|&q| q != me) {
            for off in wanted(q, 0, counts[q]) {
                // SAFETY: off is a row inside this rank's shard.
                comm.isend(unsafe { base.add(off) }, &dtype, q, reqs)?;
            }
        }
        let n = travel.len();
        let window = (per as usize).min(n);
        slots.clear();
        slots.resize(window, unsafe { mpi_sys::RSMPI_REQUEST_NULL });
        free.clear();
        free.extend(0..window);
        let mut next = 0;
        while next < n || free.len() < window {
            while next < n {
                let Some(s) = free.pop() else { break };
                // SAFETY: at[next] < idx.len(), the destination's row count.
                slots[s] = comm.irecv(unsafe { dst.add(at[next] * rb) }, &dtype, owner[next] as usize)?;
                next += 1;
            }
            Comm::waitsome(slots, done)?;
            free.extend(done.iter().map(|&i| i as usize));
        }
        Comm::waitall(reqs)?;
        return Ok(direct);
    }

    for k in 0..rounds {
        let (lo, hi) = round_slice(counts[me], per, k);
        let (lo, hi) = (lo as usize, hi as usize);
        // Alltoallv: pack per requester, in request order.
        rcounts_buf.clear();
        rcounts_buf.resize(2 * p, 0);
        let (scounts, rcounts) = rcounts_buf.split_at_mut(p);
        send.clear();
        for (q, sc) in scounts.iter_mut().enumerate() {
            if q == me {
                continue;
            }
            let (lo, hi) = round_slice(counts[q], per, k);
            for off in wanted(q, lo, hi) {
                // SAFETY: off is a row inside this rank's shard.
                send.extend_from_slice(unsafe { std::slice::from_raw_parts(base.add(off), rb) });
                *sc += 1;
            }
        }
        let sdispls = exclusive_prefix(scounts);
        let mut sorted = true;
        for j in lo..hi {
            let o = owner[j] as usize;
            rcounts[o] += 1;
            sorted &= j == lo || (owner[j - 1] as usize <= o && at[j] == at[j - 1] + 1);
        }
        let rdispls = exclusive_prefix(rcounts);
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
        comm.alltoallv(send.as_ptr(), scounts, &sdispls, recv_base, rcounts, &rdispls, &dtype)?;
        if !sorted {
            let mut cursor = rdispls;
            for j in lo..hi {
                let o = owner[j] as usize;
                // SAFETY: owner o's run holds rcounts[o] rows written by MPI;
                // at[j] is a row of the destination.
                unsafe {
                    std::ptr::copy_nonoverlapping(recv_base.add(cursor[o] as usize * rb), dst.add(at[j] * rb), rb)
                };
                cursor[o] += 1;
            }
        }
    }
    Ok(direct)
}
