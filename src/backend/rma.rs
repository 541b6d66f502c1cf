//! Method 0: MPI one-sided reads and the collective batched exchange.
//!
//! Single reads (`dds_get`) are passive-target gets on the variable's window.
//! Batched reads follow DDStore 3.0 (after MDLoader): every rank learns every
//! rank's request list, then rows move in `MPI_Alltoallv` rounds that bound
//! what a rank receives per round. Two refinements over DDStore: rows owned by
//! the rank itself or by a rank of the same node (node-local reads, see
//! `backend::local`) are copied directly instead of travelling through MPI,
//! and when a request list is ordered by owner, rows are received straight
//! into the destination instead of through a staging buffer.

use std::os::raw::c_int;

use crate::error::Result;
use crate::backend::local::Near;
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

/// Staging memory reused across batched reads (grown, never shrunk, so a
/// training loop stops allocating after its first batch).
#[derive(Default)]
pub struct Scratch {
    send: Vec<u8>,
    recv: Vec<u8>,
    owners: Vec<u32>,
    counts: Vec<c_int>,
}

/// What one rank knows about a collective batch: every rank's request list.
pub struct Requests<'a> {
    /// Rows requested by each rank.
    pub counts: &'a [i64],
    /// All requests, rank 0's first (validated against the layout).
    pub all: &'a [i64],
}

/// Moves the rows of a collective batch. `dst` receives this rank's rows in
/// request order; every rank of `comm` calls this with the same `req`. Rows
/// of owners `near` reaches directly are copied; an owner leaves them out of
/// what it sends (both sides decide from the same node map). Returns how
/// many of this rank's rows were copied directly.
#[allow(clippy::too_many_arguments)]
pub fn exchange(
    comm: &Comm,
    layout: &Layout,
    shard: &Shard,
    near: &Near,
    row_bytes: u64,
    cap: u64,
    req: &Requests,
    dst: *mut u8,
    scratch: &mut Scratch,
) -> Result<u64> {
    let (me, p) = (comm.rank(), comm.size());
    let rb = row_bytes as usize;
    let per = rows_per_round(row_bytes, cap, p);
    let rounds = n_rounds(req.counts, per);
    if rounds == 0 {
        return Ok(0);
    }
    let starts: Vec<i64> = req
        .counts
        .iter()
        .scan(0i64, |acc, &c| {
            let s = *acc;
            *acc += c;
            Some(s)
        })
        .collect();
    let (my_lo, my_hi) = layout.shard(me);
    let mine = &req.all[starts[me] as usize..(starts[me] + req.counts[me]) as usize];
    let dtype = Datatype::row(row_bytes)?;
    let Scratch { send, recv, owners, counts } = scratch;
    counts.clear();
    counts.resize(2 * p, 0);
    let (scounts, rcounts) = counts.split_at_mut(p);
    let mut rdispls = vec![0 as c_int; p];
    let mut direct = 0u64;

    for k in 0..rounds {
        // Pack the rows this rank owns, for every requester that does not
        // copy them itself (other nodes), in request order.
        send.clear();
        for (q, sc) in scounts.iter_mut().enumerate() {
            *sc = 0;
            if near.reads_directly(q) {
                continue;
            }
            let (lo, hi) = round_slice(req.counts[q], per, k);
            let list = &req.all[(starts[q] + lo) as usize..(starts[q] + hi) as usize];
            for &g in list.iter().filter(|&&g| g >= my_lo && g < my_hi) {
                let at = (g - my_lo) as usize * rb;
                // SAFETY: g is inside this rank's shard.
                send.extend_from_slice(unsafe { std::slice::from_raw_parts(shard.as_ptr().add(at), rb) });
                *sc += 1;
            }
        }
        let sdispls = exclusive_prefix(scounts);

        // Our own slice: copy direct rows now, count remote rows per owner.
        let (lo, hi) = round_slice(req.counts[me], per, k);
        let slice = &mine[lo as usize..hi as usize];
        owners.clear();
        rcounts.iter_mut().for_each(|c| *c = 0);
        let mut sorted = true;
        for (i, &g) in slice.iter().enumerate() {
            let (o, local) = layout.owner(g);
            if let Some(base) = near.src(o) {
                // SAFETY: the row lies inside o's shard; dst holds the caller's
                // whole batch and row lo+i is in it.
                unsafe { std::ptr::copy_nonoverlapping(base.add(local as usize * rb), dst.add((lo as usize + i) * rb), rb) };
                direct += 1;
            } else {
                if rcounts[o] == 0 {
                    rdispls[o] = i as c_int;
                }
                rcounts[o] += 1;
            }
            sorted &= owners.last().map_or(true, |&prev| prev as usize <= o);
            owners.push(o as u32);
        }

        // Owner-ordered lists land in place: each owner's rows form one run.
        // SAFETY: dst + lo rows is inside the caller's buffer.
        let slice_dst = unsafe { dst.add(lo as usize * rb) };
        let recv_base = if sorted {
            slice_dst
        } else {
            let remote: usize = rcounts.iter().map(|&c| c as usize).sum();
            recv.clear();
            recv.reserve(remote * rb);
            rdispls.copy_from_slice(&exclusive_prefix(rcounts));
            recv.as_mut_ptr()
        };
        comm.alltoallv(send.as_ptr(), scounts, &sdispls, recv_base, rcounts, &rdispls, &dtype)?;

        if !sorted {
            // Scatter each owner's run back into request order.
            let mut cursor = rdispls.clone();
            for (i, &o) in owners.iter().enumerate() {
                let o = o as usize;
                if near.src(o).is_some() {
                    continue;
                }
                // SAFETY: the run of owner o holds rcounts[o] rows written by MPI.
                unsafe {
                    std::ptr::copy_nonoverlapping(recv_base.add(cursor[o] as usize * rb), slice_dst.add(i * rb), rb)
                };
                cursor[o] += 1;
            }
        }
    }
    Ok(direct)
}
