//! Method 2's extra members on the store: created without a communicator,
//! they join the records the core job publishes (split.rs), read over the
//! fabric like method 1, and announce when they are done.

use super::split::{dir_of, Role, Split, EXTRA_SEQ};
use super::{validate_shape, Method, Options, Shape, Store};
use crate::config::Config;
use crate::error::{bail, err, Result};
use crate::handshake::{self as hs, Expect, ProviderCheck};
use crate::layout::Layout;
use crate::mpi::Comm;
use crate::shard::Shard;
use crate::transport::{network, Near, NodeMap};
use crate::var::{Parts, Variable};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Store {
    /// Method 2 extra member: local, no collective; `comm_f` is not used.
    pub(super) fn create_extra(o: Options) -> Result<Store> {
        if o.n_core <= 0 {
            bail!(
                InvalidArgument,
                "a method-2 extra member needs n_core > 0 (the core job's rank count), got {}",
                o.n_core
            );
        }
        let cfg = Config::from_env()?;
        super::check_nic_map(o.nic_map.as_deref(), cfg.nic_map.as_deref())?;
        let gpu = super::GpuSettings::resolve(&o, &cfg)?;
        let fcfg = super::fabric_config(&o, &cfg, &gpu);
        let dir = dir_of(&o, &cfg);
        hs::ensure_dir(&dir)?;
        let comm = Comm::dup_self()?;
        let node = Arc::new(NodeMap::new(&comm, false)?);
        let split = Split {
            role: Role::Extra,
            dir,
            n_core: o.n_core as usize,
            session: 0,
            timeout: Duration::from_secs_f64(cfg.handshake_timeout_s),
            fcfg,
            reader: Mutex::new(None),
            sessions: Mutex::new(BTreeSet::new()),
            seq: EXTRA_SEQ.fetch_add(1, Ordering::Relaxed),
        };
        Ok(Store { split: Some(split), ..Store::empty(comm, Method::Split, cfg, node, gpu) })
    }

    /// Method 2 extra member: waits for the record of `name` (polling with
    /// a back-off up to DDSTORE_HANDSHAKE_TIMEOUT_S), checks it, and makes
    /// the variable readable. `row`: the expected (elements, item size).
    pub fn join(&self, name: &str, row: Option<(i64, i32)>) -> Result<()> {
        let (var, session) = self.join_var(name, name, row)?;
        self.insert_joined(name, var, session)
    }

    /// Method 2 extra member: `join` for a ragged variable, whose index the
    /// core job published in a record of its own.
    pub fn join_ragged(&self, name: &str, row: Option<(i64, i32)>) -> Result<()> {
        let (mut var, session) = self.join_var(name, name, row)?;
        let (index, _) = self.join_var(name, &super::ragged::index_record_name(name), Some((2, 8)))?;
        var.ragged = Some(Box::new(crate::var::RaggedIndex { index }));
        self.insert_joined(name, var, session)
    }

    pub(super) fn insert_joined(&self, name: &str, var: Variable, session: u64) -> Result<()> {
        let mut vars = self.vars.write();
        if vars.contains_key(name) {
            bail!(DuplicateVariable, "variable '{name}' is already joined in this store");
        }
        vars.insert(name.to_string(), var);
        if let Some(sp) = &self.split {
            sp.sessions.lock().insert(session);
        }
        Ok(())
    }

    /// Waits for and checks the record `record` of variable `name`, and
    /// returns the variable it describes and the core store's session.
    pub(super) fn join_var(&self, name: &str, record: &str, row: Option<(i64, i32)>) -> Result<(Variable, u64)> {
        self.check_running()?;
        let sp = match &self.split {
            Some(sp) if !sp.is_core() => sp,
            Some(_) => bail!(BadState, "cannot join '{name}': dds_join is only valid for method-2 extra members, and this store is a method-2 core member (it publishes with dds_add/dds_init)"),
            None => bail!(BadState, "cannot join '{name}': dds_join is only valid for method-2 extra members (this store uses method {})", self.method.code()),
        };
        if let Some((e, i)) = row {
            validate_shape(name, &Shape { local_rows: 0, row_elems: e, item_size: i })?;
        }
        if self.vars.read().contains_key(name) {
            bail!(DuplicateVariable, "variable '{name}' is already joined in this store (dds_remove it to join again)");
        }
        // The directory may have been replaced or opened up since dds_create.
        if let Ok(m) = std::fs::metadata(&sp.dir) {
            hs::check_dir(&sp.dir, &m)?;
        }
        let path = sp.record_path(record);
        let what = path.display().to_string();
        let open = sp.reader.lock().as_ref().map(|f| f.provider().to_string());
        let want = Expect {
            name: record.to_string(),
            n_core: sp.n_core,
            provider: open
                .or_else(|| sp.fcfg.provider.clone())
                .map(|p| ProviderCheck { name: network::normalize_provider(&p), matches: network::provider_matches }),
            row,
        };
        let found = hs::poll(sp.timeout, || match hs::read_checked(&path)? {
            None => Ok(None),
            Some(b) => hs::parse(&b, &what, &want).map(Some),
        })?;
        let Some(rec) = found else {
            bail!(
                Timeout,
                "no core job published variable '{name}' in hand-shake directory {} within {:.1} s (waited for {}; \
                 DDSTORE_HANDSHAKE_TIMEOUT_S); check that the core job runs and uses the same directory",
                sp.dir.display(),
                sp.timeout.as_secs_f64(),
                what
            );
        };
        if rec.state == hs::STATE_WITHDRAWN {
            bail!(
                BadState,
                "variable '{name}' in hand-shake directory {} was withdrawn by its core job (freed with dds_remove or \
                 dds_destroy, {:.1} s ago): nothing serves it; start the core job again (and use a fresh directory per run)",
                sp.dir.display(),
                hs::now_ns().saturating_sub(rec.written_ns) as f64 * 1e-9
            );
        }
        let fab = sp.reader_for(&rec, &what)?;
        let shape = Shape { local_rows: 0, row_elems: rec.row_elems, item_size: rec.item_size };
        let row_bytes = validate_shape(name, &shape).map_err(|e| err!(Io, "{what}: {}", e.msg))?;
        let counts: Vec<i64> = rec.ranks.iter().map(|r| r.rows).collect();
        let layout = Layout::from_counts(&counts).map_err(|e| err!(Io, "{what}: {}", e.msg))?;
        let transport = fab.join(&rec.remote())?;
        let var = Variable::new(Parts {
            name: name.to_string(),
            row_elems: rec.row_elems,
            item_size: rec.item_size,
            row_bytes,
            layout,
            rank: usize::MAX,
            shard: Shard::zeroed(0)?,
            near: Near::remote_only(),
            transport,
        });
        Ok((var, rec.session))
    }

    /// Method 2 extra member: announces that this store has finished
    /// reading, to every core store it joined. Local.
    pub fn extra_done(&self) -> Result<()> {
        let sp = match &self.split {
            Some(sp) if !sp.is_core() => sp,
            _ => bail!(BadState, "dds_extra_done is only valid for method-2 extra members"),
        };
        let sessions = sp.sessions.lock().clone();
        if sessions.is_empty() {
            bail!(BadState, "dds_extra_done: this extra member has not joined any variable (nothing to announce)");
        }
        for s in sessions {
            hs::write_done(&sp.dir, s, sp.seq)?;
        }
        Ok(())
    }
}
