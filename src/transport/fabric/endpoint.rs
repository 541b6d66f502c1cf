//! An RDM endpoint with its own completion queue, bound to the store's
//! address vector.

use std::ptr;

use libfabric_sys::*;

use super::fi_err;
use crate::error::Result;

/// Longest endpoint name we exchange.
pub const MAX_NAME: usize = 256;

pub struct Endpoint {
    pub ep: *mut fid_ep,
    pub cq: *mut fid_cq,
}

// SAFETY: the domain is opened FI_THREAD_SAFE; each endpoint is used by one
// thread at a time (the progress thread, or the reader that checked it out).
unsafe impl Send for Endpoint {}
unsafe impl Sync for Endpoint {}

impl Endpoint {
    /// Opens an endpoint and a CQ of `cq_size` entries (wait object
    /// `wait`), binds both and the address vector, and enables it.
    ///
    /// # Safety
    /// `domain`, `info` and `av` are open objects of one domain.
    pub unsafe fn open(
        domain: *mut fid_domain,
        info: *mut fi_info,
        av: *mut fid_av,
        wait: fi_wait_obj,
        cq_size: usize,
    ) -> Result<Endpoint> {
        let mut cq_attr =
            fi_cq_attr { size: cq_size, format: FI_CQ_FORMAT_CONTEXT, wait_obj: wait, ..Default::default() };
        let mut cq = ptr::null_mut();
        fi_err(ddsfi_cq_open(domain, &mut cq_attr, &mut cq, ptr::null_mut()) as isize, "fi_cq_open")?;
        let mut e = Endpoint { ep: ptr::null_mut(), cq };
        fi_err(ddsfi_endpoint(domain, info, &mut e.ep, ptr::null_mut()) as isize, "fi_endpoint")?;
        fi_err(ddsfi_ep_bind(e.ep, av.cast(), 0) as isize, "fi_ep_bind(av)")?;
        fi_err(ddsfi_ep_bind(e.ep, cq.cast(), FI_TRANSMIT | FI_RECV) as isize, "fi_ep_bind(cq)")?;
        fi_err(ddsfi_enable(e.ep) as isize, "fi_enable")?;
        Ok(e)
    }

    /// The endpoint's address.
    pub fn name(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; MAX_NAME];
        let mut len = buf.len();
        // SAFETY: buf holds len bytes.
        let ret = unsafe { ddsfi_getname(self.ep.cast(), buf.as_mut_ptr().cast(), &mut len) };
        fi_err(ret as isize, "fi_getname")?;
        buf.truncate(len);
        Ok(buf)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: we own both objects; the endpoint goes first.
        unsafe {
            if !self.ep.is_null() {
                ddsfi_close(self.ep.cast());
            }
            if !self.cq.is_null() {
                ddsfi_close(self.cq.cast());
            }
        }
    }
}
