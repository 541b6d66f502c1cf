//! Ragged variables: samples of different lengths, each a run of rows of one
//! fixed trailing shape, with the per-sample offsets kept by their owners.
//!
//! A ragged variable is two variables per rank under one name: the payload
//! (the samples' rows back to back; what `dds_info`, `dds_profile`,
//! `dds_register_recv` and fixed-row reads see) and its index, one 16-byte
//! row per local sample (first row in the owner's payload shard, row count),
//! in memory its own transport serves. No rank holds entries of samples it
//! does not own: metadata is 16 bytes per local sample plus the two O(P)
//! layouts (samples and rows).
//!
//! A batched read first reads the index rows of the requested samples (the
//! fixed-row batch: collective or one-sided, as the store's batch mode),
//! then the payload ranges: one-sided transports post one read per sample
//! (adjacent ones merged), same-node samples are copied, and the method-0
//! collective mode moves the ranges by the transport's `move_ranges`.

use std::collections::BTreeMap;

use crate::error::{bail, err, Result};
use crate::profile::Timer;
use crate::transport::Scratch;
use crate::var::{RaggedIndex, Variable, INDEX_ROW_BYTES};

use super::{validate_shape, Collective, Shape, Store};

/// The fixed trailing shape of a ragged variable's rows.
#[derive(Clone, Copy, Debug)]
pub struct RaggedSpec {
    pub row_elems: i64,
    pub item_size: i32,
}

/// Most index bytes a one-sided read fetches per sample asked when it reads
/// an owner's span of index rows in one go (`entries_onesided`); also
/// bounds the transient buffer.
const SPAN_BYTES_PER_SAMPLE: usize = 2048;

/// Name of a ragged variable's index in method-2 hand-shake records: a NUL
/// byte, which no C string can hold, keeps it apart from every user name.
pub(crate) fn index_record_name(name: &str) -> String {
    format!("{name}\0index")
}

/// What `dds_get_ragged_batch` wrote.
pub struct RaggedRead {
    /// Bytes written at the start of the destination.
    pub bytes: u64,
}

pub(super) fn index_of(v: &Variable) -> Result<&Variable> {
    match &v.ragged {
        Some(r) => Ok(&r.index),
        None => bail!(
            InvalidArgument,
            "variable '{}' has fixed-size rows, not ragged samples (use dds_get / dds_get_batch)",
            v.name
        ),
    }
}

/// Checks every sample index; the error names the first bad one.
fn check_samples(v: &Variable, idx: &[i64]) -> Result<()> {
    let total = index_of(v)?.layout.total();
    match idx.iter().position(|&g| g < 0 || g >= total) {
        None => Ok(()),
        Some(i) => bail!(
            OutOfRange,
            "index {i} of the batch, sample {}, is out of range [0, {total}) of ragged variable '{}'",
            idx[i],
            v.name
        ),
    }
}

impl Store {
    /// Collective: registers ragged variable `name` from this rank's samples:
    /// `payload` holds their rows back to back, `lengths[i]` is sample i's
    /// row count. `spec` is this rank's (possibly invalid) row shape.
    pub fn register_ragged(&self, name: &str, spec: Result<RaggedSpec>, payload: &[u8], lengths: &[i64]) -> Result<()> {
        self.check_running()?;
        self.refuse_extra("add", name)?;
        self.drain_requests();
        let mut vars = self.vars.write();
        let me = self.comm.rank();
        let local = spec.and_then(|sp| {
            if vars.contains_key(name) {
                bail!(DuplicateVariable, "variable '{name}' already exists in this store");
            }
            let shape = Shape { local_rows: 0, row_elems: sp.row_elems, item_size: sp.item_size };
            let row_bytes = validate_shape(name, &shape)?;
            let mut rows: u64 = 0;
            let mut index = Vec::with_capacity(lengths.len() * INDEX_ROW_BYTES as usize);
            for (i, &n) in lengths.iter().enumerate() {
                if n < 0 {
                    bail!(InvalidArgument, "ragged variable '{name}': rank {me}, local sample {i}: length {n} is negative");
                }
                index.extend_from_slice(&rows.to_ne_bytes());
                index.extend_from_slice(&(n as u64).to_ne_bytes());
                rows += n as u64; // at most 2^63 per sample, fewer than 2^64 samples of them fit no memory
            }
            let need = rows as u128 * row_bytes as u128;
            if need != payload.len() as u128 {
                bail!(
                    Mismatch,
                    "ragged variable '{name}': rank {me}: the lengths of its {} samples sum to {rows} rows of {row_bytes} \
                     bytes ({need} bytes), but the payload holds {} bytes",
                    lengths.len(),
                    payload.len()
                );
            }
            let pshard = self.new_shard(payload.len(), Some(payload))?;
            let ishard = self.new_shard(index.len(), Some(&index))?;
            Ok((Shape { local_rows: rows as i64, ..shape }, row_bytes, pshard, ishard))
        });
        let (pshape, row_bytes, pshard, ishard) = self.enter(Collective::AddRagged, name, local)?;
        let mut var = self.build_var(name, name, pshape, row_bytes, pshard)?;
        let ishape = Shape { local_rows: lengths.len() as i64, row_elems: 2, item_size: 8 };
        match self.build_var(name, &index_record_name(name), ishape, INDEX_ROW_BYTES, ishard) {
            Ok(index) => var.ragged = Some(Box::new(RaggedIndex { index })),
            Err(e) => {
                // Every rank failed here together: free the payload together.
                let _ = var.free();
                return Err(e);
            }
        }
        vars.insert(name.to_string(), var);
        Ok(())
    }

    /// Reads the index rows (first row, row count) of samples `idx` of the
    /// ragged variable in `local` into `out`. Collective in the method-0
    /// collective batch mode (`local` carries this rank's argument check,
    /// whose failure fails every rank), one-sided otherwise.
    /// `scratch`: the store's exchange memory, which the caller holds (with
    /// the MPI lock) for the whole of a collective read.
    pub(super) fn ragged_entries(
        &self,
        call: Collective,
        name: &str,
        local: Result<(&Variable, &[i64])>,
        out: &mut Vec<[u64; 2]>,
        scratch: Option<&mut Scratch>,
    ) -> Result<()> {
        let local = local.and_then(|(v, idx)| {
            check_samples(v, idx)?;
            Ok((index_of(v)?, idx))
        });
        out.clear();
        let n = local.as_ref().map_or(0, |(_, idx)| idx.len());
        out.resize(n, [0; 2]);
        let dst = out.as_mut_ptr().cast::<u8>();
        let Some(scratch) = scratch else {
            let (ix, idx) = local?;
            return self.entries_onesided(ix, idx, out);
        };
        let (ix, idx, rounds) = self.collective_agree(call, name, local, scratch)?;
        // SAFETY: out holds idx.len() index rows; scratch is this batch's plan.
        unsafe { self.collective_move(&self.comm, ix, idx.len(), rounds, dst, scratch) }
    }

    /// One-sided reads of the index rows of samples `idx` into `out`. Per
    /// owner, when the rows asked span little more than they hold (at most
    /// `SPAN_BYTES_PER_SAMPLE` per sample asked), the whole span is one read
    /// instead of one per sample: a read costs far more than its bytes
    /// until tens of KiB. The spans land after the entries in one buffer, so
    /// a fabric read needs one destination registration.
    fn entries_onesided(&self, ix: &Variable, idx: &[i64], out: &mut Vec<[u64; 2]>) -> Result<()> {
        let n = idx.len();
        // Per owner: (first, last, count) of the local rows asked.
        let mut owners: BTreeMap<usize, (i64, i64, usize)> = BTreeMap::new();
        for &g in idx {
            let (o, l) = ix.layout.owner(g);
            let e = owners.entry(o).or_insert((l, l, 0));
            *e = (e.0.min(l), e.1.max(l), e.2 + 1);
        }
        // Owners read as a span: where it starts in `out` (after the n entries).
        let mut spans: BTreeMap<usize, (i64, usize)> = BTreeMap::new();
        let mut end = n;
        for (&o, &(lo, hi, count)) in &owners {
            let span = (hi - lo + 1) as usize;
            if ix.near.src(o).is_none() && count > 1 && span * 16 <= count * SPAN_BYTES_PER_SAMPLE {
                spans.insert(o, (lo, end));
                end += span;
            }
        }
        out.resize(end, [0; 2]);
        let base = out.as_mut_ptr().cast::<u8>();
        let rb = INDEX_ROW_BYTES as usize;
        let mut reads = ix.transport.reads(0);
        for (&o, &(lo, at)) in &spans {
            let span = (owners[&o].1 - lo + 1) as usize;
            // SAFETY: out holds `end` entries; this span's are [at, at + span).
            reads.push(o, lo as u64 * INDEX_ROW_BYTES, unsafe { base.add(at * rb) }, span * rb);
        }
        for (i, &g) in idx.iter().enumerate() {
            let (o, l) = ix.layout.owner(g);
            let offset = l as u64 * INDEX_ROW_BYTES;
            // SAFETY: entry i of out; row l of the owner's index shard.
            let at = unsafe { base.add(i * rb) };
            if !unsafe { ix.near.copy(o, offset, at, rb) } && !spans.contains_key(&o) {
                reads.push(o, offset, at, rb);
            }
        }
        // Untimed: the payload read that follows is what a ragged read times.
        reads.run(base, end * rb, &self.read_ctx(ix), &mut Timer::start(false))?;
        for (i, &g) in idx.iter().enumerate() {
            let (o, l) = ix.layout.owner(g);
            if let Some(&(lo, at)) = spans.get(&o) {
                out[i] = out[at + (l - lo) as usize];
            }
        }
        out.truncate(n);
        Ok(())
    }

    /// Row counts of samples `indices` into `lengths` (same length).
    /// Collective in the method-0 collective batch mode.
    pub fn ragged_lengths(&self, name: &str, indices: Result<(&[i64], &mut [i64])>) -> Result<()> {
        self.check_running()?;
        let vars = self.vars.read();
        let (idx, lengths, local) = match indices {
            Ok((idx, l)) => {
                let v = vars.get(name).ok_or_else(|| err!(UnknownVariable, "no variable named '{name}' in this store"));
                (idx, Some(l), v.map(|v| (v, idx)))
            }
            Err(e) => (&[][..], None, Err(e)),
        };
        let mut entries = Vec::new();
        let mut ex = (!self.batch_is_onesided()).then(|| self.exchange.lock());
        let _serial = ex.as_ref().and(self.mpi_lock.as_ref()).map(|m| m.lock());
        self.ragged_entries(Collective::RaggedLengths, name, local, &mut entries, ex.as_deref_mut())?;
        if let Some(l) = lengths {
            for (d, e) in l.iter_mut().zip(&entries) {
                *d = e[1] as i64;
            }
        }
        debug_assert_eq!(idx.len(), entries.len());
        Ok(())
    }
}
