//! `dds_get_batch`: the choice between a one-sided and a collective batch
//! (method 0's batch mode) and both paths.

use super::{batch_rows, copy_or_queue, enter, BatchMode, Collective, Method, Store, Tally};
use crate::error::{bail, Result};
use crate::mpi::{agree, Comm};
use crate::profile::Timer;
use crate::transport::Scratch;
use crate::var::Variable;

impl Store {
    /// True when `dds_get_batch` needs no matching calls on other ranks:
    /// methods 1 and 2, and method 0 in the one-sided batch mode.
    pub fn batch_is_onesided(&self) -> bool {
        self.method != Method::Mpi || self.batch_mode == BatchMode::Onesided
    }

    /// Reads arbitrary rows; row i of `dst` receives global row `indices[i]`.
    /// Collective for method 0 (unless its batch mode is one-sided),
    /// one-sided for methods 1 and 2. `indices` carries
    /// this rank's argument check.
    pub fn get_batch(&self, name: &str, dst: *mut u8, dst_bytes: usize, indices: Result<&[i64]>) -> Result<()> {
        self.get_batch_tallied(name, dst, dst_bytes, indices, None)
    }

    /// `get_batch` with a staged read's running total (see `get_tallied`);
    /// only one-sided batches are staged in several chunks.
    pub(crate) fn get_batch_tallied(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        tally: Option<&Tally>,
    ) -> Result<()> {
        self.check_running()?;
        let vars = self.vars.read();
        let var = vars.get(name);
        if self.batch_is_onesided() {
            let idx = indices?;
            let Some(v) = var else { bail!(UnknownVariable, "no variable named '{name}' in this store") };
            return self.batch_onesided(v, dst, dst_bytes, idx, tally);
        }
        if let (BatchMode::Auto, Some(v)) = (self.batch_mode, var) {
            return self.batch_auto(v, dst, dst_bytes, indices, tally);
        }
        let local = indices.and_then(|idx| match var {
            None => bail!(UnknownVariable, "no variable named '{name}' in this store"),
            Some(v) => {
                v.check_dst("destination", dst_bytes, idx.len() as i64)?;
                Ok((v, idx))
            }
        });
        self.batch_collective(name, local, dst)
    }

    /// A one-sided batch (methods 1 and 2; method 0 in the one-sided batch
    /// mode): every index is checked, rows this rank maps are copied
    /// (`copy_or_queue`), and the others are read by the transport, every
    /// read posted before any is waited for. Needs no other rank's call.
    pub(super) fn batch_onesided(
        &self,
        v: &Variable,
        dst: *mut u8,
        dst_bytes: usize,
        idx: &[i64],
        tally: Option<&Tally>,
    ) -> Result<()> {
        v.check_dst("destination", dst_bytes, idx.len() as i64)?;
        v.check_indices(idx, "the")?;
        if idx.is_empty() {
            return Ok(());
        }
        let mut t = Timer::start(self.cfg.profile);
        let mut reads = v.transport.reads(idx.len());
        let mut local_rows = 0u64;
        batch_rows(v, dst, idx, |owner, offset, at, rb| {
            // SAFETY: dst holds idx.len() rows and every index is checked.
            local_rows += unsafe { copy_or_queue(v, &mut reads, owner, offset, at, rb) } as u64;
        });
        reads.run(dst, dst_bytes, &self.read_ctx(v), &mut t)?;
        Tally::record(tally, v, idx.len() as u64, local_rows);
        Ok(())
    }

    /// Method 0, collective batch mode: the sparse exchange of requests and
    /// the rounds of rows (the transport's move_rows).
    pub(super) fn batch_collective(&self, name: &str, local: Result<(&Variable, &[i64])>, dst: *mut u8) -> Result<()> {
        let mut scratch = self.exchange.lock();
        let _serial = self.mpi_lock.as_ref().map(|m| m.lock());
        let (v, idx, rounds) = self.collective_agree(Collective::GetBatch, name, local, &mut scratch)?;
        // SAFETY: dst holds idx.len() rows (checked); scratch is this batch's plan.
        unsafe { self.collective_move(&self.comm, v, idx.len(), rounds, dst, &mut scratch) }
    }

    /// The agreement step of a collective batch (every rank calls it with
    /// its own arguments; `call` is the entry point): plans this rank's rows
    /// into `scratch` and returns the variable, the indices and the agreed
    /// number of rounds, or the error every rank returns.
    pub(super) fn collective_agree<'v>(
        &self,
        call: Collective,
        name: &str,
        local: Result<(&'v Variable, &'v [i64])>,
        scratch: &mut Scratch,
    ) -> Result<(&'v Variable, &'v [i64], i64)> {
        // The call's agreement (`enter`) settles the call, argument errors
        // and the variable; its payload, indices out of range (the lowest
        // failing rank) and the number of rounds (max over ranks, as a min
        // of negatives). Every rank sees the same outcome.
        let (me, p) = (self.comm.rank() as i64, self.comm.size() as i64);
        let range = match &local {
            Ok((v, idx)) => v.check_indices(idx, "its").err(),
            Err(_) => None,
        };
        let cap = self.cfg.alltoall_max_bytes;
        // Local work only: the destination is untouched until all agree.
        let plan = match (&local, &range) {
            (Ok((v, idx)), None) => v.transport.plan_rows(&v.source(), cap, p as usize, idx, scratch),
            _ => Default::default(),
        };
        let payload = [if range.is_some() { me } else { p }, -plan.rounds, 0, 0];
        let ((v, idx), agreed) = enter(&self.comm, call, name, local, payload)?;
        if agreed[0] < p {
            agree(&self.comm, range.map_or(Ok(()), Err))?;
            bail!(Internal, "{}: ranks disagree on the outcome of the index check", call.entry());
        }
        Ok((v, idx, -agreed[1]))
    }

    /// The moving step of a collective batch on `comm` (every rank calls it
    /// with the same `rounds`): direct copies, then the exchange of the rows
    /// `scratch` plans.
    ///
    /// # Safety
    /// `dst` holds `rows` rows of `v`; `scratch` is this batch's plan.
    pub(super) unsafe fn collective_move(
        &self,
        comm: &Comm,
        v: &Variable,
        rows: usize,
        rounds: i64,
        dst: *mut u8,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let mut t = Timer::start(self.cfg.profile);
        let (cap, mode) = (self.cfg.alltoall_max_bytes, self.cfg.batch_exchange);
        // SAFETY: the caller's promise.
        let req = unsafe { v.transport.move_rows(comm, &v.source(), cap, mode, rounds, dst, scratch)? };
        v.counters.requests(req.sent, req.recv);
        t.lap(&v.counters.read_ns);
        if rows > 0 {
            v.counters.read_call(rows as u64, scratch.direct_rows() as u64);
        }
        Ok(())
    }
}
