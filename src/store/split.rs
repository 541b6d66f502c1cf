//! Method 2 (split jobs) on the store: the core side publishes a record per
//! variable and withdraws it when the variable is freed; extra members
//! create a store without a communicator, join records and read over the
//! fabric exactly as method 1 does. The file format lives in
//! `handshake`.
//!
//! A child module of `store`, so it sees the store's fields.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{validate_shape, Collective, Method, Options, Shape, Store};
use crate::config::Config;
use crate::error::{bail, err, Result};
use crate::handshake::{self as hs, Expect, ProviderCheck, Published, Record};
use crate::layout::Layout;
use crate::mpi::{agree, Comm};
use crate::shard::Shard;
use crate::transport::{network, FabricConfig, Near, NodeMap, Reader, Transport};
use crate::var::{Parts, Variable};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Core,
    Extra,
}

/// A method-2 store's hand-shake state.
pub struct Split {
    pub role: Role,
    pub dir: PathBuf,
    /// Core: this store's size; extra: the n_core option.
    pub n_core: usize,
    /// Core: identifies this store in records and done files.
    pub session: u64,
    pub timeout: Duration,
    /// Extra: how to open the reader fabric at the first join.
    fcfg: FabricConfig,
    /// Extra: the reader fabric (opened by the first join).
    reader: Mutex<Option<Reader>>,
    /// Extra: sessions of the core stores joined (for dds_extra_done).
    sessions: Mutex<BTreeSet<u64>>,
    /// Extra: distinguishes this process's stores in done-file names.
    seq: u64,
}

static EXTRA_SEQ: AtomicU64 = AtomicU64::new(0);

fn dir_of(o: &Options, cfg: &Config) -> PathBuf {
    hs::resolve_dir(o.handshake_dir.as_deref(), cfg.handshake_dir.as_deref())
}

fn new_session() -> u64 {
    let mut seed = Vec::new();
    seed.extend_from_slice(&hs::now_ns().to_le_bytes());
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    seed.extend_from_slice(&(&seed as *const _ as usize).to_le_bytes());
    let mut rnd = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut rnd);
    }
    seed.extend_from_slice(&rnd);
    crate::hash::fnv1a(&seed) | 1
}

impl Split {
    /// Core: collective over the store's communicator. Rank 0 creates the
    /// directory and chooses the session id.
    pub fn core(comm: &Comm, o: &Options, cfg: &Config) -> Result<Split> {
        let dir = dir_of(o, cfg);
        let local = if comm.rank() == 0 { hs::ensure_dir(&dir) } else { Ok(()) };
        agree(comm, local)?;
        let mut id = if comm.rank() == 0 { new_session() } else { 0 }.to_le_bytes();
        comm.bcast(&mut id, 0)?;
        Ok(Split {
            role: Role::Core,
            dir,
            n_core: comm.size(),
            session: u64::from_le_bytes(id),
            timeout: Duration::from_secs_f64(cfg.handshake_timeout_s),
            fcfg: FabricConfig::default(),
            reader: Mutex::new(None),
            sessions: Mutex::new(BTreeSet::new()),
            seq: 0,
        })
    }

    fn is_core(&self) -> bool {
        self.role == Role::Core
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.dir.join(hs::record_file_name(name))
    }

    /// Core, collective: rank 0 writes the record of a new variable.
    /// The transport describes how to reach the shards (`Transport::remote`).
    fn publish(&self, comm: &Comm, name: &str, s: &Shape, layout: &Layout, t: &Transport) -> Result<()> {
        let local = if comm.rank() == 0 {
            let rows: Vec<i64> = (0..comm.size()).map(|r| layout.shard(r)).map(|(lo, hi)| hi - lo).collect();
            let shape =
                Published { name, session: self.session, row_elems: s.row_elems, item_size: s.item_size, rows: &rows };
            t.remote(comm.size())
                .map(|remote| Record::published(shape, remote))
                .and_then(|rec| hs::serialize(&rec))
                .and_then(|b| {
                    hs::ensure_dir(&self.dir)?;
                    hs::write_atomic(&self.dir, &hs::record_file_name(name), &b)
                })
        } else {
            Ok(())
        };
        agree(comm, local).map_err(|e| {
            crate::error::Error::new(e.kind, format!("publishing '{name}' in {}: {}", self.dir.display(), e.msg))
        })
    }

    /// Core rank 0: replaces a variable's record with a tombstone, so extras
    /// that join later fail at once instead of reading freed memory.
    fn withdraw(&self, name: &str, v: &Variable) -> Result<()> {
        // A ragged variable's index has a record of its own.
        let index = match &v.ragged {
            Some(r) => self.withdraw_one(&super::ragged::index_record_name(name), &r.index),
            None => Ok(()),
        };
        index.and(self.withdraw_one(name, v))
    }

    fn withdraw_one(&self, name: &str, v: &Variable) -> Result<()> {
        let rec = Record {
            state: hs::STATE_WITHDRAWN,
            session: self.session,
            written_ns: hs::now_ns(),
            name: name.to_string(),
            provider: String::new(),
            domain: String::new(),
            addr_format: 0,
            row_elems: v.row_elems,
            item_size: v.item_size,
            ranks: Vec::new(),
        };
        // Only replace our own record (a newer core may have re-published).
        let path = self.record_path(name);
        if let Ok(Some(b)) = hs::read_checked(&path) {
            let want = Expect { name: name.to_string(), n_core: self.n_core, provider: None, row: None };
            match hs::parse(&b, "", &want) {
                Ok(r) if r.session != self.session => return Ok(()),
                _ => {}
            }
        }
        hs::write_atomic(&self.dir, &hs::record_file_name(name), &hs::serialize(&rec)?)
    }

    /// Extra: the reader fabric, opened at the first join with the record's
    /// provider (unless one was named), checked against every later record.
    fn reader_for(&self, rec: &Record, what: &str) -> Result<Reader> {
        let mut slot = self.reader.lock();
        let fab = match slot.as_ref() {
            Some(f) => f.clone(),
            None => {
                let mut cfg = self.fcfg.clone();
                if cfg.provider.is_none() {
                    cfg.provider = Some(rec.provider.clone());
                    if cfg.iface.is_none() && cfg.nic_map.is_none() {
                        cfg.iface = Some(rec.domain.clone());
                    }
                }
                let f = Reader::open(&cfg)?;
                *slot = Some(f.clone());
                f
            }
        };
        if let Err(why) = fab.can_read(&rec.provider, rec.addr_format) {
            bail!(Fabric, "{what}: variable '{}': {why}", rec.name);
        }
        Ok(fab)
    }
}

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

    pub(super) fn is_extra(&self) -> bool {
        self.split.as_ref().is_some_and(|s| !s.is_core())
    }

    /// Fails on a method-2 extra member, which cannot publish or write.
    pub(super) fn refuse_extra(&self, what: &str, name: &str) -> Result<()> {
        if self.is_extra() {
            bail!(
                BadState,
                "cannot {what} '{name}': this store is a method-2 extra member, which only reads what the core job \
                 publishes (dds_join, dds_get, dds_get_batch)"
            );
        }
        Ok(())
    }

    /// Core side of registration: publish the record (collective).
    pub(super) fn publish_if_core(&self, name: &str, s: &Shape, layout: &Layout, t: &Transport) -> Result<()> {
        match &self.split {
            Some(sp) if sp.is_core() => sp.publish(&self.comm, name, s, layout, t),
            _ => Ok(()),
        }
    }

    /// Core rank 0, at destroy: withdraws every variable's record.
    pub(super) fn withdraw_all(&self) -> Result<()> {
        let Some(sp) = self.split.as_ref().filter(|s| s.is_core()) else { return Ok(()) };
        if self.comm.rank() != 0 {
            return Ok(());
        }
        let mut first = Ok(());
        for (name, v) in self.vars.read().iter() {
            if let Err(e) = sp.withdraw(name, v) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
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

    fn insert_joined(&self, name: &str, var: Variable, session: u64) -> Result<()> {
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
    fn join_var(&self, name: &str, record: &str, row: Option<(i64, i32)>) -> Result<(Variable, u64)> {
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

    /// Frees one variable. Core members (every method): collective; method 2
    /// withdraws its record first, methods 1/2 wait at a barrier so no core
    /// peer still reads. Extra members: local (forget a joined variable).
    pub fn remove(&self, name: Result<&str>) -> Result<()> {
        self.check_running()?;
        self.drain_requests();
        let mut vars = self.vars.write();
        if self.is_extra() {
            let name = name?;
            let Some(mut v) = vars.remove(name) else {
                bail!(UnknownVariable, "no variable named '{name}' in this store");
            };
            return v.free();
        }
        let shown = name.as_ref().map_or("", |n| *n);
        let local = name.and_then(|n| {
            if vars.contains_key(n) {
                Ok(n)
            } else {
                Err(err!(UnknownVariable, "no variable named '{n}' in this store"))
            }
        });
        let name = self.enter(Collective::Remove, shown, local)?;
        if let Some(sp) = self.split.as_ref().filter(|s| s.is_core()) {
            let local = if self.comm.rank() == 0 { sp.withdraw(name, &vars[name]) } else { Ok(()) };
            agree(&self.comm, local)?;
        }
        if self.network.peers_read_unannounced() {
            self.comm.barrier()?;
        }
        let mut v = vars.remove(name).expect("checked above");
        v.free()
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

    /// Method 2 core, collective: waits until `n` extra members have called
    /// `dds_extra_done` for this store, for at most `timeout_ms`
    /// milliseconds (negative: DDSTORE_HANDSHAKE_TIMEOUT_S).
    pub fn wait_extras(&self, n: i64, timeout_ms: i64) -> Result<()> {
        let local = if n < 0 { Err(err!(InvalidArgument, "n_extras {n} is negative")) } else { Ok((n, timeout_ms)) };
        self.wait_extras_checked(local)
    }

    /// `wait_extras` with this rank's argument check (or a binding's failure).
    pub(super) fn wait_extras_checked(&self, local: Result<(i64, i64)>) -> Result<()> {
        self.check_running()?;
        let sp = match &self.split {
            Some(sp) if sp.is_core() => sp,
            _ => bail!(BadState, "dds_wait_extras is only valid for method-2 core members"),
        };
        let (n, timeout_ms) = self.enter(Collective::WaitExtras, "", local)?;
        let limit = if timeout_ms < 0 { sp.timeout } else { Duration::from_millis(timeout_ms as u64) };
        let mut seen = 0;
        let res = hs::poll(limit, || {
            seen = hs::count_done(&sp.dir, sp.session)?;
            Ok((seen as i64 >= n).then_some(()))
        });
        let local = match res {
            Ok(Some(())) => Ok(()),
            Ok(None) => Err(err!(
                Timeout,
                "only {seen} of {n} extra member(s) announced they were done (dds_extra_done) in hand-shake \
                 directory {} within {:.1} s",
                sp.dir.display(),
                limit.as_secs_f64()
            )),
            Err(e) => Err(e),
        };
        agree(&self.comm, local)
    }
}
