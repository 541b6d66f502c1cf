//! A registered variable: its shape, who holds which rows, this rank's shard,
//! the transport state that serves remote readers, and its counters.

use parking_lot::Mutex;

use crate::error::{bail, Result};
use crate::layout::Layout;
use crate::profile::Counters;
use crate::shard::Shard;
use crate::transport::{Near, Source, Transport};

pub struct Variable {
    pub name: String,
    pub row_elems: i64,
    pub item_size: i32,
    pub row_bytes: u64,
    pub layout: Layout,
    /// This rank's position in `layout`.
    pub rank: usize,
    pub shard: Shard,
    /// Shards of this node's ranks this rank copies from directly.
    pub near: Near,
    pub transport: Transport,
    pub counters: Counters,
    /// Destination buffers registered with `dds_register_recv`: (start, len).
    pub recv: Mutex<Vec<(usize, usize)>>,
    /// A ragged variable's per-sample index (this variable's rows are then
    /// the samples' items, back to back); None for a fixed-row variable.
    pub ragged: Option<Box<RaggedIndex>>,
}

/// The index of a ragged variable: one 16-byte row per sample, held by the
/// sample's owner (`INDEX_ROW_BYTES`), read through its own transport like any
/// variable's rows. Its layout is the layout of the samples.
pub struct RaggedIndex {
    pub index: Variable,
}

/// An index row: the sample's first item in its owner's payload shard and
/// its item count, two native-endian u64s.
pub const INDEX_ROW_BYTES: u64 = 16;

/// What a variable is made of before its first read: registered by the
/// core (`rank` its place in `layout`) or joined by an extra member (`rank`
/// past the end: it holds no rows).
pub struct Parts {
    pub name: String,
    pub row_elems: i64,
    pub item_size: i32,
    pub row_bytes: u64,
    pub layout: Layout,
    pub rank: usize,
    pub shard: Shard,
    pub near: Near,
    pub transport: Transport,
}

impl Variable {
    /// A fixed-row variable with no counts, registrations or ragged index yet.
    pub fn new(p: Parts) -> Variable {
        let Parts { name, row_elems, item_size, row_bytes, layout, rank, shard, near, transport } = p;
        Variable {
            name,
            row_elems,
            item_size,
            row_bytes,
            layout,
            rank,
            shard,
            near,
            transport,
            counters: Default::default(),
            recv: Mutex::new(Vec::new()),
            ragged: None,
        }
    }

    /// This variable's rows as a collective batch reads them.
    pub fn source(&self) -> Source<'_> {
        Source { layout: &self.layout, shard: &self.shard, near: &self.near, row_bytes: self.row_bytes }
    }

    /// Rows held by this rank.
    pub fn local_rows(&self) -> i64 {
        if self.rank >= self.layout.n_ranks() {
            return 0; // a method-2 extra member holds no rows
        }
        let (lo, hi) = self.layout.shard(self.rank);
        hi - lo
    }

    /// Checks that a destination of `bytes` bytes holds exactly `rows` rows.
    pub fn check_dst(&self, what: &str, bytes: usize, rows: i64) -> Result<()> {
        let need = (rows as u128) * (self.row_bytes as u128);
        if bytes as u128 != need {
            bail!(
                Mismatch,
                "{what} of {bytes} bytes for variable '{}': {rows} rows of {} bytes ({} elements x {} bytes) need {need} bytes",
                self.name,
                self.row_bytes,
                self.row_elems,
                self.item_size
            );
        }
        Ok(())
    }

    /// Checks every index of a batch against the variable's rows; the error
    /// names the first bad one ("index i of {whose} batch, ...").
    pub fn check_indices(&self, idx: &[i64], whose: &str) -> Result<()> {
        match idx.iter().position(|&g| self.layout.check(g).is_err()) {
            None => Ok(()),
            Some(i) => bail!(
                OutOfRange,
                "index {i} of {whose} batch, global row {}, is out of range [0, {}) of variable '{}'",
                idx[i],
                self.layout.total(),
                self.name
            ),
        }
    }

    /// Adds a receive registration; an identical one is a no-op, a partial
    /// overlap with another is refused (ownership of the bytes would be ambiguous).
    /// `on_new` registers a new range with the transport; it runs under the
    /// registry's lock, so a racing unregistration of the same buffer cannot
    /// slip between the two and leave the transport holding a stale one.
    /// A range whose end would pass the address space (or isize::MAX bytes,
    /// the most one object may span) is refused before any comparison, so the
    /// overlap test below works on ends that cannot wrap.
    pub fn register_recv(&self, start: usize, len: usize, on_new: impl FnOnce() -> Result<()>) -> Result<()> {
        check_recv_range(start, len)?;
        let mut regs = self.recv.lock();
        for &(s, l) in regs.iter() {
            if (s, l) == (start, len) {
                return Ok(());
            }
            // Half-open ranges [start, start + len) and [s, s + l); every
            // registered range passed check_recv_range, so neither end wraps.
            if start < s + l && s < start + len {
                bail!(
                    InvalidArgument,
                    "buffer [{start:#x}, +{len}) overlaps the buffer [{s:#x}, +{l}) already registered for '{}'",
                    self.name
                );
            }
        }
        on_new()?;
        regs.push((start, len));
        Ok(())
    }

    /// Removes the registration that starts at `start`; `on_removed` drops
    /// the transport's registration under the same lock.
    pub fn unregister_recv(&self, start: usize, on_removed: impl FnOnce()) -> Result<()> {
        let mut regs = self.recv.lock();
        match regs.iter().position(|&(s, _)| s == start) {
            Some(i) => {
                regs.swap_remove(i);
                on_removed();
                Ok(())
            }
            None => bail!(InvalidArgument, "buffer {start:#x} is not registered for '{}'", self.name),
        }
    }

    /// Collective for method 0 (local for method 1): releases the transport.
    pub fn free(&mut self) -> Result<()> {
        // Index first: every rank frees in the same order.
        let index = self.ragged.as_mut().map_or(Ok(()), |r| r.index.free());
        let payload = self.transport.free();
        index.and(payload)
    }
}

/// Checks a receive buffer `[start, start + len)`: `len` at most isize::MAX
/// bytes and an end inside the address space.
pub fn check_recv_range(start: usize, len: usize) -> Result<()> {
    let end = start.checked_add(len);
    if len > isize::MAX as usize || end.is_none() {
        bail!(
            InvalidArgument,
            "buf {start:#x} with bytes {len}: the buffer would end past the address space \
             (bytes must be at most {} and buf + bytes must not overflow)",
            isize::MAX
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_recv_range;

    #[test]
    fn recv_ranges_that_wrap_are_refused() {
        let buf = 0x1000usize;
        for (start, len) in [(buf, usize::MAX), (usize::MAX - 10, 40), (buf, isize::MAX as usize + 1), (1, usize::MAX)]
        {
            let e = check_recv_range(start, len).unwrap_err();
            assert!(e.msg.contains("buf") && e.msg.contains("bytes"), "{e}");
        }
        assert!(check_recv_range(buf, 4096).is_ok());
        assert!(check_recv_range(usize::MAX - 10, 10).is_ok());
        assert!(check_recv_range(0, isize::MAX as usize).is_ok());
    }
}
