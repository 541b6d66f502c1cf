//! Where a device (or host) buffer's rows go for a variable: the route
//! policy of gpu/direct.rs applied with this store's settings and its
//! network's capabilities, the errors of refused buffers, the interface a
//! shard is registered with, and what `dds_info` reports as the path.

use super::{Method, Store};
use crate::error::{bail, err, Result};
use crate::gpu::direct::{self, Iface, Mem, Refusal, Route};
use crate::gpu::{MemKind, Mode, Path};

impl Store {
    /// The error of a refused buffer.
    pub(super) fn refusal(&self, why: Refusal, role: &str, name: &str) -> crate::error::Error {
        match why {
            Refusal::StagingOff => match self.check_staging(role, name) {
                Err(e) => e,
                Ok(()) => err!(Internal, "GPU {role} buffer for variable '{name}' refused with staging on"),
            },
            Refusal::DirectUnavailable => err!(
                Gpu,
                "GPU {role} buffer for variable '{name}': DDSTORE_GPU_DIRECT=1 forces GPUDirect, but {}; \
                 set DDSTORE_GPU_DIRECT=auto to stage it through host memory",
                match (self.network.caps(), self.network.describe()) {
                    (Some(c), Some(f)) if !c.hmem => format!("libfabric provider {f} reports no FI_HMEM"),
                    (Some(_), Some(f)) => match self.network.device_refusal() {
                        Some(why) => format!("the registration was refused: {why}"),
                        None => format!("{f} refused to register it"),
                    },
                    _ => "method 0 (MPI) has no FI_HMEM: use method=1 or 2 (libfabric)".to_string(),
                }
            ),
        }
    }

    /// Refuses device memory when staging is off and GPUDirect does not
    /// serve it.
    pub(super) fn check_staging(&self, role: &str, name: &str) -> Result<()> {
        if self.gpu.staging {
            return Ok(());
        }
        let how = match self.method {
            Method::Mpi => {
                format!("requires method=1 or 2 (libfabric) with GPUDirect, got method={}", self.method.code())
            }
            _ if self.network.caps().is_some_and(|c| c.hmem) => {
                // FI_HMEM domain: only a refused registration ends here.
                let why = match self.network.device_refusal() {
                    Some(_) => " (its libfabric was built without this GPU's memory interface)",
                    None => "",
                };
                format!("could not be registered for GPUDirect by {}{why}", self.network.describe().unwrap_or_default())
            }
            _ => {
                "requires a provider with FI_HMEM (GPUDirect, e.g. DDSTORE_FABRIC=cxi); this store's provider has none"
                    .to_string()
            }
        };
        bail!(Gpu, "GPU {role} buffer for variable '{name}' {how}, and DDSTORE_GPU_STAGING=0 forbids staging through host memory")
    }

    pub(super) fn rocm_unstaged(role: &str, name: &str) -> crate::error::Error {
        err!(
            Gpu,
            "GPU {role} buffer for variable '{name}' is ROCm memory: this build classifies it but cannot copy it yet"
        )
    }

    /// How a `dds_register_recv` buffer is registered: `Some(None)` with
    /// the transport as host memory, `Some(Some(hmem))` as GPUDirect memory
    /// of that interface and device, `None` not at all (staged: rows reach
    /// it through bounce buffers; or GPUDirect without descriptors).
    pub fn recv_route(&self, name: &str, p: *const u8) -> Result<Option<Option<(Iface, i32)>>> {
        let kind = self.mem_kind(p)?;
        match self.route_of(name, kind)? {
            Route::Host => Ok(Some(None)),
            Route::Direct { iface, device, desc } => Ok(desc.then_some(Some((iface, device)))),
            Route::Staged if kind == MemKind::Host => Ok(Some(None)),
            Route::Staged => match kind {
                MemKind::Rocm(_) => Err(Self::rocm_unstaged("destination", name)),
                _ => Ok(None),
            },
            Route::Refused(why) => Err(self.refusal(why, "destination", name)),
        }
    }

    /// A GPUDirect `dds_register_recv` the provider refused: nothing is
    /// registered and reads into the buffer are staged, as for `dds_get`;
    /// the error when staging is off or GPUDirect is forced.
    pub(super) fn recv_refused(&self, name: &str, p: *const u8, refused: crate::error::Error) -> Result<()> {
        match self.fallback_route(self.mem_kind(p)?, &refused)? {
            Route::Refused(why) => Err(self.refusal(why, "destination", name)),
            _ => Ok(()),
        }
    }

    /// The route of a buffer of `kind` for variable `name`.
    pub(super) fn route_of(&self, name: &str, kind: MemKind) -> Result<Route> {
        let caps = self.with_var(name, |v| Ok(self.caps_of(v)))?;
        Ok(direct::route(caps, Mem::of(kind, self.gpu.host_as), self.gpu.direct, self.gpu.staging))
    }

    pub(super) fn caps_of(&self, v: &crate::var::Variable) -> Option<direct::Caps> {
        v.transport.caps()
    }

    /// Where a refused GPUDirect registration sends the buffer (or the
    /// error, with the provider's reason, when DDSTORE_GPU_DIRECT=1).
    pub(super) fn fallback_route(&self, kind: MemKind, refused: &crate::error::Error) -> Result<Route> {
        match direct::on_refusal(Mem::of(kind, self.gpu.host_as), self.gpu.direct, self.gpu.staging) {
            Route::Refused(Refusal::DirectUnavailable) => {
                bail!(Gpu, "DDSTORE_GPU_DIRECT=1 forces GPUDirect, but the registration was refused: {}", refused.msg)
            }
            r => Ok(r),
        }
    }

    /// The interface a new variable's shard is registered with (FI_HMEM).
    pub(super) fn shard_iface(&self) -> Option<Iface> {
        let caps = self.network.caps();
        if self.gpu.mode == Mode::Off {
            return None;
        }
        direct::shard_iface(caps, self.gpu.direct, self.gpu.host_as)
    }

    /// `dds_var_info.device_path` of variable `v`: GPUDirect where a CUDA
    /// buffer (or, with the testing aid, a host one) would go direct.
    pub(super) fn device_path(&self, v: &crate::var::Variable) -> Path {
        let base = self.gpu.path();
        let probe = match (base, self.gpu.host_as) {
            (Path::HostOnly, Some(_)) if self.gpu.mode != Mode::Off => MemKind::Host,
            (Path::HostOnly, _) => return base,
            _ => MemKind::Cuda(0),
        };
        match direct::route(self.caps_of(v), Mem::of(probe, self.gpu.host_as), self.gpu.direct, self.gpu.staging) {
            Route::Direct { .. } => Path::GpuDirect,
            Route::Refused(_) => Path::Refused,
            Route::Staged => Path::Staged,
            Route::Host => base,
        }
    }
}
