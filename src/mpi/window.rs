//! Row datatypes and RMA windows over memory the store owns.

use std::os::raw::{c_int, c_void};
use std::ptr;

use mpi_sys as ffi;

use crate::error::Result;

use super::gate::{gate, gated};
use super::{check, running, Comm, MAX_CHUNK};

/// A committed datatype describing one row of `row_bytes` bytes, whatever its
/// size (rows over 2 GiB are built from 1 GiB blocks plus a remainder).
pub struct Datatype {
    pub(super) raw: ffi::MPI_Datatype,
}

impl Datatype {
    pub fn row(row_bytes: u64) -> Result<Datatype> {
        let byte = unsafe { ffi::RSMPI_UINT8_T };
        let mut t = unsafe { ffi::RSMPI_DATATYPE_NULL };
        let _g = gate();
        // SAFETY: type constructors on valid predefined types; intermediate types are freed.
        unsafe {
            if row_bytes <= i32::MAX as u64 {
                check(ffi::MPI_Type_contiguous(row_bytes as c_int, byte, &mut t), "MPI_Type_contiguous")?;
            } else {
                let block = MAX_CHUNK as u64;
                let (blocks, rem) = (row_bytes / block, row_bytes % block);
                let mut chunk = ffi::RSMPI_DATATYPE_NULL;
                let mut body = ffi::RSMPI_DATATYPE_NULL;
                check(ffi::MPI_Type_contiguous(block as c_int, byte, &mut chunk), "MPI_Type_contiguous")?;
                check(ffi::MPI_Type_contiguous(blocks as c_int, chunk, &mut body), "MPI_Type_contiguous")?;
                if rem == 0 {
                    t = body;
                } else {
                    let mut tail = ffi::RSMPI_DATATYPE_NULL;
                    check(ffi::MPI_Type_contiguous(rem as c_int, byte, &mut tail), "MPI_Type_contiguous")?;
                    let lens = [1 as c_int, 1];
                    let displs = [0 as ffi::MPI_Aint, (blocks * block) as ffi::MPI_Aint];
                    let types = [body, tail];
                    check(
                        ffi::MPI_Type_create_struct(2, lens.as_ptr(), displs.as_ptr(), types.as_ptr(), &mut t),
                        "MPI_Type_create_struct",
                    )?;
                    ffi::MPI_Type_free(&mut body);
                    ffi::MPI_Type_free(&mut tail);
                }
                ffi::MPI_Type_free(&mut chunk);
            }
            check(ffi::MPI_Type_commit(&mut t), "MPI_Type_commit")?;
        }
        Ok(Datatype { raw: t })
    }
}

impl Drop for Datatype {
    fn drop(&mut self) {
        if running() {
            // SAFETY: we own this committed type.
            gated(|| unsafe { ffi::MPI_Type_free(&mut self.raw) });
        }
    }
}

/// An RMA window over memory the store owns, kept in a shared `lock_all`
/// epoch for its whole life so a read is just get + flush.
pub struct Window {
    raw: ffi::MPI_Win,
}

unsafe impl Send for Window {}
unsafe impl Sync for Window {}

impl Window {
    /// Collective over `comm`. `base` stays valid until `free`.
    pub fn create(base: *mut u8, bytes: usize, comm: &Comm) -> Result<Window> {
        let mut raw = unsafe { ffi::RSMPI_WIN_NULL };
        let base: *mut c_void = if bytes == 0 { ptr::null_mut() } else { base.cast() };
        // SAFETY: `base` covers `bytes` bytes and outlives the window.
        unsafe {
            check(
                ffi::MPI_Win_create(base, bytes as ffi::MPI_Aint, 1, ffi::RSMPI_INFO_NULL, comm.raw(), &mut raw),
                "MPI_Win_create",
            )?;
            let w = Window { raw };
            check(ffi::MPI_Win_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN), "MPI_Win_set_errhandler")?;
            check(ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, raw), "MPI_Win_lock_all")?;
            Ok(w)
        }
    }

    /// Reads `len` bytes at byte offset `offset` of `target`'s window into `dst`,
    /// split into calls of at most 1 GiB, and waits for them.
    pub fn get(&self, dst: *mut u8, len: usize, target: usize, offset: u64) -> Result<()> {
        let started = self.get_start(dst, len, target, offset);
        // Flushed even when a piece failed to start: nothing may land later.
        let flushed = self.flush(target);
        started.and(flushed)
    }

    /// Completes every get this process started on `target` (in this
    /// window): their bytes have landed when it returns.
    pub fn flush(&self, target: usize) -> Result<()> {
        // SAFETY: flushing the epoch opened by lock_all.
        check(unsafe { ffi::MPI_Win_flush(target as c_int, self.raw) }, "MPI_Win_flush")
    }

    /// Starts reading `len` bytes at byte offset `offset` of `target`'s
    /// window into `dst` (calls of at most 1 GiB); `flush(target)` completes
    /// them. `dst` must stay valid and untouched until then.
    pub fn get_start(&self, dst: *mut u8, len: usize, target: usize, offset: u64) -> Result<()> {
        self.each_piece(dst, len, target, offset, |d, n, t, disp, byte, win| {
            // SAFETY: see `each_piece`.
            check(gated(|| unsafe { ffi::MPI_Get(d, n, byte, t, disp, n, byte, win) }), "MPI_Get")
        })
    }

    /// Starts reading like `get_start`, one request-based get (`MPI_Rget`)
    /// per piece, pushed onto `reqs`: the bytes have landed once those
    /// requests complete (`Comm::testsome`, `Comm::waitall`).
    pub fn rget(
        &self,
        dst: *mut u8,
        len: usize,
        target: usize,
        offset: u64,
        reqs: &mut Vec<ffi::MPI_Request>,
    ) -> Result<()> {
        self.each_piece(dst, len, target, offset, |d, n, t, disp, byte, win| {
            let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: see `each_piece`; the request is completed before `dst` is released.
            check(gated(|| unsafe { ffi::MPI_Rget(d, n, byte, t, disp, n, byte, win, &mut r) }), "MPI_Rget")?;
            reqs.push(r);
            Ok(())
        })
    }

    /// Calls `issue(dst, count, target, displacement, MPI_UINT8_T, window)`
    /// for each piece of at most `MAX_CHUNK` bytes of a read of `len` bytes at
    /// `offset` of `target`'s window into `dst`. The caller keeps `dst`
    /// (`len` bytes) valid until the reads complete; the store bounds-checked
    /// the target range.
    fn each_piece(
        &self,
        dst: *mut u8,
        len: usize,
        target: usize,
        offset: u64,
        mut issue: impl FnMut(*mut c_void, c_int, c_int, ffi::MPI_Aint, ffi::MPI_Datatype, ffi::MPI_Win) -> Result<()>,
    ) -> Result<()> {
        let byte = unsafe { ffi::RSMPI_UINT8_T };
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(MAX_CHUNK);
            let disp = (offset + done as u64) as ffi::MPI_Aint;
            issue(dst.wrapping_add(done).cast(), n as c_int, target as c_int, disp, byte, self.raw)?;
            done += n;
        }
        Ok(())
    }

    /// Synchronises the public and private copies of the local window memory.
    pub fn sync(&self) -> Result<()> {
        // SAFETY: inside the lock_all epoch.
        check(unsafe { ffi::MPI_Win_sync(self.raw) }, "MPI_Win_sync")
    }

    /// Collective release. Skipped (leaked) once MPI is finalised.
    pub fn free(&mut self) -> Result<()> {
        if !running() || self.raw == unsafe { ffi::RSMPI_WIN_NULL } {
            return Ok(());
        }
        // SAFETY: ends our epoch, then frees the window (collective).
        unsafe {
            let unlock = check(ffi::MPI_Win_unlock_all(self.raw), "MPI_Win_unlock_all");
            let free = check(ffi::MPI_Win_free(&mut self.raw), "MPI_Win_free");
            unlock.and(free)
        }
    }
}
