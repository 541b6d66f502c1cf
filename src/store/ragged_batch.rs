//! `dds_get_ragged_batch`: whole samples of a ragged variable into one
//! destination, one-sided (copy or transport reads per owner run) or, in
//! method 0's collective batch mode, by agreed rounds of the transport's
//! `move_ranges`; device destinations staged through host memory.

use super::ragged::{index_of, RaggedRead};
use super::{Collective, Store};
use crate::copy::copy_rows;
use crate::error::{bail, err, Result};
use crate::gpu::MemKind;
use crate::mpi::agree;
use crate::profile::Timer;
use crate::transport::Range;
use crate::var::Variable;

impl Store {
    /// `get_ragged_batch` into CUDA memory of device `dev`: the samples are
    /// read into a host buffer of `dst_bytes` (the size the caller's device
    /// buffer has; the bytes needed are known only once the owners answer),
    /// then copied to the device through the pinned bounce buffers of
    /// fixed-row staged reads. A host buffer that cannot be allocated, or
    /// staging turned off (`DDSTORE_GPU_STAGING=0`), fails this rank's part
    /// of the read, which a collective read reports on every rank.
    pub(super) fn get_ragged_staged(
        &self,
        name: &str,
        dev: i32,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        lengths: Option<&mut [i64]>,
    ) -> Result<RaggedRead> {
        let mut host: Vec<u8> = Vec::new();
        let ready = self.check_staging("destination", name).and_then(|_| {
            host.try_reserve_exact(dst_bytes).map_err(|_| {
                err!(
                    NoMemory,
                    "ragged variable '{name}': cannot allocate {dst_bytes} bytes of host memory to stage a read into \
                     device memory"
                )
            })
        });
        let (ptr, bytes) = if ready.is_ok() { (host.as_mut_ptr(), dst_bytes) } else { (std::ptr::null_mut(), 0) };
        let r = self.get_ragged_batch(name, ptr, bytes, indices.and_then(|i| ready.map(|_| i)), lengths)?;
        let n = r.bytes as usize;
        // SAFETY: the read wrote the first n bytes of host's capacity.
        let src = host.as_ptr();
        self.staged_cap(dev, dst, n, 1, self.gpu.staging_bytes, None, |h, first, k| {
            // SAFETY: [first, first + k) lies within the n bytes read; h holds k bytes.
            unsafe { copy_rows(h, src.add(first), k) };
            Ok(())
        })?;
        Ok(r)
    }

    /// Reads samples `indices` (any order, repeats) back to back into
    /// `dst`, and their row counts into `lengths` when given. Collective in
    /// the method-0 collective batch mode (`indices` carries this rank's
    /// argument check), one-sided otherwise.
    pub fn get_ragged_batch(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        lengths: Option<&mut [i64]>,
    ) -> Result<RaggedRead> {
        self.check_running()?;
        // A device destination: the same read (the same collective calls on
        // every rank) into host memory, then staged to the device.
        let kind = if dst_bytes > 0 { self.mem_kind(dst) } else { Ok(MemKind::Host) };
        match kind {
            Ok(MemKind::Host) => {}
            Ok(MemKind::Cuda(dev)) => return self.get_ragged_staged(name, dev, dst, dst_bytes, indices, lengths),
            Ok(MemKind::Rocm(_)) => {
                let e = Self::rocm_unstaged("destination", name);
                return self.get_ragged_batch(name, std::ptr::null_mut(), 0, indices.and(Err(e)), lengths);
            }
            Err(e) => return self.get_ragged_batch(name, std::ptr::null_mut(), 0, indices.and(Err(e)), lengths),
        }
        let vars = self.vars.read();
        let local = indices.and_then(|idx| match vars.get(name) {
            Some(v) => Ok((v, idx)),
            None => bail!(UnknownVariable, "no variable named '{name}' in this store"),
        });
        let found = local.as_ref().ok().map(|&(v, idx)| (v, idx));
        let mut entries = Vec::new();
        let collective = !self.batch_is_onesided();
        // A collective read holds the exchange memory and the MPI lock
        // (without MPI_THREAD_MULTIPLE) throughout, as a fixed-row batch does.
        let mut ex = collective.then(|| self.exchange.lock());
        let _serial = ex.as_ref().and(self.mpi_lock.as_ref()).map(|m| m.lock());
        self.ragged_entries(Collective::GetRaggedBatch, name, local, &mut entries, ex.as_deref_mut())?;
        let (v, idx) = found.expect("ragged_entries fails without a variable");
        let rb = v.row_bytes;
        // Entries come from owners; check them against the owners' shards
        // before any byte moves, then the destination.
        let ix = index_of(v)?;
        let checked = (|| {
            let mut rows: u64 = 0;
            for (k, (&g, e)) in idx.iter().zip(&entries).enumerate() {
                let (owner, _) = ix.layout.owner(g);
                let (lo, hi) = v.layout.shard(owner);
                if e[0].checked_add(e[1]).map_or(true, |end| end > (hi - lo) as u64) {
                    bail!(
                        Internal,
                        "ragged variable '{name}': the index entry of sample {g} (index {k} of the batch) from rank {owner} \
                         names rows [{}, +{}) outside its payload of {} rows",
                        e[0],
                        e[1],
                        hi - lo
                    );
                }
                rows += e[1];
            }
            let need = rows as u128 * rb as u128;
            if (dst_bytes as u128) < need {
                bail!(
                    Mismatch,
                    "destination of {dst_bytes} bytes for ragged variable '{name}' is too small: the {} samples asked \
                     hold {rows} rows of {rb} bytes, {need} bytes are needed",
                    idx.len()
                );
            }
            Ok(rows)
        })();
        let mut t = Timer::start(self.cfg.profile);
        let (rows, direct) = if collective {
            // SAFETY: dst holds the checked rows once every rank agreed.
            unsafe { self.ragged_collective(v, idx, &entries, checked, dst)? }
        } else {
            let rows = checked?;
            // SAFETY: dst holds `rows` rows (checked above).
            (rows, unsafe { self.ragged_onesided(v, idx, &entries, dst, dst_bytes)? })
        };
        t.lap(&v.counters.read_ns);
        if !idx.is_empty() {
            v.counters.read_call(rows, direct);
        }
        if let Some(l) = lengths {
            for (d, e) in l.iter_mut().zip(&entries) {
                *d = e[1] as i64;
            }
        }
        Ok(RaggedRead { bytes: rows * rb })
    }

    /// One-sided payload reads: same-node samples copied, the others one
    /// read each (adjacent ones merged). Returns the rows copied directly.
    ///
    /// # Safety
    /// `dst` holds the samples' rows (`entries`, checked).
    pub(super) unsafe fn ragged_onesided(
        &self,
        v: &Variable,
        idx: &[i64],
        entries: &[[u64; 2]],
        dst: *mut u8,
        dst_bytes: usize,
    ) -> Result<u64> {
        let ix = index_of(v)?;
        let rb = v.row_bytes;
        let (mut at, mut direct) = (0usize, 0u64);
        let mut reads = v.transport.reads(0);
        for (&g, &[first, rows]) in idx.iter().zip(entries) {
            let len = (rows * rb) as usize;
            if len == 0 {
                continue;
            }
            let (owner, _) = ix.layout.owner(g);
            let offset = first * rb;
            // SAFETY: the caller's promise; at + len <= the rows checked.
            let d = unsafe { dst.add(at) };
            at += len;
            // SAFETY: the range lies inside the owner's shard (checked).
            if unsafe { super::copy_or_queue(v, &mut reads, owner, offset, d, len) } {
                direct += rows;
            }
        }
        // Timed by the caller (get_ragged_batch), whichever the transport.
        reads.run(dst, dst_bytes, &self.read_ctx(v), &mut Timer::start(false))?;
        Ok(direct)
    }

    /// Method-0 collective payload moves: same-node samples copied, the
    /// others by the agreed rounds of the transport's `move_ranges`. `checked` is this
    /// rank's destination check (its rows); one all-reduce agrees on it, on
    /// samples too long for a round, and on the number of rounds, before
    /// any byte moves. Returns (rows, rows copied directly).
    ///
    /// # Safety
    /// When `checked` is Ok, `dst` holds the samples' rows (`entries`).
    pub(super) unsafe fn ragged_collective(
        &self,
        v: &Variable,
        idx: &[i64],
        entries: &[[u64; 2]],
        checked: Result<u64>,
        dst: *mut u8,
    ) -> Result<(u64, u64)> {
        let ix = index_of(v)?;
        let rb = v.row_bytes;
        let (mut at, mut direct) = (0usize, Vec::new());
        let mut travel = Vec::new();
        for (&g, &[first, rows]) in idx.iter().zip(entries) {
            let len = (rows * rb) as usize;
            if len == 0 {
                continue;
            }
            let (owner, _) = ix.layout.owner(g);
            let r = Range { owner: owner as u32, first, rows, at };
            // Copied once every rank agreed (the destination is untouched until then).
            if v.near.src(owner).is_some() {
                direct.push(r);
            } else {
                travel.push(r);
            }
            at += len;
        }
        let (me, p) = (self.comm.rank() as i64, self.comm.size() as i64);
        let local = checked.and_then(|rows| {
            let starts = v.transport.plan_ranges(&travel, rb, self.cfg.alltoall_max_bytes, p as usize)?;
            Ok((rows, starts))
        });
        let n = local.as_ref().map_or(0, |(_, s)| s.len() as i64);
        let mut flags = [if local.is_err() { me } else { p }, -n];
        self.comm.allreduce_min(&mut flags)?;
        if flags[0] < p {
            agree(&self.comm, local)?;
            bail!(Internal, "dds_get_ragged_batch: ranks disagree on the outcome of the destination check");
        }
        let (rows, starts) = local?;
        let mut copied = 0u64;
        for r in &direct {
            // SAFETY: inside the owner's shard (entries checked) and the destination (the caller's promise).
            unsafe { v.near.copy(r.owner as usize, r.first * rb, dst.add(r.at), (r.rows * rb) as usize) };
            copied += r.rows;
        }
        let rounds = -flags[1];
        if rounds > 0 {
            let (lo, hi) = v.layout.shard(self.comm.rank());
            // SAFETY: every range's destination lies inside dst (above).
            let tr = unsafe {
                v.transport.move_ranges(
                    &self.comm,
                    &v.shard,
                    (hi - lo) as u64,
                    rb,
                    &travel,
                    &starts,
                    rounds as usize,
                    self.cfg.batch_exchange,
                    dst,
                )?
            };
            v.counters.requests(tr.sent, tr.recv);
        }
        Ok((rows, copied))
    }
}
