//! GPUDirect reads (gpu/direct.rs chose the route): every row, this rank's
//! own included, is read by the fabric straight into the destination, which
//! the CPU may not be able to address; the destination is registered with
//! its memory interface when the provider needs descriptors.
//!
//! Each returns `Ok(Some(refusal))` when the provider refused the
//! destination's registration, before any row moved: the caller falls back
//! for this buffer (store/gpu.rs).

use crate::error::{bail, Error, Result};
use crate::gpu::direct::Iface;
use crate::var::Variable;

use super::Store;

type Refused = Option<Error>;

impl Store {
    /// `dds_get` into a GPUDirect destination.
    #[allow(clippy::too_many_arguments)] // a read's arguments and the registration's
    pub(super) fn direct_get(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        start: i64,
        count: i64,
        hmem: (Iface, i32),
        desc: bool,
    ) -> Result<Refused> {
        self.check_running()?;
        self.with_var(name, |v| {
            let Some((owner, offset)) = self.check_get(v, dst_bytes, start, count)? else { return Ok(None) };
            check_fabric(v)?;
            let mr = match v.transport.direct_mr(dst, dst_bytes, hmem, desc, &v.counters) {
                Ok(mr) => mr,
                Err(e) => return Ok(Some(e)),
            };
            let mut reads = v.transport.reads(1);
            reads.push(owner, offset, dst, dst_bytes);
            reads.run_direct(mr.as_ref(), &self.read_ctx(v))?;
            v.counters.read_call(count as u64, 0);
            Ok(None)
        })
    }

    /// One-sided `dds_get_batch` into a GPUDirect destination: every index
    /// is checked first; rows adjacent at the owner and in `dst` are one read.
    pub(super) fn direct_batch(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        idx: &[i64],
        hmem: (Iface, i32),
        desc: bool,
    ) -> Result<Refused> {
        self.check_running()?;
        self.with_var(name, |v| {
            v.check_dst("destination", dst_bytes, idx.len() as i64)?;
            v.check_indices(idx, "the")?;
            if idx.is_empty() {
                return Ok(None);
            }
            check_fabric(v)?;
            let mr = match v.transport.direct_mr(dst, dst_bytes, hmem, desc, &v.counters) {
                Ok(mr) => mr,
                Err(e) => return Ok(Some(e)),
            };
            let mut reads = v.transport.reads(idx.len());
            // Every row through the fabric, this rank's own included.
            super::batch_rows(v, dst, idx, |owner, offset, at, rb| reads.push(owner, offset, at, rb));
            reads.run_direct(mr.as_ref(), &self.read_ctx(v))?;
            v.counters.read_call(idx.len() as u64, 0);
            Ok(None)
        })
    }
}

/// A GPUDirect route is only chosen for a fabric (gpu/direct.rs); an error
/// here, before the registration, is not mistaken for its refusal.
fn check_fabric(v: &Variable) -> Result<()> {
    if v.transport.caps().is_none() {
        bail!(Internal, "variable '{}': a GPUDirect read needs a fabric transport", v.name);
    }
    Ok(())
}
