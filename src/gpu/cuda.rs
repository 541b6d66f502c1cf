//! The CUDA driver API through cudarc, loaded at run time.
//!
//! cudarc panics when asked for a function while libcuda cannot be loaded,
//! so the library is probed once (`driver`) and nothing else here runs
//! unless the probe succeeded. Contexts: the primary context of the buffer's
//! device (the one PyTorch and the runtime API use) is pushed around each call.

use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

use cudarc::driver::sys as cu;
use parking_lot::Mutex;

use super::{MemKind, Stream};
use crate::error::{err, Result};

/// A usable driver: libcuda loaded, initialised, with at least one device.
pub struct Driver {
    pub devices: i32,
    /// Retained primary context per device ordinal (null until first use).
    contexts: Mutex<Vec<usize>>,
}

// SAFETY: contexts are process-wide driver handles, usable from any thread.
unsafe impl Sync for Driver {}
unsafe impl Send for Driver {}

static DRIVER: OnceLock<std::result::Result<Driver, String>> = OnceLock::new();

/// The driver, probed on first use and cached for the life of the process.
pub fn driver() -> std::result::Result<&'static Driver, String> {
    DRIVER.get_or_init(probe).as_ref().map_err(|e| e.clone())
}

fn probe() -> std::result::Result<Driver, String> {
    // SAFETY: is_culib_present only tries dlopen on the candidate names.
    if !unsafe { cu::is_culib_present() } {
        return Err("no CUDA driver: libcuda.so could not be loaded".to_string());
    }
    // The library loaded; a missing symbol or a failing call must still not
    // take the process down, so the probe runs under catch_unwind.
    let r = std::panic::catch_unwind(|| unsafe {
        check(cu::cuInit(0), "cuInit")?;
        let mut n = 0;
        check(cu::cuDeviceGetCount(&mut n), "cuDeviceGetCount")?;
        Ok::<i32, crate::error::Error>(n)
    });
    match r {
        Ok(Ok(n)) if n > 0 => Ok(Driver { devices: n, contexts: Mutex::new(vec![0; n as usize]) }),
        Ok(Ok(_)) => Err("the CUDA driver reports no device".to_string()),
        Ok(Err(e)) => Err(format!("the CUDA driver failed to start: {}", e.msg)),
        Err(_) => Err("the CUDA driver library lacks a required function (driver too old?)".to_string()),
    }
}

fn check(r: cu::CUresult, what: &str) -> Result<()> {
    if r == cu::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut name: *const std::os::raw::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a static string or leaves it null.
    let text = unsafe {
        if cu::cuGetErrorName(r, &mut name) == cu::CUresult::CUDA_SUCCESS && !name.is_null() {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        } else {
            format!("CUDA error {}", r as i32)
        }
    };
    Err(err!(Gpu, "{what} failed: {text}"))
}

/// A recorded point on a stream; the copy before it has finished once it completes.
pub struct Event(cu::CUevent);

// SAFETY: events are driver handles usable from any thread.
unsafe impl Send for Event {}

impl Event {
    /// Whether the work before the event has completed.
    pub fn done(&self) -> Result<bool> {
        // SAFETY: self.0 is a live event.
        match unsafe { cu::cuEventQuery(self.0) } {
            cu::CUresult::CUDA_SUCCESS => Ok(true),
            cu::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => check(r, "cuEventQuery").map(|_| false),
        }
    }

    pub fn wait(&self) -> Result<()> {
        // SAFETY: self.0 is a live event.
        check(unsafe { cu::cuEventSynchronize(self.0) }, "cuEventSynchronize")
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroying a live event; pending work is unaffected.
        unsafe { cu::cuEventDestroy_v2(self.0) };
    }
}

fn stream_of(s: Option<Stream>) -> cu::CUstream {
    s.map_or(std::ptr::null_mut(), |s| s.0 as cu::CUstream)
}

impl Driver {
    pub fn classify(&self, ptr: *const u8) -> Result<MemKind> {
        let mut attrs = [
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        ];
        // Each attribute is at most 4 bytes; 8-byte zeroed slots leave room.
        let mut vals = [0u64; 3];
        let mut data: [*mut c_void; 3] = [
            &mut vals[0] as *mut u64 as *mut c_void,
            &mut vals[1] as *mut u64 as *mut c_void,
            &mut vals[2] as *mut u64 as *mut c_void,
        ];
        // SAFETY: cuPointerGetAttributes accepts any address (unknown ones
        // get default values); the out-slots are large enough.
        let mut query = || unsafe { cu::cuPointerGetAttributes(3, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr as u64) };
        let mut r = query();
        if r == cu::CUresult::CUDA_ERROR_INVALID_CONTEXT {
            // A thread with no current context (not a CUDA thread yet).
            r = self.on_device(0, || Ok(query()))?;
        }
        check(r, "cuPointerGetAttributes")?;
        let (mem_type, ordinal, managed) = (vals[0] as u32, vals[1] as u32 as i32, vals[2] as u32);
        // Managed memory is CPU-addressable: treat it as host.
        if mem_type == cu::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 && managed == 0 {
            Ok(MemKind::Cuda(ordinal))
        } else {
            Ok(MemKind::Host)
        }
    }

    /// Runs `f` with device `dev`'s primary context current on this thread.
    pub fn on_device<T>(&self, dev: i32, f: impl FnOnce() -> Result<T>) -> Result<T> {
        if dev < 0 || dev >= self.devices {
            return Err(err!(Gpu, "device ordinal {dev} is outside the {} CUDA devices", self.devices));
        }
        let ctx = {
            let mut c = self.contexts.lock();
            if c[dev as usize] == 0 {
                let mut d = 0;
                let mut ctx: cu::CUcontext = std::ptr::null_mut();
                // SAFETY: plain driver calls with out-pointers.
                unsafe {
                    check(cu::cuDeviceGet(&mut d, dev), "cuDeviceGet")?;
                    check(cu::cuDevicePrimaryCtxRetain(&mut ctx, d), "cuDevicePrimaryCtxRetain")?;
                }
                c[dev as usize] = ctx as usize;
            }
            c[dev as usize] as cu::CUcontext
        };
        // SAFETY: ctx is a retained primary context, popped below.
        check(unsafe { cu::cuCtxPushCurrent_v2(ctx) }, "cuCtxPushCurrent")?;
        let out = f();
        let mut old: cu::CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context pushed above.
        unsafe { cu::cuCtxPopCurrent_v2(&mut old) };
        out
    }

    /// Page-locked host memory (call on a device); usable from every context.
    pub fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointer call.
        check(unsafe { cu::cuMemHostAlloc(&mut p, bytes.max(1), cu::CU_MEMHOSTALLOC_PORTABLE) }, "cuMemHostAlloc")
            .map_err(|e| err!(NoMemory, "pinned bounce buffer of {bytes} bytes: {}", e.msg))?;
        Ok(p as *mut u8)
    }

    /// # Safety
    /// `p` came from `host_alloc` and no copy still uses it.
    pub unsafe fn host_free(&self, p: *mut u8) {
        cu::cuMemFreeHost(p as *mut c_void);
    }

    /// Queues host-to-device `bytes` on `stream` (NULL: the legacy default
    /// stream) and returns an event recorded after it.
    ///
    /// # Safety
    /// `src` stays valid and unchanged until the event completes; `dst` is
    /// device memory of at least `bytes` (call on its device).
    pub unsafe fn copy_to_device(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: Option<Stream>,
    ) -> Result<Event> {
        let s = stream_of(stream);
        check(cu::cuMemcpyHtoDAsync_v2(dst as u64, src as *const c_void, bytes, s), "cuMemcpyHtoDAsync")?;
        self.record(stream)
    }

    /// An event recorded on `stream` (NULL: the legacy default stream).
    pub fn record(&self, stream: Option<Stream>) -> Result<Event> {
        let mut e: cu::CUevent = std::ptr::null_mut();
        // SAFETY: out-pointer call; the event is destroyed by Event's Drop.
        unsafe {
            check(cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32), "cuEventCreate")?;
            let ev = Event(e);
            check(cu::cuEventRecord(e, stream_of(stream)), "cuEventRecord")?;
            Ok(ev)
        }
    }

    /// Copies device memory to host memory, after all work queued on the
    /// device (a kernel on any stream may still be writing the source).
    ///
    /// # Safety
    /// `dst` holds `bytes`; `src` is device memory (call on its device).
    pub unsafe fn copy_from_device(&self, dst: *mut u8, src: *const u8, bytes: usize) -> Result<()> {
        check(cu::cuCtxSynchronize(), "cuCtxSynchronize")?;
        check(cu::cuMemcpyDtoH_v2(dst as *mut c_void, src as u64, bytes), "cuMemcpyDtoH")
    }

    /// Waits for the work queued on the caller's stream.
    pub fn stream_sync(&self, stream: Stream) -> Result<()> {
        // NULL, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) name the
        // default stream of the calling thread's current context. A thread
        // with no context current has queued nothing there, and the driver
        // would answer CUDA_ERROR_INVALID_CONTEXT (a C program passing
        // CU_STREAM_LEGACY before any CUDA call of its own, found on an H200).
        if stream.0 <= 2 {
            let mut ctx: cu::CUcontext = std::ptr::null_mut();
            // SAFETY: an out-pointer; the driver was initialised by the probe.
            if unsafe { cu::cuCtxGetCurrent(&mut ctx) } == cu::CUresult::CUDA_SUCCESS && ctx.is_null() {
                return Ok(());
            }
        }
        // SAFETY: the caller vouches that `stream` is a live CUstream.
        check(unsafe { cu::cuStreamSynchronize(stream.0 as cu::CUstream) }, "cuStreamSynchronize")
    }
}
