//! Opening a store's fabric: the provider chosen (`select`), the fabric,
//! domain, address vector and serving endpoint opened, the serving
//! addresses exchanged and checked to name one provider, and the progress
//! thread started; or, for a method-2 extra member, a fabric with reader
//! endpoints only.

use std::ptr;
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;
use std::time::Duration;

use libfabric_sys::*;
use parking_lot::{Condvar, Mutex};

use super::domain::{Fabric, FabricConfig};
use super::endpoint::{Endpoint, MAX_NAME};
use super::fi_err;
use super::iface::IfaceOrigin;
use super::info::{dom_name, fab_name, hmem_entry, list_entries, query, MODE_LOCAL_MR};
use super::pool::{Pool, MAX_READERS, MAX_SLOTS};
use super::progress::{Progress, Wait};
use super::select::{self, Request};
use crate::error::{bail, err, Result};
use crate::gpu::direct::Caps;
use crate::mpi::{agree, Comm};

/// Fixed-size record of one rank's serving address, for the all-gather.
#[derive(Clone, Copy)]
#[repr(C)]
struct AddrRecord {
    len: u64,
    prov_fp: u64,
    bytes: [u8; MAX_NAME],
}

impl Default for AddrRecord {
    fn default() -> Self {
        AddrRecord { len: 0, prov_fp: 0, bytes: [0; MAX_NAME] }
    }
}

fn fingerprint(s: &str) -> u64 {
    crate::hash::fnv1a(s.as_bytes())
}

impl Fabric {
    /// Collective over `comm`: chooses the provider, opens the objects, and
    /// exchanges serving addresses. A failure on any rank fails every rank.
    pub fn open(comm: &Comm, cfg: &FabricConfig) -> Result<Fabric> {
        let single_node = comm.single_node()?;
        let req = Fabric::request(cfg, single_node);
        let req = if single_node { req } else { Ok(Fabric::agree_iface(comm, req)?) };
        let local = req.and_then(|(req, origin)| Fabric::open_local(comm.rank(), comm.size(), cfg, req, origin, true));
        let mut fab = agree(comm, local)?;

        // Every rank must have chosen the same provider.
        let name = fab.server.as_ref().unwrap().name();
        let mut rec = AddrRecord { prov_fp: fingerprint(&fab.prov), ..Default::default() };
        if let Ok(n) = &name {
            rec.len = n.len() as u64;
            rec.bytes[..n.len()].copy_from_slice(n);
        }
        let name_ok = agree(comm, name.map(|_| ()));
        let all = comm.allgather(&rec)?;
        name_ok?;
        if let Some(r) = all.iter().position(|x| x.prov_fp != all[0].prov_fp) {
            bail!(
                Fabric,
                "ranks chose different libfabric providers (rank 0 and rank {r}; this rank: {}@{}); \
                 set DDSTORE_FABRIC and FABRIC_IFACE to the same values on every rank",
                fab.prov,
                fab.domain_name
            );
        }
        // SAFETY: the address vector is open.
        let inserted = unsafe { fab.insert_peers(&all) };
        agree(comm, inserted)?;
        fab.names = all.iter().map(|r| r.bytes[..r.len as usize].to_vec()).collect();
        let server_cq = fab.server.as_ref().unwrap().cq;
        let wait = if fab.server_blocking() {
            let mut fd: i32 = -1;
            // SAFETY: the CQ is open; FI_GETWAIT writes an int for FI_WAIT_FD.
            let got = unsafe { ddsfi_control(server_cq as *mut fid, FI_GETWAIT as i32, (&mut fd as *mut i32).cast()) };
            if got == 0 && fd >= 0 {
                Wait::Fd { fabric: fab.fabric, fd }
            } else {
                Wait::Sread
            }
        } else {
            Wait::Poll(Duration::from_micros(cfg.progress_sleep_us))
        };
        let started =
            Progress::start(server_cq, wait).map_err(|e| err!(Internal, "cannot start the progress thread: {e}"));
        fab.progress = Some(agree(comm, started)?);
        Ok(fab)
    }

    fn server_blocking(&self) -> bool {
        !self.prov.eq_ignore_ascii_case("shm")
    }

    /// Method 2 extra member: a fabric with reader endpoints only (no
    /// serving endpoint, no progress thread, no peers until a join). Local.
    pub fn open_reader(cfg: &FabricConfig) -> Result<Fabric> {
        let (req, origin) = Fabric::request(cfg, false)?;
        Fabric::open_local(usize::MAX, 64, cfg, req, origin, false)
    }

    fn open_local(
        rank: usize,
        n_peers: usize,
        cfg: &FabricConfig,
        req: Request,
        iface_origin: IfaceOrigin,
        serve: bool,
    ) -> Result<Fabric> {
        // SAFETY: the info list is walked read-only and freed once.
        unsafe {
            let list = query(false)?;
            let (infos, cands): (Vec<_>, Vec<_>) = list_entries(list).into_iter().unzip();
            // The provider is chosen without FI_HMEM (asking for it hides
            // providers that lack it); its FI_HMEM entry, if any, is used.
            let chosen = select::choose(&cands, &req);
            let info = chosen.as_ref().ok().map(|&i| {
                let ask = cfg.hmem && (cands[i].0 != "shm" || cfg.hmem_shm);
                let hmem = if ask { hmem_entry(&cands[i]) } else { ptr::null_mut() };
                if hmem.is_null() {
                    ddsfi_dupinfo(infos[i])
                } else {
                    hmem
                }
            });
            ddsfi_freeinfo(list);
            let i = chosen.map_err(|m| err!(Fabric, "{m}"))?;
            let info = info.filter(|p| !p.is_null()).ok_or_else(|| err!(NoMemory, "fi_dupinfo failed"))?;
            let (prov, domain_name) = cands[i].clone();
            // Default operation flags may include FI_INJECT (cxi), which
            // would cap reads at the inject size: reads use no default flags.
            (*(*info).tx_attr).op_flags = 0;
            let mr_mode = (*(*info).domain_attr).mr_mode;
            let need_local = mr_mode & FI_MR_LOCAL != 0 || (*info).mode & MODE_LOCAL_MR != 0 || cfg.force_local_mr;
            let max_msg = (*(*info).ep_attr).max_msg_size as u64;
            let max_piece = cfg.max_read_bytes.min(if max_msg > 0 { max_msg } else { u64::MAX }).max(1);
            let tx_size = (*(*info).tx_attr).size;
            let caps =
                Caps { hmem: (*info).caps & FI_HMEM != 0, mr_hmem: mr_mode & FI_MR_HMEM != 0, mr_local: need_local };
            let mut fab = Fabric {
                prov,
                domain_name,
                iface_origin,
                mr_mode,
                caps,
                device_mr_refused: OnceLock::new(),
                need_local,
                max_piece,
                read_timeout: (cfg.read_timeout_s > 0.0).then(|| Duration::from_secs_f64(cfg.read_timeout_s)),
                peers: Vec::new(),
                names: Vec::new(),
                addr_format: (*info).addr_format,
                known: Mutex::new(Default::default()),
                rank,
                info,
                fabric: ptr::null_mut(),
                domain: ptr::null_mut(),
                av: ptr::null_mut(),
                server: None,
                progress: None,
                pool: Mutex::new(Pool { idle: Vec::new(), count: 0 }),
                pool_cv: Condvar::new(),
                max_readers: if mr_mode & FI_MR_ENDPOINT != 0 { 1 } else { MAX_READERS },
                slots: if tx_size == 0 { MAX_SLOTS } else { tx_size.min(MAX_SLOTS) },
                next_key: AtomicU64::new(1),
            };
            let what = |e: crate::error::Error| {
                err!(Fabric, "libfabric provider {}@{}: {}", fab_name(info), dom_name(info), e.msg)
            };
            fi_err(ddsfi_fabric((*info).fabric_attr, &mut fab.fabric, ptr::null_mut()) as isize, "fi_fabric")
                .map_err(what)?;
            fi_err(ddsfi_domain(fab.fabric, info, &mut fab.domain, ptr::null_mut()) as isize, "fi_domain")
                .map_err(what)?;
            let mut av_attr = fi_av_attr { type_: FI_AV_TABLE, count: n_peers, ..Default::default() };
            fi_err(ddsfi_av_open(fab.domain, &mut av_attr, &mut fab.av, ptr::null_mut()) as isize, "fi_av_open")
                .map_err(what)?;
            if serve {
                let server = if fab.server_blocking() {
                    Endpoint::open(fab.domain, info, fab.av, FI_WAIT_FD, 64)
                        .or_else(|_| Endpoint::open(fab.domain, info, fab.av, FI_WAIT_UNSPEC, 64))
                        .or_else(|_| Endpoint::open(fab.domain, info, fab.av, FI_WAIT_NONE, 64))
                } else {
                    Endpoint::open(fab.domain, info, fab.av, FI_WAIT_NONE, 64)
                };
                fab.server = Some(server.map_err(what)?);
            }
            // No reader endpoint yet: the first read through the fabric opens
            // one (pool.rs). A store whose reads are all node-local never
            // does, and saves its memory (with shm a 16 MiB region, ~5 MiB of
            // it touched, and ~5 ms; docs/fabric.md, "Memory").
            Ok(fab)
        }
    }

    unsafe fn insert_peers(&mut self, all: &[AddrRecord]) -> Result<()> {
        // One insert per peer: address lengths may differ between ranks (shm
        // names vary from 19 to 21 bytes), and a batched fi_av_insert reads
        // every address with the length of the first.
        let mut addrs = vec![addr_unspec(); all.len()];
        for (r, rec) in all.iter().enumerate() {
            let n = ddsfi_av_insert(self.av, rec.bytes.as_ptr().cast(), 1, &mut addrs[r], 0, ptr::null_mut());
            if n != 1 {
                bail!(Fabric, "fi_av_insert of rank {r}'s endpoint address ({} bytes) failed ({})", rec.len, errstr(n));
            }
        }
        self.peers = addrs;
        Ok(())
    }
}
