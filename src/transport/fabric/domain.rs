//! One store's libfabric objects: fabric, domain, address vector, the
//! serving endpoint and its progress thread, and a pool of reader endpoints.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use libfabric_sys::*;
use parking_lot::{Condvar, Mutex};

use super::endpoint::{Endpoint, MAX_NAME};
use super::fi_err;
use super::progress::{Progress, Wait};
use super::select::{self, Request};
use crate::error::{bail, err, Result};
use crate::gpu::direct::Caps;
use crate::mpi::{agree, Comm};

/// Reader endpoints per store when the provider allows several.
const MAX_READERS: usize = 4;
/// Reads in flight per reader endpoint (bounded by the provider's queue).
const MAX_SLOTS: usize = 256;

/// What `Fabric::open` needs from the store's options and environment.
#[derive(Clone, Debug, Default)]
pub struct FabricConfig {
    pub provider: Option<String>,
    pub iface: Option<String>,
    pub nic_map: Option<String>,
    pub max_read_bytes: u64,
    pub read_timeout_s: f64,
    /// Register destinations even when the provider does not need it
    /// (`DDSTORE_TEST_FABRIC_LOCAL_MR=1`, a testing aid for the FI_MR_LOCAL path).
    pub force_local_mr: bool,
    /// `DDSTORE_PROGRESS_SLEEP_US`: sleep between polls of a serving CQ
    /// without a wait object (shm).
    pub progress_sleep_us: u64,
    /// Ask for FI_HMEM (GPU support on and GPUDirect not off): the chosen
    /// provider's domain is opened with it when that provider offers it.
    pub hmem: bool,
}

/// A reader endpoint with its operation contexts. Slot i's context is
/// `ctx[i]`; a completion's context pointer gives back the slot.
pub struct Reader {
    pub ep: Endpoint,
    pub ctx: Vec<fi_context2>,
    pub free: Vec<u32>,
    /// Owner rank and length of the read in each busy slot.
    pub slot_owner: Vec<u32>,
    pub slot_len: Vec<usize>,
}

impl Reader {
    pub fn slot_of(&self, ctx: *mut std::os::raw::c_void) -> Option<usize> {
        let base = self.ctx.as_ptr() as usize;
        let off = (ctx as usize).checked_sub(base)?;
        let i = off / std::mem::size_of::<fi_context2>();
        (off % std::mem::size_of::<fi_context2>() == 0 && i < self.ctx.len()).then_some(i)
    }
}

struct Pool {
    idle: Vec<Reader>,
    count: usize,
}

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

/// How the domain's interface came to be chosen (named in messages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IfaceOrigin {
    /// The provider's first domain (one node, or a provider without
    /// interfaces).
    #[default]
    Provider,
    /// `FABRIC_IFACE` or `dds_options.fabric_iface`.
    Named,
    /// `DDSTORE_NIC_MAP` / `dds_options.nic_map`.
    NicMap,
    /// Agreed across nodes: its address differs between nodes.
    Agreed,
}

/// Candidates one rank contributes to the interface agreement (at most
/// MAX_SEEN `(interface, address)` fingerprints, in the provider's order).
const MAX_SEEN: usize = 32;

#[derive(Clone, Copy, Default)]
#[repr(C)]
struct SeenRecord {
    choose: u64,
    node: u64,
    len: u64,
    entries: [(u64, u64); MAX_SEEN],
}

/// What one rank found before the agreement: its request and the
/// `(interface, address)` pairs of the provider it would take.
struct Probe {
    req: Request,
    origin: IfaceOrigin,
    prov: String,
    entries: Vec<(String, std::net::IpAddr)>,
}

pub struct Fabric {
    pub(super) prov: String,
    pub(super) domain_name: String,
    pub(super) iface_origin: IfaceOrigin,
    pub mr_mode: i32,
    /// FI_HMEM and the mode bits GPUDirect follows (gpu/direct.rs).
    pub caps: Caps,
    /// Destinations need a registration and a local descriptor.
    pub need_local: bool,
    /// Largest single read.
    pub max_piece: u64,
    pub read_timeout: Option<Duration>,
    /// fi_addr_t of each rank's serving endpoint, by store rank.
    pub peers: Vec<fi_addr_t>,
    /// Raw serving-endpoint address of each rank (method 2 records).
    pub(super) names: Vec<Vec<u8>>,
    /// `fi_info.addr_format` of the chosen provider.
    pub(super) addr_format: u32,
    /// Addresses inserted for joined method-2 variables (extra members).
    known: Mutex<std::collections::HashMap<Vec<u8>, fi_addr_t>>,
    pub rank: usize,
    info: *mut fi_info,
    fabric: *mut fid_fabric,
    pub(super) domain: *mut fid_domain,
    av: *mut fid_av,
    server: Option<Endpoint>,
    progress: Option<Progress>,
    pool: Mutex<Pool>,
    pool_cv: Condvar,
    max_readers: usize,
    slots: usize,
    next_key: AtomicU64,
}

// SAFETY: FI_THREAD_SAFE domain; mutable state is behind locks or atomics.
unsafe impl Send for Fabric {}
unsafe impl Sync for Fabric {}

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libfabric strings are NUL-terminated.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn fingerprint(s: &str) -> u64 {
    crate::hash::fnv1a(s.as_bytes())
}

/// Mode bits that libfabric 2.x headers may no longer define (values from
/// the 1.x `fabric.h`, unchanged in the ABI).
const MODE_CONTEXT: u64 = 1 << 59;
const MODE_LOCAL_MR: u64 = 1 << 55;

/// `fi_getinfo` for RDM endpoints with RMA read, thread-safe domains, and
/// with `hmem` FI_HMEM (and FI_MR_HMEM among the mode bits we handle).
/// Returns the list head (caller frees) or the error.
unsafe fn query(hmem: bool) -> Result<*mut fi_info> {
    let hints = ddsfi_allocinfo();
    if hints.is_null() {
        bail!(NoMemory, "fi_allocinfo failed");
    }
    (*hints).caps = FI_RMA | FI_READ | FI_REMOTE_READ | if hmem { FI_HMEM } else { 0 };
    (*hints).mode = MODE_CONTEXT | FI_CONTEXT2 | MODE_LOCAL_MR;
    (*(*hints).ep_attr).type_ = FI_EP_RDM;
    (*(*hints).domain_attr).mr_mode = FI_MR_LOCAL
        | FI_MR_VIRT_ADDR
        | FI_MR_ALLOCATED
        | FI_MR_PROV_KEY
        | FI_MR_ENDPOINT
        | if hmem { FI_MR_HMEM } else { 0 };
    (*(*hints).domain_attr).threading = FI_THREAD_SAFE;
    let mut info = ptr::null_mut();
    let ret = ddsfi_getinfo(ddsfi_header_version(), ptr::null(), ptr::null(), 0, hints, &mut info);
    ddsfi_freeinfo(hints);
    if ret == -(FI_ENODATA as i32) {
        return Ok(ptr::null_mut());
    }
    fi_err(ret as isize, "fi_getinfo")?;
    Ok(info)
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

    /// The request from the options and environment (local).
    fn request(cfg: &FabricConfig, single_node: bool) -> Result<(Request, IfaceOrigin)> {
        let mut origin = if cfg.iface.is_some() { IfaceOrigin::Named } else { IfaceOrigin::Provider };
        let mut iface = cfg.iface.clone();
        if iface.is_none() {
            if let Some(map) = &cfg.nic_map {
                let parsed = select::parse_nic_map(map).map_err(|e| err!(InvalidArgument, "{e}"))?;
                iface = select::nic_for_affinity(&parsed, &select::affinity());
                if iface.is_some() {
                    origin = IfaceOrigin::NicMap;
                }
            }
        }
        Ok((Request { provider: cfg.provider.clone(), iface, single_node }, origin))
    }

    /// Collective, ranks on several nodes: every rank gathers the others'
    /// `(interface, address)` candidates and node, and the ranks that named
    /// no interface take one whose address is held by no other node (an
    /// interface with the same address on several nodes, such as a container
    /// bridge, reaches none of them). None on some rank fails every rank.
    /// The result is the same on every rank (an error already agreed).
    fn agree_iface(comm: &Comm, local: Result<(Request, IfaceOrigin)>) -> Result<(Request, IfaceOrigin)> {
        let probe = agree(comm, local.and_then(|(req, origin)| Fabric::probe(req, origin)))?;
        // The node: the lowest rank of this rank's shared-memory domain.
        let node = {
            let shared = comm.split_shared()?;
            let mut b = (comm.rank() as u64).to_le_bytes();
            shared.bcast(&mut b, 0)?;
            u64::from_le_bytes(b)
        };
        let fp = |s: &str| crate::hash::fnv1a(s.as_bytes());
        let choose = probe.origin == IfaceOrigin::Provider && !probe.entries.is_empty();
        let mut rec = SeenRecord { choose: choose as u64, node, ..Default::default() };
        for (k, (i, a)) in probe.entries.iter().take(MAX_SEEN).enumerate() {
            rec.entries[k] = (fp(i), fp(&a.to_string()));
            rec.len = k as u64 + 1;
        }
        let all: Vec<select::Seen> = comm
            .allgather(&rec)?
            .iter()
            .map(|r| select::Seen {
                choose: r.choose != 0,
                node: r.node,
                entries: r.entries[..(r.len as usize).min(MAX_SEEN)].to_vec(),
            })
            .collect();
        let mine = match select::choose_iface(&all) {
            Ok(got) => {
                let Probe { mut req, mut origin, prov, entries } = probe;
                if let Some(f) = got[comm.rank()] {
                    req.iface = entries.iter().find(|(i, _)| fp(i) == f).map(|(i, _)| i.clone());
                    req.provider = Some(prov);
                    origin = IfaceOrigin::Agreed;
                }
                Ok((req, origin))
            }
            Err(ranks) if ranks.contains(&comm.rank()) => {
                let shared = select::shared_addresses(&all);
                // Each interface once, with its addresses held elsewhere too.
                let mut dup: Vec<(String, Vec<String>)> = Vec::new();
                for (i, a) in probe.entries.iter().filter(|(_, a)| shared.contains(&fp(&a.to_string()))) {
                    match dup.iter_mut().find(|d| d.0 == *i) {
                        Some(d) => d.1.push(a.to_string()),
                        None => dup.push((i.clone(), vec![a.to_string()])),
                    }
                }
                let dup: Vec<String> = dup.iter().map(|(i, a)| format!("{i} ({})", a.join(", "))).collect();
                let nodes = {
                    let mut n: Vec<u64> = all.iter().map(|s| s.node).collect();
                    n.sort();
                    n.dedup();
                    n.len()
                };
                Err(err!(
                    Fabric,
                    "no network interface of libfabric provider {} on host {} has an address that differs between \
                     the store's {nodes} nodes: {} carry the same address on several nodes and reach no other \
                     node (a container or VM bridge like docker0 or virbr0, or loopback); set FABRIC_IFACE to the \
                     interface that connects the nodes",
                    probe.prov,
                    host_name(),
                    if dup.is_empty() { "its interfaces".to_string() } else { dup.join(", ") }
                ))
            }
            Err(_) => Ok((probe.req, probe.origin)),
        };
        agree(comm, mine)
    }

    /// Local: the provider the request leads to (without an interface
    /// agreement) and the `(interface, address)` of its domains that carry
    /// IP addresses, link-local ones left out.
    fn probe(req: Request, origin: IfaceOrigin) -> Result<Probe> {
        // SAFETY: the info list is walked read-only and freed once.
        unsafe {
            let list = query(false)?;
            let (cands, addrs): (Vec<_>, Vec<_>) = list_entries(list).into_iter().map(|(p, c)| (c, ip_of(p))).unzip();
            if !list.is_null() {
                ddsfi_freeinfo(list);
            }
            let i = select::choose(&cands, &req).map_err(|m| err!(Fabric, "{m}"))?;
            let prov = cands[i].0.clone();
            let mut entries: Vec<(String, std::net::IpAddr)> = Vec::new();
            if select::iface_applies(&prov) {
                for ((p, d), a) in cands.iter().zip(&addrs) {
                    if let Some(a) = a.filter(|a| *p == prov && !select::link_local(a)) {
                        if !entries.contains(&(d.clone(), a)) {
                            entries.push((d.clone(), a));
                        }
                    }
                }
            }
            Ok(Probe { req, origin, prov, entries })
        }
    }

    /// Inserts raw endpoint addresses into the address vector (each distinct
    /// address once) and returns their fi_addr_t, in order.
    pub fn insert_names(&self, names: &[Vec<u8>]) -> Result<Vec<fi_addr_t>> {
        let mut known = self.known.lock();
        let mut out = Vec::with_capacity(names.len());
        for (r, n) in names.iter().enumerate() {
            if let Some(&a) = known.get(n) {
                out.push(a);
                continue;
            }
            let mut a = addr_unspec();
            // SAFETY: the address vector is open; n holds one address.
            let got = unsafe { ddsfi_av_insert(self.av, n.as_ptr().cast(), 1, &mut a, 0, ptr::null_mut()) };
            if got != 1 {
                bail!(
                    Fabric,
                    "fi_av_insert of core rank {r}'s address ({} bytes) failed on {} ({})",
                    n.len(),
                    self.describe(),
                    errstr(got)
                );
            }
            known.insert(n.clone(), a);
            out.push(a);
        }
        Ok(out)
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
                let hmem = if cfg.hmem { hmem_entry(&cands[i]) } else { ptr::null_mut() };
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
            // One reader now (endpoints are slow to open); more on demand.
            let r = fab.new_reader().map_err(what)?;
            fab.pool.get_mut().idle.push(r);
            fab.pool.get_mut().count = 1;
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

    /// A fresh, unique key for a registration (providers without FI_MR_PROV_KEY).
    pub fn next_key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    /// The endpoint MRs are bound to when the provider wants FI_MR_ENDPOINT
    /// (the serving endpoint; with that mode the pool has one reader, and
    /// local MRs are bound to the serving endpoint too only if the provider
    /// allows it; untested here, no provider on this machine sets it).
    pub fn bind_ep(&self) -> *mut fid_ep {
        self.server.as_ref().map_or(ptr::null_mut(), |s| s.ep)
    }

    fn new_reader(&self) -> Result<Reader> {
        // SAFETY: open objects of this domain.
        let ep = unsafe { Endpoint::open(self.domain, self.info, self.av, FI_WAIT_NONE, self.slots * 2) }?;
        Ok(Reader {
            ep,
            ctx: vec![fi_context2::default(); self.slots],
            free: (0..self.slots as u32).rev().collect(),
            slot_owner: vec![0; self.slots],
            slot_len: vec![0; self.slots],
        })
    }

    /// Takes a reader endpoint for the calling thread: an idle one, a new one
    /// while the pool is below its size, or waits for one.
    pub fn acquire(&self) -> Result<Reader> {
        let mut pool = self.pool.lock();
        loop {
            if let Some(r) = pool.idle.pop() {
                return Ok(r);
            }
            if pool.count < self.max_readers {
                pool.count += 1;
                drop(pool);
                let r = self.new_reader();
                if r.is_err() {
                    self.pool.lock().count -= 1;
                    self.pool_cv.notify_one();
                }
                return r;
            }
            self.pool_cv.wait(&mut pool);
        }
    }

    /// Returns a reader; `healthy` false closes it (reads may still be in
    /// flight on it: closing the endpoint cancels them).
    pub fn release(&self, r: Reader, healthy: bool) {
        let mut pool = self.pool.lock();
        if healthy {
            pool.idle.push(r);
        } else {
            pool.count -= 1;
            drop(pool);
            drop(r);
        }
        self.pool_cv.notify_one();
    }

    /// `fabric:<provider>@<domain>`, `+hmem` when opened with FI_HMEM.
    /// The provider, as `fi_info` names it.
    pub fn provider(&self) -> &str {
        &self.prov
    }

    /// What a method-2 record says about the fabric serving a variable:
    /// provider, domain and address format.
    pub fn identity(&self) -> (String, String, u32) {
        (self.prov.clone(), self.domain_name.clone(), self.addr_format)
    }

    /// The raw address of store rank `r`'s serving endpoint (method-2 records).
    pub fn address(&self, r: usize) -> &[u8] {
        &self.names[r]
    }

    /// Whether this reader fabric can read a variable served with
    /// `provider` and addresses of `addr_format` (a method-2 record's); the
    /// reason otherwise.
    pub fn can_read(&self, provider: &str, addr_format: u32) -> std::result::Result<(), String> {
        if !select::provider_matches(&select::normalize_provider(provider), &self.prov) {
            return Err(format!(
                "it is served by libfabric provider '{provider}', but this extra member reads with '{}'",
                self.prov
            ));
        }
        if addr_format != self.addr_format {
            return Err(format!(
                "it has addresses of format {addr_format}, but this extra member's provider {} uses format {}",
                self.describe(),
                self.addr_format
            ));
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        format!("fabric:{}@{}{}", self.prov, self.domain_name, if self.caps.hmem { "+hmem" } else { "" })
    }

    /// Why reads may not complete, for the read-timeout message: the
    /// interface in use and how it was chosen, when the provider has one.
    pub fn stall_hint(&self) -> String {
        if !select::iface_applies(&self.prov) {
            return "peer gone or not progressing".to_string();
        }
        let how = match self.iface_origin {
            IfaceOrigin::Named => "named by FABRIC_IFACE or options.fabric_iface",
            IfaceOrigin::NicMap => "chosen by the NIC map",
            IfaceOrigin::Agreed => "chosen as one whose address differs between nodes",
            IfaceOrigin::Provider => "the provider's first; FABRIC_IFACE unset",
        };
        format!(
            "peer gone or not progressing, or interface {d} ({how}) does not reach it, e.g. a container or \
             VM bridge or a network the peer is not on; set FABRIC_IFACE to an interface that connects the nodes",
            d = self.domain_name
        )
    }
}

/// The IP address of an `fi_info` entry's source address, if it has one.
unsafe fn ip_of(info: *const fi_info) -> Option<std::net::IpAddr> {
    let (a, len) = ((*info).src_addr as *const u8, (*info).src_addrlen);
    if a.is_null() || len < std::mem::size_of::<libc::sockaddr_in>() {
        return None;
    }
    let family = match (*info).addr_format {
        FI_SOCKADDR_IN => libc::AF_INET,
        FI_SOCKADDR_IN6 => libc::AF_INET6,
        FI_SOCKADDR => (*(a as *const libc::sockaddr)).sa_family as i32,
        _ => return None,
    };
    // Unaligned reads: src_addr is only byte-aligned by contract.
    if family == libc::AF_INET {
        let s: libc::sockaddr_in = ptr::read_unaligned(a.cast());
        Some(std::net::Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)).into())
    } else if family == libc::AF_INET6 && len >= std::mem::size_of::<libc::sockaddr_in6>() {
        let s: libc::sockaddr_in6 = ptr::read_unaligned(a.cast());
        Some(std::net::Ipv6Addr::from(s.sin6_addr.s6_addr).into())
    } else {
        None
    }
}

/// This host's name, for messages.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf holds its length.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "?".to_string()
    }
}

/// The entries of an `fi_getinfo` list (empty for a null list), each with
/// its `(provider, domain)` names, the key a provider is chosen by.
unsafe fn list_entries(list: *mut fi_info) -> Vec<(*mut fi_info, (String, String))> {
    let mut out = Vec::new();
    let mut p = list;
    while !p.is_null() {
        out.push((p, (cstr((*(*p).fabric_attr).prov_name), cstr((*(*p).domain_attr).name))));
        p = (*p).next;
    }
    out
}

/// A copy of the FI_HMEM entry of `(provider, domain)`, or null (none, or
/// the query failed: the plain entry is used then).
unsafe fn hmem_entry(want: &(String, String)) -> *mut fi_info {
    let Ok(list) = query(true) else { return ptr::null_mut() };
    let out = list_entries(list)
        .into_iter()
        .find(|(p, names)| (**p).caps & FI_HMEM != 0 && names == want)
        .map_or(ptr::null_mut(), |(p, _)| ddsfi_dupinfo(p));
    if !list.is_null() {
        ddsfi_freeinfo(list);
    }
    out
}

unsafe fn fab_name(info: *mut fi_info) -> String {
    cstr((*(*info).fabric_attr).prov_name)
}

unsafe fn dom_name(info: *mut fi_info) -> String {
    cstr((*(*info).domain_attr).name)
}

impl Drop for Fabric {
    fn drop(&mut self) {
        if let Some(mut p) = self.progress.take() {
            p.stop();
        }
        self.pool.get_mut().idle.clear();
        self.server = None;
        // SAFETY: everything opened on the domain is closed above (MRs are
        // owned by variables, which hold this fabric alive until they drop).
        unsafe {
            if !self.av.is_null() {
                ddsfi_close(self.av.cast());
            }
            if !self.domain.is_null() {
                ddsfi_close(self.domain.cast());
            }
            if !self.fabric.is_null() {
                ddsfi_close(self.fabric.cast());
            }
            if !self.info.is_null() {
                ddsfi_freeinfo(self.info);
            }
        }
    }
}
