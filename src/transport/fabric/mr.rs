//! Memory registrations: a variable's shard (remote read only) and read
//! destinations (local, only when the provider needs local descriptors).

use std::os::raw::c_void;
use std::ptr;
use std::sync::Arc;

use libfabric_sys::*;
use parking_lot::Mutex;

use super::domain::Fabric;
use super::fi_err;
use crate::error::Result;
use crate::gpu::direct::Iface;

pub struct Mr {
    raw: *mut fid_mr,
}

/// Access a shard is registered with: peers may read it, never write it
/// (tests/remote_access.rs checks that providers refuse a remote write).
pub const SHARD_ACCESS: u64 = FI_REMOTE_READ;

// SAFETY: an MR is immutable after registration; FI_THREAD_SAFE domain.
unsafe impl Send for Mr {}
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers `len` bytes at `buf` with `access`, following the domain's
    /// MR mode (requested unique key unless the provider chooses keys; bind
    /// and enable on `bind_ep` for FI_MR_ENDPOINT).
    pub fn register(fab: &Fabric, buf: *const u8, len: usize, access: u64, bind_ep: *mut fid_ep) -> Result<Mr> {
        Mr::register_as(fab, buf, len, access, bind_ep, None)
    }

    /// `register`, through `fi_mr_regattr` naming the memory's interface
    /// and device when `hmem` is given (GPUDirect: FI_HMEM_CUDA / _ROCR
    /// device memory, or FI_HMEM_SYSTEM host memory), else `fi_mr_reg`.
    pub fn register_as(
        fab: &Fabric,
        buf: *const u8,
        len: usize,
        access: u64,
        bind_ep: *mut fid_ep,
        hmem: Option<(Iface, i32)>,
    ) -> Result<Mr> {
        let key = if fab.mr_mode & FI_MR_PROV_KEY != 0 { 0 } else { fab.next_key() };
        let mut raw = ptr::null_mut();
        // SAFETY: buf covers len bytes and outlives the registration (owners
        // close the MR before freeing the memory); attr and iov live across the call.
        unsafe {
            match hmem {
                None => fi_err(
                    ddsfi_mr_reg(fab.domain, buf.cast(), len, access, 0, key, 0, &mut raw, ptr::null_mut()) as isize,
                    "fi_mr_reg",
                )?,
                Some((iface, device)) => {
                    let iov = libc::iovec { iov_base: buf as *mut c_void, iov_len: len };
                    let mut attr: fi_mr_attr = std::mem::zeroed();
                    attr.mr_iov = (&iov as *const libc::iovec).cast();
                    attr.iov_count = 1;
                    attr.access = access;
                    attr.requested_key = key;
                    attr.iface = iface as _;
                    // The ordinal sits in the union member of its interface;
                    // every member is an int at offset 0.
                    attr.device.cuda = device;
                    let ret = ddsfi_mr_regattr(fab.domain, &attr, 0, &mut raw);
                    let what = format!("fi_mr_regattr (iface {}, device {device})", iface.name());
                    if ret == -libc::ENOSYS && iface != Iface::System {
                        // A build without this interface: say so, and route
                        // this fabric's device buffers through staging from now on.
                        let what = format!("{what} (this libfabric was built without {} support)", iface.name());
                        let e = fi_err(ret as isize, &what).unwrap_err();
                        let _ = fab.device_mr_refused.set(e.msg.clone());
                        return Err(e);
                    }
                    fi_err(ret as isize, &what)?
                }
            }
            let mr = Mr { raw };
            if fab.mr_mode & FI_MR_ENDPOINT != 0 {
                fi_err(ddsfi_mr_bind(raw, bind_ep.cast(), 0) as isize, "fi_mr_bind")?;
                fi_err(ddsfi_mr_enable(raw) as isize, "fi_mr_enable")?;
            }
            Ok(mr)
        }
    }

    /// Registers a shard for remote reads only.
    pub fn register_shard(fab: &Fabric, buf: *const u8, len: usize) -> Result<Mr> {
        Mr::register(fab, buf, len, SHARD_ACCESS, fab.bind_ep())
    }

    /// The address peers name a byte of `buf` by: virtual with
    /// FI_MR_VIRT_ADDR, otherwise an offset from the registration's start.
    pub fn remote_base(fab: &Fabric, buf: *const u8) -> u64 {
        if fab.mr_mode & FI_MR_VIRT_ADDR != 0 {
            buf as u64
        } else {
            0
        }
    }

    pub fn key(&self) -> u64 {
        // SAFETY: a registered MR.
        unsafe { ddsfi_mr_key(self.raw) }
    }

    pub fn desc(&self) -> *mut c_void {
        // SAFETY: a registered MR.
        unsafe { ddsfi_mr_desc(self.raw) }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: we own the registration.
        unsafe { ddsfi_close(self.raw.cast()) };
    }
}

/// A registered destination range.
#[derive(Clone)]
pub struct LocalMr {
    pub start: usize,
    pub len: usize,
    pub mr: Arc<Mr>,
}

impl LocalMr {
    fn covers(&self, start: usize, len: usize) -> bool {
        start >= self.start && start + len <= self.start + self.len
    }
}

/// Destination registrations of one variable: pinned ranges from
/// `dds_register_recv` and a one-slot cache of the last automatic one.
/// Reads hold an `Arc` to their MR, so replacing the cache or unregistering
/// never closes an MR that a read in flight still uses.
#[derive(Default)]
pub struct RecvRegs {
    pinned: Mutex<Vec<LocalMr>>,
    cache: Mutex<Option<LocalMr>>,
}

impl RecvRegs {
    pub fn pin(&self, fab: &Fabric, start: usize, len: usize, hmem: Option<(Iface, i32)>) -> Result<()> {
        let mr = Mr::register_as(fab, start as *const u8, len, FI_READ, fab.bind_ep(), hmem)?;
        self.pinned.lock().push(LocalMr { start, len, mr: Arc::new(mr) });
        Ok(())
    }

    pub fn unpin(&self, start: usize) {
        let mut p = self.pinned.lock();
        if let Some(i) = p.iter().position(|m| m.start == start) {
            p.swap_remove(i);
        }
    }

    /// The MR covering [start, start+len): pinned, cached, or newly
    /// registered (`true` = a miss that registered memory), with `hmem`'s
    /// interface when given (one RecvRegs holds one kind of registration).
    pub fn lookup(
        &self,
        fab: &Fabric,
        start: usize,
        len: usize,
        hmem: Option<(Iface, i32)>,
    ) -> Result<(Arc<Mr>, bool)> {
        if let Some(m) = self.pinned.lock().iter().find(|m| m.covers(start, len)) {
            return Ok((m.mr.clone(), false));
        }
        let mut cache = self.cache.lock();
        if let Some(m) = cache.as_ref().filter(|m| m.covers(start, len)) {
            return Ok((m.mr.clone(), false));
        }
        *cache = None;
        let mr = Arc::new(Mr::register_as(fab, start as *const u8, len, FI_READ, fab.bind_ep(), hmem)?);
        *cache = Some(LocalMr { start, len, mr: mr.clone() });
        Ok((mr, true))
    }

    pub fn clear(&self) {
        self.pinned.lock().clear();
        *self.cache.lock() = None;
    }
}
