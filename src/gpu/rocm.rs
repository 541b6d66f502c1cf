//! ROCm classification through hip-sys (cargo feature `rocm`, off by
//! default). hip-sys links libamdhip64 and needs the HIP headers to build,
//! so this module is compiled only where ROCm is installed; it has never been
//! built by this project's CI. Only classification is provided: reads into
//! ROCm memory fail with DDS_ERR_GPU (see store/gpu.rs).

use hip_sys::hiprt as hip;

use super::MemKind;

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
