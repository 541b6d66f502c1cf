//! Method 2 (split jobs) on the store: the core side publishes a record per
//! variable and withdraws it when the variable is freed, and waits for
//! extras to be done; remove. Extra members (split_extra.rs) create a store
//! without a communicator, join records and read over the fabric exactly as
//! method 1 does. The file format lives in `handshake`.
//!
//! A child module of `store`, so it sees the store's fields.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use parking_lot::Mutex;

use super::{Collective, Options, Shape, Store};
use crate::config::Config;
use crate::error::{bail, err, Result};
use crate::handshake::{self as hs, Expect, Published, Record};
use crate::layout::Layout;
use crate::mpi::{agree, Comm};
use crate::transport::{FabricConfig, Reader, Transport};
use crate::var::Variable;

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
    pub(super) fcfg: FabricConfig,
    /// Extra: the reader fabric (opened by the first join).
    pub(super) reader: Mutex<Option<Reader>>,
    /// Extra: sessions of the core stores joined (for dds_extra_done).
    pub(super) sessions: Mutex<BTreeSet<u64>>,
    /// Extra: distinguishes this process's stores in done-file names.
    pub(super) seq: u64,
}

pub(super) static EXTRA_SEQ: AtomicU64 = AtomicU64::new(0);

pub(super) fn dir_of(o: &Options, cfg: &Config) -> PathBuf {
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

    pub(super) fn is_core(&self) -> bool {
        self.role == Role::Core
    }

    pub(super) fn record_path(&self, name: &str) -> PathBuf {
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
    pub(super) fn reader_for(&self, rec: &Record, what: &str) -> Result<Reader> {
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
