//! ROCm classification through hip-sys (cargo feature `rocm`, off by
//! default). hip-sys links libamdhip64 and needs the HIP headers to build,
//! so this module is compiled only with the feature (`make test-rocm` builds it
//! against Debian's HIP 5.2 and runs the no-device tests). Classification,
//! and the stream wait before a GPUDirect read (FI_HMEM_ROCR); staged reads
//! into ROCm memory fail with DDS_ERR_GPU (see store/gpu.rs).

use hip_sys::hiprt as hip;

use super::{MemKind, Stream};
use crate::error::{bail, Result};

/// ROCm memory of a device, else host. A failed query (an address HIP does
/// not know) is host memory.
pub fn classify(ptr: *const u8) -> MemKind {
    // SAFETY: plain-old-data struct filled by the call.
    let mut a: hip::hipPointerAttribute_t = unsafe { std::mem::zeroed() };
    // SAFETY: hipPointerGetAttributes only looks the address up.
    let r = unsafe { hip::hipPointerGetAttributes(&mut a, ptr as *const std::ffi::c_void) };
    if r != hip::hipError_t::hipSuccess {
        return MemKind::Host;
    }
    match a.memoryType {
        hip::hipMemoryType::hipMemoryTypeDevice | hip::hipMemoryType::hipMemoryTypeArray if a.isManaged == 0 => {
            MemKind::Rocm(a.device)
        }
        _ => MemKind::Host,
    }
}

/// Waits for the work queued on `stream` (a `hipStream_t`; None: the null
/// stream) before a GPUDirect read writes the buffer.
pub fn stream_sync(stream: Option<Stream>) -> Result<()> {
    let s = stream.map_or(std::ptr::null_mut(), |s| s.0 as hip::hipStream_t);
    // SAFETY: the caller vouches for the stream; null is the null stream.
    let r = unsafe { hip::hipStreamSynchronize(s) };
    if r != hip::hipError_t::hipSuccess {
        bail!(Gpu, "hipStreamSynchronize failed: {r:?}");
    }
    Ok(())
}
