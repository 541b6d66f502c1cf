//! The registry of variables: registering (`dds_add`, `dds_init`), building
//! a variable's layout, node-local view and transport, lookups, local
//! updates, receive registrations and what `dds_info` reports.

use super::{enter, fingerprint, Collective, Shape, Snapshot, Store, VarInfo, NO_PAYLOAD};
use crate::error::{bail, err, Error, Result};
use crate::layout::Layout;
use crate::mpi::{self, agree};
use crate::shard::Shard;
use crate::transport::{Near, ReadCtx};
use crate::var::{Parts, Variable};

impl Store {
    /// The first step of every collective call on this store
    /// (`collective::enter`, with nothing of the call's own to agree on).
    pub(crate) fn enter<T>(&self, call: Collective, name: &str, local: Result<T>) -> Result<T> {
        enter(&self.comm, call, name, local, NO_PAYLOAD).map(|(v, _)| v)
    }

    #[inline]
    pub(crate) fn check_running(&self) -> Result<()> {
        if mpi::finalize_began() {
            bail!(BadState, "MPI has been finalized; only dds_destroy is allowed");
        }
        Ok(())
    }

    /// Collective: registers `name` with a zero-filled shard (`src` None) or a
    /// copy of `src`. `shape` is this rank's (possibly invalid) request;
    /// `call` is `Add` or `Init` (the entry point, for messages).
    pub fn register(&self, call: Collective, name: &str, shape: Result<Shape>, src: Option<&[u8]>) -> Result<()> {
        self.register_filled(call, name, shape, src, |_| Ok(()))
    }

    /// `register`, with `fill` writing the new shard's bytes before the
    /// ranks agree (dds_load reads a snapshot straight into it); a failure
    /// of `fill` fails the call on every rank like any local error.
    pub(crate) fn register_filled(
        &self,
        call: Collective,
        name: &str,
        shape: Result<Shape>,
        src: Option<&[u8]>,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        self.check_running()?;
        self.refuse_extra("add or init", name)?;
        self.drain_requests();
        let mut vars = self.vars.write();
        let local = shape.and_then(|s| {
            if vars.contains_key(name) {
                bail!(DuplicateVariable, "variable '{name}' already exists in this store");
            }
            let row_bytes = validate_shape(name, &s)?;
            let bytes = (s.local_rows as u128) * (row_bytes as u128);
            if bytes > isize::MAX as u128 {
                bail!(
                    InvalidArgument,
                    "variable '{name}': {} rows x {row_bytes} bytes overflows memory sizes",
                    s.local_rows
                );
            }
            let shard = self.new_shard(bytes as usize, src)?;
            // SAFETY: a shard made just now, of len() bytes, that no other
            // rank or thread can reach before the agreement below.
            fill(unsafe { std::slice::from_raw_parts_mut(shard.as_ptr(), shard.len()) })?;
            Ok((s, row_bytes, shard))
        });
        // On an error every rank has dropped the shard it made, so its
        // memory (huge pages, /dev/shm) is free when any rank returns and,
        // say, retries with less.
        let (s, row_bytes, shard) = self.enter(call, name, local)?;
        let var = self.build_var(name, name, s, row_bytes, shard)?;
        vars.insert(name.to_string(), var);
        Ok(())
    }

    /// A shard of `bytes` bytes, zero-filled or a copy of `src`. Node-local
    /// reads need it in shared memory (placed per `DDSTORE_SHM_DIR` and
    /// `DDSTORE_HUGEPAGES`); without them (or when that fails quietly) the
    /// heap, and the transport for peers.
    pub(crate) fn new_shard(&self, bytes: usize, src: Option<&[u8]>) -> Result<Shard> {
        let seg = &self.cfg.segments;
        if !self.node.on && seg.huge == crate::config::HugePages::Require {
            bail!(
                InvalidArgument,
                "DDSTORE_HUGEPAGES=require asks for node-local segments in huge pages, but node-local reads are off \
                 (DDSTORE_NODE_LOCAL=0 on some rank)"
            );
        }
        let shared = if self.node.on { Shard::shared(bytes, src, seg)? } else { None };
        if shared.is_some() && self.cfg.test_segment_delay_s > 0.0 {
            // Testing aid: hold the window in which the segment has a name.
            std::thread::sleep(std::time::Duration::from_secs_f64(self.cfg.test_segment_delay_s));
        }
        match (shared, src) {
            (Some(s), _) => Ok(s),
            (None, Some(data)) => Shard::copy_of(data),
            (None, None) => Shard::zeroed(bytes),
        }
    }

    /// Makes a shard shared among the store's ranks (collective, after every
    /// rank's request was agreed valid): checks the ranks describe one
    /// variable, builds its layout, node-local view and transport, and
    /// publishes it for method-2 extras. `record` names it in hand-shake
    /// records (a ragged variable's index has a name no user can give).
    pub(crate) fn build_var(
        &self,
        name: &str,
        record: &str,
        s: Shape,
        row_bytes: u64,
        mut shard: Shard,
    ) -> Result<Variable> {
        // Every rank now has a valid request; check they describe one variable.
        let all = self.comm.allgather(&[s.local_rows, s.row_elems, s.item_size as i64, fingerprint(name)])?;
        for (r, m) in all.iter().enumerate() {
            if m[3] != all[0][3] {
                bail!(InvalidArgument, "ranks 0 and {r} registered different variable names (this rank: '{name}')");
            }
            if m[1] != all[0][1] || m[2] != all[0][2] {
                bail!(
                    Mismatch,
                    "variable '{name}': rank {r} has rows of {} elements x {} bytes but rank 0 has {} x {}",
                    m[1],
                    m[2],
                    all[0][1],
                    all[0][2]
                );
            }
        }
        let counts: Vec<i64> = all.iter().map(|m| m[0]).collect();
        let layout = Layout::from_counts(&counts).map_err(|e| err!(InvalidArgument, "variable '{name}': {}", e.msg))?;
        let near = Near::share(&self.node, &self.comm, &mut shard)?;
        // MPI may fail a window on some ranks only (Open MPI does, when no
        // one-sided component suits the window): every rank fails together.
        // A rank whose part succeeded leaks it: freeing is collective.
        // (The store's method chose its network at dds_create: it picks
        // the transport of every variable the store registers.)
        let transport = self.network.transport_for(&shard, &self.comm, self.shard_iface());
        let transport =
            agree(&self.comm, transport).map_err(|e| Error::new(e.kind, format!("variable '{name}': {}", e.msg)))?;
        self.publish_if_core(record, &s, &layout, &transport)?;
        self.auto.reset(name);
        Ok(Variable::new(Parts {
            name: name.to_string(),
            row_elems: s.row_elems,
            item_size: s.item_size,
            row_bytes,
            layout,
            rank: self.comm.rank(),
            shard,
            near,
            transport,
        }))
    }

    /// What `v`'s transport needs from the store for a read.
    pub(crate) fn read_ctx<'a>(&'a self, v: &'a Variable) -> ReadCtx<'a> {
        ReadCtx { counters: &v.counters, profile: self.cfg.profile, serial: self.mpi_lock.as_ref() }
    }

    /// Runs `f` on variable `name` under the registry's read lock.
    pub(crate) fn with_var<T>(&self, name: &str, f: impl FnOnce(&Variable) -> Result<T>) -> Result<T> {
        let vars = self.vars.read();
        match vars.get(name) {
            Some(v) => f(v),
            None => bail!(UnknownVariable, "no variable named '{name}' in this store"),
        }
    }

    /// Local: copies whole rows into this rank's shard from local row `offset`.
    pub fn update(&self, name: &str, data: &[u8], offset: i64) -> Result<()> {
        self.refuse_extra("update", name)?;
        self.with_var(name, |v| {
            if data.len() as u64 % v.row_bytes != 0 {
                bail!(
                    Mismatch,
                    "dds_update of {} bytes into '{name}': not a whole number of {}-byte rows",
                    data.len(),
                    v.row_bytes
                );
            }
            let rows = (data.len() as u64 / v.row_bytes) as i64;
            let have = v.local_rows();
            if offset < 0 || offset > have || rows > have - offset {
                bail!(
                    OutOfRange,
                    "rows [{offset}, {}) of '{name}' are outside this rank's shard of {have} rows",
                    offset.saturating_add(rows)
                );
            }
            v.shard.write(offset as usize * v.row_bytes as usize, data);
            Ok(())
        })
    }

    pub fn register_recv(&self, name: &str, start: usize, len: usize) -> Result<()> {
        self.with_var(name, |v| {
            if len == 0 {
                return Ok(());
            }
            // Staged device buffers are never transport destinations;
            // GPUDirect ones are registered with their memory interface.
            let how = self.recv_route(name, start as *const u8)?;
            v.register_recv(start, len, || match how {
                Some(Some(hmem)) => v
                    .transport
                    .register_recv(start, len, Some(hmem))
                    .or_else(|e| self.recv_refused(name, start as *const u8, e)),
                Some(None) => v.transport.register_recv(start, len, None),
                None => Ok(()),
            })
        })
    }

    pub fn unregister_recv(&self, name: &str, start: usize) -> Result<()> {
        self.with_var(name, |v| v.unregister_recv(start, || v.transport.unregister_recv(start)))
    }

    pub fn info(&self, name: &str) -> Result<VarInfo> {
        self.with_var(name, |v| {
            Ok(VarInfo {
                total_rows: v.layout.total(),
                local_rows: v.local_rows(),
                row_elems: v.row_elems,
                item_size: v.item_size,
                row_bytes: v.row_bytes,
                method: self.method,
                n_ranks: v.layout.n_ranks(),
                transport: v.transport.describe(),
                node_local: v.near.is_on(),
                node_ranks: v.near.direct_ranks(),
                device_path: self.device_path(v),
                samples: v.ragged.as_ref().map(|r| (r.index.layout.total(), r.index.local_rows())),
            })
        })
    }

    pub fn profile(&self, name: &str) -> Result<(Snapshot, bool)> {
        let mode = self.batch_mode_of(name);
        self.with_var(name, |v| {
            Ok((Snapshot { batch_mode: mode, ..v.counters.snapshot(v.row_bytes) }, self.cfg.profile))
        })
    }
}

/// Validates a shape and returns its row size in bytes.
pub(super) fn validate_shape(name: &str, s: &Shape) -> Result<u64> {
    if s.local_rows < 0 {
        bail!(InvalidArgument, "variable '{name}': local row count {} is negative", s.local_rows);
    }
    if s.row_elems <= 0 {
        bail!(InvalidArgument, "variable '{name}': elements per row must be positive, got {}", s.row_elems);
    }
    if ![1, 2, 4, 8].contains(&s.item_size) {
        bail!(InvalidArgument, "variable '{name}': item size {} is not 1, 2, 4 or 8 bytes", s.item_size);
    }
    match (s.row_elems as u64).checked_mul(s.item_size as u64) {
        Some(b) if b <= i64::MAX as u64 => Ok(b),
        _ => bail!(
            InvalidArgument,
            "variable '{name}': {} elements x {} bytes per row overflows 64 bits",
            s.row_elems,
            s.item_size
        ),
    }
}
