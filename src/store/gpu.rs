//! Device buffers at the store level: which path a read into device memory
//! takes, staging it through host memory, and device sources of add/update.
//!
//! Everything here sits in front of the host-memory reads of store/reads.rs and
//! store/batch.rs (gpu_route.rs chooses the path):
//! a staged read is a sequence of ordinary reads into pinned bounce buffers,
//! each followed by a host-to-device copy. So every method and transport
//! (MPI, libfabric, node-local copies) gets device destinations at once.

use crate::config::Config;
use crate::error::{bail, err, Result};
use crate::gpu::direct::{Direct, Iface, Route};
use crate::gpu::{self, MemKind, Mode, Path, Stream};

use super::{Options, Store, Tally};

/// A store's device-memory settings, fixed at creation.
#[derive(Clone, Copy, Debug)]
pub struct GpuSettings {
    pub mode: Mode,
    pub staging: bool,
    pub staging_bytes: usize,
    /// `DDSTORE_GPU_DIRECT`.
    pub direct: Direct,
    /// `DDSTORE_TEST_GPU_DIRECT_HOST_IFACE` (testing aid; None with GPU support off).
    pub host_as: Option<Iface>,
}

impl GpuSettings {
    /// Options override the environment; `require` fails without a driver.
    pub fn resolve(o: &Options, cfg: &Config) -> Result<GpuSettings> {
        let mode = Mode::from_code(o.gpu)?.unwrap_or(cfg.gpu);
        let staging = match o.gpu_staging {
            -1 => cfg.gpu_staging,
            0 => false,
            1 => true,
            c => bail!(InvalidArgument, "options.gpu_staging {c} is not -1 (environment), 0 (refuse) or 1 (stage)"),
        };
        if mode == Mode::Require {
            if let Err(why) = gpu::driver_status() {
                bail!(
                    Gpu,
                    "GPU support was required (DDSTORE_GPU=require or options.gpu) but no GPU driver is usable: {why}"
                );
            }
        }
        Ok(GpuSettings {
            mode,
            staging,
            staging_bytes: cfg.gpu_staging_bytes.min(isize::MAX as u64) as usize,
            direct: cfg.gpu_direct,
            host_as: if mode == Mode::Off { None } else { cfg.gpu_direct_host_iface },
        })
    }

    /// Whether the fabric is asked for FI_HMEM: device buffers can occur
    /// (GPU support on and a driver, or the testing aid) and GPUDirect is
    /// not off.
    pub fn wants_hmem(&self) -> bool {
        self.mode != Mode::Off && self.direct != Direct::Off && (gpu::driver_status().is_ok() || self.host_as.is_some())
    }

    /// Whether `shm` is asked for FI_HMEM as well: only when GPUDirect is
    /// forced or the testing aid presents host memory as device memory
    /// (FabricConfig::hmem_shm says why not by default).
    pub fn wants_hmem_on_shm(&self) -> bool {
        self.wants_hmem() && (self.direct == Direct::On || self.host_as.is_some())
    }

    /// The path device destinations of this store take.
    pub fn path(&self) -> Path {
        if self.mode == Mode::Off || gpu::driver_status().is_err() {
            Path::HostOnly
        } else if self.staging {
            Path::Staged
        } else {
            Path::Refused
        }
    }
}

impl Store {
    /// What `p` is, as this store sees it (always host with GPU support off).
    pub(super) fn mem_kind(&self, p: *const u8) -> Result<MemKind> {
        if self.gpu.mode == Mode::Off {
            return Ok(MemKind::Host);
        }
        gpu::classify(p)
    }

    /// Refuses a stream this store cannot use.
    fn check_stream(&self, stream: Option<Stream>) -> Result<()> {
        let Some(_) = stream else { return Ok(()) };
        if self.gpu.mode == Mode::Off {
            bail!(Gpu, "a stream was given but GPU support is off for this store (DDSTORE_GPU=0 or options.gpu = 0); pass NULL");
        }
        if let Err(why) = gpu::driver_status() {
            bail!(Gpu, "a stream was given but no GPU driver is usable: {why}; pass NULL");
        }
        Ok(())
    }

    /// Host dst with a stream: the stream's queued work (which may still use
    /// dst) completes before the rows are written.
    fn order_host(&self, stream: Option<Stream>) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let (Some(s), Ok(d)) = (stream, gpu::cuda::driver()) {
            return d.stream_sync(s);
        }
        let _ = stream;
        Ok(())
    }

    /// `dds_get` / `dds_get_stream`.
    pub fn get_to(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        start: i64,
        count: i64,
        stream: Option<Stream>,
    ) -> Result<()> {
        self.check_stream(stream)?;
        let kind = self.mem_kind(dst)?;
        let route = self.route_of(name, kind)?;
        self.get_via(route, kind, name, dst, dst_bytes, start, count, stream)
    }

    /// `get_to` along `route` (a GPUDirect read whose registration is
    /// refused comes back here with the fallback route).
    #[allow(clippy::too_many_arguments)]
    fn get_via(
        &self,
        route: Route,
        kind: MemKind,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        start: i64,
        count: i64,
        stream: Option<Stream>,
    ) -> Result<()> {
        match (route, kind) {
            (Route::Refused(why), _) => Err(self.refusal(why, "destination", name)),
            (Route::Direct { iface, device, desc }, _) => self.via_direct(
                kind,
                stream,
                || self.direct_get(name, dst, dst_bytes, start, count, (iface, device), desc),
                |fallback| self.get_via(fallback, kind, name, dst, dst_bytes, start, count, stream),
            ),
            (Route::Host, _) | (_, MemKind::Host) => {
                self.order_host(stream)?;
                self.get(name, dst, dst_bytes, start, count)
            }
            (Route::Staged, MemKind::Rocm(_)) => Err(Self::rocm_unstaged("destination", name)),
            (Route::Staged, MemKind::Cuda(dev)) => {
                self.check_staging("destination", name)?;
                let rb = self.with_var(name, |v| {
                    self.check_get(v, dst_bytes, start, count)?;
                    Ok(v.row_bytes as usize)
                })?;
                let tally = Tally::default();
                let r = self.staged(dev, dst, count as usize, rb, stream, |h, first, n| {
                    self.get_tallied(name, h, n * rb, start + first as i64, n as i64, Some(&tally))
                });
                tally.finish(self, name);
                r
            }
        }
    }

    /// A read along `Route::Direct`, single or batch: orders `stream`, runs
    /// `read`, and when the provider refused the destination's registration
    /// takes the fallback route with `again`.
    fn via_direct(
        &self,
        kind: MemKind,
        stream: Option<Stream>,
        read: impl FnOnce() -> Result<Option<crate::error::Error>>,
        again: impl FnOnce(Route) -> Result<()>,
    ) -> Result<()> {
        self.order_direct(kind, stream)?;
        match read()? {
            None => Ok(()),
            Some(refused) => again(self.fallback_route(kind, &refused)?),
        }
    }

    /// `dds_get_batch` / `dds_get_batch_stream`. Method 0 stays collective:
    /// a rank whose own checks fail still takes part, with its error.
    pub fn get_batch_to(
        &self,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        indices: Result<&[i64]>,
        stream: Option<Stream>,
    ) -> Result<()> {
        let kind = self.check_stream(stream).and_then(|_| self.mem_kind(dst));
        let (kind, idx) = match (kind, indices) {
            (Err(e), _) | (_, Err(e)) => return self.get_batch(name, std::ptr::null_mut(), 0, Err(e)),
            (Ok(k), Ok(idx)) => (k, idx),
        };
        match self.route_of(name, kind) {
            Ok(route) => self.batch_via(route, kind, name, dst, dst_bytes, idx, stream),
            Err(e) => self.get_batch(name, std::ptr::null_mut(), 0, Err(e)),
        }
    }

    /// `get_batch_to` along `route`; method 0 stays collective (its routes
    /// are never GPUDirect: MPI has no FI_HMEM).
    #[allow(clippy::too_many_arguments)]
    fn batch_via(
        &self,
        route: Route,
        kind: MemKind,
        name: &str,
        dst: *mut u8,
        dst_bytes: usize,
        idx: &[i64],
        stream: Option<Stream>,
    ) -> Result<()> {
        let dev = match (route, kind) {
            (Route::Refused(why), _) => {
                return self.get_batch(name, std::ptr::null_mut(), 0, Err(self.refusal(why, "destination", name)))
            }
            (Route::Direct { iface, device, desc }, _) => {
                return self.via_direct(
                    kind,
                    stream,
                    || self.direct_batch(name, dst, dst_bytes, idx, (iface, device), desc),
                    |fallback| self.batch_via(fallback, kind, name, dst, dst_bytes, idx, stream),
                )
            }
            (Route::Host, _) | (_, MemKind::Host) => {
                if let Err(e) = self.order_host(stream) {
                    return self.get_batch(name, std::ptr::null_mut(), 0, Err(e));
                }
                return self.get_batch(name, dst, dst_bytes, Ok(idx));
            }
            // No bytes move: the device pointer is never dereferenced.
            _ if idx.is_empty() => return self.get_batch(name, dst, dst_bytes, Ok(idx)),
            (Route::Staged, MemKind::Rocm(_)) => {
                return self.get_batch(name, std::ptr::null_mut(), 0, Err(Self::rocm_unstaged("destination", name)))
            }
            (Route::Staged, MemKind::Cuda(d)) => d,
        };
        let n = idx.len();
        let checked = self.check_staging("destination", name).and_then(|_| {
            self.with_var(name, |v| {
                v.check_dst("destination", dst_bytes, n as i64)?;
                Ok(v.row_bytes as usize)
            })
        });
        let rb = match checked {
            Ok(rb) => rb,
            Err(e) => return self.get_batch(name, std::ptr::null_mut(), 0, Err(e)),
        };
        if self.batch_is_onesided() {
            // One-sided: check every index first, so no chunk is copied
            // before an error further on.
            self.with_var(name, |v| v.check_indices(idx, "the"))?;
            let tally = Tally::default();
            let r = self.staged(dev, dst, n, rb, stream, |h, first, k| {
                self.get_batch_tallied(name, h, k * rb, Ok(&idx[first..first + k]), Some(&tally))
            });
            tally.finish(self, name);
            return r;
        }
        // Collective: one chunk, so every rank makes exactly one collective
        // call; if staging fails before it, this rank still joins with the error.
        let mut joined = false;
        let r = self.staged_cap(dev, dst, n, rb, usize::MAX, stream, |h, _, _| {
            joined = true;
            self.get_batch(name, h, n * rb, Ok(idx))
        });
        match r {
            Err(e) if !joined => self.get_batch(name, std::ptr::null_mut(), 0, Err(e)),
            r => r,
        }
    }

    fn staged(
        &self,
        dev: i32,
        dst: *mut u8,
        rows: usize,
        rb: usize,
        stream: Option<Stream>,
        fill: impl FnMut(*mut u8, usize, usize) -> Result<()>,
    ) -> Result<()> {
        self.staged_cap(dev, dst, rows, rb, self.gpu.staging_bytes, stream, fill)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn staged_cap(
        &self,
        dev: i32,
        dst: *mut u8,
        rows: usize,
        rb: usize,
        cap: usize,
        stream: Option<Stream>,
        fill: impl FnMut(*mut u8, usize, usize) -> Result<()>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let d = gpu::cuda::driver().map_err(|why| err!(Gpu, "{why}"))?;
            gpu::staging::read_staged(d, dev, dst, rows, rb, cap, stream, fill)
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (dev, dst, rows, rb, cap, stream, fill);
            bail!(Gpu, "device memory needs a libddstore built with the `cuda` feature")
        }
    }

    /// Device data given to `dds_add` or `dds_update`: a host copy of it
    /// (None for host data, which is used in place).
    pub fn source_to_host(&self, name: &str, data: *const u8, bytes: usize) -> Result<Option<Vec<u8>>> {
        if bytes == 0 {
            return Ok(None);
        }
        match self.mem_kind(data)? {
            MemKind::Host => Ok(None),
            MemKind::Rocm(_) => Err(Self::rocm_unstaged("source", name)),
            MemKind::Cuda(dev) => {
                self.check_staging("source", name)?;
                #[cfg(feature = "cuda")]
                {
                    let d = gpu::cuda::driver().map_err(|why| err!(Gpu, "{why}"))?;
                    let mut host = Vec::new();
                    host.try_reserve_exact(bytes)
                        .map_err(|_| err!(NoMemory, "host copy of the {bytes}-byte GPU source of '{name}'"))?;
                    // SAFETY: capacity is `bytes`; the copy fills all of it.
                    d.on_device(dev, || unsafe { d.copy_from_device(host.as_mut_ptr(), data, bytes) })?;
                    unsafe { host.set_len(bytes) };
                    Ok(Some(host))
                }
                #[cfg(not(feature = "cuda"))]
                {
                    let _ = dev;
                    bail!(Gpu, "device memory needs a libddstore built with the `cuda` feature")
                }
            }
        }
    }

    /// Before a GPUDirect read: the work queued on `stream` (the legacy
    /// default stream when none), which may still use the destination,
    /// completes. The rows have landed when the read returns.
    fn order_direct(&self, kind: MemKind, stream: Option<Stream>) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let (MemKind::Cuda(dev), Ok(d)) = (kind, gpu::cuda::driver()) {
            return d.on_device(dev, || d.stream_sync(stream.unwrap_or(Stream(0))));
        }
        #[cfg(feature = "rocm")]
        if let MemKind::Rocm(_) = kind {
            return gpu::rocm::stream_sync(stream);
        }
        let _ = kind;
        self.order_host(stream)
    }
}
