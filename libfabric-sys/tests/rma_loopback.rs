//! One-sided RMA read between two RDM endpoints of one process, per provider.
//!
//! A serves a registered 64 KiB buffer (FI_REMOTE_READ); B reads pieces of it
//! with fi_read. The test honours the mr_mode bits the provider reports and
//! polls both CQs while waiting (manual-progress providers only move the
//! target's side when its CQ is read). Waits are bounded: 10 s, then fail.
mod common;

use common::*;
use libfabric_sys::*;
use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SRC_LEN: usize = 64 * 1024;
const LIMIT: Duration = Duration::from_secs(10);
/// (offset in A's buffer, length): includes 1 byte, 4 KiB and 60000 bytes.
const PIECES: [(usize, usize); 6] = [(0, 1), (100, 4096), (5000, 60000), (SRC_LEN - 1, 1), (0, SRC_LEN), (777, 12345)];

/// Keeps the two provider tests from running at the same time (readable
/// output, timings not disturbed by the other test on 2 cores).
static SERIAL: Mutex<()> = Mutex::new(());

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 8)) as u8
}

unsafe fn as_fid<T>(obj: *mut T) -> *mut fid {
    // Every fid_* struct begins with `struct fid`.
    obj.cast()
}

/// One endpoint with its own CQ and AV.
struct Side {
    ep: *mut fid_ep,
    cq: *mut fid_cq,
    av: *mut fid_av,
}

impl Side {
    unsafe fn open(domain: *mut fid_domain, fi: *mut fi_info, cq_wait: fi_wait_obj) -> Side {
        let mut cq_attr = fi_cq_attr { size: 128, format: FI_CQ_FORMAT_CONTEXT, wait_obj: cq_wait, ..Default::default() };
        let mut cq = ptr::null_mut();
        check!(ddsfi_cq_open(domain, &mut cq_attr, &mut cq, ptr::null_mut()), "fi_cq_open");
        let mut av_attr = fi_av_attr { type_: FI_AV_TABLE, count: 4, ..Default::default() };
        let mut av = ptr::null_mut();
        check!(ddsfi_av_open(domain, &mut av_attr, &mut av, ptr::null_mut()), "fi_av_open");
        let mut ep = ptr::null_mut();
        check!(ddsfi_endpoint(domain, fi, &mut ep, ptr::null_mut()), "fi_endpoint");
        check!(ddsfi_ep_bind(ep, as_fid(av), 0), "fi_ep_bind(av)");
        check!(ddsfi_ep_bind(ep, as_fid(cq), FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
        check!(ddsfi_enable(ep), "fi_enable");
        Side { ep, cq, av }
    }

    unsafe fn name(&self) -> Vec<u8> {
        let mut buf = vec![0u8; 256];
        let mut len = buf.len();
        let mut ret = ddsfi_getname(as_fid(self.ep), buf.as_mut_ptr().cast(), &mut len);
        if ret == -(FI_ETOOSMALL as i32) {
            buf.resize(len, 0);
            ret = ddsfi_getname(as_fid(self.ep), buf.as_mut_ptr().cast(), &mut len);
        }
        check!(ret, "fi_getname");
        buf.truncate(len);
        buf
    }

    unsafe fn insert(&self, name: &[u8]) -> fi_addr_t {
        let mut addr: fi_addr_t = addr_unspec();
        let n = check!(ddsfi_av_insert(self.av, name.as_ptr().cast(), 1, &mut addr, 0, ptr::null_mut()), "fi_av_insert");
        assert_eq!(n, 1, "fi_av_insert inserted {n} addresses");
        addr
    }

    /// Reads available completions; returns their op_context values.
    unsafe fn poll(&self, who: &str) -> Vec<*mut c_void> {
        let mut entries = [fi_cq_entry::default(); 16];
        let n = ddsfi_cq_read(self.cq, entries.as_mut_ptr().cast(), entries.len());
        if n > 0 {
            return entries[..n as usize].iter().map(|e| e.op_context).collect();
        }
        if n == -(FI_EAGAIN as isize) {
            return Vec::new();
        }
        if n == -(FI_EAVAIL as isize) {
            let mut err = fi_cq_err_entry::default();
            ddsfi_cq_readerr(self.cq, &mut err, 0);
            let mut buf = [0 as std::os::raw::c_char; 256];
            let text = ddsfi_cq_strerror(self.cq, err.prov_errno, err.err_data, buf.as_mut_ptr(), buf.len());
            panic!(
                "{who}: completion error {} ({}), provider: {}",
                err.err,
                errstr(err.err),
                cstr_or(text, "?")
            );
        }
        panic!("{who}: fi_cq_read failed: {n} ({})", errstr(n as i32));
    }

    unsafe fn close(self) {
        check!(ddsfi_close(as_fid(self.ep)), "fi_close(ep)");
        check!(ddsfi_close(as_fid(self.av)), "fi_close(av)");
        check!(ddsfi_close(as_fid(self.cq)), "fi_close(cq)");
    }
}

/// Registers `len` bytes at `buf`; binds/enables for FI_MR_ENDPOINT.
unsafe fn register(
    domain: *mut fid_domain,
    ep: *mut fid_ep,
    mr_mode: i32,
    buf: *const u8,
    len: usize,
    access: u64,
    wanted_key: u64,
) -> *mut fid_mr {
    let key = if mr_mode & FI_MR_PROV_KEY != 0 { 0 } else { wanted_key };
    let mut mr = ptr::null_mut();
    check!(ddsfi_mr_reg(domain, buf.cast(), len, access, 0, key, 0, &mut mr, ptr::null_mut()), "fi_mr_reg");
    if mr_mode & FI_MR_ENDPOINT != 0 {
        check!(ddsfi_mr_bind(mr, as_fid(ep), 0), "fi_mr_bind");
        check!(ddsfi_mr_enable(mr), "fi_mr_enable");
    }
    mr
}

fn rma_loopback(prov: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let info = getinfo_rma(Some(prov))
        .unwrap_or_else(|e| panic!("provider {prov} not available for RDM + RMA read: {e} ({})", errstr(e)));
    let all = entries(info);
    // For tcp there is one entry per address family; any entry on `lo` works.
    let fi = *all
        .iter()
        .find(|&&fi| prov != "tcp;ofi_rxm" || domain_name(fi) == "lo")
        .unwrap_or_else(|| panic!("{prov}: no usable fi_info entry"));
    println!("[{prov}] {}", describe(fi));

    unsafe {
        let mr_mode = (*(*fi).domain_attr).mr_mode;
        let manual = (*(*fi).domain_attr).data_progress == FI_PROGRESS_MANUAL;
        let t_setup = Instant::now();

        let mut fabric = ptr::null_mut();
        check!(ddsfi_fabric((*fi).fabric_attr, &mut fabric, ptr::null_mut()), "fi_fabric");
        let mut domain = ptr::null_mut();
        check!(ddsfi_domain(fabric, fi, &mut domain, ptr::null_mut()), "fi_domain");

        // A: serving side, polled CQ. B: reading side, CQ with a wait object
        // so that fi_cq_sread can be exercised at the end.
        let a = Side::open(domain, fi, FI_WAIT_NONE);
        let b = Side::open(domain, fi, FI_WAIT_UNSPEC);
        let a_in_b = b.insert(&a.name());
        let _b_in_a = a.insert(&b.name());

        let src: Vec<u8> = (0..SRC_LEN).map(pattern).collect();
        let src_mr = register(domain, a.ep, mr_mode, src.as_ptr(), SRC_LEN, FI_REMOTE_READ, 1);
        let key = ddsfi_mr_key(src_mr);
        assert_ne!(key, key_notavail(), "fi_mr_key: FI_KEY_NOTAVAIL");
        let base = if mr_mode & FI_MR_VIRT_ADDR != 0 { src.as_ptr() as u64 } else { 0 };

        let dst_len: usize = PIECES.iter().map(|p| p.1).sum();
        let mut dst = vec![0u8; dst_len];
        let (dst_mr, desc) = if mr_mode & FI_MR_LOCAL != 0 {
            let mr = register(domain, b.ep, mr_mode, dst.as_ptr(), dst_len, FI_READ, 2);
            (mr, ddsfi_mr_desc(mr))
        } else {
            (ptr::null_mut(), ptr::null_mut())
        };
        println!(
            "[{prov}] setup {:.1} ms; key {key:#x}, remote base {base:#x}, local desc {}",
            t_setup.elapsed().as_secs_f64() * 1e3,
            if desc.is_null() { "none" } else { "yes" }
        );

        let mut ctx = vec![fi_context2::default(); PIECES.len()];
        let mut done = vec![false; PIECES.len()];
        let start = Instant::now();
        let expired = |what: &str| {
            if start.elapsed() > LIMIT {
                panic!("[{prov}] timed out after {LIMIT:?} {what}");
            }
        };
        // Marks completions of B; returns how many arrived.
        let reap = |ctx: &mut Vec<fi_context2>, done: &mut Vec<bool>, poll_a: bool| -> usize {
            let got = b.poll("B");
            for c in &got {
                let i = ctx.iter().position(|x| x as *const _ as *mut c_void == *c).expect("unknown op_context");
                assert!(!done[i], "duplicate completion");
                done[i] = true;
            }
            if poll_a {
                let extra = a.poll("A");
                assert!(extra.is_empty(), "serving CQ reported {} unexpected completions", extra.len());
            }
            got.len()
        };

        // Post every piece; dst slices are laid out back to back.
        let mut doff = 0;
        let mut dst_off = Vec::new();
        for (i, &(off, len)) in PIECES.iter().enumerate() {
            dst_off.push(doff);
            let cptr: *mut c_void = (&mut ctx[i] as *mut fi_context2).cast();
            loop {
                let ret = ddsfi_read(b.ep, dst.as_mut_ptr().add(doff).cast(), len, desc, a_in_b, base + off as u64, key, cptr);
                if ret == 0 {
                    break;
                }
                assert_eq!(ret, -(FI_EAGAIN as isize), "[{prov}] fi_read({off}, {len}) failed: {}", errstr(ret as i32));
                reap(&mut ctx, &mut done, true);
                expired("posting reads");
                std::thread::yield_now();
            }
            doff += len;
        }

        // Probe: does B make progress with only its own CQ polled? (200 ms)
        let probe_end = Instant::now() + Duration::from_millis(200);
        while !done.iter().all(|&d| d) && Instant::now() < probe_end {
            if reap(&mut ctx, &mut done, false) == 0 {
                std::thread::yield_now();
            }
        }
        let alone = done.iter().filter(|&&d| d).count();
        // Then drive both sides until everything completed.
        while !done.iter().all(|&d| d) {
            if reap(&mut ctx, &mut done, true) == 0 {
                expired("waiting for read completions");
                std::thread::yield_now();
            }
        }
        let elapsed = start.elapsed();
        println!(
            "[{prov}] {} reads ({} bytes) complete in {:.2} ms; data_progress {}; \
             {alone}/{} completed within 200 ms with only B's CQ polled{}",
            PIECES.len(),
            dst_len,
            elapsed.as_secs_f64() * 1e3,
            if manual { "MANUAL" } else { "AUTO" },
            PIECES.len(),
            if alone < PIECES.len() { " -> serving CQ must be polled" } else { "" }
        );

        for (i, &(off, len)) in PIECES.iter().enumerate() {
            let got = &dst[dst_off[i]..dst_off[i] + len];
            if got != &src[off..off + len] {
                let bad = got.iter().zip(&src[off..]).position(|(x, y)| x != y).unwrap();
                panic!("[{prov}] piece {i} (offset {off}, len {len}) differs at byte {bad}");
            }
        }

        // Sequential latency per size (both CQs polled), 20 rounds each.
        for &(off, len) in &[(0usize, 1usize), (0, 4096), (0, 60000)] {
            let t = Instant::now();
            for _ in 0..20 {
                done.iter_mut().for_each(|d| *d = false);
                done[1..].iter_mut().for_each(|d| *d = true);
                let cptr: *mut c_void = (&mut ctx[0] as *mut fi_context2).cast();
                loop {
                    let ret = ddsfi_read(b.ep, dst.as_mut_ptr().cast(), len, desc, a_in_b, base + off as u64, key, cptr);
                    if ret == 0 {
                        break;
                    }
                    assert_eq!(ret, -(FI_EAGAIN as isize), "fi_read: {}", errstr(ret as i32));
                    reap(&mut ctx, &mut done, true);
                    expired("re-posting");
                    std::thread::yield_now();
                }
                while !done[0] {
                    if reap(&mut ctx, &mut done, true) == 0 {
                        expired("timed reads");
                        std::thread::yield_now();
                    }
                }
                assert_eq!(&dst[..len], &src[off..off + len]);
            }
            println!("[{prov}] read {len:>6} B: {:8.1} us avg over 20", t.elapsed().as_secs_f64() * 1e6 / 20.0);
        }

        // fi_cq_sread on an idle CQ with a wait object times out with -FI_EAGAIN.
        let mut entry = fi_cq_entry::default();
        let t = Instant::now();
        let ret = ddsfi_cq_sread(b.cq, (&mut entry as *mut fi_cq_entry).cast(), 1, ptr::null(), 50);
        println!("[{prov}] fi_cq_sread(idle, 50 ms) -> {ret} ({}) after {:.1} ms", errstr(ret as i32), t.elapsed().as_secs_f64() * 1e3);
        assert!(
            ret == -(FI_EAGAIN as isize) || ret == -(FI_ETIMEDOUT as isize),
            "[{prov}] fi_cq_sread on an idle CQ returned {ret}"
        );

        if !dst_mr.is_null() {
            check!(ddsfi_close(as_fid(dst_mr)), "fi_close(dst mr)");
        }
        check!(ddsfi_close(as_fid(src_mr)), "fi_close(src mr)");
        b.close();
        a.close();
        check!(ddsfi_close(as_fid(domain)), "fi_close(domain)");
        check!(ddsfi_close(as_fid(fabric)), "fi_close(fabric)");
        ddsfi_freeinfo(info);
        drop(src);
    }
}

#[test]
fn rma_read_tcp_rxm() {
    rma_loopback("tcp;ofi_rxm");
}

#[test]
fn rma_read_shm() {
    rma_loopback("shm");
}
