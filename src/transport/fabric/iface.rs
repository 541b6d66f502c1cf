//! Which network interface a store's fabric uses: from FABRIC_IFACE, the
//! NIC map, or agreed across nodes (an address that differs between them).

use libfabric_sys::*;

use super::domain::{Fabric, FabricConfig};
use super::iface_choice::{choose_iface, link_local, shared_addresses, Seen};
use super::info::{ip_of, list_entries, query};
use super::nic_map;
use super::select::{self, Request};
use crate::error::{err, Result};
use crate::mpi::{agree, Comm};

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
impl Fabric {
    /// The request from the options and environment (local).
    pub(super) fn request(cfg: &FabricConfig, single_node: bool) -> Result<(Request, IfaceOrigin)> {
        let mut origin = if cfg.iface.is_some() { IfaceOrigin::Named } else { IfaceOrigin::Provider };
        let mut iface = cfg.iface.clone();
        if iface.is_none() {
            if let Some(map) = &cfg.nic_map {
                let parsed = nic_map::parse_nic_map(map).map_err(|e| err!(InvalidArgument, "{e}"))?;
                iface = nic_map::nic_for_affinity(&parsed, &nic_map::affinity());
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
    pub(super) fn agree_iface(comm: &Comm, local: Result<(Request, IfaceOrigin)>) -> Result<(Request, IfaceOrigin)> {
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
        let all: Vec<Seen> = comm
            .allgather(&rec)?
            .iter()
            .map(|r| Seen {
                choose: r.choose != 0,
                node: r.node,
                entries: r.entries[..(r.len as usize).min(MAX_SEEN)].to_vec(),
            })
            .collect();
        let mine = match choose_iface(&all) {
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
                let shared = shared_addresses(&all);
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
                    if let Some(a) = a.filter(|a| *p == prov && !link_local(a)) {
                        if !entries.contains(&(d.clone(), a)) {
                            entries.push((d.clone(), a));
                        }
                    }
                }
            }
            Ok(Probe { req, origin, prov, entries })
        }
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
