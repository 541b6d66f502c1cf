//! Device memory: what kind of memory a pointer is, and moving rows between
//! host shards and device buffers.
//!
//! The library classifies every destination and source itself, so the C API
//! keeps its signatures. CUDA comes from the driver library loaded at run
//! time (`cuda.rs`): a build without CUDA installed, and a run on a machine
//! without a GPU, both work and see host memory only. ROCm classification is
//! a build option (`rocm.rs`). Rows reach device memory straight through
//! libfabric FI_HMEM where the provider offers it (`direct.rs` chooses), else
//! through pinned host bounce buffers (`staging.rs`); see docs/gpu.md.

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod direct;
#[cfg(feature = "rocm")]
pub mod rocm;
pub mod staging;

use crate::error::{bail, Result};

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// Memory the CPU can address: heap, stack, mmap, shared memory, pinned
    /// or managed (unified) memory.
    Host,
    /// CUDA device memory of device `ordinal`.
    Cuda(i32),
    /// ROCm (HIP) device memory of device `ordinal`.
    #[cfg_attr(not(feature = "rocm"), allow(dead_code))] // classified only by the rocm build
    Rocm(i32),
}

impl MemKind {
    /// The C API's `DDS_MEM_*` code (capi/types.rs asserts that they agree).
    pub const fn code(self) -> i32 {
        match self {
            MemKind::Host => 0,
            MemKind::Cuda(_) => 1,
            MemKind::Rocm(_) => 2,
        }
    }

    pub fn device(self) -> i32 {
        match self {
            MemKind::Host => -1,
            MemKind::Cuda(d) | MemKind::Rocm(d) => d,
        }
    }
}

/// `DDSTORE_GPU` / `dds_options.gpu`: whether a store looks for device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every buffer is host memory; pointers are not classified.
    Off,
    /// Classify when a GPU driver is present, else host only (default).
    Auto,
    /// As Auto, but `dds_create` fails when no GPU driver is usable.
    Require,
}

impl Mode {
    /// Parses `DDSTORE_GPU`'s value.
    pub fn parse(v: &str) -> Result<Mode> {
        match v.trim().to_ascii_lowercase().as_str() {
            "0" | "off" | "no" | "false" | "host" => Ok(Mode::Off),
            "1" | "auto" | "on" | "yes" | "true" => Ok(Mode::Auto),
            "require" | "required" | "2" => Ok(Mode::Require),
            _ => bail!(InvalidArgument, "DDSTORE_GPU={v:?} is not 0 (host only), auto (default) or require"),
        }
    }

    /// `dds_options.gpu`: -1 defers to the environment.
    pub fn from_code(c: i32) -> Result<Option<Mode>> {
        match c {
            -1 => Ok(None),
            0 => Ok(Some(Mode::Off)),
            1 => Ok(Some(Mode::Auto)),
            2 => Ok(Some(Mode::Require)),
            _ => bail!(
                InvalidArgument,
                "options.gpu {c} is not -1 (environment), 0 (host only), 1 (auto) or 2 (require)"
            ),
        }
    }
}

/// How a variable's rows reach device buffers (`dds_var_info.device_path`;
/// the discriminants are the `DDS_PATH_*` codes, asserted in capi/types.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Device buffers are not recognised (GPU support off or no driver).
    HostOnly = 0,
    /// Through pinned host bounce buffers and an asynchronous copy.
    Staged = 1,
    /// Straight into device memory (libfabric FI_HMEM, `gpu/direct.rs`).
    GpuDirect = 2,
    /// Device buffers are refused (`DDSTORE_GPU_STAGING=0`).
    Refused = 3,
}

/// A caller's CUDA stream (`CUstream`), or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream(pub usize);

/// Why no driver can be used, or `Ok` with the device count.
pub fn driver_status() -> std::result::Result<i32, String> {
    #[cfg(feature = "cuda")]
    {
        cuda::driver().map(|d| d.devices)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err("this libddstore was built without CUDA support (cargo feature `cuda`)".to_string())
    }
}

/// Classifies `ptr` with whatever drivers this build has and finds. Without
/// a driver every pointer is host memory.
pub fn classify(ptr: *const u8) -> Result<MemKind> {
    if ptr.is_null() {
        return Ok(MemKind::Host);
    }
    #[cfg(feature = "cuda")]
    if let Ok(d) = cuda::driver() {
        let k = d.classify(ptr)?;
        if k != MemKind::Host {
            return Ok(k);
        }
    }
    #[cfg(feature = "rocm")]
    {
        let k = rocm::classify(ptr);
        if k != MemKind::Host {
            return Ok(k);
        }
    }
    Ok(MemKind::Host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_host_with_or_without_a_driver() {
        let on_stack = [0u8; 64];
        let on_heap = vec![0u8; 1 << 20];
        for p in [on_stack.as_ptr(), on_heap.as_ptr(), std::ptr::null()] {
            assert_eq!(classify(p).unwrap(), MemKind::Host);
        }
        // Probing twice gives the cached answer; a missing driver is a message.
        match (driver_status(), driver_status()) {
            (Ok(a), Ok(b)) => assert!(a > 0 && a == b),
            (Err(a), Err(b)) => assert!(!a.is_empty() && a == b),
            other => panic!("driver probe changed its answer: {other:?}"),
        }
    }

    #[test]
    fn modes_parse() {
        assert_eq!(Mode::parse("0").unwrap(), Mode::Off);
        assert_eq!(Mode::parse("Require").unwrap(), Mode::Require);
        assert!(Mode::parse("maybe").unwrap_err().msg.contains("DDSTORE_GPU"));
        assert_eq!(Mode::from_code(-1).unwrap(), None);
        assert!(Mode::from_code(7).is_err());
    }
}
