//! One store's libfabric objects: fabric, domain, address vector and the
//! serving endpoint with its progress thread, and what an opened fabric
//! answers (its provider, addresses, capabilities, messages). How it is
//! opened (the provider chosen, the objects opened, the serving addresses
//! exchanged) is in `open`, the reader endpoints in `pool`, the interface
//! choice across nodes in `iface`, the `fi_getinfo` queries in `info`.

use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use libfabric_sys::*;
use parking_lot::{Condvar, Mutex};

use super::endpoint::Endpoint;
use super::iface::IfaceOrigin;
use super::pool::Pool;
use super::progress::Progress;
use super::select;
use crate::error::{bail, Result};
use crate::gpu::direct::Caps;

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
    /// Ask `shm` too (GPUDirect forced, or the testing aid). Opened with
    /// FI_HMEM, libfabric 1.17's shm serves host rows through the owner's
    /// progress instead of CMA: a batch of 16 x 3 KiB took 3.9 ms instead of
    /// 8 us here and 16.6 ms on an H200 node, and Debian's and PyPI MPICH's
    /// libfabric builds cannot register CUDA memory anyway.
    pub hmem_shm: bool,
}

pub struct Fabric {
    pub(super) prov: String,
    pub(super) domain_name: String,
    pub(super) iface_origin: IfaceOrigin,
    pub mr_mode: i32,
    /// FI_HMEM and the mode bits GPUDirect follows (gpu/direct.rs).
    pub caps: Caps,
    /// The provider's answer when it refused a device-memory registration
    /// with FI_ENOSYS: it reports FI_HMEM, but this libfabric was built
    /// without that interface (Debian's 1.17 and CUDA), so device buffers
    /// are staged from then on instead of failing on every read.
    pub device_mr_refused: OnceLock<String>,
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
    pub(super) known: Mutex<std::collections::HashMap<Vec<u8>, fi_addr_t>>,
    pub rank: usize,
    pub(super) info: *mut fi_info,
    pub(super) fabric: *mut fid_fabric,
    pub(super) domain: *mut fid_domain,
    pub(super) av: *mut fid_av,
    pub(super) server: Option<Endpoint>,
    pub(super) progress: Option<Progress>,
    pub(super) pool: Mutex<Pool>,
    pub(super) pool_cv: Condvar,
    pub(super) max_readers: usize,
    pub(super) slots: usize,
    pub(super) next_key: AtomicU64,
}

// SAFETY: FI_THREAD_SAFE domain; mutable state is behind locks or atomics.
unsafe impl Send for Fabric {}
unsafe impl Sync for Fabric {}

impl Fabric {
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

    /// The capabilities device buffers are routed by: `caps` less FI_HMEM
    /// once the provider has refused device memory (`device_mr_refused`).
    pub fn device_caps(&self) -> Caps {
        let mut c = self.caps;
        if self.device_mr_refused.get().is_some() {
            c.hmem = false;
            c.mr_hmem = false;
        }
        c
    }

    /// `fabric:<provider>@<domain>`, `+hmem` when opened with FI_HMEM.
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
